//! The `rl.mode` config (on, off, monitor): set at load, by `MODULE
//! LOADEX` and by `CONFIG SET`; what monitor and off do to replies, state,
//! counters and replication.
//!
//! Windows are long (an hour or more; aligned ones chosen so that they do
//! not end for at least ten minutes) so that nothing expires while a test
//! runs, and every wait is for a condition, never a fixed sleep.

mod common;

use common::*;
use redis::Value;

/// Writes since the last save: moves with every change to the dataset.
fn dirty(con: &mut redis::Connection) -> i64 {
    info_i64(con, "persistence", "rdb_changes_since_last_save")
}

/// Lookups that found or missed a key: move with every read.
fn lookups(con: &mut redis::Connection) -> i64 {
    info_i64(con, "stats", "keyspace_hits") + info_i64(con, "stats", "keyspace_misses")
}

// ---------------------------------------------------------------------------
// rl.mode: where it is set
// ---------------------------------------------------------------------------

/// A limit of 1: the first call is admitted, the second one is what the
/// mode makes of a call that `on` denies.
fn second_call_of_one(con: &mut redis::Connection, key: &str) -> [i64; 6] {
    let args = ["RL.FIXED", key, "1", "1h"];
    limiter(con, &args);
    limiter(con, &args)
}

fn assert_behaves_as(con: &mut redis::Connection, mode: &str, key: &str) {
    assert_eq!(config_mode(con), mode);
    assert_eq!(info_field(con, "rl", "rl_mode"), mode);
    let before = dbsize(con);
    let r = second_call_of_one(con, key);
    match mode {
        "on" => {
            assert_eq!(r[..2], [0, 1], "{r:?}");
            assert!(r[2] > 0, "{r:?}");
        }
        "monitor" => {
            assert_eq!(r[..2], [1, 1], "{r:?}");
            assert!(r[2] > 0, "monitor keeps retry_after: {r:?}");
        }
        "off" => {
            assert_eq!(r, [1, 0, 0, 1, 1, 0]);
            assert_eq!(dbsize(con), before, "off created {key}");
        }
        _ => unreachable!(),
    }
}

#[test]
fn mode_defaults_to_on_and_config_set_changes_it_at_run_time() {
    on_each_server(|server, con| {
        assert_behaves_as(con, "on", "a");
        for (i, mode) in ["off", "monitor", "on", "monitor", "off", "on"]
            .into_iter()
            .enumerate()
        {
            set_mode(con, mode);
            assert_behaves_as(con, mode, &format!("k{i}"));
        }
        // Enum configs compare case-insensitively, like the server's own.
        set_mode(con, "MONITOR");
        assert_eq!(config_mode(con), "monitor");
        for bad in ["maybe", "", "1", "on off", "onn"] {
            let err = cmd(con, &["CONFIG", "SET", "rl.mode", bad]).unwrap_err();
            assert!(
                err.starts_with("ERR "),
                "{:?} {bad:?}: {err}",
                server.flavor
            );
            assert_eq!(config_mode(con), "monitor", "{bad:?} changed the mode");
        }
        // CONFIG GET with a pattern finds it too.
        let pairs: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("rl.*")
            .query(con)
            .unwrap();
        assert_eq!(pairs, ["rl.mode", "monitor"]);
    });
}

#[test]
fn mode_given_as_module_argument_at_load() {
    for_each_flavor(|flavor| {
        for mode in ["monitor", "off", "on"] {
            let server = Server::builder(flavor).module_args(&["mode", mode]).start();
            let mut con = server.conn();
            assert_behaves_as(&mut con, mode, "a");
            // Still settable at run time.
            set_mode(&mut con, "on");
            assert_behaves_as(&mut con, "on", "b");
        }
    });
}

