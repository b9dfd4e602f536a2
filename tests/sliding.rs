//! RL.SLIDING (exact log and APPROX) against real redis-server and
//! valkey-server processes.

mod common;

use common::*;

#[test]
fn admits_up_to_limit_in_any_window_and_says_when_to_retry() {
    on_each_server(|_, con| {
        assert_eq!(
            limiter(con, &["RL.SLIDING", "s", "3", "1m"]),
            [1, 1, 0, 3, 2, 60_000]
        );
        assert_eq!(
            limiter(con, &["RL.SLIDING", "s", "3", "1m", "COST", "2"])[..5],
            [1, 3, 0, 3, 0]
        );
        let (denied, pttl) = limiter_then_pttl(con, &["RL.SLIDING", "s", "3", "1m"]);
        assert_eq!(denied[..2], [0, 3]);
        // The oldest call leaves the window first.
        assert!(denied[2] > 59_000 && denied[2] <= 60_000, "{denied:?}");
        assert_eq!(
            limiter(con, &["RL.SLIDING", "s", "3", "1m", "COST", "4"])[2],
            -1
        );
        assert!(pttl.abs_diff(denied[5]) <= 2, "{pttl} vs {denied:?}");
    });
}

#[test]
fn calls_leave_the_window_one_by_one() {
    on_each_server(|_, con| {
        // The second call comes 100 ms after the first: the margin a
        // loaded machine's stalls get before both calls have left.
        let args = ["RL.SLIDING", "w", "2", "200ms"];
        assert_eq!(limiter(con, &args)[0], 1);
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert_eq!(limiter(con, &args)[0], 1);
        let denied = limiter(con, &args);
        assert_eq!(denied[0], 0);
        std::thread::sleep(std::time::Duration::from_millis(denied[2] as u64));
        // Only the first call has left: one slot, not two.
        assert_eq!(limiter(con, &args)[..2], [1, 2]);
    });
}

#[test]
fn denied_calls_and_peek_write_nothing() {
    on_each_server(|_, con| {
        for approx in [false, true] {
            let with = |extra: &[&'static str]| {
                let mut args = vec!["RL.SLIDING", if approx { "a" } else { "s" }, "2", "60"];
                if approx {
                    args.push("APPROX");
                }
                args.extend(extra);
                args
            };
            limiter(con, &with(&["COST", "2"]));
            let before = snapshot(con);
            assert_eq!(limiter(con, &with(&[]))[0], 0);
            assert_eq!(limiter(con, &with(&["PEEK"]))[0], 0);
            assert_eq!(limiter(con, &with(&["COST", "3"]))[2], -1);
            assert_eq!(snapshot(con), before);
        }
        assert_eq!(
            limiter(con, &["RL.SLIDING", "new", "2", "60", "PEEK"])[0],
            1
        );
        assert_eq!(cmd(con, &["EXISTS", "new"]).unwrap(), redis::Value::Int(0));
    });
}

#[test]
fn approx_counts_with_constant_memory() {
    on_each_server(|_, con| {
        let first = limiter(
            con,
            &["RL.SLIDING", "a", "100", "1h", "APPROX", "COST", "40"],
        );
        assert_eq!(first[..5], [1, 40, 0, 100, 60]);
        // Counters live until the next aligned window has ended.
        let expire_at: i64 = redis::cmd("PEXPIRETIME").arg("a").query(con).unwrap();
        assert_eq!(expire_at % 3_600_000, 0);
        // The first rewrite turns Redis's embedded short string into a raw
        // one; from then on the size is fixed.
        limiter(con, &["RL.SLIDING", "a", "1000000", "1h", "APPROX"]);
        let small: i64 = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg("a")
            .query(con)
            .unwrap();
        for _ in 0..50 {
            limiter(con, &["RL.SLIDING", "a", "1000000", "1h", "APPROX"]);
        }
        let after: i64 = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg("a")
            .query(con)
            .unwrap();
        assert_eq!(small, after);
    });
}

#[test]
fn algorithms_do_not_share_keys() {
    on_each_server(|_, con| {
        limiter(con, &["RL.SLIDING", "exact", "5", "60"]);
        limiter(con, &["RL.SLIDING", "approx", "5", "60", "APPROX"]);
        limiter(con, &["RL.FIXED", "fixed", "5", "60"]);
        cmd(con, &["HSET", "hash", "f", "v"]).unwrap();
        let before = snapshot(con);
        for (key, approx) in [
            ("approx", false),
            ("exact", true),
            ("fixed", false),
            ("fixed", true),
            ("hash", false),
        ] {
            let mut args = vec!["RL.SLIDING", key, "5", "60"];
            if approx {
                args.push("APPROX");
            }
            let err = cmd(con, &args).unwrap_err();
            assert!(
                err.starts_with("WRONGTYPE ") && err.contains("RL.SLIDING"),
                "{key}: {err}"
            );
        }
        let err = cmd(con, &["RL.TOKEN", "exact", "5", "60"]).unwrap_err();
        assert!(err.starts_with("WRONGTYPE "), "{err}");
        assert_eq!(snapshot(con), before);
    });
}

