//! The layer against a real 3-primary Redis Cluster: one subject's keys
//! share its hash tag, so each request's check is one `RL.ALL` sent
//! straight to the node owning that slot (no `COMMAND GETKEYS`, no MOVED).

mod common;

use std::time::Duration;

use axum::routing::get;
use axum::Router;
use common::Cluster;
use librl_tower::{KeyKind, Policy, RateLimiter, RedisTarget};

/// Summed over the nodes: `(calls of RL.ALL, COMMAND GETKEYS calls, MOVED errors)`.
fn stats(cluster: &Cluster) -> (u64, u64, u64) {
    let mut sum = (0, 0, 0);
    for node in &cluster.nodes {
        let mut con = common::conn(node);
        let mut field = |section: &str, field: &str, key: &str| -> u64 {
            let info: String = redis::cmd("INFO").arg(section).query(&mut con).unwrap();
            info.lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case(field).then(|| {
                        value
                            .split(',')
                            .find_map(|kv| kv.strip_prefix(key)?.parse().ok())
                            .unwrap_or(0)
                    })
                })
                .unwrap_or(0)
        };
        sum.0 += field("commandstats", "cmdstat_rl.all", "calls=");
        sum.1 += field("commandstats", "cmdstat_command|getkeys", "calls=");
        sum.2 += field("errorstats", "errorstat_MOVED", "count=");
    }
    sum
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_client_is_one_rl_all_on_its_own_node() {
    let cluster = tokio::task::block_in_place(common::cluster);
    let limiter = RateLimiter::new(common::config(), RedisTarget::Cluster(cluster.urls())).unwrap();
    let secs = Duration::from_secs;
    let app = Router::new().route(
        "/x",
        get(|| async { "ok" }).route_layer(limiter.layer([
            Policy::fixed("minute", 10, secs(60)).key(KeyKind::ApiKey),
            Policy::sliding("burst", 2, secs(60)).key(KeyKind::ApiKey),
        ])),
    );
    let app = common::serve(app).await;
    let http = common::http();
    let as_key = |key: String| http.get(format!("{}/x", app.base)).header("x-api-key", key);
    // Warm up: the cluster client learns the slots on connecting.
    assert_eq!(as_key("warm-up".into()).send().await.unwrap().status(), 200);
    let before = tokio::task::block_in_place(|| stats(&cluster));
    let keys = 20;
    for i in 0..keys {
        for expected in [200, 200, 429] {
            let status = as_key(format!("key-{i}")).send().await.unwrap().status();
            assert_eq!(status.as_u16(), expected, "key-{i}");
        }
    }
    let after = tokio::task::block_in_place(|| stats(&cluster));
    assert_eq!(after.0 - before.0, keys * 3, "one RL.ALL per request");
    assert_eq!((after.1, after.2), (0, 0), "no COMMAND GETKEYS, no MOVED");
}