fn without_module(flavor: Flavor) -> (Server, redis::Connection, String) {
    let server = Server::builder(flavor)
        .args(&["--enable-module-command", "yes"])
        .without_module()
        .start();
    let mut con = server.conn();
    assert!(!module_names(&mut con).contains(&"rl".to_string()));
    assert!(cmd(&mut con, &["RL.FIXED", "a", "1", "1h"]).is_err());
    (server, con, module_path().to_string_lossy().into_owned())
}

#[test]
fn mode_given_to_module_loadex() {
    for_each_flavor(|flavor| {
        let (_server, mut con, path) = without_module(flavor);
        cmd(
            &mut con,
            &["MODULE", "LOADEX", &path, "CONFIG", "rl.mode", "monitor"],
        )
        .unwrap();
        assert!(module_names(&mut con).contains(&"rl".to_string()));
        assert_behaves_as(&mut con, "monitor", "a");
        set_mode(&mut con, "off");
        assert_behaves_as(&mut con, "off", "b");

        // An invalid value is refused and the module is not loaded.
        let (_server, mut con, path) = without_module(flavor);
        let err = cmd(
            &mut con,
            &["MODULE", "LOADEX", &path, "CONFIG", "rl.mode", "maybe"],
        )
        .unwrap_err();
        assert!(err.starts_with("ERR"), "{flavor:?}: {err}");
        assert!(!module_names(&mut con).contains(&"rl".to_string()));
        assert!(cmd(&mut con, &["RL.FIXED", "a", "1", "1h"]).is_err());

        // LOADEX ARGS and MODULE LOAD with arguments take `mode` too.
        for load in [
            vec!["MODULE", "LOADEX", &path, "ARGS", "mode", "off"],
            vec!["MODULE", "LOAD", &path, "mode", "off"],
        ] {
            let (_server, mut con, _) = without_module(flavor);
            cmd(&mut con, &load).unwrap_or_else(|e| panic!("{load:?}: {e}"));
            assert_behaves_as(&mut con, "off", "a");
        }
    });
}

/// Regression: Valkey 9.1 keeps a module's ACL category after the module
/// is unloaded (also after a LOADEX whose CONFIG was refused), and librl
/// used to treat "category already exists" as fatal, so it could not be
/// loaded again by that server process.
#[test]
fn module_loads_again_after_a_refused_loadex_and_after_unload() {
    for_each_flavor(|flavor| {
        let (server, mut con, path) = without_module(flavor);
        assert!(cmd(
            &mut con,
            &["MODULE", "LOADEX", &path, "CONFIG", "rl.mode", "maybe"],
        )
        .is_err());
        cmd(
            &mut con,
            &["MODULE", "LOADEX", &path, "CONFIG", "rl.mode", "monitor"],
        )
        .unwrap_or_else(|e| panic!("{flavor:?}: after a refused LOADEX: {e}\n{}", server.log()));
        assert_behaves_as(&mut con, "monitor", "a");
        cmd(&mut con, &["MODULE", "UNLOAD", "rl"]).unwrap();
        cmd(&mut con, &["MODULE", "LOAD", &path])
            .unwrap_or_else(|e| panic!("{flavor:?}: after MODULE UNLOAD: {e}\n{}", server.log()));
        assert_behaves_as(&mut con, "on", "b");
    });
}

/// Regression: the module arguments are read by looking up each config's
/// name (case-sensitively) among them, and anything else used to be
/// ignored, so a typo (`mod monitor`, `MODE monitor`, a dangling `mode`)
/// started the server silently in `on`. Now the module refuses to load.
#[test]
fn module_arguments_that_are_not_a_config_are_refused() {
    for_each_flavor(|flavor| {
        for args in [
            &["mod", "monitor"][..],
            &["mode"],
            &["mode", "monitor", "extra"],
            &["MODE", "monitor"],
        ] {
            let started = std::panic::catch_unwind(|| {
                let server = Server::builder(flavor).module_args(args).start();
                config_mode(&mut server.conn())
            });
            match started {
                // Refused: the server did not start.
                Err(_) => {}
                // Or understood, as CONFIG SET RL.MODE would be.
                Ok(mode) if args == ["MODE", "monitor"] => assert_eq!(mode, "monitor"),
                Ok(mode) => panic!("{flavor:?} {args:?}: loaded in mode {mode}"),
            }
        }
    });
}

