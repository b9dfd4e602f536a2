//! RL.CONCURRENT through the crate: the builder and its seven-integer
//! reply, RL.ALL's CONCURRENT clause, the blocking limiter's leases and
//! `with_lease`, the tokio limiter's `Lease` guard (release, renew, drop,
//! background renewal), `WAIT` on a connection of its own, exactness under
//! real concurrency, and routing in a cluster.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use librl_client::{
    All, AsyncLimiter, Command, Concurrent, Fixed, HeldLease, LeaseId, LeaseLost, Limiter,
    OverrideSet, RetryAfter,
};
use redis::cluster::ClusterClient;
use redis::ErrorKind;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The slots held on `key` (a `COST 0` read).
fn held(con: &mut impl librl_client::Connection, key: &str) -> u64 {
    Concurrent::new(key, 1000, "1m")
        .cost(0)
        .query(con)
        .unwrap()
        .count
}

#[test]
fn the_builder_takes_releases_and_renews_leases_on_each_server() {
    on_each_server(|server| {
        let mut con = server.conn();
        let slots = || Concurrent::new("inflight", 2, "30s");
        let a = slots().query(&mut con).unwrap();
        let b = slots().query(&mut con).unwrap();
        assert!(a.allowed && b.allowed);
        let (a_id, b_id) = (a.lease.unwrap(), b.lease.unwrap());
        assert_eq!(b_id.get(), a_id.get() + 1, "ids follow each other");
        assert!(a_id.get() < (1 << 53));
        assert_eq!((b.count, b.remaining, b.reset_after_ms), (2, 0, 30000));
        let full = slots().query(&mut con).unwrap();
        assert!(!full.allowed && full.lease.is_none());
        assert!(matches!(full.retry_after, RetryAfter::Ms(ms) if ms > 29_000));
        let never = slots().cost(3).query(&mut con).unwrap();
        assert_eq!(never.retry_after, RetryAfter::Never);

        let released = slots().release(a_id).query(&mut con).unwrap();
        assert_eq!((released.allowed, released.count), (true, 1));
        assert_eq!(released.lease, Some(a_id));
        let again = slots().release(a_id).query(&mut con).unwrap();
        assert_eq!(
            (again.allowed, again.lease),
            (false, None),
            "not held any more"
        );
        let renewed = Concurrent::new("inflight", 2, "2m")
            .renew(b_id)
            .query(&mut con)
            .unwrap();
        assert_eq!((renewed.allowed, renewed.reset_after_ms), (true, 120_000));
        let peek = slots().peek().query(&mut con).unwrap();
        assert!(peek.allowed && peek.lease.is_none());
        assert_eq!(held(&mut con, "inflight"), 1, "the peek took nothing");

        // An override's limit (and window, as the lease's length) applies.
        OverrideSet::new("plan", 1, "5s").query(&mut con).unwrap();
        let over = slots().override_key("plan").query(&mut con).unwrap();
        assert_eq!((over.allowed, over.limit), (false, 1));

        // RL.ALL: the clause's lease is in its decision.
        let all = |cost| {
            All::new()
                .clause(Fixed::new("{u}:minute", 10, "1m"))
                .clause(Concurrent::new("{u}:inflight", 1, "30s").cost(cost))
        };
        let taken = all(1).query(&mut con).unwrap();
        assert!(taken.allowed);
        let leases: Vec<_> = taken.leases().collect();
        assert_eq!(leases.len(), 1);
        assert_eq!(leases[0].0, 1);
        assert_eq!(taken.decisions[0].lease, None);
        let refused = all(1).query(&mut con).unwrap();
        assert!(!refused.allowed && refused.leases().next().is_none());
        let back = Concurrent::new("{u}:inflight", 1, "30s")
            .release(leases[0].1)
            .query(&mut con)
            .unwrap();
        assert!(back.allowed);
        for bad in [
            All::new().clause(Concurrent::new("k", 1, "1s").wait("1s")),
            All::new().clause(Concurrent::new("k", 1, "1s").release(a_id)),
        ] {
            let e = bad.query(&mut con).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Client, "{e}");
        }
        // A concurrency key is WRONGTYPE for the other limiters.
        let e = Fixed::new("inflight", 1, "1m").query(&mut con).unwrap_err();
        assert_eq!(e.code(), Some("WRONGTYPE"), "{e}");
    });
}

