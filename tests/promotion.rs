//! Promotion: a replica promoted to primary carries on exactly where the
//! primary was. Every limiter's count and window end are the same, and the
//! same calls on both give the same answers (times shorter only by the
//! time that passed).
//!
//! Windows are long (an hour or more, aligned ones chosen so that they do
//! not end for at least ten minutes) so nothing expires while a test runs,
//! and every wait is for a condition.

mod common;

use common::*;
use redis::Value;

#[test]
fn promoted_replica_continues_the_count() {
    for_each_flavor(|flavor| {
        let (mut primary, replica) = primary_and_replica(flavor, &[]);
        let (mut pcon, mut rcon) = (primary.conn(), replica.conn());
        let aligned = aligned_windows(&mut pcon)[0];
        let plain = ["RL.FIXED", "p", "5", "1h"];
        let with_aligned = ["RL.FIXED", "a", "5", aligned, "ALIGNED"];
        let plain_end = use_three_of_five(&mut pcon, &plain);
        let aligned_end = use_three_of_five(&mut pcon, &with_aligned);
        wait_in_sync(&mut pcon, &mut rcon);
        primary.kill();
        cmd(&mut rcon, &["REPLICAOF", "NO", "ONE"]).unwrap();
        continues_with_two_more(&mut rcon, &plain, plain_end);
        continues_with_two_more(&mut rcon, &with_aligned, aligned_end);
    });
}

/// The algorithm of each clause of a limiter call or RL.ALL.
fn clause_words(call: &Call) -> Vec<Vec<u8>> {
    match call.kind {
        CallKind::Limiter => vec![call.args[0][3..].to_vec()],
        _ => call.args[1..]
            .iter()
            .filter(|a| matches!(a.as_slice(), b"FIXED" | b"SLIDING" | b"TOKEN"))
            .cloned()
            .collect(),
    }
}

/// The same calls' replies from two servers with the same dataset, the
/// second server answering later: equal, except that remaining times may
/// differ by at most `elapsed_ms` (the span of both runs: a window or TTL
/// that a call of the run starts is anchored at that call's time). A token bucket whose
/// rate changes between calls (an override named by some calls and not
/// others) refills each gap at the rate of the call that ends it, so when
/// the gaps differ its times may drift by up to the ratio of the rates:
/// its time fields get a looser bound, its counts stay exact.
fn assert_same_replies(calls: &[Call], first: &[Value], second: &[Value], elapsed_ms: i64) {
    let close = |call: &Call, token: bool, a: i64, b: i64| {
        if a <= 0 || b <= 0 {
            assert_eq!(a, b, "{call:?}");
        } else if token {
            assert!((a - b).abs() <= 50 * elapsed_ms, "{call:?}: {a} then {b}");
        } else {
            assert!(
                (a - b).abs() <= elapsed_ms,
                "{call:?}: {a} then {b} ({elapsed_ms} ms apart)"
            );
        }
    };
    let same_limiter = |call: &Call, token: bool, a: [i64; 6], b: [i64; 6]| {
        assert_eq!(
            [a[0], a[1], a[3], a[4]],
            [b[0], b[1], b[3], b[4]],
            "{call:?}"
        );
        close(call, token, a[2], b[2]);
        close(call, token, a[5], b[5]);
    };
    for ((call, a), b) in calls.iter().zip(first).zip(second) {
        let words = clause_words(call);
        match call.kind {
            CallKind::Limiter => same_limiter(call, words[0] == b"TOKEN", six(a), six(b)),
            CallKind::All => {
                let (a_allowed, a_retry, a_clauses) = all_parts(a);
                let (b_allowed, b_retry, b_clauses) = all_parts(b);
                assert_eq!(a_allowed, b_allowed, "{call:?}");
                let any_token = words.iter().any(|w| w == b"TOKEN");
                close(call, any_token, a_retry, b_retry);
                assert_eq!(a_clauses.len(), words.len(), "{call:?}");
                assert_eq!(b_clauses.len(), words.len(), "{call:?}");
                for ((x, y), word) in a_clauses.into_iter().zip(b_clauses).zip(&words) {
                    same_limiter(call, word == b"TOKEN", x, y);
                }
            }
            CallKind::Get => match (a, b) {
                (Value::Array(x), Value::Array(y)) => {
                    let (x, y): (Vec<i64>, Vec<i64>) =
                        (x.iter().map(int).collect(), y.iter().map(int).collect());
                    assert_eq!(x[..3], y[..3], "{call:?}");
                    close(call, false, x[3], y[3]);
                }
                _ => assert_eq!(a, b, "{call:?}"),
            },
            CallKind::Set | CallKind::Del => assert_eq!(a, b, "{call:?}"),
            // Cursor order is the server's own; checked by the datasets.
            CallKind::List => {}
        }
    }
}

#[test]
fn promoted_replica_carries_on_exactly() {
    for_each_flavor(|flavor| {
        let (primary, replica) = primary_and_replica(flavor, &[]);
        let (mut pcon, mut rcon) = (primary.conn(), replica.conn());
        workload(&mut pcon, "w", 71, 800);
        wait_in_sync(&mut pcon, &mut rcon);
        assert_same_mixed_dataset(&format!("{flavor:?}"), &mut pcon, &mut rcon);
        // Promote the replica before the primary sees more calls; then the
        // same calls on both must get the same answers.
        cmd(&mut rcon, &["REPLICAOF", "NO", "ONE"]).unwrap();
        wait_until("the promotion", || {
            info_field(&mut rcon, "replication", "role") == "master"
        });
        let aligned = aligned_windows(&mut pcon);
        let calls = mixed_calls("w", &aligned, 72, 600);
        let t0 = server_ms(&mut pcon);
        let from_primary = run_calls(&mut pcon, &calls);
        let from_promoted = run_calls(&mut rcon, &calls);
        let elapsed = server_ms(&mut rcon) - t0 + 2;
        let t = tally(&calls, &from_primary);
        assert!(t.admitted > 50 && t.denied > 50, "{t:?}");
        assert_same_replies(&calls, &from_primary, &from_promoted, elapsed);
        // And the two datasets hold the same counts: a PEEK of every key
        // gives the same answer.
        let peeks: Vec<Call> = (0..KEYS)
            .map(|i| {
                let mut rng = Lcg(i);
                let (word, mut args) = clause(&mut rng, "w", &aligned, i);
                let cost = args.iter().position(|a| a.as_slice() == b"COST");
                if let Some(at) = cost {
                    args.drain(at..at + 2);
                }
                let mut argv = vec![arg_bytes(format!("RL.{word}"))];
                argv.extend(args);
                argv.push(arg_bytes("PEEK"));
                Call {
                    args: argv,
                    kind: CallKind::Limiter,
                    peek: true,
                }
            })
            .collect();
        // (Windows the calls above opened are anchored in their run.)
        let a = run_calls(&mut pcon, &peeks);
        let b = run_calls(&mut rcon, &peeks);
        let elapsed = server_ms(&mut rcon) - t0 + 2;
        assert_same_replies(&peeks, &a, &b, elapsed);
    });
}