// ---------------------------------------------------------------------------
// monitor
// ---------------------------------------------------------------------------

#[test]
fn monitor_admits_and_keeps_retry_after() {
    on_each_server(|_, con| {
        set_mode(con, "monitor");
        // FIXED: what on would deny is admitted with on's retry_after.
        let first = limiter(con, &["RL.FIXED", "f", "2", "1h", "COST", "2"]);
        assert_eq!(first[..5], [1, 2, 0, 2, 0]);
        let r = limiter(con, &["RL.FIXED", "f", "2", "1h"]);
        assert_eq!(r[..2], [1, 2], "{r:?}");
        assert!(r[2] > 3_590_000 && r[2] == r[5], "{r:?}");
        // The denied call recorded nothing.
        assert_eq!(limiter(con, &["RL.FIXED", "f", "2", "1h", "PEEK"])[1], 2);
        // A cost above the limit: -1, no wait helps.
        let r = limiter(con, &["RL.FIXED", "f", "2", "1h", "COST", "3"]);
        assert_eq!(r[..3], [1, 2, -1], "{r:?}");
        let r = limiter(con, &["RL.FIXED", "new", "2", "1h", "COST", "3"]);
        assert_eq!(r[..3], [1, 0, -1], "{r:?}");
        assert_eq!(dbsize(con), 1, "a denied call created a key");

        for args in [
            ["RL.SLIDING", "s", "1", "1h", ""],
            ["RL.SLIDING", "a", "1", "1h", "APPROX"],
            ["RL.TOKEN", "t", "1", "1d", ""],
        ] {
            let args: Vec<&str> = args.into_iter().filter(|a| !a.is_empty()).collect();
            assert_eq!(limiter(con, &args)[..3], [1, 1, 0], "{args:?}");
            let r = limiter(con, &args);
            assert_eq!(r[..2], [1, 1], "{args:?}: {r:?}");
            assert!(r[2] > 0, "{args:?}: {r:?}");
            let mut over = args.clone();
            over.extend(["COST", "2"]);
            assert_eq!(limiter(con, &over)[..3], [1, 1, -1], "{args:?}");
        }

        // RL.ALL: admitted at the top; clause replies still say which
        // limits would have refused the call; nothing recorded anywhere.
        let before = snapshot(con);
        let (allowed, retry, clauses) =
            rl_all(con, &["FIXED", "f", "2", "1h", "TOKEN", "fresh", "5", "1d"]);
        assert_eq!(allowed, 1);
        assert!(retry > 3_590_000 && retry == clauses[0][2], "{retry}");
        assert_eq!(clauses[0][..2], [0, 2]);
        assert_eq!(clauses[1][..2], [1, 1], "the TOKEN clause's PEEK reply");
        let (allowed, retry, _) = rl_all(
            con,
            &[
                "FIXED", "f", "2", "1h", "TOKEN", "fresh", "1", "1d", "COST", "2",
            ],
        );
        assert_eq!((allowed, retry), (1, -1));
        assert_same_snapshot(
            &snapshot(con),
            &before,
            "a call on would deny changed state",
        );
        // Admitted by every clause: recorded, as on would.
        let (allowed, retry, clauses) =
            rl_all(con, &["FIXED", "g", "2", "1h", "TOKEN", "fresh", "5", "1d"]);
        assert_eq!((allowed, retry), (1, 0));
        assert_eq!(clauses[0][..3], [1, 1, 0]);
        assert_eq!(clauses[1][..3], [1, 1, 0]);
        assert_ne!(snapshot(con), before);
    });
}

