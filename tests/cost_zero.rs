//! `COST 0` reads a limiter as it stands: count, remaining and reset_after
//! as stored, allowed 1 and retry_after 0; nothing is written, replicated
//! or waited for, and INFO rl counts it as it counts a PEEK: a call,
//! allowed (docs/commands.md, Arguments).

mod common;

use common::*;
use std::time::{Duration, Instant};

/// Every limiter form, with a limit of 10 (APPROX on a window that cannot
/// roll over during the test).
fn forms(aligned: &'static str) -> [Vec<&'static str>; 5] {
    [
        vec!["RL.FIXED", "fix", "10", "60"],
        vec!["RL.FIXED", "fixa", "10", aligned, "ALIGNED"],
        vec!["RL.SLIDING", "sl", "10", "60"],
        vec!["RL.SLIDING", "ap", "10", aligned, "APPROX"],
        vec!["RL.TOKEN", "tok", "10", "60"],
    ]
}

fn with(args: &[&'static str], more: &[&'static str]) -> Vec<&'static str> {
    [args, more].concat()
}

#[test]
fn on_an_empty_key_it_reads_an_empty_limiter_and_creates_nothing() {
    on_each_server(|_, con| {
        for form in forms(aligned_windows(con)[0]) {
            let r = limiter(con, &with(&form, &["COST", "0"]));
            assert_eq!(r, [1, 0, 0, 10, 10, 0], "{form:?}");
            assert_eq!(dbsize(con), 0, "{form:?}");
        }
        let (allowed, retry, clauses) = rl_all(
            con,
            &[
                "FIXED", "a", "5", "60", "COST", "0", "TOKEN", "b", "7", "1s", "COST", "0",
            ],
        );
        assert_eq!((allowed, retry), (1, 0));
        assert_eq!(clauses, [[1, 0, 0, 5, 5, 0], [1, 0, 0, 7, 7, 0]]);
        assert_eq!(dbsize(con), 0);
    });
}

#[test]
fn it_reads_the_counts_as_stored_and_changes_nothing() {
    on_each_server(|_, con| {
        for form in forms(aligned_windows(con)[0]) {
            for _ in 0..3 {
                assert_eq!(limiter(con, &form)[0], 1, "{form:?}");
            }
            let key = form[1];
            let before = snapshot(con);
            let (r, pttl) = limiter_then_pttl(con, &with(&form, &["COST", "0"]));
            assert_eq!(r[..5], [1, 3, 0, 10, 7], "{form:?}");
            // reset_after is the key's life, within the clocks' 2 ms.
            assert!((r[5] - pttl).abs() <= 2, "{form:?}: {r:?} PTTL {pttl}");
            assert_eq!(snapshot(con), before, "{form:?} wrote");
            // A PEEK of cost 1 would count itself; COST 0 does not.
            let peek = limiter(con, &with(&form, &["PEEK"]));
            assert_eq!(peek[1], 4, "{form:?}");
            // At the limit, still admitted: reading needs no room.
            for _ in 0..7 {
                limiter(con, &form);
            }
            let full = limiter(con, &with(&form, &["COST", "0"]));
            assert_eq!(full[..5], [1, 10, 0, 10, 0], "{form:?}");
            assert_eq!(limiter(con, &form)[0], 0, "{form:?}");
            assert!(exists(con, key));
        }
    });
}

#[test]
fn in_rl_all_a_read_clause_records_nothing_while_the_others_record() {
    on_each_server(|_, con| {
        limiter(con, &["RL.FIXED", "f", "2", "60"]);
        let args = [
            "FIXED", "f", "2", "60", "COST", "0", "TOKEN", "t", "5", "60", "SLIDING", "s", "3",
            "60", "COST", "0",
        ];
        for round in 1..=5 {
            let (allowed, _, clauses) = rl_all(con, &args);
            assert_eq!(allowed, 1, "round {round}");
            assert_eq!(clauses[0][..2], [1, 1], "round {round}");
            assert_eq!(clauses[1][1], round, "round {round}");
            assert_eq!(clauses[2][..2], [1, 0], "round {round}");
        }
        // The token clause is empty now: it alone denies.
        let (allowed, _, clauses) = rl_all(con, &args);
        assert_eq!(allowed, 0);
        assert_eq!([clauses[0][0], clauses[1][0], clauses[2][0]], [1, 0, 1]);
        assert!(!exists(con, "s"));
    });
}

