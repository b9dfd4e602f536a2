//! RL.TOKEN against real redis-server and valkey-server processes.

mod common;

use common::*;
use std::time::Duration;

#[test]
fn bucket_starts_full_and_bursts_up_to_capacity() {
    on_each_server(|_, con| {
        let first = limiter(
            con,
            &["RL.TOKEN", "api", "10", "1s", "BURST", "50", "COST", "50"],
        );
        assert_eq!(first[..5], [1, 50, 0, 50, 0]);
        // 50 missing tokens at 10 per second: full again in 5 s.
        assert_eq!(first[5], 5000);
        let (denied, pttl) =
            limiter_then_pttl(con, &["RL.TOKEN", "api", "10", "1s", "BURST", "50"]);
        assert_eq!(denied[..2], [0, 50]);
        assert!(denied[2] > 0 && denied[2] <= 100, "{denied:?}");
        assert!(pttl.abs_diff(denied[5]) <= 2, "{pttl} vs {denied:?}");
    });
}

#[test]
fn default_capacity_is_the_rate() {
    on_each_server(|_, con| {
        assert_eq!(
            limiter(con, &["RL.TOKEN", "d", "3", "1s", "PEEK", "COST", "3"]),
            [1, 3, 0, 3, 0, 1000]
        );
        assert_eq!(
            limiter(con, &["RL.TOKEN", "d", "3", "1s", "COST", "4"]),
            [0, 0, -1, 3, 3, 0]
        );
        assert_eq!(cmd(con, &["EXISTS", "d"]).unwrap(), redis::Value::Int(0));
    });
}

#[test]
fn waiting_retry_after_is_enough() {
    on_each_server(|_, con| {
        let args = ["RL.TOKEN", "r", "3", "100ms", "COST", "3"];
        assert_eq!(limiter(con, &args)[0], 1);
        let denied = limiter(con, &["RL.TOKEN", "r", "3", "100ms"]);
        assert_eq!(denied[0], 0);
        // One token every 33.3 ms: rounded up, so the client is not early.
        assert!(denied[2] >= 1 && denied[2] <= 34, "{denied:?}");
        std::thread::sleep(Duration::from_millis(denied[2] as u64));
        assert_eq!(limiter(con, &["RL.TOKEN", "r", "3", "100ms"])[0], 1);
    });
}

#[test]
fn admitted_call_expires_the_key_when_the_bucket_is_full_again() {
    on_each_server(|_, con| {
        let (reply, pttl) = limiter_then_pttl(
            con,
            &["RL.TOKEN", "e", "1", "1m", "BURST", "5", "COST", "2"],
        );
        assert_eq!(reply, [1, 2, 0, 5, 3, 120_000]);
        // PTTL counts from the transaction's time snapshot, which can be a
        // millisecond behind the module's clock (limiter_then_pttl).
        assert!((119_990..=120_001).contains(&pttl), "{pttl}");
    });
}

#[test]
fn bytes_per_second_quota_with_cost_as_body_size() {
    on_each_server(|_, con| {
        let quota = ["RL.TOKEN", "bytes:tenant", "1048576", "1s"];
        let upload = |con: &mut redis::Connection, size: &str| {
            let mut args = quota.to_vec();
            args.extend(["COST", size]);
            limiter(con, &args)
        };
        assert_eq!(
            upload(con, "700000")[..5],
            [1, 700_000, 0, 1_048_576, 348_576]
        );
        let refused = upload(con, "400000");
        assert_eq!(refused[0], 0);
        // 51,424 bytes short at 1,048.576 bytes per ms: 49.04.. ms, rounded
        // up, less whatever time passed between the two calls.
        assert!((1..=50).contains(&refused[2]), "{refused:?}");
        assert_eq!(upload(con, "2000000")[2], -1);
    });
}

#[test]
fn denied_calls_and_peek_write_nothing() {
    on_each_server(|_, con| {
        limiter(con, &["RL.TOKEN", "t", "2", "60", "COST", "2"]);
        let before = snapshot(con);
        assert_eq!(limiter(con, &["RL.TOKEN", "t", "2", "60"])[0], 0);
        assert_eq!(limiter(con, &["RL.TOKEN", "t", "2", "60", "PEEK"])[0], 0);
        assert_eq!(
            limiter(con, &["RL.TOKEN", "t", "2", "60", "COST", "9"])[2],
            -1
        );
        assert_eq!(limiter(con, &["RL.TOKEN", "new", "2", "60", "PEEK"])[0], 1);
        assert_eq!(snapshot(con), before);
    });
}

#[test]
fn limiters_of_other_algorithms_are_wrongtype() {
    on_each_server(|_, con| {
        limiter(con, &["RL.FIXED", "f", "5", "60"]);
        limiter(con, &["RL.TOKEN", "t", "5", "60"]);
        let before = snapshot(con);
        let err = cmd(con, &["RL.TOKEN", "f", "5", "60"]).unwrap_err();
        assert!(
            err.starts_with("WRONGTYPE ") && err.contains("RL.TOKEN"),
            "{err}"
        );
        let err = cmd(con, &["RL.FIXED", "t", "5", "60"]).unwrap_err();
        assert!(
            err.starts_with("WRONGTYPE ") && err.contains("RL.FIXED"),
            "{err}"
        );
        cmd(con, &["RPUSH", "list", "x"]).unwrap();
        let err = cmd(con, &["RL.TOKEN", "list", "5", "60", "PEEK"]).unwrap_err();
        assert!(err.starts_with("WRONGTYPE "), "{err}");
        let mut after = snapshot(con);
        after.retain(|(k, _, _)| k != b"list");
        assert_eq!(after, before);
    });
}

#[test]
fn extreme_rates_work() {
    on_each_server(|_, con| {
        let slow = limiter(con, &["RL.TOKEN", "slow", "1", "3650d"]);
        assert_eq!(slow, [1, 1, 0, 1, 0, 3650 * 86_400_000]);
        let fast = limiter(
            con,
            &["RL.TOKEN", "fast", "1000000", "1ms", "COST", "1000000"],
        );
        assert_eq!(fast, [1, 1_000_000, 0, 1_000_000, 0, 1]);
        let max = "1125899906842624";
        let huge = limiter(
            con,
            &["RL.TOKEN", "huge", "1", "3650d", "BURST", max, "COST", max],
        );
        assert_eq!(huge[..5], [1, 1 << 50, 0, 1 << 50, 0]);
        assert_eq!(huge[5], i64::MAX, "a refill longer than i64 ms saturates");
        let ttl: i64 = redis::cmd("PTTL").arg("huge").query(con).unwrap();
        assert!(ttl > 0, "the key still has an expiry: {ttl}");
    });
}
