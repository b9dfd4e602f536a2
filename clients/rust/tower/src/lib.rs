//! librl's HTTP rate limiting as a `tower::Layer`, for axum, hyper and
//! tonic: the contract of docs/http.md (one configuration, identity and
//! trusted proxies, one `RL.ALL` per subject with refunds across subjects,
//! RateLimit headers, problem bodies, fail modes, shadow mode, a decision
//! hook), checked by the conformance suite in `conformance/`.
//!
//! From a configuration file, every route by the file's `routes`:
//!
//! ```no_run
//! use std::net::SocketAddr;
//! use axum::{routing::get, Router};
//! use librl_tower::{Config, RateLimiter};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = Config::from_file("policies.yaml")?;
//! let limiter = RateLimiter::builder(config).redis_url("redis://127.0.0.1:6379").build()?;
//! let app: Router = Router::new()
//!     .route("/hello", get(|| async { "hello" }))
//!     .layer(limiter.config_layer());
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
//! # Ok(()) }
//! ```
//!
//! Or per route, in code:
//!
//! ```no_run
//! use std::time::Duration;
//! use axum::{routing::get, Router};
//! use librl_tower::{Config, KeyKind, Policy, RateLimiter};
//!
//! let limiter = RateLimiter::builder(Config::default()).build().unwrap();
//! let app: Router = Router::new().route(
//!     "/search",
//!     get(|| async { "results" }).route_layer(limiter.layer([
//!         Policy::fixed("ip-second", 5, Duration::from_secs(1)).aligned(),
//!         Policy::sliding("search", 100, Duration::from_secs(60)).key(KeyKind::User),
//!     ])),
//! );
//! ```
//! Serve with `into_make_service_with_connect_info::<SocketAddr>()` (axum)
//! or insert [`PeerAddr`] (hyper, tonic): the peer address is how a client
//! without credentials is told apart.

mod breaker;
mod configuration;
mod connection;
mod decide;
mod durations;
mod fail;
mod headers;
mod hook;
mod identity;
mod keys;
mod layer;
mod lease;
mod limiter;
mod plan;
mod policy;
mod refusals;
mod resolvers;
mod routes;
mod substitution;
// RULES (the cross-field rules' names) is read by a test only.
#[cfg_attr(not(test), allow(dead_code))]
mod schema;
#[cfg(test)]
mod vectors;
mod walker;

pub use configuration::{
    Config, ConfigError, Deny, DenyBody, FailMode, HeaderMode, LegacyReset, Mode, Route, RouteDeny,
};
pub use connection::{pipelined_connection, PipelinedConnection};
pub use decide::RedisTarget;
pub use durations::{parse_duration, parse_rate};
pub use hook::{CheckReport, DecisionEvent, DecisionHook, Outcome};
pub use identity::{Attributes, Source};
pub use keys::{hashed, policy_keys, PolicyKeys};
pub use layer::{PeerAddr, RateLimit, RateLimitLayer, RequestBody};
pub use lease::ResponseBody;
pub use librl_client::{Decision, RetryAfter};
pub use limiter::{AuthUser, BuildError, Builder, RateLimiter};
pub use policy::{Algorithm, Cost, Count, KeyKind, Policy};
pub use resolvers::{
    CostResolver, LimitResolver, ModeResolver, RequestMode, RequestParts, ResolvedLimit,
};
