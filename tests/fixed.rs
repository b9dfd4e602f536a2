//! RL.FIXED against real redis-server and valkey-server processes.

mod common;

use common::*;

#[test]
fn admits_up_to_limit_then_denies_with_the_window_remainder() {
    on_each_server(|_, con| {
        let first = limiter(con, &["RL.FIXED", "user:42", "3", "60"]);
        assert_eq!(first[..5], [1, 1, 0, 3, 2]);
        assert!(first[5] > 59_000 && first[5] <= 60_000, "{first:?}");
        let second = limiter(con, &["RL.FIXED", "user:42", "3", "60", "COST", "2"]);
        assert_eq!(second[..5], [1, 3, 0, 3, 0]);
        let (denied, pttl) = limiter_then_pttl(con, &["RL.FIXED", "user:42", "3", "60"]);
        assert_eq!(denied[..2], [0, 3]);
        assert_eq!(denied[3..5], [3, 0]);
        // Denied: retry when the window ends, which is the key's life.
        assert!(denied[2] > 0 && denied[2] == denied[5], "{denied:?}");
        assert!((pttl - denied[5]).abs() <= 2, "pttl {pttl} vs {denied:?}");
    });
}

#[test]
fn admitted_call_leaves_key_expiring_at_window_end() {
    on_each_server(|_, con| {
        for _ in 0..3 {
            // PTTL is read in the same MULTI, a moment after the reply:
            // equal up to clock ticks.
            let (reply, pttl) = limiter_then_pttl(con, &["RL.FIXED", "k", "10", "1500ms"]);
            assert!(pttl.abs_diff(reply[5]) <= 2, "pttl {pttl} vs {reply:?}");
        }
        let expire_at: i64 = redis::cmd("PEXPIRETIME").arg("k").query(con).unwrap();
        let reply = limiter(con, &["RL.FIXED", "k", "10", "1500ms"]);
        let again: i64 = redis::cmd("PEXPIRETIME").arg("k").query(con).unwrap();
        assert_eq!(expire_at, again, "the window's end never moves: {reply:?}");
    });
}

#[test]
fn aligned_windows_end_on_multiples_of_the_window() {
    on_each_server(|_, con| {
        let reply = limiter(con, &["RL.FIXED", "a", "5", "7s", "ALIGNED"]);
        assert_eq!(reply[..5], [1, 1, 0, 5, 4]);
        assert!(reply[5] <= 7000);
        let expire_at: i64 = redis::cmd("PEXPIRETIME").arg("a").query(con).unwrap();
        assert_eq!(expire_at % 7000, 0, "aligned window ends at {expire_at}");
    });
}

#[test]
fn a_new_window_starts_after_the_old_one_ends() {
    on_each_server(|_, con| {
        assert_eq!(limiter(con, &["RL.FIXED", "w", "1", "30ms"])[0], 1);
        let denied = limiter(con, &["RL.FIXED", "w", "1", "30ms"]);
        assert_eq!(denied[0], 0);
        std::thread::sleep(std::time::Duration::from_millis(denied[5] as u64 + 5));
        assert_eq!(limiter(con, &["RL.FIXED", "w", "1", "30ms"])[..2], [1, 1]);
    });
}

#[test]
fn denied_calls_and_peek_write_nothing() {
    on_each_server(|_, con| {
        limiter(con, &["RL.FIXED", "full", "2", "60", "COST", "2"]);
        let before = snapshot(con);
        let digest_before = digest(con);
        assert_eq!(limiter(con, &["RL.FIXED", "full", "2", "60"])[0], 0);
        assert_eq!(
            limiter(con, &["RL.FIXED", "full", "2", "60", "COST", "3"])[2],
            -1
        );
        let peek = limiter(con, &["RL.FIXED", "full", "2", "60", "PEEK"]);
        assert_eq!(peek[..2], [0, 2]);
        // PEEK on a missing key answers as if admitted, but creates nothing.
        let fresh = limiter(con, &["RL.FIXED", "fresh", "2", "60", "PEEK"]);
        assert_eq!(fresh, [1, 1, 0, 2, 1, 60_000]);
        let over = limiter(con, &["RL.FIXED", "fresh", "2", "60", "COST", "3"]);
        assert_eq!(over, [0, 0, -1, 2, 2, 0]);
        assert_eq!(snapshot(con), before);
        assert_eq!(digest(con), digest_before);
    });
}

