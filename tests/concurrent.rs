//! RL.CONCURRENT (docs/commands.md, RL.CONCURRENT): at most `limit` slots
//! held at once, each taken as a lease that ends by itself unless released
//! or renewed. Leases taken, refused, released, renewed and ended on real
//! servers, the key living exactly until its last lease ends; many clients
//! at once never holding more than the limit; overrides, PEEK, COST 0,
//! the modes and `INFO rl`.
//!
//! Exact timing (expiry at the millisecond, retry_after) is the pure
//! core's, tested with an explicit clock; here the server's clock is read
//! around each call.

mod common;

use common::*;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

fn with<'a>(base: &[&'a str], more: &[&'a str]) -> Vec<&'a str> {
    [base, more].concat()
}

/// Waits until the server's clock is past `ms`.
fn clock_past(con: &mut redis::Connection, ms: i64) {
    wait_until(&format!("the clock to pass {ms}"), || server_ms(con) > ms);
}

#[test]
fn leases_are_taken_refused_released_and_renewed() {
    on_each_server(|server, con| {
        let flavor = server.flavor;
        let k = ["RL.CONCURRENT", "c", "2", "1m"];
        // Two leases, then full.
        let (a, id_a) = timed_lease(con, &k);
        assert_eq!(a.reply, [1, 1, 0, 2, 1, 60_000], "{flavor:?}");
        assert!(id_a > 1_700_000_000_000_000, "{flavor:?}: {id_a}");
        assert_eq!(
            id_a % 1000,
            1,
            "a key's first lease is its millisecond times 1000 plus 1"
        );
        let (b, id_b) = timed_lease(con, &k);
        assert_eq!((b.reply, id_b), ([1, 2, 0, 2, 0, 60_000], id_a + 1));
        expiry_follows_reset(con, "c", &b, "PTTL is the last lease's end");
        let refused = changes_nothing(con, "a refusal", |con| lease(con, &k));
        assert_eq!(refused[..2], [0, 2], "{flavor:?}: {refused:?}");
        assert_eq!((refused[3], refused[4], refused[6]), (2, 0, 0));
        assert!(refused[2] > 0 && refused[2] <= 60_000, "{refused:?}");
        // COST above the limit never fits.
        let never = lease(con, &with(&k, &["COST", "3"]));
        assert_eq!((never[0], never[2], never[6]), (0, -1, 0), "{never:?}");

        // RELEASE frees a slot at once; a second RELEASE is refused.
        let id_a_s = id_a.to_string();
        let release_a = with(&k, &["RELEASE", &id_a_s]);
        let r = lease(con, &release_a);
        assert_eq!((r[..5].to_vec(), r[6]), (vec![1, 1, 0, 2, 1], id_a));
        let again = changes_nothing(con, "a second release", |con| lease(con, &release_a));
        assert_eq!((again[..5].to_vec(), again[6]), (vec![0, 1, 0, 2, 1], 0));
        let unknown = lease(con, &with(&k, &["RELEASE", "424242"]));
        assert_eq!((unknown[0], unknown[6]), (0, 0));
        let (c, id_c) = timed_lease(con, &k);
        assert_eq!((c.reply[..2].to_vec(), id_c), (vec![1, 2], id_b + 1));

        // RENEW: the lease lasts its length from now; never shorter.
        let renew_b = |lease_len: &str| {
            vec![
                "RL.CONCURRENT".to_string(),
                "c".into(),
                "2".into(),
                lease_len.into(),
                "RENEW".into(),
                id_b.to_string(),
            ]
        };
        let args = renew_b("1h");
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (renewed, id) = timed_lease(con, &args);
        assert_eq!((renewed.reply, id), ([1, 2, 0, 2, 0, 3_600_000], id_b));
        expiry_follows_reset(con, "c", &renewed, "PTTL follows the renewal");
        let args = renew_b("1s");
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let shorter = changes_nothing(con, "a shorter renewal", |con| lease(con, &args));
        assert_eq!((shorter[0], shorter[6]), (1, id_b), "{shorter:?}");
        assert!(shorter[5] > 3_500_000, "{shorter:?}");
        let unknown = lease(con, &with(&k, &["RENEW", "424242"]));
        assert_eq!((unknown[0], unknown[6]), (0, 0));

        // Releasing every lease removes the key, once the clock has left
        // the millisecond of its first id.
        clock_past(con, id_c / 1000);
        for id in [id_b, id_c] {
            assert_eq!(lease(con, &with(&k, &["RELEASE", &id.to_string()]))[0], 1);
        }
        assert!(!exists(con, "c"), "{flavor:?}: the key outlived its leases");
        // A new key's ids start from the clock, above the old ones.
        let (_, fresh) = timed_lease(con, &k);
        assert!(fresh > id_c, "{flavor:?}: {fresh} after {id_c}");
    });
}

#[test]
fn a_lease_that_is_not_released_ends_by_itself() {
    on_each_server(|server, con| {
        let flavor = server.flavor;
        // A holder that crashed: its lease of 300 ms is never released.
        let k = ["RL.CONCURRENT", "crash", "1", "300ms"];
        let (taken, id) = timed_lease(con, &k);
        assert_eq!(taken.reply[0], 1);
        let end = pexpiretime(con, "crash");
        assert_in(
            "the lease's end",
            end,
            taken.before + 300,
            taken.after + 300,
        );
        let t = {
            let before = server_ms(con);
            let r = lease(con, &k);
            let after = server_ms(con);
            (r, before, after)
        };
        assert_eq!(t.0[0], 0, "{flavor:?}: {:?}", t.0);
        assert_in("retry_after", t.0[2], end - t.2, end - t.1);
        // Once the clock has reached the end, the slot is free again, and
        // the ended lease can be neither released nor renewed.
        clock_past(con, end);
        let id_s = id.to_string();
        for option in ["RELEASE", "RENEW"] {
            let r = lease(con, &with(&k, &[option, &id_s]));
            assert_eq!((r[0], r[1], r[6]), (0, 0, 0), "{flavor:?} {option}: {r:?}");
        }
        let again = lease(con, &k);
        assert_eq!(again[..2], [1, 1], "{flavor:?}: {again:?}");
        assert!(again[6] > id, "{flavor:?}");
    });
}

/// Many clients at once, each acquiring (COST 1 or 2), holding a few ms
/// and releasing, some never releasing (short leases): never more than the
/// limit held, by the test's own count of admitted and not yet released
/// slots; every id different; and once every lease has ended, nothing is
/// held and the key is gone.
#[test]
fn never_more_than_the_limit_with_many_clients_at_once() {
    for_each_flavor(|flavor| {
        let server = Server::start(flavor);
        const LIMIT: i64 = 3;
        let held = AtomicI64::new(0);
        let most = AtomicI64::new(0);
        let ids = Mutex::new(BTreeSet::new());
        let tally = Mutex::new((0i64, 0i64, 0i64));
        std::thread::scope(|scope| {
            for worker in 0..6u64 {
                let (server, held, most, ids, tally) = (&server, &held, &most, &ids, &tally);
                scope.spawn(move || {
                    let mut con = server.conn();
                    let mut rng = Lcg(worker + 1);
                    for _ in 0..120 {
                        let cost = 1 + rng.below(2) as i64;
                        let crash = rng.chance(10);
                        let lease_len = if crash { "20ms" } else { "10s" };
                        let cost_s = cost.to_string();
                        let args = ["RL.CONCURRENT", "pool", "3", lease_len, "COST", &cost_s];
                        let r = lease(&mut con, &args);
                        if r[0] == 0 {
                            tally.lock().unwrap().1 += 1;
                            std::thread::sleep(Duration::from_millis(1));
                            continue;
                        }
                        let now_held = held.fetch_add(cost, Ordering::SeqCst) + cost;
                        most.fetch_max(now_held, Ordering::SeqCst);
                        assert!(now_held <= LIMIT, "{flavor:?}: {now_held} held");
                        assert!(r[1] <= LIMIT, "{flavor:?}: {r:?}");
                        assert!(
                            ids.lock().unwrap().insert(r[6]),
                            "{flavor:?}: id {} twice",
                            r[6]
                        );
                        std::thread::sleep(Duration::from_millis(rng.below(3)));
                        // The test stops counting before the server frees.
                        held.fetch_sub(cost, Ordering::SeqCst);
                        if crash {
                            tally.lock().unwrap().2 += 1;
                            continue;
                        }
                        let id = r[6].to_string();
                        let release = ["RL.CONCURRENT", "pool", "3", "10s", "RELEASE", &id];
                        assert_eq!(lease(&mut con, &release)[0], 1, "{flavor:?}");
                        tally.lock().unwrap().0 += 1;
                    }
                });
            }
        });
        let mut con = server.conn();
        let (released, refused, crashed) = *tally.lock().unwrap();
        eprintln!(
            "{flavor:?}: {released} released, {crashed} left to expire, {refused} refused, \
             at most {} held",
            most.load(Ordering::SeqCst)
        );
        assert!(
            released > 50 && refused > 10 && crashed > 3,
            "not mixed enough"
        );
        // The crashed holders' slots come back by themselves.
        let last_end = pexpiretime(&mut con, "pool");
        clock_past(&mut con, last_end);
        let read = lease(
            &mut con,
            &["RL.CONCURRENT", "pool", "3", "10s", "COST", "0"],
        );
        assert_eq!(read[..2], [1, 0], "{flavor:?}: {read:?}");
        assert!(!exists(&mut con, "pool"), "{flavor:?}");
        let c = counters(&mut con);
        assert_eq!(c["rl_concurrent_denied"], refused);
        assert_eq!(c["rl_releases"], released);
        assert_eq!(
            c["rl_concurrent_calls"],
            c["rl_concurrent_allowed"] + c["rl_concurrent_denied"]
        );
    });
}

#[test]
fn overrides_peek_cost_zero_and_the_modes() {
    on_each_server(|server, con| {
        let flavor = server.flavor;
        // An override's limit is the limit, its window the lease.
        ok(con, &["RL.OVERRIDE.SET", "o:c", "1", "5s"]);
        let k = ["RL.CONCURRENT", "oc", "10", "1h", "OVERRIDE", "o:c"];
        let (t, id) = timed_lease(con, &k);
        assert_eq!(t.reply, [1, 1, 0, 1, 0, 5_000], "{flavor:?}");
        assert_eq!(lease(con, &k)[..2], [0, 1]);
        let id_s = id.to_string();
        let release = with(&k, &["RELEASE", &id_s]);

        // PEEK and COST 0 write nothing and take no lease.
        changes_nothing(con, "PEEK and COST 0", |con| {
            let peek = lease(con, &with(&k, &["PEEK"]));
            assert_eq!((peek[0], peek[6]), (0, 0));
            let free = lease(con, &["RL.CONCURRENT", "peek", "2", "1m", "PEEK"]);
            assert_eq!(free, [1, 1, 0, 2, 1, 60_000, 0]);
            let read = lease(con, &with(&k, &["COST", "0"]));
            assert_eq!(read[..5], [1, 1, 0, 1, 0]);
            assert_eq!(read[6], 0);
            let peek_release = lease(con, &with(&release, &["PEEK"]));
            assert_eq!(
                (peek_release[0], peek_release[1], peek_release[6]),
                (1, 0, 0)
            );
        });
        assert!(!exists(con, "peek"));

        // Monitor: a refused acquire replies allowed 1, but takes no lease.
        set_mode(con, "monitor");
        changes_nothing(con, "a monitored refusal", |con| {
            let r = lease(con, &k);
            assert_eq!((r[0], r[1], r[6]), (1, 1, 0), "{r:?}");
            assert!(r[2] > 0, "{r:?}");
        });
        // Off: nothing read or written; lease 0.
        set_mode(con, "off");
        changes_nothing(con, "calls in mode off", |con| {
            assert_eq!(lease(con, &k), [1, 0, 0, 10, 10, 0, 0]);
            assert_eq!(lease(con, &release), [1, 0, 0, 10, 10, 0, 0]);
        });
        set_mode(con, "on");
        assert_eq!(lease(con, &release)[..2], [1, 0]);
        let c = counters(con);
        assert_eq!(
            (
                c["rl_releases"],
                c["rl_renewals"],
                c["rl_concurrent_monitor_would_deny"]
            ),
            (1, 0, 1),
            "{flavor:?}"
        );
    });
}
