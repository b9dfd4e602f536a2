//! The middleware's own Redis connection (docs/http/rust.md, The Redis
//! connection) against a real redis-server with the module: the URL's
//! database and password, `RL.ALL` and librl-client's commands on it, a
//! server error as `Err`, and a lost connection made again by the layer's
//! next request.

mod common;

use std::time::Duration;

use librl_client::{AsyncConnection, Command, Fixed};
use librl_tower::{pipelined_connection, Policy};
use redis::Commands;

#[tokio::test]
async fn sends_rl_all_and_any_command_on_the_urls_database() {
    let redis = common::redis();
    let mut admin = common::conn(&redis);
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("s3cret")
        .query(&mut admin)
        .unwrap();
    // `redis://127.0.0.1:PORT/` with a password and database 3.
    let url = format!("{}3", redis.url().replace("redis://", "redis://:s3cret@"));
    let client = redis::Client::open(url.as_str()).unwrap();
    let connection = pipelined_connection(&client).await.unwrap();

    // Many at once: one write, each reply to its own caller.
    let calls: Vec<_> = (0..20)
        .map(|i| {
            let connection = connection.clone();
            tokio::spawn(async move {
                let key = format!("k{}", i % 2);
                let reply = connection
                    .all(&[b"FIXED", key.as_bytes(), b"10", b"60000ms"])
                    .await;
                (i % 2, reply.unwrap().decisions[0].count)
            })
        })
        .collect();
    let mut counts = [Vec::new(), Vec::new()];
    for call in calls {
        let (key, count) = call.await.unwrap();
        counts[key].push(count);
    }
    for mut per_key in counts {
        per_key.sort_unstable();
        assert_eq!(per_key, (1..=10).collect::<Vec<u64>>());
    }

    // librl-client's commands run on it too.
    let mut con = connection.clone();
    let decision = Fixed::new("k0", 10, Duration::from_secs(60))
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!((decision.allowed, decision.count), (false, 10));
    let prepared = Fixed::new("k2", 10, Duration::from_secs(60))
        .prepare()
        .unwrap();
    assert!(con.send(&prepared).await.is_ok());

    // The keys are in database 3.
    let _: () = redis::cmd("AUTH").arg("s3cret").query(&mut admin).unwrap();
    let _: () = redis::cmd("SELECT").arg(3).query(&mut admin).unwrap();
    assert!(admin.exists::<_, bool>("k0").unwrap());

    // A server error is the caller's alone.
    let error = connection.all(&[b"FIXED", b"k0"]).await.unwrap_err();
    assert!(error.to_string().contains("needs key"), "{error}");
    assert!(connection
        .all(&[b"FIXED", b"k3", b"1", b"1s"])
        .await
        .is_ok());

    // A wrong password is refused at connect time.
    let wrong = redis.url().replace("redis://", "redis://:nope@");
    let wrong = redis::Client::open(wrong.as_str()).unwrap();
    assert!(pipelined_connection(&wrong).await.is_err());

    // Killed by the server: the connection says it is closed, and every
    // call fails at once.
    kill_other_clients(&mut admin);
    let lost = connection.all(&[b"FIXED", b"k0", b"10", b"60000ms"]).await;
    assert!(lost.is_err());
    assert!(!connection.is_open());
}

#[tokio::test]
async fn the_layer_connects_again_after_the_connection_is_lost() {
    let redis = common::redis();
    let mut admin = common::conn(&redis);
    let limiter = common::limiter(&redis).build().unwrap();
    let app = axum::Router::new()
        .route("/", axum::routing::get(|| async { "ok" }))
        .route_layer(limiter.layer([Policy::fixed("p", 100, Duration::from_secs(60))]));
    let served = common::serve(app).await;
    let http = common::http();
    let remaining = |r: &reqwest::Response| r.headers().get("x-ratelimit-remaining").cloned();

    let first = http.get(&served.base).send().await.unwrap();
    assert_eq!(first.status(), 200);
    assert_eq!(remaining(&first).unwrap(), "99");
    kill_other_clients(&mut admin);
    // The request that finds the connection gone fails open (no headers);
    // a later one is counted again on a new connection.
    let mut counted = None;
    for _ in 0..50 {
        let response = http.get(&served.base).send().await.unwrap();
        assert_eq!(response.status(), 200);
        if let Some(r) = remaining(&response) {
            counted = Some(r);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(counted.unwrap(), "98");
}

/// Closes every normal client connection but the caller's, as a server
/// restart or a network cut would the layer's.
fn kill_other_clients(admin: &mut redis::Connection) {
    let _: () = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .arg("SKIPME")
        .arg("yes")
        .query(admin)
        .unwrap();
}
