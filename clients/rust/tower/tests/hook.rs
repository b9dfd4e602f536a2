//! The decision hook feeding Prometheus, as docs/http/rust.md shows it:
//! the example compiles, and counts each outcome per policy.

mod common;

use std::time::Duration;

use axum::routing::get;
use axum::Router;
use librl_tower::{Config, DecisionEvent, FailMode, Policy, RateLimiter};
use prometheus::{Encoder, IntCounterVec, Opts, Registry, TextEncoder};

/// docs/http/rust.md, "A Prometheus counter": one counter, labelled by
/// outcome and by the policy that decided.
fn prometheus_hook(registry: &Registry) -> impl Fn(&DecisionEvent<'_>) + Send + Sync + 'static {
    let decisions = IntCounterVec::new(
        Opts::new(
            "librl_http_decisions_total",
            "Rate-limit decisions by outcome and policy",
        ),
        &["outcome", "policy"],
    )
    .expect("a valid metric");
    registry
        .register(Box::new(decisions.clone()))
        .expect("registered once");
    move |event: &DecisionEvent<'_>| {
        for check in &event.checks {
            decisions
                .with_label_values(&[event.outcome.as_str(), check.policy])
                .inc();
        }
    }
}

/// `GET /x` answers `ok`, limited by policy `p`: 2 per minute.
fn app(limiter: &RateLimiter) -> Router {
    Router::new().route(
        "/x",
        get(|| async { "ok" }).route_layer(limiter.layer([Policy::fixed(
            "p",
            2,
            Duration::from_secs(60),
        )])),
    )
}

fn metrics(registry: &Registry) -> String {
    let mut text = Vec::new();
    TextEncoder::new()
        .encode(&registry.gather(), &mut text)
        .unwrap();
    String::from_utf8(text).unwrap()
}

#[tokio::test]
async fn the_prometheus_hook_counts_each_outcome() {
    let redis = common::redis();
    let registry = Registry::new();
    let limiter = common::limiter(&redis)
        .hook(prometheus_hook(&registry))
        .build()
        .unwrap();
    let app = common::serve(app(&limiter)).await;
    let http = common::http();
    for _ in 0..3 {
        http.get(format!("{}/x", app.base)).send().await.unwrap();
    }
    let text = metrics(&registry);
    assert!(
        text.contains("librl_http_decisions_total{outcome=\"allowed\",policy=\"p\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("librl_http_decisions_total{outcome=\"denied\",policy=\"p\"} 1"),
        "{text}"
    );
}

#[tokio::test]
async fn a_panicking_hook_does_not_fail_the_request_and_fail_open_is_reported() {
    let registry = Registry::new();
    let counting = prometheus_hook(&registry);
    let config = Config {
        fail: FailMode::Open,
        timeout: Duration::from_millis(100),
        ..common::config()
    };
    let limiter = RateLimiter::builder(config)
        .redis_url(format!("redis://127.0.0.1:{}/", common::free_port()))
        .hook(move |event: &DecisionEvent<'_>| {
            counting(event);
            assert!(event.error.is_some());
            panic!("a broken hook");
        })
        .build()
        .unwrap();
    let app = common::serve(app(&limiter)).await;
    let response = common::http()
        .get(format!("{}/x", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert!(metrics(&registry).contains("outcome=\"fail_open\",policy=\"p\"} 1"));
}
