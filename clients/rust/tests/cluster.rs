//! A real 3-primary cluster of each flavor, the module on every node. In
//! steady state every call reaches the primary owning its key at once: no
//! node counts a MOVED error or a `COMMAND GETKEYS`. Moving a slot that
//! holds a limiter mid-run loses no call and no count.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use librl_client::{slot, All, AsyncLimiter, Command, Fixed, Sliding, Token};
use redis::cluster::ClusterClient;
use redis::ErrorKind;

/// Three servers at a time are plenty on a small machine (a tokio mutex:
/// the async tests hold it across their awaits).
static ONE_CLUSTER_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const USERS: usize = 200;

/// Every key on every node hashes to a slot that node owns.
fn assert_keys_on_their_owners(cluster: &Cluster) {
    for (i, mut con) in cluster.conns().into_iter().enumerate() {
        let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(&mut con).unwrap();
        for key in keys {
            assert_eq!(
                cluster.owner(slot(&key)),
                i,
                "{} on node {i}",
                key.escape_ascii()
            );
        }
    }
}

/// For each node: (calls of `name`, COMMAND GETKEYS calls, MOVED errors).
fn assert_steady(cluster: &Cluster, name: &str, total: u64) {
    let stats = cluster.stats(name);
    assert_eq!(
        stats.iter().map(|s| s.0).sum::<u64>(),
        total,
        "{name}: {stats:?}"
    );
    for (node, (calls, getkeys, moved)) in stats.iter().enumerate() {
        assert!(*calls > 0, "node {node} got no {name}: {stats:?}");
        assert_eq!((*getkeys, *moved), (0, 0), "node {node}: {stats:?}");
    }
}

fn user_calls(i: usize) -> (Fixed, All, Token) {
    let tag = format!("{{user:{i}}}");
    (
        Fixed::new(format!("user:{i}"), 100, "1h"),
        All::new()
            .clause(Fixed::new(format!("{tag}:second"), 5, "1h").aligned())
            .clause(Sliding::new(format!("{tag}:minute"), 30, "1h"))
            .clause(
                Token::new(format!("{tag}:bytes"), 1000, "1h")
                    .cost(10)
                    .override_key(format!("{tag}:plan")),
            ),
        Token::new(format!("bucket:{i}"), 10, "1s").burst(20),
    )
}

#[test]
fn sync_cluster_calls_go_straight_to_the_owner() {
    let _turn = ONE_CLUSTER_AT_A_TIME.blocking_lock();
    for flavor in CLUSTER_FLAVORS {
        let cluster = cluster(flavor);
        let client = ClusterClient::new(cluster.urls()).unwrap();
        let mut con = client.get_connection().unwrap();
        cluster.reset_stats();
        for i in 0..USERS {
            let (fixed, all, token) = user_calls(i);
            assert!(fixed.query(&mut con).unwrap().allowed);
            let all = all.query(&mut con).unwrap();
            assert!(all.allowed, "{all:?}");
            assert_eq!(all.decisions.len(), 3);
            assert!(token.query(&mut con).unwrap().allowed);
        }
        for name in ["rl.fixed", "rl.all", "rl.token"] {
            assert_steady(&cluster, name, USERS as u64);
        }
        assert_keys_on_their_owners(&cluster);
        // A second round sees the first: each call reached the same node.
        let again = Fixed::new("user:7", 100, "1h").query(&mut con).unwrap();
        assert_eq!(again.count, 2);

        // Keys of one call in different slots: refused before sending.
        let split = All::new()
            .clause(Fixed::new("{a}:x", 1, "1h"))
            .clause(Fixed::new("{b}:x", 1, "1h"));
        let e = split.query(&mut con).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Client);
        assert!(e.to_string().contains("hash tag"), "{e}");
        let e = Fixed::new("{a}:x", 1, "1h")
            .override_key("{b}:o")
            .query(&mut con)
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Client, "{e}");
        assert_server_errors_come_back(&mut con);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_cluster_calls_go_straight_to_the_owner() {
    let _turn = ONE_CLUSTER_AT_A_TIME.lock().await;
    for flavor in CLUSTER_FLAVORS {
        let cluster = cluster(flavor);
        let client = ClusterClient::builder(cluster.urls())
            .use_protocol(redis::ProtocolVersion::RESP3)
            .build()
            .unwrap();
        let con = client.get_async_connection().await.unwrap();
        cluster.reset_stats();
        let limiter = AsyncLimiter::new(con);
        let mut tasks = Vec::new();
        for i in 0..USERS {
            let limiter = limiter.clone();
            tasks.push(tokio::spawn(async move {
                let (fixed, all, token) = user_calls(i);
                let fixed = limiter.run(&fixed).await?;
                let all = limiter.run(&all).await?;
                let token = limiter.run(&token).await?;
                redis::RedisResult::Ok(fixed.allowed && all.allowed && token.allowed)
            }));
        }
        for task in tasks {
            assert!(task.await.unwrap().unwrap());
        }
        for name in ["rl.fixed", "rl.all", "rl.token"] {
            assert_steady(&cluster, name, USERS as u64);
        }
        assert_keys_on_their_owners(&cluster);
        let mut con = client.get_async_connection().await.unwrap();
        let split = All::new()
            .clause(Fixed::new("{a}:x", 1, "1h"))
            .clause(Fixed::new("{b}:x", 1, "1h"));
        let e = split.query_async(&mut con).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Client);
    }
}

