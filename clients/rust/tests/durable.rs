//! `durable(numreplicas, timeout)` against a primary with a replica: a
//! decision is returned once the replica holds it; without a replica it is
//! an error; and what the option costs, in round trips and µs per call
//! (printed, not asserted: run with `--nocapture`).

mod common;

use std::time::{Duration, Instant};

use common::*;
use librl_client::{is_not_durable, AsyncLimiter, Fixed, Limiter, OverrideGet, Token};

/// A primary and a replica of it, the link up.
fn primary_and_replica(flavor: Flavor) -> (Server, Server) {
    let primary = server(flavor);
    // Sync at once rather than after the default 5 s diskless delay.
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("repl-diskless-sync-delay")
        .arg(0)
        .query::<()>(&mut primary.conn())
        .unwrap();
    let replica = server(flavor);
    let mut rcon = replica.conn();
    redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(primary.port)
        .query::<()>(&mut rcon)
        .unwrap();
    wait_until("the replication link", Duration::from_secs(30), || {
        info_field(&mut rcon, "replication", "master_link_status").as_deref() == Some("up")
    });
    // WAIT counts only replicas the primary sees online: until then a
    // durable call would wait out its whole timeout.
    let mut pcon = primary.conn();
    wait_until("the replica online", Duration::from_secs(30), || {
        info_field(&mut pcon, "replication", "slave0").is_some_and(|s| s.contains("state=online"))
    });
    (primary, replica)
}

fn exists(con: &mut redis::Connection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query::<i64>(con).unwrap() == 1
}

#[test]
fn a_durable_decision_is_on_the_replica_when_it_returns() {
    for flavor in FLAVORS {
        let (primary, replica) = primary_and_replica(flavor);
        let mut rcon = replica.conn();
        let mut limiter = Limiter::new(primary.conn())
            .durable(1, Duration::from_secs(2))
            .unwrap();
        // Each key is new: the replica has it as soon as the call returns,
        // with no waiting on the test's side.
        for i in 0..50 {
            let key = format!("durable:{i}");
            let d = limiter.run(&Fixed::new(&key, 10, "1m")).unwrap();
            assert!(d.allowed);
            assert!(
                exists(&mut rcon, &key),
                "{flavor:?}: {key} not on the replica"
            );
        }
        // Reads send no WAIT.
        let mut pcon = primary.conn();
        let waits = command_calls(&mut pcon, "wait");
        assert_eq!(limiter.run(&OverrideGet::new("none")).unwrap(), None);
        assert_eq!(command_calls(&mut pcon, "wait"), waits);
        assert_eq!(waits, 50);
    }
}

#[tokio::test]
async fn the_async_limiter_waits_on_its_own_connection() {
    for flavor in FLAVORS {
        let (primary, replica) = primary_and_replica(flavor);
        let mut rcon = replica.conn();
        let client = redis::Client::open(primary.url()).unwrap();
        let mut con = client.get_multiplexed_async_connection().await.unwrap();
        // A WAIT may take up to the durability timeout (2 s), longer than
        // redis-rs's default response timeout (500 ms).
        con.set_response_timeout(Duration::from_secs(5));
        let limiter = AsyncLimiter::new(con)
            .durable(1, Duration::from_secs(2))
            .unwrap();
        for i in 0..20 {
            let key = format!("adurable:{i}");
            // A bucket lives until it is full again: one token of 5 in 1 s
            // would expire 200 ms later, and a replica hides an expired
            // key, so a loaded machine's slow EXISTS could miss it. An hour
            // keeps it for 12 minutes.
            let d = limiter.run(&Token::new(&key, 5, "1h")).await.unwrap();
            assert!(d.allowed);
            assert!(exists(&mut rcon, &key), "{flavor:?}: {key}");
        }
    }
}

#[test]
fn without_enough_replicas_the_decision_is_an_error() {
    for flavor in FLAVORS {
        let server = server(flavor);
        let mut limiter = Limiter::new(server.conn())
            .durable(1, Duration::from_millis(20))
            .unwrap();
        let e = limiter.run(&Fixed::new("k", 10, "1m")).unwrap_err();
        assert!(is_not_durable(&e), "{flavor:?}: {e}");
        assert!(e.to_string().contains("reached 0 of 1 replicas"), "{e}");
        // The primary decided and recorded it all the same.
        assert!(exists(&mut server.conn(), "k"));
        // Bad settings are refused before anything is sent.
        assert!(Limiter::new(server.conn())
            .durable(0, Duration::from_secs(1))
            .is_err());
        assert!(Limiter::new(server.conn())
            .durable(1, Duration::ZERO)
            .is_err());
    }
}

/// µs per call and round trips per call, without and with `durable(1, 1s)`,
/// over loopback with a replica on the same machine.
#[test]
fn what_durability_costs() {
    const CALLS: u32 = 1000;
    for flavor in FLAVORS {
        let (primary, _replica) = primary_and_replica(flavor);
        let mut pcon = primary.conn();
        let mut measure = |durable: bool| -> (f64, f64) {
            let limiter = Limiter::new(primary.conn());
            let mut limiter = if durable {
                limiter.durable(1, Duration::from_secs(1)).unwrap()
            } else {
                limiter
            };
            let before = command_calls(&mut pcon, "rl.fixed") + command_calls(&mut pcon, "wait");
            let t0 = Instant::now();
            for i in 0..CALLS {
                let key = format!("cost:{durable}:{}", i % 100);
                limiter.run(&Fixed::new(&key, 1_000_000, "1m")).unwrap();
            }
            let us = t0.elapsed().as_secs_f64() * 1e6 / f64::from(CALLS);
            let after = command_calls(&mut pcon, "rl.fixed") + command_calls(&mut pcon, "wait");
            (us, (after - before) as f64 / f64::from(CALLS))
        };
        let (plain_us, plain_trips) = measure(false);
        let (durable_us, durable_trips) = measure(true);
        println!(
            "{flavor:?}: plain {plain_trips:.0} round trip, {plain_us:.1} µs per call; \
             durable(1, 1s) {durable_trips:.0} round trips, {durable_us:.1} µs per call"
        );
        assert_eq!(plain_trips, 1.0);
        assert_eq!(durable_trips, 2.0);
    }
}
