//! RL.ALL: several limits checked and recorded all-or-nothing.

mod common;

use common::*;
use redis::Value;

#[test]
fn admits_only_when_every_clause_admits_and_then_records_all() {
    on_each_server(|_, con| {
        let call = [
            "FIXED", "ip:s", "2", "1s", "SLIDING", "ip:m", "3", "1m", "TOKEN", "key:d", "5", "1d",
        ];
        let (allowed, retry, replies) = rl_all(con, &call);
        assert_eq!((allowed, retry), (1, 0));
        assert_eq!(replies[0][..5], [1, 1, 0, 2, 1]);
        assert_eq!(replies[1][..5], [1, 1, 0, 3, 2]);
        assert_eq!(replies[2][..5], [1, 1, 0, 5, 4]);
        assert_eq!(rl_all(con, &call).0, 1);
        // The per-second limit is now full: nothing else may be recorded.
        let before = snapshot(con);
        let (allowed, retry, replies) = rl_all(con, &call);
        assert_eq!(allowed, 0);
        assert_eq!(replies[0][0], 0, "the FIXED clause is the reason");
        assert_eq!(
            replies[1][..2],
            [1, 3],
            "SLIDING would admit: its PEEK reply"
        );
        assert_eq!(replies[2][..2], [1, 3], "TOKEN would admit: its PEEK reply");
        assert_eq!(retry, replies[0][2]);
        assert_eq!(snapshot(con), before, "a denial leaves every key unchanged");
    });
}

#[test]
fn retry_after_is_the_largest_or_never() {
    on_each_server(|_, con| {
        limiter(con, &["RL.FIXED", "a", "1", "10s"]);
        limiter(con, &["RL.FIXED", "b", "1", "60s"]);
        let (allowed, retry, replies) =
            rl_all(con, &["FIXED", "a", "1", "10s", "FIXED", "b", "1", "60s"]);
        assert_eq!(allowed, 0);
        assert_eq!(retry, replies[1][2]);
        assert!(retry > 59_000, "{retry}");
        let (_, retry, _) = rl_all(
            con,
            &[
                "FIXED", "a", "1", "10s", "TOKEN", "t", "1", "1s", "COST", "2",
            ],
        );
        assert_eq!(retry, -1);
    });
}

#[test]
fn peek_changes_nothing() {
    on_each_server(|_, con| {
        let before = snapshot(con);
        let (allowed, retry, replies) = rl_all(
            con,
            &["FIXED", "p", "1", "1m", "TOKEN", "q", "2", "1m", "PEEK"],
        );
        assert_eq!((allowed, retry), (1, 0));
        assert_eq!(replies[0][..2], [1, 1]);
        assert_eq!(snapshot(con), before);
    });
}

#[test]
fn overrides_apply_inside_clauses() {
    on_each_server(|_, con| {
        cmd(
            con,
            &["RL.OVERRIDE.SET", "o:vip", "100", "1m", "BURST", "7"],
        )
        .unwrap();
        let (_, _, replies) = rl_all(
            con,
            &[
                "SLIDING", "s", "1", "1m", "OVERRIDE", "o:vip", "TOKEN", "t", "1", "1m",
                "OVERRIDE", "o:vip",
            ],
        );
        assert_eq!(replies[0][3], 100);
        assert_eq!(replies[1][3], 7, "TOKEN's capacity is the override's burst");
    });
}

