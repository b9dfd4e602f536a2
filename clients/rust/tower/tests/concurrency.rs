//! Concurrency policies in axum (docs/http.md, Concurrency policies): a
//! request holds its slot until its response is finished, and gives it
//! back exactly once whatever ends it: the body sent, the client gone, the
//! handler panicking, a stream ending; a request another policy refuses
//! holds none; the `local` fail mode holds and releases slots in the
//! process. Real servers: a redis-server with the module, axum on a free
//! loopback port. Leases are 30 s, so a slot seen free was released, not
//! expired.

mod common;

use std::convert::Infallible;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::HeaderMap;
use axum::Router;
use bytes::Bytes;
use librl_tower::{Config, FailMode, KeyKind, Policy, RateLimiter};
use tokio::io::AsyncWriteExt;

const LEASE: Duration = Duration::from_secs(30);

/// Answers after `X-Delay-Ms`; panics on `X-Panic`.
async fn slow(headers: HeaderMap) -> &'static str {
    let ms = headers
        .get("x-delay-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(ms)).await;
    assert!(!headers.contains_key("x-panic"), "the handler panics");
    "ok"
}

fn config(prefix: &str, policies: Vec<Policy>) -> Config {
    Config {
        prefix: prefix.into(),
        policies,
        ..common::config()
    }
}

async fn serve(redis: &common::Redis, config: Config, app: Router) -> common::Served {
    let limiter = RateLimiter::builder(config)
        .redis_url(redis.url())
        .build()
        .unwrap();
    common::serve(app.layer(limiter.config_layer())).await
}

/// Slots held at `key` (`COST 0` reads them).
fn held(redis: &common::Redis, key: &str, limit: u64) -> i64 {
    let reply: Vec<i64> = redis::cmd("RL.CONCURRENT")
        .arg(key)
        .arg(limit)
        .arg("30s")
        .arg("COST")
        .arg(0)
        .query(&mut common::conn(redis))
        .unwrap();
    reply[1]
}