#[test]
fn during_a_block_it_is_admitted_and_reset_after_shows_the_block() {
    on_each_server(|_, con| {
        let args = ["RL.FIXED", "login", "1", "60", "BLOCK", "1h"];
        limiter(con, &args);
        assert_eq!(limiter(con, &args)[0], 0);
        let before = snapshot(con);
        let r = limiter(con, &with(&args, &["COST", "0"]));
        assert_eq!(r[..5], [1, 1, 0, 1, 0]);
        assert!(r[5] > 3_590_000, "{r:?}");
        assert_eq!(snapshot(con), before);
    });
}

#[test]
fn with_reserve_or_wait_it_reads_and_never_waits() {
    on_each_server(|_, con| {
        // One token a second; two reservations put the bucket 2 s in debt.
        let bucket = ["RL.TOKEN", "q", "1", "1s"];
        limiter(con, &bucket);
        let r = limiter(con, &with(&bucket, &["RESERVE", "10s"]));
        assert!(r[0] == 1 && r[2] > 0, "{r:?}");
        let before = snapshot(con);
        for option in ["RESERVE", "WAIT"] {
            let t0 = Instant::now();
            let r = limiter(con, &with(&bucket, &["COST", "0", option, "10s"]));
            assert!(t0.elapsed() < Duration::from_millis(500), "{option} waited");
            assert_eq!(r[..5], [1, 2, 0, 1, 0], "{option}");
            assert!(r[5] > 1000, "{option}: {r:?}");
        }
        assert_eq!(snapshot(con), before);
        let c = counters(con);
        assert_eq!(c["rl_reservations"], 1, "{c:?}");
        assert_eq!(c["rl_waits"], 0, "{c:?}");
    });
}

#[test]
fn it_is_neither_replicated_nor_counted_beyond_a_call_allowed() {
    for_each_flavor(|flavor| {
        let (primary, replica) = primary_and_replica(flavor, &[]);
        let (mut pcon, mut rcon) = (primary.conn(), replica.conn());
        // The replica's own count of RL.FIXED calls applied (the name's
        // case in INFO differs between servers).
        let calls_on_replica = |rcon: &mut redis::Connection| -> i64 {
            let info: String = redis::cmd("INFO").arg("commandstats").query(rcon).unwrap();
            info.lines()
                .find_map(|l| {
                    let lower = l.to_ascii_lowercase();
                    let fields = lower.strip_prefix("cmdstat_rl.fixed:")?;
                    fields
                        .split(',')
                        .find_map(|f| f.strip_prefix("calls="))
                        .and_then(|n| n.parse().ok())
                })
                .unwrap_or(0)
        };
        limiter(&mut pcon, &["RL.FIXED", "k", "10", "60"]);
        wait_in_sync(&mut pcon, &mut rcon);
        assert_eq!(calls_on_replica(&mut rcon), 1);
        let before = counters(&mut pcon);
        for _ in 0..5 {
            limiter(&mut pcon, &["RL.FIXED", "k", "10", "60", "COST", "0"]);
            limiter(&mut pcon, &["RL.FIXED", "new", "10", "60", "COST", "0"]);
        }
        // A real call after them: the replica has seen it, and only it.
        limiter(&mut pcon, &["RL.FIXED", "k", "10", "60"]);
        wait_in_sync(&mut pcon, &mut rcon);
        assert_eq!(calls_on_replica(&mut rcon), 2);
        assert_eq!(digest(&mut rcon), digest(&mut pcon));
        let after = counters(&mut pcon);
        let delta = |name: &str| after[name] - before[name];
        assert_eq!(delta("rl_fixed_calls"), 11);
        assert_eq!(delta("rl_fixed_allowed"), 11);
        assert_eq!(delta("rl_fixed_denied") + delta("rl_fixed_errors"), 0);
    });
}