/// Strips `prefix` from every key of a snapshot that has it.
fn under_prefix(snap: &[(Vec<u8>, Vec<u8>, i64)], prefix: &str) -> Vec<(Vec<u8>, Vec<u8>, i64)> {
    snap.iter()
        .filter_map(|(k, v, at)| {
            k.strip_prefix(prefix.as_bytes())
                .map(|rest| (rest.to_vec(), v.clone(), *at))
        })
        .collect()
}

/// The keys and okeys a call names, without their prefix.
fn keys_of(call: &Call, prefix: &str) -> Vec<Vec<u8>> {
    call.args[1..]
        .iter()
        .filter_map(|a| a.strip_prefix(prefix.as_bytes()).map(<[u8]>::to_vec))
        .collect()
}

/// A FIXED limiter whose window ends in ten years: a PEEK of it says how
/// far away that end is by the module's own clock (TIME inside MULTI is
/// frozen on Valkey, so it cannot tell whether a MULTI crossed a
/// millisecond). Its PEEK is admitted, so it counts as allowed.
const CLOCK: [&str; 4] = ["RL.FIXED", "clock", "2", "3650d"];

fn clock_probe() -> redis::Cmd {
    let mut c = redis::cmd(CLOCK[0]);
    c.arg(&CLOCK[1..]).arg("PEEK");
    c
}

/// Waits until the system clock, which the server reads too, is early in
/// a millisecond, so that what is sent next runs within that millisecond.
fn early_in_a_millisecond() {
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(5);
    while std::time::Instant::now() < deadline {
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        if since.subsec_micros() % 1000 < 100 {
            return;
        }
        std::hint::spin_loop();
    }
}

struct Lockstep {
    calls: Vec<Call>,
    on: Vec<Value>,
    monitor: Vec<Value>,
    /// Whether the pair may be compared: no key of the call had a step
    /// that straddled a millisecond boundary, up to and including this one.
    comparable: Vec<bool>,
    /// Keys (without prefix) whose twins may have seen different clocks.
    tainted: std::collections::HashSet<Vec<u8>>,
}

/// Drives keys under `on` with the mode on and the same calls on the same
/// keys under `mon` in monitor, each pair in one MULTI, started early in a
/// millisecond so that both calls see the same clock. A clock probe
/// brackets each pair; a pair that straddled a millisecond anyway (the host was busy)
/// taints its keys, which are then left out of the comparison.
fn on_and_monitor_in_lockstep(con: &mut redis::Connection, steps: usize) -> Lockstep {
    let aligned = aligned_windows(con);
    let calls = mixed_calls("on", &aligned, 11, steps);
    let twins = mixed_calls("mon", &aligned, 11, steps);
    limiter(con, &CLOCK);
    let mut run = Lockstep {
        calls: calls.clone(),
        on: Vec::new(),
        monitor: Vec::new(),
        comparable: Vec::new(),
        tainted: Default::default(),
    };
    for (on_call, mon_call) in calls.iter().zip(&twins) {
        assert_eq!(keys_of(on_call, "on"), keys_of(mon_call, "mon"));
        let mut pipe = redis::pipe();
        pipe.atomic()
            .add_command(clock_probe())
            .add_command(on_call.command())
            .cmd("CONFIG")
            .arg("SET")
            .arg("rl.mode")
            .arg("monitor")
            .add_command(mon_call.command())
            .cmd("CONFIG")
            .arg("SET")
            .arg("rl.mode")
            .arg("on")
            .add_command(clock_probe());
        early_in_a_millisecond();
        let replies: Vec<Value> = pipe
            .query(con)
            .unwrap_or_else(|e| panic!("{on_call:?}: {}", error_line(&e)));
        assert_eq!(replies.len(), 6);
        let keys = keys_of(on_call, "on");
        if six(&replies[0])[5] != six(&replies[5])[5] {
            run.tainted.extend(keys.iter().cloned());
        }
        run.comparable
            .push(keys.iter().all(|k| !run.tainted.contains(k)));
        run.on.push(replies[1].clone());
        run.monitor.push(replies[3].clone());
    }
    run
}

