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
    /// An error reply from the module.
    Error,
    /// An override command that succeeded.
    Done,
    /// Refused by the server before the module runs (wrong arity): the
    /// server's own `rejected_calls` has it, the module never sees it.
    Rejected,
}

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
        Outcome::Error => {
            let err = reply.unwrap_err();
            assert!(
                !err.contains("wrong number of arguments"),
                "{args:?}: {err}"
            );
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
        type Step<'a> = (&'a [&'a str], Outcome);
        let on: &[Step] = &[
            (&["RL.FIXED", "f", "2", "1h"], Allowed),
            (&["rl.fixed", "f", "2", "1h", "COST", "1"], Allowed),
            (&["RL.FIXED", "f", "2", "1h"], Denied),
            (&["RL.FIXED", "f", "2", "1h", "PEEK"], Denied),
            (&["RL.FIXED", "f2", "2", "1h", "PEEK"], Allowed),
            (&["RL.FIXED", "f", "2", "1h", "COST", "3"], Denied),
            (&["RL.FIXED", "f", "0", "1h"], Error),
            (&["RL.FIXED", "f", "2", "1h", "BOGUS"], Error),
            (&["RL.FIXED", "list", "2", "1h"], Error),
            (&["RL.FIXED", "f", "2"], Rejected),
            (&["RL.SLIDING", "s", "1", "1h"], Allowed),
            (&["RL.SLIDING", "s", "1", "1h"], Denied),
            (&["RL.SLIDING", "sa", "1", "1h", "APPROX"], Allowed),
            (&["RL.SLIDING", "sa", "1", "1h", "APPROX", "PEEK"], Denied),
            (&["RL.SLIDING", "s", "1", "1h", "APPROX"], Error),
            (&["RL.SLIDING", "s", "1", "0"], Error),
            (&["RL.TOKEN", "t", "1", "1d"], Allowed),
            (&["RL.TOKEN", "t", "1", "1d"], Denied),
            (&["RL.TOKEN", "t", "1", "1d", "BURST", "0"], Error),
            (&["RL.TOKEN", "f", "1", "1d"], Error),
            (&["RL.TOKEN"], Rejected),
            (&["RL.CONCURRENT", "c", "1", "1h"], Allowed),
            (&["RL.CONCURRENT", "c", "1", "1h"], Denied),
            (&["RL.CONCURRENT", "c", "1", "1h", "PEEK"], Denied),
            (&["RL.CONCURRENT", "c", "1", "1h", "COST", "2"], Denied),
            (&["RL.CONCURRENT", "c2", "1", "1h", "COST", "0"], Allowed),
            (&["RL.CONCURRENT", "c", "0", "1h"], Error),
            (&["RL.CONCURRENT", "c", "1", "1h", "RELEASE", "0"], Error),
            (&["RL.CONCURRENT", "f", "1", "1h"], Error),
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
                Error,
            ),
            (
                &["RL.ALL", "FIXED", "a3", "1", "1h", "OVERRIDE", "list"],
                Error,
            ),
            (&["RL.ALL", "PEEK"], Error),
            (&["RL.ALL"], Rejected),
            (&["RL.OVERRIDE.SET", "o", "5", "1h", "TTL", "2h"], Done),
            (&["RL.OVERRIDE.SET", "o", "0", "1h"], Error),
            (&["RL.OVERRIDE.SET", "f", "5", "1h"], Error),
            (&["RL.OVERRIDE.SET", "o", "5"], Rejected),
            (&["RL.OVERRIDE.GET", "o"], Done),
            (&["RL.OVERRIDE.GET", "missing"], Done),
            (&["RL.OVERRIDE.GET", "f"], Error),
            (&["RL.OVERRIDE.GET", "o", "extra"], Rejected),
            (&["RL.OVERRIDE.DEL", "missing", "o"], Done),
            (&["RL.OVERRIDE.DEL", "f"], Error),
            (&["RL.OVERRIDE.LIST", "0"], Done),
            (&["RL.OVERRIDE.LIST", "0", "COUNT", "0"], Error),
            (&["RL.OVERRIDE.LIST", "x"], Error),
        ];
        let monitor: &[Step] = &[
            (&["RL.FIXED", "f", "2", "1h"], WouldDeny),
            (&["RL.FIXED", "f", "2", "1h", "COST", "9"], WouldDeny),
            (&["RL.FIXED", "f", "2", "1h", "PEEK"], WouldDeny),
            (&["RL.FIXED", "m", "2", "1h"], Allowed),
            (&["RL.FIXED", "m", "x", "1h"], Error),
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
                Error,
            ),
        ];
        let off: &[Step] = &[
            (&["RL.FIXED", "f", "2", "1h"], Allowed),
            (&["RL.FIXED", "f", "2", "1h", "PEEK"], Allowed),
            (&["RL.FIXED", "list", "2", "1h"], Allowed),
            (&["RL.FIXED", "f", "-1", "1h"], Error),
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
                Error,
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