#[test]
fn the_blocking_limiter_releases_what_with_lease_took() {
    on_each_server(|server| {
        let mut stats = server.conn();
        let mut limiter = Limiter::new(server.conn());
        let exports = Concurrent::new("exports", 1, "1m");
        let lease = limiter.acquire(&exports).unwrap().unwrap();
        let refused = limiter.acquire(&exports).unwrap().unwrap_err();
        assert!(refused.to_string().contains("1 of 1 held"), "{refused}");
        assert!(limiter.renew(&lease).unwrap());
        assert!(limiter.release(lease.clone()).unwrap());
        assert!(!limiter.release(lease.clone()).unwrap(), "released already");
        assert!(
            !limiter.renew(&lease).unwrap(),
            "an ended lease is not renewed"
        );

        let inside = limiter
            .with_lease(&exports, |limiter, lease| {
                assert!(lease.id().is_some());
                held(limiter.connection(), "exports")
            })
            .unwrap()
            .unwrap();
        assert_eq!(inside, 1);
        assert_eq!(held(&mut stats, "exports"), 0, "released after the body");
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            limiter.with_lease(&exports, |_, _| panic!("the body failed"))
        }));
        assert!(panicked.is_err());
        assert_eq!(held(&mut stats, "exports"), 0, "released after a panic");
        let _held = limiter.acquire(&exports).unwrap().unwrap();
        let refused = limiter.with_lease(&exports, |_, _| unreachable!()).unwrap();
        assert!(refused.is_err(), "the body does not run");
        for no_lease in [exports.clone().cost(0), exports.clone().peek()] {
            let e = limiter.acquire(&no_lease).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Client, "{e}");
        }
    });
}