#[test]
fn monitor_changes_state_exactly_as_on() {
    on_each_server(|server, con| {
        let run = on_and_monitor_in_lockstep(con, 400);
        let t = tally(&run.calls, &run.on);
        assert!(
            t.denied >= 40 && t.never >= 5 && t.all_denied >= 5 && t.peeks >= 5,
            "{t:?}"
        );
        let mut would_deny = 0;
        let mut compared = 0;
        for (i, call) in run.calls.iter().enumerate() {
            let (on, mon) = (&run.on[i], &run.monitor[i]);
            // Admitted in monitor whatever on says, and counted.
            let on_denied = match call.kind {
                CallKind::Limiter => {
                    assert_eq!(six(mon)[0], 1, "{call:?}: monitor refused: {mon:?}");
                    six(on)[0] == 0
                }
                CallKind::All => {
                    assert_eq!(all_parts(mon).0, 1, "{call:?}: monitor refused: {mon:?}");
                    all_parts(on).0 == 0
                }
                _ => false,
            };
            would_deny += usize::from(on_denied);
            if !run.comparable[i] {
                continue;
            }
            compared += 1;
            match call.kind {
                CallKind::Limiter => {
                    let (on, mon) = (six(on), six(mon));
                    assert_eq!(mon[1..], on[1..], "{call:?}");
                    if on[0] == 0 {
                        assert!(on[2] > 0 || on[2] == -1, "{call:?}: {on:?}");
                    }
                }
                CallKind::All => {
                    let (on_allowed, on_retry, on_clauses) = all_parts(on);
                    let (_, mon_retry, mon_clauses) = all_parts(mon);
                    assert_eq!(mon_retry, on_retry, "{call:?}");
                    assert_eq!(mon_clauses, on_clauses, "{call:?}");
                    if on_allowed == 0 {
                        assert!(on_retry > 0 || on_retry == -1, "{call:?}");
                    }
                }
                // Override commands are not subject to the mode.
                CallKind::Set | CallKind::Get | CallKind::Del => assert_eq!(mon, on, "{call:?}"),
                CallKind::List => {}
            }
        }
        eprintln!(
            "{:?}: {compared} of {} pairs compared, {} keys tainted",
            server.flavor,
            run.calls.len(),
            run.tainted.len()
        );
        assert!(would_deny >= 30, "{would_deny}");
        assert!(
            compared >= run.calls.len() / 2,
            "{:?}: only {compared} pairs comparable; tainted: {}",
            server.flavor,
            run.tainted.len()
        );
        let snap = snapshot(con);
        let untainted = |state: Vec<(Vec<u8>, Vec<u8>, i64)>| -> Vec<_> {
            state
                .into_iter()
                .filter(|(k, _, _)| !run.tainted.contains(k))
                .collect()
        };
        let on_state = untainted(under_prefix(&snap, "on"));
        assert!(on_state.len() > 15, "{}", on_state.len());
        assert_same_snapshot(
            &untainted(under_prefix(&snap, "mon")),
            &on_state,
            &format!(
                "{:?}: monitor left a different state than on",
                server.flavor
            ),
        );
        // Every call on denied was counted as such, and as a would-deny of
        // its twin in monitor.
        let c = counters(con);
        let mut total = 0;
        for command in ["fixed", "sliding", "token", "all"] {
            let denied = c[&format!("rl_{command}_denied")];
            assert_eq!(
                c[&format!("rl_{command}_monitor_would_deny")],
                denied,
                "{command}: {c:?}"
            );
            total += denied;
        }
        assert_eq!(total as usize, would_deny);
    });
}

// ---------------------------------------------------------------------------
// off
// ---------------------------------------------------------------------------