#[test]
fn limit_can_change_between_calls() {
    on_each_server(|_, con| {
        limiter(con, &["RL.FIXED", "c", "10", "60", "COST", "8"]);
        let shrunk = limiter(con, &["RL.FIXED", "c", "5", "60"]);
        assert_eq!(shrunk[..2], [0, 8]);
        assert_eq!(shrunk[3..5], [5, 0]);
        let grown = limiter(con, &["RL.FIXED", "c", "20", "60", "COST", "12"]);
        assert_eq!(grown[..5], [1, 20, 0, 20, 0]);
    });
}

#[test]
fn keys_of_other_types_are_wrongtype_and_untouched() {
    on_each_server(|_, con| {
        cmd(con, &["SET", "string", "hello"]).unwrap();
        cmd(con, &["SET", "number", "12"]).unwrap();
        cmd(con, &["RPUSH", "list", "a"]).unwrap();
        cmd(con, &["HSET", "hash", "f", "v"]).unwrap();
        cmd(con, &["SADD", "set", "m"]).unwrap();
        cmd(con, &["ZADD", "zset", "1", "m"]).unwrap();
        cmd(con, &["XADD", "stream", "*", "f", "v"]).unwrap();
        let before = snapshot(con);
        for key in ["string", "number", "list", "hash", "set", "zset", "stream"] {
            for extra in [&[][..], &["PEEK"][..]] {
                let mut args = vec!["RL.FIXED", key, "10", "60"];
                args.extend(extra);
                let err = cmd(con, &args).unwrap_err();
                assert!(err.starts_with("WRONGTYPE "), "{key}: {err}");
                assert!(err.contains("RL.FIXED"), "{key}: {err}");
            }
        }
        assert_eq!(snapshot(con), before);
    });
}

#[test]
fn tampered_state_is_refused_cleanly() {
    on_each_server(|_, con| {
        // Our marker with an unknown encoding version, then with a
        // truncated body.
        let newer: &[u8] = b"\x00rl\x09F0123456789abcdef01234567";
        let short: &[u8] = b"\x00rl\x01F01234";
        call(con, &[b"SET", b"newer", newer]).unwrap();
        call(con, &[b"SET", b"short", short]).unwrap();
        let before = snapshot(con);
        let err = cmd(con, &["RL.FIXED", "newer", "10", "60"]).unwrap_err();
        assert!(
            err.starts_with("ERR ") && err.contains("version 9"),
            "{err}"
        );
        let err = cmd(con, &["RL.FIXED", "short", "10", "60"]).unwrap_err();
        assert!(err.starts_with("ERR ") && err.contains("corrupt"), "{err}");
        assert_eq!(snapshot(con), before);
        assert_eq!(
            cmd(con, &["PING"]).unwrap(),
            redis::Value::SimpleString("PONG".into())
        );
    });
}

#[test]
fn edge_values_work() {
    on_each_server(|_, con| {
        let binary_key: &[u8] = b"\xff\x00\xfe key";
        let reply = call(con, &[b"RL.FIXED", binary_key, b"1", b"1"]).unwrap();
        assert_eq!(
            reply,
            redis::Value::Array(
                (0..6)
                    .map(|i| redis::Value::Int([1, 1, 0, 1, 0, 1000][i]))
                    .collect()
            )
        );
        let big_key = "k".repeat(512 * 1024);
        assert_eq!(limiter(con, &["RL.FIXED", &big_key, "1", "1"])[0], 1);
        let max = "1125899906842624";
        let admitted = limiter(con, &["RL.FIXED", "max", max, "3650d", "COST", max]);
        assert_eq!(admitted, [1, 1 << 50, 0, 1 << 50, 0, 3650 * 86_400_000]);
        let denied = limiter(con, &["RL.FIXED", "max", max, "3650d"]);
        assert_eq!(denied[..2], [0, 1 << 50]);
        // The server's clock may tick between the two calls.
        assert!((3650 * 86_400_000 - 50..=3650 * 86_400_000).contains(&denied[2]));
        assert_eq!(
            limiter(con, &["RL.FIXED", "tiny", "1", "1ms", "ALIGNED"])[..2],
            [1, 1]
        );
    });
}

#[test]
fn works_inside_multi_and_lua() {
    on_each_server(|_, con| {
        let (a, b): (Vec<i64>, Vec<i64>) = redis::pipe()
            .atomic()
            .cmd("RL.FIXED")
            .arg("m")
            .arg(1)
            .arg(60)
            .cmd("RL.FIXED")
            .arg("m")
            .arg(1)
            .arg(60)
            .query(con)
            .unwrap();
        assert_eq!((a[0], b[0]), (1, 0));
        let lua: Vec<i64> = redis::cmd("EVAL")
            .arg("return redis.call('RL.FIXED', KEYS[1], 2, 60)")
            .arg(1)
            .arg("l")
            .query(con)
            .unwrap();
        assert_eq!(lua[..2], [1, 1]);
    });
}
