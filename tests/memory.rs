//! Above `maxmemory` (noeviction) the limiter keeps limiting every subject
//! it already holds: updates, denials, PEEK, COST 0, REFUND, RL.ALL and a
//! WAIT on an existing bucket run; a new subject, a log that must grow and
//! a new override get the server's own OOM error and write nothing; INFO rl
//! counts the refusals; replicated and AOF-replayed calls are never refused
//! (docs/memory.md, Under memory pressure).

mod common;

use common::*;
use std::time::{Duration, Instant};

const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// Fills the server with a few big strings, then sets `maxmemory` below
/// what it uses (noeviction): the server is past `maxmemory` and stays so.
fn fill_past_maxmemory(con: &mut redis::Connection) {
    ok(con, &["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    ok(con, &["DEBUG", "POPULATE", "4", "fill:", "1000000"]);
    let used = info_i64(con, "memory", "used_memory");
    let max = (used - 1_000_000).to_string();
    ok(con, &["CONFIG", "SET", "maxmemory", &max]);
    // A plain write shows the server's own refusal, with the same text.
    assert_eq!(cmd(con, &["SET", "probe", "x"]), Err(OOM.into()));
}

#[track_caller]
fn assert_oom(con: &mut redis::Connection, args: &[&str]) {
    assert_eq!(cmd(con, args), Err(OOM.into()), "{args:?}");
}

/// Every key and its absolute expiry, to show a refused call wrote nothing.
fn keys_and_expiries(con: &mut redis::Connection) -> Vec<(Vec<u8>, Vec<u8>, i64)> {
    snapshot(con)
        .into_iter()
        .filter(|(k, _, _)| !k.starts_with(b"fill:"))
        .collect()
}

#[test]
fn subjects_already_held_keep_being_limited() {
    on_each_server(|_, con| {
        // APPROX's windows are aligned: one that cannot roll over meanwhile.
        let w = aligned_windows(con)[0];
        // Subjects held before the server is full.
        limiter(con, &["RL.FIXED", "f:old", "3", "60"]);
        limiter(con, &["RL.SLIDING", "a:old", "3", w, "APPROX"]);
        limiter(con, &["RL.SLIDING", "s:old", "3", "60"]);
        limiter(con, &["RL.TOKEN", "t:old", "3", "60"]);
        limiter(con, &["RL.FIXED", "b:old", "1", "60", "BLOCK", "1h"]);
        let first = lease(con, &["RL.CONCURRENT", "c:old", "3", "1h"])[6].to_string();
        // An empty bucket of 100 tokens, one back every 100 ms: its key
        // lives 10 s, however long filling the server takes.
        let bucket = ["RL.TOKEN", "w:old", "10", "1s", "BURST", "100"];
        limiter(con, &[&bucket[..], &["COST", "100"]].concat());
        ok(con, &["RL.OVERRIDE", "SET", "o:old", "5", "60"]);
        fill_past_maxmemory(con);
        let before = info_i64(con, "rl", "rl_fixed_oom_refused");
        assert_eq!(before, 0);

        // A WAIT on an existing bucket reserves (its debt is an update)
        // and is held until its turn: two tokens more than it holds are
        // 100 to 200 ms away. A RESERVE behind it goes into debt.
        let held = 100 - limiter(con, &[&bucket[..], &["COST", "0"]].concat())[1];
        let cost = (held + 2).to_string();
        let t0 = Instant::now();
        let r = limiter(con, &[&bucket[..], &["COST", &cost, "WAIT", "2s"]].concat());
        assert_eq!(r[0], 1, "{r:?}");
        let waited = t0.elapsed();
        assert!(waited >= Duration::from_millis(50), "{waited:?}");
        let r = limiter(con, &[&bucket[..], &["RESERVE", "2s"]].concat());
        assert!(r[0] == 1 && r[2] > 0, "{r:?}");

        // Updates of existing keys, then denials.
        for (args, limit) in [
            (&["RL.FIXED", "f:old", "3", "60"][..], 3),
            (&["RL.SLIDING", "a:old", "3", w, "APPROX"], 3),
            (&["RL.SLIDING", "s:old", "3", "60"], 3),
            (&["RL.TOKEN", "t:old", "3", "60"], 3),
        ] {
            let r = limiter(con, args);
            assert_eq!((r[0], r[1], r[3]), (1, 2, limit), "{args:?}");
            limiter(con, args);
            let denied = limiter(con, args);
            assert_eq!((denied[0], denied[1]), (0, 3), "{args:?}");
            // PEEK and COST 0 read it.
            let peek = limiter(con, &[args, &["PEEK"]].concat());
            assert_eq!(peek[0], 0, "{args:?}");
            let read = limiter(con, &[args, &["COST", "0"]].concat());
            assert_eq!((read[0], read[1], read[2]), (1, 3, 0), "{args:?}");
            // REFUND gives a unit back; the next call is admitted again.
            let refunded = limiter(con, &[args, &["REFUND", "1"]].concat());
            assert_eq!(refunded[1], 2, "{args:?}");
            assert_eq!(limiter(con, args)[0], 1, "{args:?}");
        }

        // Leases on a key that exists: new ones (the value grows by a few
        // bytes, bounded by the limit), refusals, renewals and releases.
        let c = ["RL.CONCURRENT", "c:old", "3", "1h"];
        let second = lease(con, &c);
        assert_eq!(second[..2], [1, 2]);
        assert_eq!(lease(con, &[&c[..], &["COST", "1"]].concat())[..2], [1, 3]);
        assert_eq!(lease(con, &c)[..2], [0, 3]);
        assert_eq!(lease(con, &[&c[..], &["RENEW", &first]].concat())[0], 1);
        assert_eq!(
            lease(con, &[&c[..], &["RELEASE", &first]].concat())[..2],
            [1, 2]
        );
        assert_eq!(lease(con, &[&c[..], &["COST", "0"]].concat())[..2], [1, 2]);

        // A denial that starts a block on an existing key stores its end.
        assert_eq!(
            limiter(con, &["RL.FIXED", "b:old", "1", "60", "BLOCK", "1h"])[0],
            0
        );
        assert!(cmd_int(con, &["PTTL", "b:old"]) > 3_000_000);

        // RL.ALL over subjects it holds: an update under an override it
        // reads, and a read.
        let (allowed, _, clauses) = rl_all(
            con,
            &[
                "FIXED", "f:old", "10", "60", "OVERRIDE", "o:old", "TOKEN", "t:old", "3", "60",
                "COST", "0",
            ],
        );
        assert_eq!(allowed, 1);
        assert_eq!((clauses[0][1], clauses[0][3]), (4, 5));
        assert_eq!(clauses[1][..3], [1, 3, 0]);

        // Overrides: read, listed and deleted as usual.
        assert_eq!(
            ints(&cmd(con, &["RL.OVERRIDE", "GET", "o:old"]).unwrap())[0],
            5
        );
        assert_eq!(list_overrides(con, &[]).len(), 1);
        assert_eq!(cmd_int(con, &["RL.OVERRIDE", "DEL", "o:old"]), 1);

        assert_eq!(info_i64(con, "rl", "rl_fixed_oom_refused"), 0);
        for c in ["fixed", "sliding", "token", "concurrent", "all"] {
            assert_eq!(info_i64(con, "rl", &format!("rl_{c}_errors")), 0, "{c}");
            assert_eq!(
                info_i64(con, "rl", &format!("rl_{c}_oom_refused")),
                0,
                "{c}"
            );
        }
    });
}

#[test]
fn what_would_add_to_the_dataset_is_refused_and_writes_nothing() {
    on_each_server(|_, con| {
        limiter(con, &["RL.FIXED", "f:old", "10", "60"]);
        ok(con, &["RL.OVERRIDE", "SET", "o:old", "5", "60"]);
        fill_past_maxmemory(con);
        let before = keys_and_expiries(con);

        // New subjects, whatever the command or option.
        let refused: [&[&str]; 9] = [
            &["RL.FIXED", "f:new", "10", "60"],
            &["RL.CONCURRENT", "c:new", "10", "60"],
            &["RL.FIXED", "f:new", "10", "60", "ALIGNED"],
            &["RL.SLIDING", "s:new", "10", "60"],
            &["RL.SLIDING", "a:new", "10", "60", "APPROX"],
            &["RL.TOKEN", "t:new", "10", "60"],
            &["RL.TOKEN", "t:new", "10", "60", "WAIT", "1s"],
            // A denial that would store a block in a new key.
            &["RL.FIXED", "f:new", "1", "60", "COST", "5", "BLOCK", "1h"],
            // One new clause refuses the whole call.
            &[
                "RL.ALL", "FIXED", "f:old", "10", "60", "TOKEN", "t:new", "10", "60",
            ],
        ];
        for args in refused {
            assert_oom(con, args);
        }
        // A new override, and replacing one: every SET stores a value.
        assert_oom(con, &["RL.OVERRIDE", "SET", "o:new", "5", "60"]);
        assert_oom(con, &["RL.OVERRIDE.SET", "o:old", "6", "60"]);
        assert_eq!(keys_and_expiries(con), before, "a refused call wrote");

        // What writes nothing still answers for a new subject.
        let peek = limiter(con, &["RL.FIXED", "f:new", "10", "60", "PEEK"]);
        assert_eq!(peek[..2], [1, 1]);
        let read = limiter(con, &["RL.TOKEN", "t:new", "10", "60", "COST", "0"]);
        assert_eq!(read, [1, 0, 0, 10, 10, 0]);
        let refund = limiter(con, &["RL.FIXED", "f:new", "10", "60", "REFUND", "1"]);
        assert_eq!(refund[..2], [1, 0]);
        // RELEASE and RENEW always run: on a new key, they find no lease.
        for option in ["RELEASE", "RENEW"] {
            let r = lease(con, &["RL.CONCURRENT", "c:new", "10", "60", option, "1"]);
            assert_eq!(r, [0, 0, 0, 10, 10, 0, 0]);
        }
        let peek = lease(con, &["RL.CONCURRENT", "c:new", "10", "60", "PEEK"]);
        assert_eq!(peek, [1, 1, 0, 10, 9, 60_000, 0]);
        assert_eq!(keys_and_expiries(con), before);

        let c = counters(con);
        assert_eq!(c["rl_fixed_oom_refused"], 3, "{c:?}");
        assert_eq!(c["rl_sliding_oom_refused"], 2, "{c:?}");
        assert_eq!(c["rl_token_oom_refused"], 2, "{c:?}");
        assert_eq!(c["rl_all_oom_refused"], 1, "{c:?}");
        assert_eq!(c["rl_concurrent_oom_refused"], 1, "{c:?}");
        for name in ["fixed", "sliding", "token", "concurrent", "all"] {
            assert_eq!(c[&format!("rl_{name}_errors")], 0, "{c:?}");
        }
        // The same refusals, by class.
        assert_eq!(c["rl_errors_oom"], 9, "{c:?}");

        // Room again: the same calls are admitted.
        ok(con, &["CONFIG", "SET", "maxmemory", "0"]);
        assert_eq!(limiter(con, &["RL.FIXED", "f:new", "10", "60"])[0], 1);
    });
}

#[test]
fn a_sliding_log_runs_in_its_slack_and_is_refused_when_it_must_grow() {
    on_each_server(|_, con| {
        let args = ["RL.SLIDING", "s:log", "1000", "60"];
        limiter(con, &args);
        fill_past_maxmemory(con);
        // Calls at distinct milliseconds extend the compact log by their
        // entry, up to its bound (64 bytes), or append in a large log's
        // slack, in place; the call that needs a larger log is refused.
        let mut admitted = 0;
        let refusal = loop {
            std::thread::sleep(Duration::from_millis(2));
            let len = cmd_int(con, &["STRLEN", "s:log"]);
            let read = limiter(con, &["RL.SLIDING", "s:log", "1000", "60", "COST", "0"]);
            match cmd(con, &args) {
                Ok(_) => {
                    admitted += 1;
                    let after = cmd_int(con, &["STRLEN", "s:log"]);
                    assert!(
                        after == len || after <= 64,
                        "grew from {len} to {after} bytes"
                    );
                }
                Err(e) => break (e, len, read),
            }
            assert!(admitted < 500, "the log never needed to grow");
        };
        let (error, len, read) = refusal;
        assert_eq!(error, OOM);
        assert!(admitted >= 1, "no append fitted the slack");
        // Nothing written: same length, same counts.
        assert_eq!(cmd_int(con, &["STRLEN", "s:log"]), len);
        let again = limiter(con, &["RL.SLIDING", "s:log", "1000", "60", "COST", "0"]);
        assert_eq!(again[1], read[1]);
        assert_eq!(info_i64(con, "rl", "rl_sliding_oom_refused"), 1);
    });
}

#[test]
fn replicated_and_replayed_calls_are_never_refused() {
    for_each_flavor(|flavor| {
        let primary = start_primary(flavor, &["--appendonly", "yes"]);
        let replica = start_replica(&primary);
        let (mut pcon, mut rcon) = (primary.conn(), replica.conn());
        // The replica applies maxmemory too, and is past it.
        ok(
            &mut rcon,
            &["CONFIG", "SET", "replica-ignore-maxmemory", "no"],
        );
        let used = info_i64(&mut rcon, "memory", "used_memory");
        ok(
            &mut rcon,
            &["CONFIG", "SET", "maxmemory", &(used / 2).to_string()],
        );
        for key in ["f:1", "f:2", "f:3"] {
            limiter(&mut pcon, &["RL.FIXED", key, "10", "60"]);
        }
        limiter(&mut pcon, &["RL.SLIDING", "s:1", "10", "60"]);
        rl_all(
            &mut pcon,
            &["TOKEN", "t:1", "10", "60", "FIXED", "f:4", "1", "60"],
        );
        wait_in_sync(&mut pcon, &mut rcon);
        assert_eq!(dbsize(&mut rcon), 6);
        assert_eq!(digest(&mut rcon), digest(&mut pcon));

        // AOF replay on a server past maxmemory: every key comes back.
        wait_no_aof_rewrite(&mut pcon);
        let used = info_i64(&mut pcon, "memory", "used_memory");
        ok(
            &mut pcon,
            &["CONFIG", "SET", "maxmemory", &(used / 2).to_string()],
        );
        let digest_before = digest(&mut pcon);
        ok(&mut pcon, &["DEBUG", "LOADAOF"]);
        assert_eq!(dbsize(&mut pcon), 6);
        assert_eq!(digest(&mut pcon), digest_before);
        assert_oom(&mut pcon, &["RL.FIXED", "f:new", "10", "60"]);
        // Only the client's call was refused; the replica refused nothing.
        for (con, want) in [(&mut pcon, 1), (&mut rcon, 0)] {
            let c = counters(con);
            let refused: i64 = ["fixed", "sliding", "token", "all"]
                .iter()
                .map(|n| c[&format!("rl_{n}_oom_refused")])
                .sum();
            assert_eq!(refused, want, "{c:?}");
        }
    });
}