#[test]
fn errors_change_nothing() {
    on_each_server(|_, con| {
        limiter(con, &["RL.FIXED", "f", "5", "60"]);
        cmd(con, &["RPUSH", "list", "x"]).unwrap();
        let before = snapshot(con);
        let cases: &[(&[&str], &str)] = &[
            (&[], "ERR wrong number of arguments for 'rl.all' command"),
            (&["PEEK"], "ERR RL.ALL needs at least one clause"),
            (
                &["LEAKY", "k", "1", "1"],
                "ERR unknown clause 'LEAKY' for RL.ALL",
            ),
            (
                &["FIXED", "k", "1"],
                "ERR RL.ALL FIXED clause needs key, limit and window",
            ),
            (
                &["FIXED", "k", "1", "1", "TOKEN", "t"],
                "ERR RL.ALL TOKEN clause needs key, rate and window",
            ),
            (
                &["FIXED", "k", "1", "1", "SLIDING", "k", "1", "1"],
                "ERR key 'k' appears in more than one RL.ALL clause",
            ),
            (
                &["FIXED", "k", "1", "1", "APPROX"],
                "ERR APPROX is not an option of RL.ALL FIXED",
            ),
            (&["FIXED", "k", "x", "1"], "ERR limit must be an integer"),
            (
                &["FIXED", "k", "1", "1", "NOW", "5"],
                "ERR unknown option 'NOW' for RL.ALL FIXED",
            ),
            (
                &["FIXED", "new", "1", "1", "SLIDING", "f", "1", "1"],
                "WRONGTYPE ",
            ),
            (
                &["FIXED", "new", "1", "1", "TOKEN", "list", "1", "1"],
                "WRONGTYPE ",
            ),
            (
                &["FIXED", "new", "1", "1", "OVERRIDE", "list"],
                "WRONGTYPE ",
            ),
            (
                &["FIXED", "new", "1", "1", "CONCURRENT", "f", "1", "1"],
                "WRONGTYPE Operation against a key holding the wrong kind of value \
                 (expected an RL.CONCURRENT limiter or no key)",
            ),
            (
                &["CONCURRENT", "c", "1"],
                "ERR RL.ALL CONCURRENT clause needs key, limit and lease",
            ),
            (
                &["CONCURRENT", "c", "1", "0"],
                "ERR lease must be a duration",
            ),
            (
                &["CONCURRENT", "c", "1", "1", "WAIT", "1s"],
                "ERR WAIT is not an option of RL.ALL CONCURRENT",
            ),
            (
                &["CONCURRENT", "c", "1", "1", "RELEASE", "5"],
                "ERR RELEASE is not an option of RL.ALL CONCURRENT",
            ),
            (
                &["CONCURRENT", "c", "1", "1", "RENEW", "5"],
                "ERR RENEW is not an option of RL.ALL CONCURRENT",
            ),
            (
                &["CONCURRENT", "c", "1", "1", "BLOCK", "1s"],
                "ERR BLOCK is not an option of RL.ALL CONCURRENT",
            ),
            (
                &["FIXED", "c", "1", "1", "CONCURRENT", "c", "1", "1"],
                "ERR key 'c' appears in more than one RL.ALL clause",
            ),
        ];
        for (args, want) in cases {
            let err = cmd(con, &[&["RL.ALL"], *args].concat()).unwrap_err();
            assert!(
                err.to_lowercase().starts_with(&want.to_lowercase()),
                "{args:?}: {err}"
            );
        }
        assert_eq!(snapshot(con), before);
    });
}

/// A CONCURRENT clause takes its lease only when every clause admits, and
/// its reply carries the lease id (0 when the call is denied or a PEEK);
/// the lease is released by RL.CONCURRENT like any other.
#[test]
fn a_concurrent_clause_takes_a_lease_only_with_the_others() {
    on_each_server(|server, con| {
        let flavor = server.flavor;
        let call = ["FIXED", "ac:f", "2", "1h", "CONCURRENT", "ac:c", "1", "1m"];
        let (allowed, retry, clauses) = rl_all_ints(con, &call);
        assert_eq!((allowed, retry), (1, 0), "{flavor:?}: {clauses:?}");
        assert_eq!(clauses[0].len(), 6);
        assert_eq!(clauses[1][..6], [1, 1, 0, 1, 0, 60_000], "{flavor:?}");
        let id = clauses[1][6];
        assert!(id > 0, "{flavor:?}: {clauses:?}");
        // Full: denied by the CONCURRENT clause; the FIXED one counts nothing.
        let c = changes_nothing(con, "denied by the CONCURRENT clause", |con| {
            rl_all_ints(con, &call)
        });
        assert_eq!(
            (c.0, c.2[0][..2].to_vec(), c.2[1][0], c.2[1][6]),
            (0, vec![1, 2], 0, 0)
        );
        assert!(c.1 > 0 && c.1 == c.2[1][2], "{flavor:?}: {c:?}");
        // Released: the FIXED clause is the one full now; no lease is taken.
        let released = lease(
            con,
            &[
                "RL.CONCURRENT",
                "ac:c",
                "1",
                "1m",
                "RELEASE",
                &id.to_string(),
            ],
        );
        assert_eq!(released[..2], [1, 0]);
        // Released in the millisecond its id came from, the key stays until
        // the clock has left it (docs/commands.md, RL.CONCURRENT).
        wait_until("the released key to go", || !exists(con, "ac:c"));
        rl_all_ints(con, &["FIXED", "ac:f", "2", "1h"]);
        let d = changes_nothing(con, "denied by the FIXED clause", |con| {
            rl_all_ints(con, &call)
        });
        assert_eq!(d.0, 0, "{flavor:?}: {d:?}");
        assert_eq!(
            (d.2[1][0], d.2[1][1], d.2[1][6]),
            (1, 1, 0),
            "{flavor:?}: {d:?}"
        );
        assert!(
            !exists(con, "ac:c"),
            "{flavor:?}: a denied call took a lease"
        );
        // PEEK takes nothing either.
        let p = changes_nothing(con, "PEEK", |con| {
            rl_all_ints(con, &["CONCURRENT", "ac:c", "1", "1m", "COST", "1", "PEEK"])
        });
        assert_eq!((p.0, p.2[0][0], p.2[0][6]), (1, 1, 0), "{flavor:?}: {p:?}");
    });
}