/// Moves the slot of `{hot}` from its owner to the next node while
/// `caller` keeps calling; returns (source, destination).
fn move_hot_slot(cluster: &Cluster, calls_so_far: impl Fn() -> u64) -> (usize, usize) {
    let slot = slot(b"hot");
    let source = cluster.owner(slot);
    let dest = (source + 1) % 3;
    let mut cons = cluster.conns();
    wait_until("calls before the move", Duration::from_secs(10), || {
        calls_so_far() >= 50
    });
    let setslot = |con: &mut redis::Connection, state: &str, id: &str| {
        let () = redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg(state)
            .arg(id)
            .query(con)
            .unwrap();
    };
    setslot(&mut cons[dest], "IMPORTING", &cluster.ids[source]);
    setslot(&mut cons[source], "MIGRATING", &cluster.ids[dest]);
    let keys: Vec<Vec<u8>> = redis::cmd("CLUSTER")
        .arg("GETKEYSINSLOT")
        .arg(slot)
        .arg(100)
        .query(&mut cons[source])
        .unwrap();
    assert_eq!(keys.len(), 2, "the limiter keys of {{hot}}");
    let () = redis::cmd("MIGRATE")
        .arg("127.0.0.1")
        .arg(cluster.nodes[dest].port)
        .arg("")
        .arg(0)
        .arg(5000)
        .arg("KEYS")
        .arg(&keys)
        .query(&mut cons[source])
        .unwrap();
    // Calls now follow ASK to the destination for a while.
    let before = calls_so_far();
    wait_until("calls while migrating", Duration::from_secs(10), || {
        calls_so_far() >= before + 20
    });
    for con in &mut cons {
        setslot(con, "NODE", &cluster.ids[dest]);
    }
    (source, dest)
}

/// The count of `{hot}:second` as its node has it.
fn hot_count(cluster: &Cluster, node: usize) -> u64 {
    let mut con = cluster.nodes[node].conn();
    let peek = Fixed::new("{hot}:second", 1_000_000, "1h")
        .peek()
        .query(&mut con)
        .unwrap();
    peek.count - 1
}

fn hot_call() -> All {
    All::new()
        .clause(Fixed::new("{hot}:second", 1_000_000, "1h"))
        .clause(Sliding::new("{hot}:minute", 1_000_000, "1h").approx())
}

#[test]
fn sync_calls_keep_succeeding_while_their_slot_moves() {
    let _turn = ONE_CLUSTER_AT_A_TIME.blocking_lock();
    let cluster = cluster(Flavor::Redis);
    let client = ClusterClient::new(cluster.urls()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let admitted = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let caller = {
        let (stop, admitted) = (stop.clone(), admitted.clone());
        let mut con = client.get_connection().unwrap();
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(60);
            while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
                let all = hot_call().query(&mut con).expect("a call failed mid-move");
                assert!(all.allowed, "{all:?}");
                admitted.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    let (source, dest) = move_hot_slot(&cluster, || admitted.load(Ordering::SeqCst));
    let moved_at = admitted.load(Ordering::SeqCst);
    wait_until("calls after the move", Duration::from_secs(10), || {
        admitted.load(Ordering::SeqCst) >= moved_at + 20
    });
    stop.store(true, Ordering::SeqCst);
    caller.join().expect("the caller failed");
    let total = admitted.load(Ordering::SeqCst);
    assert_eq!(
        hot_count(&cluster, dest),
        total,
        "every admitted call counted once"
    );
    let mut src = cluster.nodes[source].conn();
    let left: u64 = redis::cmd("CLUSTER")
        .arg("COUNTKEYSINSLOT")
        .arg(slot(b"hot"))
        .query(&mut src)
        .unwrap();
    assert_eq!(left, 0);
    assert!(redirected(&mut src) > 0, "the calls did meet the move");
}

/// ASK and MOVED replies a node has sent.
fn redirected(con: &mut redis::Connection) -> u64 {
    error_count(con, "ASK") + error_count(con, "MOVED")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_calls_keep_succeeding_while_their_slot_moves() {
    let _turn = ONE_CLUSTER_AT_A_TIME.lock().await;
    let cluster = cluster(Flavor::Valkey);
    let client = ClusterClient::new(cluster.urls()).unwrap();
    let limiter = AsyncLimiter::new(client.get_async_connection().await.unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let admitted = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let caller = {
        let (stop, admitted) = (stop.clone(), admitted.clone());
        tokio::spawn(async move {
            let deadline = Instant::now() + Duration::from_secs(60);
            while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
                let all = limiter
                    .run(&hot_call())
                    .await
                    .expect("a call failed mid-move");
                assert!(all.allowed, "{all:?}");
                admitted.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    let mover = {
        let admitted = admitted.clone();
        tokio::task::spawn_blocking(move || {
            let (source, dest) = move_hot_slot(&cluster, || admitted.load(Ordering::SeqCst));
            let moved_at = admitted.load(Ordering::SeqCst);
            wait_until("calls after the move", Duration::from_secs(10), || {
                admitted.load(Ordering::SeqCst) >= moved_at + 20
            });
            let mut src = cluster.nodes[source].conn();
            assert!(redirected(&mut src) > 0, "the calls did meet the move");
            (cluster, dest)
        })
    };
    let (cluster, dest) = mover.await.unwrap();
    stop.store(true, Ordering::SeqCst);
    caller.await.expect("the caller failed");
    let total = admitted.load(Ordering::SeqCst);
    let count = tokio::task::spawn_blocking(move || hot_count(&cluster, dest))
        .await
        .unwrap();
    assert_eq!(count, total, "every admitted call counted once");
}