#[test]
fn off_reads_and_writes_nothing() {
    on_each_server(|server, con| {
        // State left by on, including a full limiter, an override and a
        // key of another type.
        limiter(con, &["RL.FIXED", "full", "2", "1h", "COST", "2"]);
        limiter(con, &["RL.SLIDING", "s", "3", "1h"]);
        limiter(con, &["RL.TOKEN", "t", "3", "1d"]);
        cmd(con, &["RL.OVERRIDE.SET", "o", "50", "1h", "BURST", "60"]).unwrap();
        cmd(con, &["RPUSH", "list", "x"]).unwrap();
        let before = snapshot(con);
        let (dirty_before, lookups_before) = (dirty(con), lookups(con));
        set_mode(con, "off");

        let cases: &[(&[&str], [i64; 6])] = &[
            (&["RL.FIXED", "full", "2", "1h"], [1, 0, 0, 2, 2, 0]),
            (
                &["RL.FIXED", "full", "2", "1h", "COST", "5"],
                [1, 0, 0, 2, 2, 0],
            ),
            (
                &["RL.FIXED", "new", "7", "1h", "ALIGNED"],
                [1, 0, 0, 7, 7, 0],
            ),
            (&["RL.FIXED", "new", "7", "1h", "PEEK"], [1, 0, 0, 7, 7, 0]),
            (
                &["RL.SLIDING", "s", "3", "1h", "COST", "3"],
                [1, 0, 0, 3, 3, 0],
            ),
            (
                &["RL.SLIDING", "sa", "4", "1h", "APPROX"],
                [1, 0, 0, 4, 4, 0],
            ),
            (&["RL.TOKEN", "t", "3", "1d"], [1, 0, 0, 3, 3, 0]),
            (
                &["RL.TOKEN", "t2", "3", "1d", "BURST", "9"],
                [1, 0, 0, 9, 9, 0],
            ),
            // The override is not read: the call's own values apply.
            (
                &["RL.FIXED", "full", "2", "1h", "OVERRIDE", "o"],
                [1, 0, 0, 2, 2, 0],
            ),
            (
                &["RL.TOKEN", "t", "3", "1d", "OVERRIDE", "o"],
                [1, 0, 0, 3, 3, 0],
            ),
            // Nor is the key: another type is not even noticed.
            (&["RL.FIXED", "list", "2", "1h"], [1, 0, 0, 2, 2, 0]),
            (
                &["RL.TOKEN", "t", "3", "1d", "OVERRIDE", "list"],
                [1, 0, 0, 3, 3, 0],
            ),
        ];
        for (args, want) in cases {
            assert_eq!(&limiter(con, args), want, "{:?} {args:?}", server.flavor);
        }
        let reply = cmd(
            con,
            &[
                "RL.ALL", "FIXED", "full", "2", "1h", "SLIDING", "s", "3", "1h", "TOKEN", "t", "1",
                "1d", "BURST", "4", "COST", "9", "OVERRIDE", "o",
            ],
        )
        .unwrap();
        let (allowed, retry, clauses) = all_parts(&reply);
        assert_eq!((allowed, retry), (1, 0));
        assert_eq!(
            clauses,
            [[1, 0, 0, 2, 2, 0], [1, 0, 0, 3, 3, 0], [1, 0, 0, 4, 4, 0]]
        );
        let (allowed, _, clauses) = rl_all(con, &["FIXED", "x", "1", "1h", "PEEK"]);
        assert_eq!((allowed, clauses), (1, vec![[1, 0, 0, 1, 1, 0]]));
        // Malformed calls are still refused.
        for bad in [
            &["RL.FIXED", "k", "0", "1h"][..],
            &["RL.TOKEN", "k", "1", "1d", "BURST"],
            &["RL.ALL", "FIXED", "k", "1", "1h", "FIXED", "k", "1", "1h"],
        ] {
            assert!(cmd(con, bad).unwrap_err().starts_with("ERR"), "{bad:?}");
        }
        // (Before the snapshot, whose DUMPs are lookups too.)
        assert_eq!(lookups(con), lookups_before, "off read a key");
        assert_eq!(dirty(con), dirty_before, "off wrote");
        assert_same_snapshot(&snapshot(con), &before, "off changed the dataset");

        // Back on, every limiter carries on from where on left it.
        set_mode(con, "on");
        assert_eq!(limiter(con, &["RL.FIXED", "full", "2", "1h"])[..2], [0, 2]);
        assert_eq!(limiter(con, &["RL.SLIDING", "s", "3", "1h"])[..2], [1, 2]);
        assert_eq!(limiter(con, &["RL.TOKEN", "t", "3", "1d"])[..2], [1, 2]);
        assert!(dirty(con) > dirty_before, "on's writes are not counted");
        // PEEK and okeys open keys for reading, which the server counts:
        // the check above would have seen off reading them.
        let lookups_on = lookups(con);
        limiter(con, &["RL.FIXED", "new", "7", "1h", "PEEK"]);
        limiter(con, &["RL.FIXED", "full", "2", "1h", "OVERRIDE", "o"]);
        assert!(
            lookups(con) >= lookups_on + 2,
            "module reads are not counted"
        );
    });
}

