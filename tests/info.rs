//! `INFO rl`: per-command calls, allowed, denied, monitor would-deny and
//! errors, counted exactly for every outcome of every command, and never
//! for calls a replica or an AOF replays.

mod common;

use common::*;
use redis::Value;
use std::collections::BTreeMap;

// ---------------------------------------------------------------------------
// INFO rl
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// A limiter call admitted (in monitor: one that on admits too).
    Allowed,
    Denied,
    /// Admitted in monitor, denied by on.
    WouldDeny,
    /// An error reply from the module, of this class (`rl_errors_<class>`).
    Error(&'static str),
    /// An override command that succeeded.
    Done,
    /// Refused by the server before the module runs (wrong arity): the
    /// server's own `rejected_calls` has it, the module never sees it.
    Rejected,
}

const ARGUMENT: &str = "argument";
const WRONGTYPE: &str = "wrongtype";

fn expect(expected: &mut BTreeMap<String, i64>, command: &str, counter: &str) {
    *expected
        .get_mut(&format!("rl_{command}_{counter}"))
        .unwrap_or_else(|| panic!("no field rl_{command}_{counter}")) += 1;
}

/// Makes the call and checks that it had `outcome`; returns what it adds
/// to the counters.
fn scripted(con: &mut redis::Connection, args: &[&str], outcome: Outcome) -> Vec<&'static str> {
    let reply = cmd(con, args);
    let allowed_retry = |v: &Value| -> (i64, i64) {
        if args[0].eq_ignore_ascii_case("RL.ALL") {
            let (a, r, _) = all_parts(v);
            (a, r)
        } else {
            let r = ints(v);
            (r[0], r[2])
        }
    };
    match outcome {
        Outcome::Allowed => {
            let (a, r) = allowed_retry(&reply.unwrap_or_else(|e| panic!("{args:?}: {e}")));
            assert_eq!((a, r), (1, 0), "{args:?}");
            vec!["calls", "allowed"]
        }
        Outcome::Denied => {
            let (a, r) = allowed_retry(&reply.unwrap_or_else(|e| panic!("{args:?}: {e}")));
            assert_eq!(a, 0, "{args:?}");
            assert_ne!(r, 0, "{args:?}");
            vec!["calls", "denied"]
        }
        Outcome::WouldDeny => {
            let (a, r) = allowed_retry(&reply.unwrap_or_else(|e| panic!("{args:?}: {e}")));
            assert_eq!(a, 1, "{args:?}");
            assert_ne!(r, 0, "{args:?}");
            vec!["calls", "allowed", "monitor_would_deny"]
        }
        Outcome::Error(class) => {
            let err = reply.unwrap_err();
            assert!(
                !err.contains("wrong number of arguments"),
                "{args:?}: {err}"
            );
            let code = if class == WRONGTYPE {
                "WRONGTYPE"
            } else {
                "ERR"
            };
            assert!(err.starts_with(code), "{args:?}: {err}");
            vec!["calls", "errors"]
        }
        Outcome::Done => {
            reply.unwrap_or_else(|e| panic!("{args:?}: {e}"));
            vec!["calls"]
        }
        Outcome::Rejected => {
            let err = reply.unwrap_err();
            assert!(err.contains("wrong number of arguments"), "{args:?}: {err}");
            vec![]
        }
    }
}