#[test]
fn a_blocking_lease_renewed_on_a_thread_outlives_its_length() {
    let server = server(Flavor::Redis8);
    let mut stats = server.conn();
    let mut limiter = Limiter::new(server.conn());
    // Renewed every 333 ms: a renewal may come 666 ms late on a loaded
    // machine and still find the lease held.
    let job = Concurrent::new("job", 1, "1s");
    let lease = limiter.acquire(&job).unwrap().unwrap();
    let renewing = lease.keep_alive(server.conn()).unwrap();
    std::thread::sleep(ms(1500));
    assert!(renewing.lost().is_none());
    assert_eq!(held(&mut stats, "job"), 1, "renewed past its length");
    drop(renewing);
    assert!(limiter.release(lease).unwrap());

    // Renewals that cannot get through: lost once the lease's end came.
    let lease = limiter.acquire(&job).unwrap().unwrap();
    let mut elsewhere = self::server(Flavor::Redis8);
    let renewing = lease.keep_alive(elsewhere.conn()).unwrap();
    elsewhere.stop();
    wait_until("the renewal's verdict", ms(5000), || {
        renewing.lost().is_some()
    });
    assert!(
        matches!(renewing.lost(), Some(LeaseLost::Unreachable(_))),
        "{:?}",
        renewing.lost()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_async_lease_is_released_explicitly_on_drop_and_by_renewal_s_end() {
    for flavor in FLAVORS {
        let server = server(flavor);
        let mut stats = server.conn();
        let client = redis::Client::open(server.url_resp3()).unwrap();
        let limiter = AsyncLimiter::new(client.get_multiplexed_async_connection().await.unwrap());
        let lease = limiter
            .acquire("gen", 2, "1m")
            .cost(2)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(lease.decision().count, 2);
        let refused = limiter.acquire("gen", 2, "1m").await.unwrap().unwrap_err();
        assert!(matches!(refused.retry_after(), RetryAfter::Ms(_)));
        assert!(lease.release().await.unwrap());
        assert_eq!(held(&mut stats, "gen"), 0);

        // Dropped on a runtime: a task sends the release.
        let dropped = limiter.acquire("gen", 2, "1m").await.unwrap().unwrap();
        assert_eq!(held(&mut stats, "gen"), 1);
        drop(dropped);
        wait_until("the dropped lease's release", ms(5000), || {
            held(&mut stats, "gen") == 0
        });

        // Detached: nothing releases it but its own id.
        let detached = limiter
            .acquire("gen", 2, "1m")
            .await
            .unwrap()
            .unwrap()
            .detach();
        tokio::time::sleep(ms(50)).await;
        assert_eq!(held(&mut stats, "gen"), 1);
        let mut adopted = limiter.adopt(detached.clone());
        assert!(adopted.renew().await.unwrap());
        assert!(adopted.release().await.unwrap());
        if flavor != Flavor::Valkey {
            // The background renewal is the client's timing; the server's
            // RENEW is checked on each server above.
            continue;
        }
        // An adopted lease renewed in the background (every 333 ms: a
        // renewal may come 666 ms late on a loaded machine).
        let short = limiter.acquire("gen", 2, "1s").await.unwrap().unwrap();
        let mut kept = limiter.adopt(short.detach());
        kept.keep_alive().unwrap();
        tokio::time::sleep(ms(1500)).await;
        assert_eq!(held(&mut stats, "gen"), 1, "renewed past its length");
        assert!(kept.release().await.unwrap());

        // A lease renewed in the background outlives its length, and is
        // released at once.
        let kept = limiter
            .acquire("job", 1, "1s")
            .keep_alive()
            .await
            .unwrap()
            .unwrap();
        tokio::time::sleep(ms(1500)).await;
        assert!(kept.is_lost().is_none());
        assert_eq!(held(&mut stats, "job"), 1, "renewed past its length");
        assert!(kept.release().await.unwrap());
        assert_eq!(held(&mut stats, "job"), 0);

        // Taken away (the key deleted): the renewal reports it lost.
        let kept = limiter
            .acquire("job", 1, "1s")
            .keep_alive()
            .await
            .unwrap()
            .unwrap();
        let () = redis::cmd("DEL").arg("job").query(&mut stats).unwrap();
        let lost = tokio::time::timeout(ms(5000), kept.lost()).await.unwrap();
        assert!(matches!(lost, LeaseLost::Ended), "{lost}");
        assert!(!kept.release().await.unwrap(), "not held");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_goes_on_a_connection_of_its_own() {
    for flavor in [Flavor::Redis, Flavor::Valkey] {
        let server = server(flavor);
        let client = redis::Client::open(server.url()).unwrap();
        let shared = client.get_multiplexed_async_connection().await.unwrap();
        let bare = AsyncLimiter::new(shared.clone());
        let e = bare.acquire("slot", 1, "1m").wait("2s").await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Client, "refused before sending: {e}");
        assert!(e.to_string().contains("with_wait_connections"), "{e}");

        let limiter = AsyncLimiter::new(shared).with_wait_connections(client.clone());
        let first = limiter.acquire("slot", 1, "1m").await.unwrap().unwrap();
        let waiter = {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                let started = Instant::now();
                let lease = limiter.acquire("slot", 1, "1m").wait("10s").await;
                (lease, started.elapsed())
            })
        };
        // The shared connection answers other calls meanwhile.
        tokio::time::sleep(ms(200)).await;
        let started = Instant::now();
        let quick = limiter.run(&Fixed::new("other", 1, "1m")).await.unwrap();
        assert!(quick.allowed);
        assert!(started.elapsed() < ms(1000), "{:?}", started.elapsed());
        assert!(!waiter.is_finished(), "the waiter waits");
        let released_at = Instant::now();
        assert!(first.release().await.unwrap());
        let (lease, waited) = waiter.await.unwrap();
        let lease = lease.unwrap().expect("admitted when the slot was freed");
        assert!(waited >= ms(200), "{waited:?}");
        assert!(released_at.elapsed() < ms(2000));
        assert!(lease.id().is_some());
        // Within max_wait and refused: answered at the deadline, refused.
        let started = Instant::now();
        let refused = limiter
            .acquire("slot", 1, "1m")
            .wait("300ms")
            .await
            .unwrap();
        assert!(refused.is_err());
        assert!(started.elapsed() >= ms(290), "{:?}", started.elapsed());
        lease.release().await.unwrap();
    }
}

/// Tasks acquiring and releasing at random on a real server never hold
/// more than the limit, and every slot comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_holders_never_exceed_the_limit() {
    const LIMIT: u64 = 3;
    let server = server(Flavor::Valkey);
    let client = redis::Client::open(server.url()).unwrap();
    let limiter = AsyncLimiter::new(client.get_multiplexed_async_connection().await.unwrap());
    let holding = Arc::new(AtomicU64::new(0));
    let most = Arc::new(AtomicU64::new(0));
    let admitted = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for t in 0..12u64 {
        let (limiter, holding, most, admitted) = (
            limiter.clone(),
            holding.clone(),
            most.clone(),
            admitted.clone(),
        );
        tasks.push(tokio::spawn(async move {
            for i in 0..25u64 {
                let Ok(lease) = limiter.acquire("pool", LIMIT, "1m").await.unwrap() else {
                    tokio::task::yield_now().await;
                    continue;
                };
                assert!(lease.decision().count <= LIMIT, "{:?}", lease.decision());
                let now = holding.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                admitted.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(ms((t * 7 + i * 3) % 5)).await;
                holding.fetch_sub(1, Ordering::SeqCst);
                assert!(lease.release().await.unwrap());
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let mut con = server.conn();
    assert_eq!(held(&mut con, "pool"), 0, "every slot came back");
    assert!(most.load(Ordering::SeqCst) <= LIMIT);
    assert!(
        admitted.load(Ordering::SeqCst) >= LIMIT,
        "some were admitted"
    );
}

/// Three servers at a time are plenty on a small machine.
static ONE_CLUSTER_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_go_straight_to_their_owner_in_a_cluster() {
    let _turn = ONE_CLUSTER_AT_A_TIME.lock().await;
    let cluster = cluster(Flavor::Valkey);
    let client = ClusterClient::new(cluster.urls()).unwrap();
    let limiter = AsyncLimiter::new(client.get_async_connection().await.unwrap())
        .with_wait_connections(client.clone());
    cluster.reset_stats();
    for i in 0..60 {
        let key = format!("{{tenant:{i}}}:inflight");
        let lease = limiter.acquire(&key, 1, "1m").await.unwrap().unwrap();
        let mut lease = lease;
        assert!(lease.renew().await.unwrap());
        let all = limiter
            .run(
                &All::new()
                    .clause(Fixed::new(format!("{{tenant:{i}}}:minute"), 10, "1m"))
                    .clause(Concurrent::new(format!("{{tenant:{i}}}:exports"), 1, "1m")),
            )
            .await
            .unwrap();
        let (_, id) = all.leases().next().unwrap();
        let held = HeldLease::new(
            Concurrent::new(format!("{{tenant:{i}}}:exports"), 1, "1m"),
            id,
            all.decisions[1],
        );
        assert!(limiter.adopt(held).release().await.unwrap());
        assert!(lease.release().await.unwrap());
    }
    // A WAIT that finds its slot free, on its own cluster connection.
    let waited = limiter
        .acquire("{tenant:0}:inflight", 1, "1m")
        .wait("1s")
        .await
        .unwrap()
        .unwrap();
    assert!(waited.release().await.unwrap());
    let stats = cluster.stats("rl.concurrent");
    assert_eq!(
        stats.iter().map(|s| s.0).sum::<u64>(),
        60 * 4 + 2,
        "{stats:?}"
    );
    for (node, (calls, getkeys, moved)) in stats.iter().enumerate() {
        assert!(*calls > 0, "node {node}: {stats:?}");
        assert_eq!((*getkeys, *moved), (0, 0), "node {node}: {stats:?}");
    }
    let e = limiter
        .acquire("{a}k", 1, "1m")
        .override_key("{b}o")
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Client);
    let id = LeaseId::new(1).unwrap();
    let mut con = client.get_connection().unwrap();
    let d = Concurrent::new("{tenant:0}:inflight", 1, "1m")
        .release(id)
        .query(&mut con)
        .unwrap();
    assert!(!d.allowed);
}
