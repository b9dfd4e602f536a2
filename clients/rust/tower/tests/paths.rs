//! What axum's router does with the spellings of a path
//! (docs/http/rust.md, Paths), beside what librl checks them as: with a
//! `/limited` route in both the router and the configuration, every
//! spelling the canonical path merges into `/limited` is checked against
//! the route, including those axum's router does not send to the
//! `/limited` handler (a spelling no handler serves may be counted).

mod common;

use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http::Method;
use librl_tower::{Config, RateLimiter};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_spelling_axum_may_route_is_checked() {
    let redis = common::redis();
    let config = Config::from_value(&json!({
        "exempt_loopback": false,
        "policies": [{"name": "p", "algorithm": "fixed", "limit": 1000, "window": "1m"}],
        "routes": [{"path": "/limited", "policies": ["p"]}],
    }))
    .unwrap();
    let limiter = RateLimiter::builder(config)
        .redis_url(redis.url())
        .build()
        .unwrap();
    let app = Router::new()
        .route("/limited", get(|| async { "limited" }))
        .route("/param/{name}", get(|| async { "param" }))
        .fallback(|| async { (StatusCode::NOT_FOUND, "no route") })
        .layer(limiter.config_layer());
    let served = common::serve(app).await;
    let addr = served.base.trim_start_matches("http://");
    // (request target, what axum's router answers, checked against /limited)
    let table: &[(&str, u16, bool)] = &[
        ("/limited", 200, true),
        ("/limited?x=1", 200, true),
        ("//limited", 404, true),
        ("/limited/", 404, true),
        ("/./limited", 404, true),
        ("/x/../limited", 404, true),
        ("/limited;x", 404, true),
        ("/LIMITED", 404, true),
        ("/%6Cimited", 404, true),
        ("/limited%2Fx", 404, true),
        ("/limited/x", 404, true),
        ("/limitedx", 404, false),
        // A parameter gets `limited%2Fx` decoded, one segment; librl
        // checks the path the handler was reached by.
        ("/param/limited%2Fx", 200, false),
        ("/param/..%2Flimited", 200, true),
    ];
    let mut differ = Vec::new();
    for (target, status, checked) in table {
        let (got_status, headers, _) = common::send(
            addr,
            Method::GET,
            target.as_bytes().to_vec(),
            Vec::new(),
            Bytes::new(),
            false,
        )
        .await
        .unwrap();
        let got_checked = headers.contains_key("ratelimit-policy");
        if (got_status, got_checked) != (*status, *checked) {
            differ.push(format!(
                "{target}: {got_status}, checked {got_checked}; expected {status}, checked {checked}"
            ));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}