#[test]
fn info_counts_every_outcome_of_every_command_exactly() {
    use Outcome::*;
    on_each_server(|server, con| {
        let start = counters(con);
        assert!(all_zero(&start), "{start:?}");
        let mut expected = start.clone();
        cmd(con, &["RPUSH", "list", "x"]).unwrap();
        // A value a newer librl wrote, and one that fails validation.
        ok(con, &["SET", "newer", "\0rl\x09F"]);
        ok(con, &["SET", "corrupt", "\0rl\x01F"]);
        type Step<'a> = (&'a [&'a str], Outcome);
        let on: &[Step] = &[
            (&["RL.FIXED", "f", "2", "1h"], Allowed),
            (&["rl.fixed", "f", "2", "1h", "COST", "1"], Allowed),
            (&["RL.FIXED", "f", "2", "1h"], Denied),
            (&["RL.FIXED", "f", "2", "1h", "PEEK"], Denied),
            (&["RL.FIXED", "f2", "2", "1h", "PEEK"], Allowed),
            (&["RL.FIXED", "f", "2", "1h", "COST", "3"], Denied),
            (&["RL.FIXED", "f", "0", "1h"], Error(ARGUMENT)),
            (&["RL.FIXED", "f", "2", "1h", "BOGUS"], Error(ARGUMENT)),
            (&["RL.FIXED", "list", "2", "1h"], Error(WRONGTYPE)),
            (&["RL.FIXED", "f", "2"], Rejected),
            (&["RL.FIXED", "newer", "2", "1h"], Error("newer_version")),
            (&["RL.FIXED", "corrupt", "2", "1h"], Error("corrupt")),
            (&["RL.SLIDING", "s", "1", "1h"], Allowed),
            (&["RL.SLIDING", "s", "1", "1h"], Denied),
            (&["RL.SLIDING", "sa", "1", "1h", "APPROX"], Allowed),
            (&["RL.SLIDING", "sa", "1", "1h", "APPROX", "PEEK"], Denied),
            (&["RL.SLIDING", "s", "1", "1h", "APPROX"], Error(WRONGTYPE)),
            (&["RL.SLIDING", "s", "1", "0"], Error(ARGUMENT)),
            (&["RL.TOKEN", "t", "1", "1d"], Allowed),
            (&["RL.TOKEN", "t", "1", "1d"], Denied),
            (&["RL.TOKEN", "t", "1", "1d", "BURST", "0"], Error(ARGUMENT)),
            (&["RL.TOKEN", "f", "1", "1d"], Error(WRONGTYPE)),
            (&["RL.TOKEN"], Rejected),
            (&["RL.CONCURRENT", "c", "1", "1h"], Allowed),
            (&["RL.CONCURRENT", "c", "1", "1h"], Denied),
            (&["RL.CONCURRENT", "c", "1", "1h", "PEEK"], Denied),
            (&["RL.CONCURRENT", "c", "1", "1h", "COST", "2"], Denied),
            (&["RL.CONCURRENT", "c2", "1", "1h", "COST", "0"], Allowed),
            (&["RL.CONCURRENT", "c", "0", "1h"], Error(ARGUMENT)),
            (
                &["RL.CONCURRENT", "c", "1", "1h", "RELEASE", "0"],
                Error(ARGUMENT),
            ),
            (&["RL.CONCURRENT", "f", "1", "1h"], Error(WRONGTYPE)),
            (&["RL.CONCURRENT", "c", "1"], Rejected),
            (
                &["RL.ALL", "FIXED", "a1", "1", "1h", "TOKEN", "a2", "5", "1d"],
                Allowed,
            ),
            (
                &["RL.ALL", "FIXED", "a1", "1", "1h", "TOKEN", "a2", "5", "1d"],
                Denied,
            ),
            (&["RL.ALL", "TOKEN", "a2", "5", "1d", "PEEK"], Allowed),
            (&["RL.ALL", "FIXED", "a1", "1", "1h", "PEEK"], Denied),
            (
                &["RL.ALL", "FIXED", "a3", "1", "1h", "FIXED", "a3", "1", "1h"],
                Error(ARGUMENT),
            ),
            (
                &["RL.ALL", "FIXED", "a3", "1", "1h", "OVERRIDE", "list"],
                Error(WRONGTYPE),
            ),
            (&["RL.ALL", "PEEK"], Error(ARGUMENT)),
            (&["RL.ALL"], Rejected),
            (&["RL.OVERRIDE.SET", "o", "5", "1h", "TTL", "2h"], Done),
            (&["RL.OVERRIDE.SET", "o", "0", "1h"], Error(ARGUMENT)),
            (&["RL.OVERRIDE.SET", "f", "5", "1h"], Error(WRONGTYPE)),
            (&["RL.OVERRIDE.SET", "o", "5"], Rejected),
            (&["RL.OVERRIDE.GET", "o"], Done),
            (&["RL.OVERRIDE.GET", "missing"], Done),
            (&["RL.OVERRIDE.GET", "f"], Error(WRONGTYPE)),
            (&["RL.OVERRIDE.GET", "o", "extra"], Rejected),
            (&["RL.OVERRIDE.DEL", "missing", "o"], Done),
            (&["RL.OVERRIDE.DEL", "f"], Error(WRONGTYPE)),
            (&["RL.OVERRIDE.LIST", "0"], Done),
            (&["RL.OVERRIDE.LIST", "0", "COUNT", "0"], Error(ARGUMENT)),
            (&["RL.OVERRIDE.LIST", "x"], Error(ARGUMENT)),
        ];
        let monitor: &[Step] = &[
            (&["RL.FIXED", "f", "2", "1h"], WouldDeny),
            (&["RL.FIXED", "f", "2", "1h", "COST", "9"], WouldDeny),
            (&["RL.FIXED", "f", "2", "1h", "PEEK"], WouldDeny),
            (&["RL.FIXED", "m", "2", "1h"], Allowed),
            (&["RL.FIXED", "m", "x", "1h"], Error(ARGUMENT)),
            (&["RL.SLIDING", "s", "1", "1h"], WouldDeny),
            (&["RL.SLIDING", "m2", "1", "1h"], Allowed),
            (&["RL.TOKEN", "t", "1", "1d"], WouldDeny),
            (&["RL.TOKEN", "t", "1", "1d", "COST", "2"], WouldDeny),
            (&["RL.CONCURRENT", "c", "1", "1h"], WouldDeny),
            (&["RL.CONCURRENT", "c", "1", "1h", "COST", "5"], WouldDeny),
            (
                &["RL.ALL", "FIXED", "a1", "1", "1h", "TOKEN", "a2", "5", "1d"],
                WouldDeny,
            ),
            (&["RL.ALL", "FIXED", "m3", "1", "1h"], Allowed),
            (
                &[
                    "RL.ALL", "FIXED", "m3", "1", "1h", "SLIDING", "m3", "1", "1h",
                ],
                Error(ARGUMENT),
            ),
        ];
        let off: &[Step] = &[
            (&["RL.FIXED", "f", "2", "1h"], Allowed),
            (&["RL.FIXED", "f", "2", "1h", "PEEK"], Allowed),
            (&["RL.FIXED", "list", "2", "1h"], Allowed),
            (&["RL.FIXED", "f", "-1", "1h"], Error(ARGUMENT)),
            (&["RL.SLIDING", "s", "1", "1h"], Allowed),
            (&["RL.TOKEN", "t", "1", "1d", "COST", "5"], Allowed),
            (&["RL.CONCURRENT", "c", "1", "1h"], Allowed),
            (
                &[
                    "RL.ALL", "FIXED", "a1", "1", "1h", "SLIDING", "s", "1", "1h",
                ],
                Allowed,
            ),
            (
                &["RL.ALL", "SLIDING", "s", "1", "1h", "APPROX", "ALIGNED"],
                Error(ARGUMENT),
            ),
            (&["RL.OVERRIDE.SET", "o2", "5", "1h"], Done),
            (&["RL.OVERRIDE.GET", "o2"], Done),
        ];
        for (mode, steps) in [("on", on), ("monitor", monitor), ("off", off)] {
            set_mode(con, mode);
            for &(args, outcome) in steps {
                let command = stats_name(args[0].as_bytes());
                for counter in scripted(con, args, outcome) {
                    expect(&mut expected, command, counter);
                }
                if let Error(class) = outcome {
                    *expected.get_mut(&format!("rl_errors_{class}")).unwrap() += 1;
                }
            }
            assert_eq!(
                counters(con),
                expected,
                "{:?}: after the calls in {mode}",
                server.flavor
            );
        }
        // Calls from a script and inside MULTI count once each.
        set_mode(con, "on");
        let _: Value = redis::cmd("EVAL")
            .arg("return redis.call('RL.FIXED', KEYS[1], 1, '1h')")
            .arg(1)
            .arg("lua")
            .query(con)
            .unwrap();
        expect(&mut expected, "fixed", "calls");
        expect(&mut expected, "fixed", "allowed");
        let _: Vec<Value> = redis::pipe()
            .atomic()
            .cmd("RL.TOKEN")
            .arg("multi")
            .arg(1)
            .arg("1d")
            .cmd("RL.TOKEN")
            .arg("multi")
            .arg(1)
            .arg("1d")
            .query(con)
            .unwrap();
        for counter in ["calls", "allowed", "calls", "denied"] {
            expect(&mut expected, "token", counter);
        }
        let got = counters(con);
        assert_eq!(got, expected, "{:?}", server.flavor);
        // calls = allowed + denied + errors, for every limiter command.
        for command in ["fixed", "sliding", "token", "concurrent", "all"] {
            let field = |c: &str| got[&format!("rl_{command}_{c}")];
            assert_eq!(
                field("calls"),
                field("allowed") + field("denied") + field("errors"),
                "{command}"
            );
        }
        // Every error is of one class.
        let by_command: i64 = COUNTED.iter().map(|c| got[&format!("rl_{c}_errors")]).sum();
        let by_class: i64 = ERROR_CLASSES
            .iter()
            .map(|c| got[&format!("rl_errors_{c}")])
            .sum();
        assert_eq!(by_command, by_class, "{:?}", server.flavor);
        assert_eq!(info_field(con, "rl", "rl_mode"), "on");
    });
}

#[test]
fn replayed_calls_are_not_counted() {
    for_each_flavor(|flavor| {
        let (primary, replica) = primary_and_replica(flavor, &AOF);
        let (mut pcon, mut rcon) = (primary.conn(), replica.conn());
        let t = workload(&mut pcon, "w", 31, 500);
        wait_in_sync(&mut pcon, &mut rcon);
        assert_same_mixed_dataset(&format!("{flavor:?}"), &mut pcon, &mut rcon);
        let on_primary = counters(&mut pcon);
        for (name, calls) in &t.calls {
            assert_eq!(on_primary[&format!("rl_{name}_calls")], *calls, "{name}");
            assert_eq!(on_primary[&format!("rl_{name}_errors")], 0, "{name}");
        }
        for (name, n) in &t.allowed {
            assert_eq!(on_primary[&format!("rl_{name}_allowed")], *n, "{name}");
        }
        for (name, n) in &t.refused {
            assert_eq!(on_primary[&format!("rl_{name}_denied")], *n, "{name}");
        }
        let on_replica = counters(&mut rcon);
        assert!(all_zero(&on_replica), "{flavor:?}: {on_replica:?}");
        drop((pcon, rcon));
        drop(replica);

        // Nor are calls replayed from the AOF at start.
        let mut primary = primary;
        let before = snapshot(&mut primary.conn());
        primary.restart();
        let mut con = primary.conn();
        assert_same_snapshot(
            &snapshot(&mut con),
            &before,
            &format!("{flavor:?}: AOF replay"),
        );
        let after = counters(&mut con);
        assert!(all_zero(&after), "{flavor:?}: {after:?}");
    });
}

/// `rl_replayed_refused` counts, on the node itself, the calls replayed
/// from its primary's link or its AOF that its librl refused: writes it
/// does not have. The primary never hears of them (the server logs the
/// refusal as CRITICAL and counts it in `unexpected_error_replies`, and
/// by default carries on). Here the replica's copy of a key differs (it
/// was writable); an older librl refusing an option it does not know is
/// counted the same way (the AOF below).
#[test]
fn replayed_calls_librl_refuses_are_counted_on_that_node() {
    for_each_flavor(|flavor| {
        let (primary, replica) = primary_and_replica(flavor, &AOF);
        let (mut pcon, mut rcon) = (primary.conn(), replica.conn());
        let what = format!("{flavor:?}");
        assert_eq!(
            strings(&cmd(&mut rcon, &["CONFIG", "GET", "propagation-error-behavior"]).unwrap()),
            ["propagation-error-behavior", "ignore"],
            "{what}: the server's default"
        );
        ok(&mut rcon, &["CONFIG", "SET", "replica-read-only", "no"]);
        cmd(&mut rcon, &["RPUSH", "diverged", "x"]).unwrap();
        let unexpected = info_i64(&mut rcon, "stats", "unexpected_error_replies");
        limiter(&mut pcon, &["RL.FIXED", "diverged", "5", "1h"]);
        limiter(&mut pcon, &["RL.FIXED", "same", "5", "1h"]);
        wait_in_sync(&mut pcon, &mut rcon);
        let on_replica = counters(&mut rcon);
        let counted: Vec<_> = on_replica.iter().filter(|(_, &v)| v != 0).collect();
        assert_eq!(
            counted,
            [(&"rl_replayed_refused".to_string(), &1)],
            "{what}"
        );
        assert_eq!(
            info_i64(&mut rcon, "stats", "unexpected_error_replies"),
            unexpected + 1,
            "{what}"
        );
        assert!(replica.log().contains("== CRITICAL =="), "{what}");
        // The rest of the stream applied: the replica carries on.
        assert_eq!(
            limiter(&mut rcon, &["RL.FIXED", "same", "5", "1h", "COST", "0"])[1],
            1
        );
        assert_eq!(counters(&mut pcon)["rl_replayed_refused"], 0, "{what}");
        drop(replica);

        // An AOF holding a call this librl does not know (as a newer
        // librl could write): the node starts, applies the rest, counts it.
        drop((pcon, rcon));
        let mut primary = primary;
        primary.stop();
        let dir = primary.dir.join("appendonlydir");
        let incr = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.to_string_lossy().ends_with(".incr.aof"))
            .unwrap_or_else(|| panic!("{what}: no incremental AOF in {}", dir.display()));
        let newer: Vec<&[u8]> = vec![
            b"RL.FIXED",
            b"same",
            b"5",
            b"1h",
            b"NOW",
            b"1700000000000",
            b"LATER_OPTION",
            b"1",
        ];
        let mut aof = std::fs::OpenOptions::new()
            .append(true)
            .open(&incr)
            .unwrap();
        std::io::Write::write_all(&mut aof, &resp_commands([newer])).unwrap();
        drop(aof);
        primary.restart();
        let mut con = primary.conn();
        let c = counters(&mut con);
        assert_eq!(c["rl_replayed_refused"], 1, "{what}: {c:?}");
        assert_eq!(
            limiter(&mut con, &["RL.FIXED", "same", "5", "1h", "COST", "0"])[1],
            1,
            "{what}"
        );
        assert!(primary.log().contains("LATER_OPTION"), "{what}");
    });
}