/// Waits up to 10 s (a third of the lease, so a slot the lease ended is
/// never taken for one given back) for `key` to hold `n` slots: a release
/// is a task of its own after hyper sees the client go, which a machine
/// running every suite at once delayed past 2 s.
async fn until_held(redis: &common::Redis, key: &str, limit: u64, n: i64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while held(redis, key, limit) != n {
        assert!(Instant::now() < deadline, "{key} never held {n} slots");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn get(base: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut request = common::http().get(format!("{base}/"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_is_held_until_the_response_is_sent() {
    let redis = common::redis();
    let policy = Policy::concurrency("inflight", 1, LEASE);
    let app = serve(
        &redis,
        config("held:", vec![policy]),
        Router::new().fallback(slow),
    )
    .await;
    let base = app.base.clone();
    let first = tokio::spawn(async move { get(&base, &[("x-delay-ms", "500")]).await });
    until_held(&redis, "held:{ip:127.0.0.1}:inflight", 1, 1).await;

    let refused = get(&app.base, &[]).await;
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["retry-after"], "30");
    assert_eq!(refused.headers()["ratelimit-policy"], "\"inflight\";q=1");
    assert_eq!(refused.headers()["ratelimit"], "\"inflight\";r=0;t=30");

    let first = first.await.unwrap();
    assert_eq!(first.status(), 200);
    assert_eq!(first.headers()["ratelimit-policy"], "\"inflight\";q=1");
    assert_eq!(first.headers()["x-ratelimit-remaining"], "0");
    assert_eq!(first.text().await.unwrap(), "ok");
    // Released before the response's end reached the client: the next
    // request, sent at once, finds the slot free.
    let third = get(&app.base, &[]).await;
    assert_eq!(third.status(), 200);
    assert_eq!(third.headers()["x-ratelimit-remaining"], "0");
    until_held(&redis, "held:{ip:127.0.0.1}:inflight", 1, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_goes_away_and_a_handler_that_panics_give_their_slot_back() {
    let redis = common::redis();
    let key = "gone:{ip:127.0.0.1}:inflight";
    let app = serve(
        &redis,
        config("gone:", vec![Policy::concurrency("inflight", 2, LEASE)]),
        Router::new().fallback(slow),
    )
    .await;

    // The client closes its connection while the handler sleeps: hyper
    // drops the request's future, and the slot is free long before the
    // handler would have answered.
    let addr = app.base.trim_start_matches("http://").to_string();
    let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let request = format!("GET / HTTP/1.1\r\nHost: {addr}\r\nX-Delay-Ms: 10000\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    until_held(&redis, key, 2, 1).await;
    drop(stream);
    until_held(&redis, key, 2, 0).await;

    // axum does not catch a panic: hyper drops the connection, and the
    // request's future with it.
    let panicked = common::http()
        .get(format!("{}/", app.base))
        .header("x-panic", "1")
        .send()
        .await;
    assert!(panicked.is_err(), "no answer after a panic");
    until_held(&redis, key, 2, 0).await;
}

/// The client goes away while Redis is still to answer the request's
/// `RL.ALL` (a paused Redis holds it): hyper drops the request's future
/// before the lease's id arrives, and the slot is released all the same,
/// not held until the lease ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_gone_before_redis_answers_gives_its_slot_back() {
    let redis = common::redis();
    let key = "early:{ip:127.0.0.1}:inflight";
    let config = Config {
        timeout: Duration::from_secs(5),
        ..config("early:", vec![Policy::concurrency("inflight", 2, LEASE)])
    };
    let app = serve(&redis, config, Router::new().fallback(slow)).await;
    // Connected first: the pause holds back only the request's command.
    assert_eq!(get(&app.base, &[]).await.status(), 200);
    until_held(&redis, key, 2, 0).await;

    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(500)
        .arg("WRITE")
        .query(&mut common::conn(&redis))
        .unwrap();
    let addr = app.base.trim_start_matches("http://").to_string();
    let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let request = format!("GET / HTTP/1.1\r\nHost: {addr}\r\nX-Delay-Ms: 10000\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(stream);
    // `held` is a write command: Redis runs it after the paused `RL.ALL`,
    // so the lease was taken before the slots are first counted.
    until_held(&redis, key, 2, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_holds_its_slot_until_it_ends() {
    let redis = common::redis();
    let key = "stream:{ip:127.0.0.1}:inflight";
    let (chunks, rx) = tokio::sync::mpsc::channel::<Result<Bytes, Infallible>>(1);
    let rx = std::sync::Arc::new(std::sync::Mutex::new(Some(rx)));
    let app = Router::new().fallback(move || {
        let rx = rx.lock().unwrap().take().expect("one stream");
        async move { Body::from_stream(tokio_stream(rx)) }
    });
    let app = serve(
        &redis,
        config("stream:", vec![Policy::concurrency("inflight", 1, LEASE)]),
        app,
    )
    .await;
    let mut response = get(&app.base, &[]).await;
    assert_eq!(response.status(), 200);
    chunks.send(Ok(Bytes::from("data: 1\n\n"))).await.unwrap();
    assert_eq!(response.chunk().await.unwrap().unwrap(), "data: 1\n\n");
    assert_eq!(held(&redis, key, 1), 1, "held while the stream runs");
    assert_eq!(get(&app.base, &[]).await.status(), 429);
    drop(chunks);
    assert!(response.chunk().await.unwrap().is_none());
    assert_eq!(held(&redis, key, 1), 0, "released before the stream's end");
}

/// An mpsc receiver as a stream (tokio-stream's wrapper, written out).
fn tokio_stream<T>(
    rx: tokio::sync::mpsc::Receiver<T>,
) -> impl futures_util::Stream<Item = T> + Send + 'static
where
    T: Send + 'static,
{
    futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|t| (t, rx)) })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_another_policy_refuses_holds_no_slot() {
    let redis = common::redis();
    let minute = Duration::from_secs(60);
    let policies = vec![
        Policy::concurrency("inflight", 5, LEASE),
        // Another subject: its own RL.ALL, after the lease was taken.
        Policy::fixed("global", 1, minute).key(KeyKind::Global),
        Policy::fixed("per-ip", 2, minute),
    ];
    let app = serve(
        &redis,
        config("mixed:", policies),
        Router::new().fallback(slow),
    )
    .await;
    let key = "mixed:{ip:127.0.0.1}:inflight";
    assert_eq!(get(&app.base, &[]).await.status(), 200);
    for _ in 0..3 {
        assert_eq!(get(&app.base, &[]).await.status(), 429);
        assert_eq!(held(&redis, key, 5), 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_local_fail_mode_holds_and_releases_slots_in_the_process() {
    let down = format!("redis://127.0.0.1:{}/", common::free_port());
    let limiter = RateLimiter::builder(Config {
        fail: FailMode::Local,
        policies: vec![Policy::concurrency("inflight", 1, LEASE)],
        ..common::config()
    })
    .redis_url(down)
    .build()
    .unwrap();
    let app = common::serve(Router::new().fallback(slow).layer(limiter.config_layer())).await;
    let base = app.base.clone();
    let first = tokio::spawn(async move { get(&base, &[("x-delay-ms", "500")]).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let refused = get(&app.base, &[]).await;
    assert_eq!(refused.status(), 429);
    assert_eq!(first.await.unwrap().status(), 200);
    assert_eq!(get(&app.base, &[]).await.status(), 200);
    assert_eq!(get(&app.base, &[]).await.status(), 200);
}