#[test]
fn tampered_logs_are_refused_cleanly() {
    on_each_server(|_, con| {
        // A compact log (a few calls) and a large one (calls at 40
        // distinct milliseconds outgrow the compact layout).
        limiter(con, &["RL.SLIDING", "s", "50", "60"]);
        limiter(con, &["RL.SLIDING", "s", "50", "60", "COST", "2"]);
        for _ in 0..40 {
            limiter(con, &["RL.SLIDING", "l", "500", "60"]);
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let compact: Vec<u8> = redis::cmd("GET").arg("s").query(con).unwrap();
        let large: Vec<u8> = redis::cmd("GET").arg("l").query(con).unwrap();
        assert_eq!(compact[..5], *b"\x00rl\x03S");
        assert_eq!(large[..5], *b"\x00rl\x03L");
        // An entry cut short; a header whose tail points past the data.
        let cut = [&compact[..], &[0x80]].concat();
        let mut past = large.clone();
        past[9..13].copy_from_slice(&u32::MAX.to_le_bytes());
        for (key, bad) in [("bad:cut", cut), ("bad:tail", past)] {
            call(con, &[b"SET", key.as_bytes(), &bad, b"PX", b"60000"]).unwrap();
        }
        let before = snapshot(con);
        for key in ["bad:cut", "bad:tail"] {
            for extra in [&[][..], &["REFUND", "1"], &["PEEK"]] {
                let args = [&["RL.SLIDING", key, "50", "60"][..], extra].concat();
                let err = cmd(con, &args).unwrap_err();
                assert!(
                    err.starts_with("ERR ") && err.contains("corrupt"),
                    "{args:?}: {err}"
                );
            }
        }
        assert_eq!(snapshot(con), before);
        assert_eq!(
            cmd(con, &["PING"]).unwrap(),
            redis::Value::SimpleString("PONG".into())
        );
    });
}

/// Builds a log of `calls` entries at distinct, consecutive milliseconds
/// through the module's own replay path: an AOF of replicated-form calls
/// (`... NOW ms`), loaded at start-up. Returns the server and the key.
fn server_with_log(flavor: Flavor, calls: u64, extra: &[&str]) -> Server {
    let start = unix_ms() - calls - 1;
    let now: Vec<String> = (0..calls).map(|i| (start + i).to_string()).collect();
    let commands = now.iter().map(|t| {
        let args: [&[u8]; 8] = [
            b"RL.SLIDING",
            b"log",
            b"100000000",
            b"1d",
            b"COST",
            b"1",
            b"NOW",
            t.as_bytes(),
        ];
        args.to_vec()
    });
    let aof = resp_commands(commands);
    let mut args = vec!["--appendonly", "yes", "--appendfilename", "appendonly.aof"];
    args.extend(extra);
    Server::builder(flavor)
        .args(&args)
        .prepared(|dir| {
            std::fs::write(dir.join("appendonly.aof"), aof).unwrap();
        })
        .start()
}

#[test]
fn ten_thousand_calls_at_distinct_milliseconds_fit_in_81_kb() {
    for_each_flavor(|flavor| {
        let server = server_with_log(flavor, 10_000, &[]);
        let mut con = server.conn();
        let peek = limiter(&mut con, &["RL.SLIDING", "log", "100000000", "1d", "PEEK"]);
        assert_eq!(
            peek[..2],
            [1, 10_001],
            "the AOF's 10,000 calls were replayed"
        );
        let usage: i64 = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg("log")
            .query(&mut con)
            .unwrap();
        eprintln!("{flavor:?}: MEMORY USAGE after 10,000 calls at distinct ms: {usage} bytes");
        assert!(usage <= 81_000, "{usage} bytes");
        // The log keeps working and counting from where the AOF left it.
        assert_eq!(
            limiter(&mut con, &["RL.SLIDING", "log", "100000000", "1d"])[..2],
            [1, 10_001]
        );
    });
}

#[test]
fn replica_and_aof_restart_reproduce_logs_byte_for_byte() {
    for_each_flavor(|flavor| {
        let (mut primary, replica) = primary_and_replica(flavor, &AOF);
        let mut p = primary.conn();
        let mut r = replica.conn();
        // Enough calls on a few keys to cross several in-place appends and
        // rebuilds, with same-millisecond merges and trims.
        for i in 0..3000 {
            let key = format!("log:{}", i % 3);
            let window = ["200ms", "1s", "1h"][i % 3];
            let cost = (1 + i % 4).to_string();
            let _ = cmd(&mut p, &["RL.SLIDING", &key, "400", window, "COST", &cost]);
            if i % 500 == 0 {
                std::thread::sleep(std::time::Duration::from_millis(3));
            }
        }
        wait_in_sync(&mut p, &mut r);
        // The 200 ms and 1 s logs may expire between two snapshots on a
        // busy machine: each comparison is over the keys still alive after
        // the later one.
        let on_primary = snapshot(&mut p);
        let on_replica = snapshot(&mut r);
        let now = server_ms(&mut r);
        assert_eq!(alive_at(&on_replica, now), alive_at(&on_primary, now));
        primary.kill();
        primary.restart();
        let mut p = primary.conn();
        let replayed = snapshot(&mut p);
        let now = server_ms(&mut p);
        assert_eq!(alive_at(&replayed, now), alive_at(&on_primary, now));
    });
}

#[test]
fn dump_restore_copy_and_rename_keep_a_log_working() {
    on_each_server(|_, con| {
        for _ in 0..2 {
            limiter(con, &["RL.SLIDING", "s", "3", "1h"]);
        }
        let dump: Vec<u8> = redis::cmd("DUMP").arg("s").query(con).unwrap();
        let at = pexpiretime(con, "s");
        redis::cmd("RESTORE")
            .arg("restored")
            .arg(at)
            .arg(dump)
            .arg("ABSTTL")
            .query::<()>(con)
            .unwrap();
        cmd(con, &["COPY", "s", "copied"]).unwrap();
        cmd(con, &["RENAME", "s", "renamed"]).unwrap();
        for key in ["restored", "copied", "renamed"] {
            assert_eq!(
                limiter(con, &["RL.SLIDING", key, "3", "1h"])[..2],
                [1, 3],
                "{key}"
            );
            assert_eq!(limiter(con, &["RL.SLIDING", key, "3", "1h"])[0], 0, "{key}");
        }
    });
}
