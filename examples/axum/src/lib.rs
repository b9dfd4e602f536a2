//! Rate limiting for axum with librl: each route's layer checks all its
//! policies in one `RL.ALL` call through `librl-client` (a request refused
//! by one policy is counted by none), and answers with RateLimit headers,
//! or 429 with a problem+json body. While Redis cannot answer, the fail
//! mode decides: let requests through, refuse them, or limit them in the
//! process with the module's own algorithms (`librl-core`).
//!
//! ```no_run
//! use std::time::Duration;
//! use axum::{routing::get, Router};
//! use librl_axum_example::{Config, Policy, RateLimiter, Scope};
//!
//! let limiter = RateLimiter::new(Config::default()).unwrap();
//! let app: Router = Router::new().route(
//!     "/hello",
//!     get(|| async { "hello" }).route_layer(limiter.layer([
//!         Policy::fixed("ip-second", 5, Duration::from_secs(1)).aligned().scope(Scope::Ip),
//!         Policy::sliding("client-minute", 30, Duration::from_secs(60)),
//!     ])),
//! );
//! ```
//! Serve it with `into_make_service_with_connect_info::<SocketAddr>()`: the
//! peer address is how a client without credentials is told apart.

pub mod config;
pub mod core_adapter;
pub mod headers;
pub mod identity;
pub mod limiter;
pub mod local;
pub mod middleware;
pub mod policy;
pub mod problem;

pub use config::{Config, FailMode};
pub use identity::AuthUser;
pub use middleware::{RateLimitLayer, RateLimiter};
pub use policy::{Algorithm, Cost, Policy, Scope};
