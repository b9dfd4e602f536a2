//! The middleware against a real 3-primary Redis Cluster: each client's
//! keys share its subject's hash tag, so a route's policies are one RL.ALL
//! sent straight to the node owning that slot.

mod common;

use std::time::Duration;

use axum::routing::get;
use axum::Router;
use common::{config, http, send, serve, Cluster};
use librl_axum_example::{Config, Policy, RateLimiter, Scope};

async fn ok() -> &'static str {
    "ok"
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[tokio::test]
async fn each_client_is_limited_on_its_own_node_in_one_call() {
    let cluster = Cluster::start();
    let limiter = RateLimiter::new(Config {
        cluster_nodes: cluster.urls(),
        ..config("redis://unused/")
    })
    .unwrap();
    let app = Router::new().route(
        "/x",
        get(ok).route_layer(limiter.layer([
            Policy::fixed("minute", 10, secs(60)),
            Policy::sliding("burst", 2, secs(60)),
        ])),
    );
    let base = serve(app).await;
    let client = http();
    let as_key = |key: String| client.get(format!("{base}/x")).header("x-api-key", key);

    // Warm up: the cluster client learns the slots on connecting.
    assert_eq!(send(as_key("warm-up".into())).await.status, 200);
    let before = cluster.stats("rl.all");
    let keys = 30;
    for i in 0..keys {
        for expected in [200, 200, 429, 429] {
            let a = send(as_key(format!("key-{i}"))).await;
            assert_eq!(a.status, expected, "key-{i}: {a:?}");
        }
    }
    let after = cluster.stats("rl.all");
    assert_eq!(after.0 - before.0, keys * 4, "one RL.ALL per request");
    assert_eq!((after.1, after.2), (0, 0), "no COMMAND GETKEYS, no MOVED");
}

/// A route mixing an IP policy with a per-API-key one: the two subjects'
/// keys may live on different nodes, so they go as one RL.ALL each, and a
/// refusal by the second refunds the first.
#[tokio::test]
async fn mixed_subjects_stay_all_or_nothing_across_slots() {
    let cluster = Cluster::start();
    let limiter = RateLimiter::new(Config {
        cluster_nodes: cluster.urls(),
        ..config("redis://unused/")
    })
    .unwrap();
    let app = Router::new().route(
        "/x",
        get(ok).route_layer(limiter.layer([
            Policy::fixed("ip", 100, secs(60)).scope(Scope::Ip),
            Policy::fixed("key", 1, secs(60)),
        ])),
    );
    let base = serve(app).await;
    let client = http();
    let as_key = || client.get(format!("{base}/x")).header("x-api-key", "k");
    assert_eq!(send(as_key()).await.status, 200);
    for _ in 0..3 {
        let refused = send(as_key()).await;
        assert_eq!(refused.status, 429);
        assert_eq!(refused.problem()["policy"], "key");
    }
    // Without an API key the key policy counts the IP too: the IP counter
    // shows one request, the three refused ones refunded.
    let by_ip = send(client.get(format!("{base}/x"))).await;
    assert_eq!(by_ip.status, 200, "{by_ip:?}");
    assert_eq!(
        by_ip.header("ratelimit-policy"),
        Some("\"ip\";q=100;w=60, \"key\";q=1;w=60")
    );
    let mut ip_counter = redis::cmd("RL.FIXED");
    ip_counter
        .arg("rl:{ip:127.0.0.1}:ip")
        .arg(100)
        .arg(60)
        .arg("PEEK");
    let owner = cluster
        .nodes
        .iter()
        .find_map(|node| ip_counter.query::<Vec<i64>>(&mut node.conn()).ok())
        .expect("one node owns the IP's slot");
    assert_eq!(owner[1], 3, "two admitted requests, plus the PEEK's unit");
}