#[test]
fn override_commands_work_in_every_mode() {
    on_each_server(|_, con| {
        for mode in ["off", "monitor", "on"] {
            set_mode(con, mode);
            let okey = format!("o:{mode}");
            assert_eq!(
                cmd(con, &["RL.OVERRIDE.SET", &okey, "5", "1h"]).unwrap(),
                Value::Okay
            );
            let got = cmd(con, &["RL.OVERRIDE.GET", &okey]).unwrap();
            assert_eq!(
                got,
                Value::Array(vec![
                    Value::Int(5),
                    Value::Int(3_600_000),
                    Value::Int(0),
                    Value::Int(-1)
                ])
            );
            assert_eq!(
                cmd(con, &["RL.OVERRIDE.DEL", &okey]).unwrap(),
                Value::Int(1)
            );
        }
    });
}

// ---------------------------------------------------------------------------
// Modes and replication
// ---------------------------------------------------------------------------

#[test]
fn mode_of_a_replica_does_not_affect_replication() {
    for_each_flavor(|flavor| {
        let (primary, replica) = quiet_primary_and_replica(flavor);
        let (mut pcon, mut rcon) = (primary.conn(), replica.conn());

        set_mode(&mut rcon, "off");
        workload(&mut pcon, "a", 21, 400);
        wait_in_sync(&mut pcon, &mut rcon);
        assert_same_mixed_dataset(&format!("{flavor:?} replica off"), &mut pcon, &mut rcon);

        set_mode(&mut rcon, "monitor");
        workload(&mut pcon, "b", 22, 400);
        wait_in_sync(&mut pcon, &mut rcon);
        assert_same_mixed_dataset(&format!("{flavor:?} replica monitor"), &mut pcon, &mut rcon);

        // A primary in monitor replicates what on would record.
        set_mode(&mut pcon, "monitor");
        set_mode(&mut rcon, "off");
        mixed_calls_on(&mut pcon, "c", 23, 400);
        wait_in_sync(&mut pcon, &mut rcon);
        assert_same_mixed_dataset(&format!("{flavor:?} primary monitor"), &mut pcon, &mut rcon);

        // A primary in off propagates no limiter call at all.
        set_mode(&mut pcon, "off");
        set_mode(&mut rcon, "on");
        let offset = info_i64(&mut pcon, "replication", "master_repl_offset");
        let aligned = aligned_windows(&mut pcon);
        let limiters: Vec<Call> = mixed_calls("a", &aligned, 24, 400)
            .into_iter()
            .filter(|c| matches!(c.kind, CallKind::Limiter | CallKind::All))
            .collect();
        run_calls(&mut pcon, &limiters);
        assert_eq!(
            info_i64(&mut pcon, "replication", "master_repl_offset"),
            offset,
            "{flavor:?}: off propagated something"
        );
        assert_same_mixed_dataset(&format!("{flavor:?} primary off"), &mut pcon, &mut rcon);
        // Replayed calls count nowhere on the replica.
        assert!(all_zero(&counters(&mut rcon)), "{:?}", counters(&mut rcon));
    });
}