#[test]
fn getkeys_reports_every_key_and_okey() {
    on_each_server(|_, con| {
        let keys = cmd(
            con,
            &[
                "COMMAND",
                "GETKEYS",
                "RL.ALL",
                "FIXED",
                "a",
                "1",
                "1",
                "OVERRIDE",
                "oa",
                "TOKEN",
                "b",
                "1",
                "1",
                "SLIDING",
                "c",
                "1",
                "1",
                "CONCURRENT",
                "d",
                "1",
                "1",
                "OVERRIDE",
                "od",
                "PEEK",
            ],
        )
        .unwrap();
        let Value::Array(keys) = keys else { panic!() };
        let keys: Vec<String> = keys
            .iter()
            .map(|k| match k {
                Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(keys, ["a", "oa", "b", "c", "d", "od"]);
    });
}

#[test]
fn replica_and_aof_replay_match_the_primary() {
    for_each_flavor(|flavor| {
        let (mut primary, replica) = primary_and_replica(flavor, &AOF);
        let (mut p, mut r) = (primary.conn(), replica.conn());
        cmd(&mut p, &["RL.OVERRIDE.SET", "o", "4", "1h", "BURST", "6"]).unwrap();
        for i in 0..200 {
            let ip = format!("ip:{}", i % 7);
            let user = format!("user:{}", i % 3);
            let _ = rl_all_ints(
                &mut p,
                &[
                    "FIXED",
                    &ip,
                    "5",
                    "1h",
                    "ALIGNED",
                    "SLIDING",
                    &format!("{ip}:m"),
                    "8",
                    "1h",
                    "TOKEN",
                    &user,
                    "3",
                    "1h",
                    "OVERRIDE",
                    "o",
                    "SLIDING",
                    &format!("{user}:a"),
                    "9",
                    "1h",
                    "APPROX",
                    "CONCURRENT",
                    &format!("{ip}:c"),
                    "4",
                    "1h",
                ],
            );
        }
        wait_in_sync(&mut p, &mut r);
        let on_primary = snapshot(&mut p);
        assert!(on_primary.len() > 10);
        assert_eq!(snapshot(&mut r), on_primary);
        primary.restart();
        assert_eq!(snapshot(&mut primary.conn()), on_primary);
    });
}

/// docs/commands.md, RL.ALL: a call that does not parse still reports
/// every key it can find (each word after a clause name, and OVERRIDE
/// values), so that a cluster client routes it and the user sees librl's
/// own error rather than a client-side "missing key".
#[test]
fn getkeys_finds_the_keys_of_a_call_that_does_not_parse() {
    on_each_server(|_, con| {
        let cases: &[(&[&str], &[&str], &str)] = &[
            (
                &["FIXED", "k1", "x", "y"],
                &["k1"],
                "ERR limit must be an integer",
            ),
            (
                &["FIXED", "{a}k", "notanumber", "60"],
                &["{a}k"],
                "ERR limit must be an integer",
            ),
            (
                &["fixed", "k1", "5", "0"],
                &["k1"],
                "ERR window must be a duration",
            ),
            (
                &["FIXED", "k1"],
                &["k1"],
                "ERR RL.ALL FIXED clause needs key, limit and window",
            ),
            (
                &["FIXED", "k1", "5", "60", "TOKEN", "k2", "x"],
                &["k1", "k2"],
                "ERR RL.ALL TOKEN clause needs key, rate and window",
            ),
            (
                &[
                    "FIXED", "k1", "5", "60", "BOGUS", "SLIDING", "k2", "5", "60",
                ],
                &["k1", "k2"],
                "ERR unknown option 'BOGUS' for RL.ALL FIXED",
            ),
            (
                &["FIXED", "k1", "5", "x", "OVERRIDE", "o1"],
                &["k1", "o1"],
                "ERR window must be a duration",
            ),
            (
                &[
                    "SLIDING", "k1", "5", "60", "OVERRIDE", "o1", "TOKEN", "k2", "5", "60",
                    "BURST", "0",
                ],
                &["k1", "o1", "k2"],
                "ERR BURST must be an integer",
            ),
            (
                &["TOKEN", "k1", "5", "60", "OVERRIDE"],
                &["k1"],
                "ERR option OVERRIDE needs a value",
            ),
            (
                &["FIXED", "k1", "5", "60", "APPROX", "TOKEN", "k2", "5", "60"],
                &["k1", "k2"],
                "ERR APPROX is not an option of RL.ALL FIXED",
            ),
        ];
        let before = snapshot(con);
        for (args, keys, error) in cases {
            let mut getkeys = vec!["COMMAND", "GETKEYS", "RL.ALL"];
            getkeys.extend(*args);
            let got = cmd(con, &getkeys).map(|v| strings(&v));
            assert_eq!(
                got,
                Ok(keys.iter().map(|k| k.to_string()).collect()),
                "{args:?}"
            );
            // And the call itself is librl's error, as before.
            let err = cmd(con, &[&["RL.ALL"], *args].concat()).unwrap_err();
            assert!(err.starts_with(error), "{args:?}: {err}");
        }
        assert_eq!(snapshot(con), before);
    });
}