/// With `propagation-error-behavior panic-on-replicas` (which the four
/// servers have), a read-only replica that cannot apply a call from its
/// primary stops at once, loudly, instead of going on without that write;
/// its crash report includes `INFO rl`.
#[test]
fn a_replica_set_to_panic_stops_at_a_call_it_cannot_apply() {
    for_each_flavor(|flavor| {
        let (primary, replica) = primary_and_replica(flavor, &[]);
        let (mut pcon, mut rcon) = (primary.conn(), replica.conn());
        let what = format!("{flavor:?}");
        ok(&mut rcon, &["CONFIG", "SET", "replica-read-only", "no"]);
        cmd(&mut rcon, &["RPUSH", "diverged", "x"]).unwrap();
        ok(&mut rcon, &["CONFIG", "SET", "replica-read-only", "yes"]);
        ok(
            &mut rcon,
            &[
                "CONFIG",
                "SET",
                "propagation-error-behavior",
                "panic-on-replicas",
            ],
        );
        // The crash report's memory test takes seconds of a busy machine.
        ok(
            &mut rcon,
            &["CONFIG", "SET", "crash-memcheck-enabled", "no"],
        );
        limiter(&mut pcon, &["RL.FIXED", "diverged", "5", "1h"]);
        // The crash report ends the log ("=== REDIS BUG REPORT END", or
        // VALKEY's).
        wait_until("the replica's crash report", || {
            replica.log().contains("BUG REPORT END")
        });
        let log = replica.log();
        assert!(log.contains("panicked sending an error"), "{what}: {log}");
        assert!(log.contains("rl_replayed_refused:1"), "{what}: {log}");
    });
}
