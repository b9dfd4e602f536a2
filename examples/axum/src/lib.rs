//! A small axum application rate-limited by `librl-tower`, in the two ways
//! an application writes it (docs/http/rust.md):
//!
//! - [`policy_file_app`]: the policies and routes of a configuration file
//!   (docs/http.md, One configuration), one layer over the whole router.
//!   This is what `scripts/serve-example axum` serves: every path and method
//!   answers `ok` (after `X-Conformance-Delay-Ms`, or panicking on
//!   `X-Conformance-Fail: 1`: conformance/README.md).
//! - [`demo_app`]: policies attached per route in code with `route_layer`.
//!
//! The same policy-file app on a bare hyper server and on tonic's server
//! (`src/bin`: `scripts/serve-example hyper`, `scripts/serve-example
//! tonic`) answers with [`conformance_answer`].

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures_util::FutureExt;

use axum::extract::Request;
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Extension, Router};
use librl_tower::{
    Attributes, AuthUser, Builder, Cost, KeyKind, Policy, RateLimiter, RedisTarget, RequestMode,
    RequestParts, ResolvedLimit,
};

/// `REDIS_CLUSTER_NODES` (comma-separated `host:port`), else `REDIS_URL`,
/// else a local server.
pub fn redis_from(var: impl Fn(&str) -> Option<String>) -> RedisTarget {
    let nodes: Vec<String> = var("REDIS_CLUSTER_NODES")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(|n| {
            if n.contains("://") {
                n.to_string()
            } else {
                format!("redis://{n}")
            }
        })
        .collect();
    if nodes.is_empty() {
        RedisTarget::Url(var("REDIS_URL").unwrap_or_else(|| "redis://127.0.0.1:6379".into()))
    } else {
        RedisTarget::Cluster(nodes)
    }
}

/// An environment variable, unset when empty.
pub fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// `LISTEN` (an address), else `127.0.0.1:PORT` (default 8080).
pub fn listen_address() -> String {
    env_var("LISTEN").unwrap_or_else(|| {
        format!(
            "127.0.0.1:{}",
            env_var("PORT").unwrap_or_else(|| "8080".into())
        )
    })
}

/// The limiter of the configuration file `LIBRL_POLICIES` on the Redis
/// of [`redis_from`], reloaded on SIGHUP ([`reload_on_sighup`]), as
/// `scripts/serve-example hyper` and `tonic` serve it.
pub fn policy_file_limiter() -> Result<RateLimiter, Box<dyn std::error::Error>> {
    let path = env_var("LIBRL_POLICIES").ok_or("LIBRL_POLICIES: set it to a configuration file")?;
    let config = librl_tower::Config::from_file(&path)?;
    let limiter = conformance_resolvers(RateLimiter::builder(config))
        .redis(redis_from(env_var))
        .build()?;
    reload_on_sighup(limiter.clone(), path)?;
    Ok(limiter)
}

/// On each SIGHUP, re-reads the configuration file at `path` and reloads
/// the limiter with it (docs/http.md, Reload), printing one line on
/// stderr: `librl: configuration reloaded`, or the start-up error (the
/// configuration in force stays).
pub fn reload_on_sighup(limiter: RateLimiter, path: String) -> std::io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hangups = signal(SignalKind::hangup())?;
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            let reloaded = librl_tower::Config::from_file(&path)
                .map_err(librl_tower::BuildError::from)
                .and_then(|config| limiter.reload(config));
            match reloaded {
                Ok(()) => eprintln!("librl: configuration reloaded"),
                Err(e) => eprintln!("{e}"),
            }
        }
    });
    Ok(())
}

/// The test resolvers every example app registers (conformance/README.md,
/// What the app behind the middleware does), each reading a header:
/// `conformance-cost` (`X-Conformance-Cost`, absent 1), `conformance-limit`
/// (`X-Conformance-Limit: <limit>/<window ms>[/<burst>]`, absent: nothing)
/// and `conformance-mode` (`X-Conformance-Mode`, absent `enforce`).
pub fn conformance_resolvers(builder: Builder) -> Builder {
    fn header<'r>(req: &'r RequestParts<'_>, name: &str) -> Option<&'r str> {
        req.headers.get(name).and_then(|v| v.to_str().ok())
    }
    builder
        .cost_resolver("conformance-cost", |req| {
            match header(req, "x-conformance-cost") {
                None => Some(1),
                // Not a u64 (`-1`, `five`, 2^64): no cost, answered 400.
                Some(text) => text.parse().ok(),
            }
        })
        .limit_resolver("conformance-limit", |req| {
            let text = header(req, "x-conformance-limit")?;
            let numbers: Vec<u64> = text
                .split('/')
                .map(str::parse)
                .collect::<Result<_, _>>()
                .ok()?;
            match numbers[..] {
                [limit, ms] => Some(ResolvedLimit::new(limit, Duration::from_millis(ms))),
                [limit, ms, burst] => {
                    Some(ResolvedLimit::new(limit, Duration::from_millis(ms)).burst(burst))
                }
                _ => None,
            }
        })
        .mode_resolver("conformance-mode", |req| {
            match header(req, "x-conformance-mode") {
                Some("shadow") => RequestMode::Shadow,
                Some("off") => RequestMode::Off,
                _ => RequestMode::Enforce,
            }
        })
}

/// Every path and method answers `ok` (status from `X-Conformance-Status`,
/// user from `X-Conformance-User`, a request attribute from
/// `X-Conformance-Attribute`, after `X-Conformance-Delay-Ms`; a
/// handler that panics on `X-Conformance-Fail: 1`), behind the
/// configuration's routes.
pub fn policy_file_app(limiter: &RateLimiter) -> Router {
    Router::new()
        .fallback(ok)
        .layer(limiter.config_layer())
        // Outside the limiter, so they run first and the limiter sees the
        // user and the attribute.
        .layer(middleware::from_fn(conformance_user_layer))
        .layer(middleware::from_fn(conformance_attribute_layer))
        // Outermost: a panic unwinds through the limiter (which releases the
        // request's leases) and is answered 500, as a panic-catching layer
        // such as tower-http's CatchPanic does.
        .layer(middleware::from_fn(panic_as_500))
}

async fn ok(headers: HeaderMap) -> (StatusCode, &'static str) {
    (conformance_answer(&headers).await, "ok")
}

/// The status the conformance app answers `ok` with: after
/// `X-Conformance-Delay-Ms` (asleep on the runtime), the one in
/// `X-Conformance-Status` (default 200); panics on `X-Conformance-Fail: 1`,
/// as a failing handler of these frameworks does.
pub async fn conformance_answer(headers: &HeaderMap) -> StatusCode {
    let delay = headers
        .get("x-conformance-delay-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(ms) = delay {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    if headers
        .get("x-conformance-fail")
        .is_some_and(|v| v.as_bytes() == b"1")
    {
        panic!("X-Conformance-Fail: the handler fails");
    }
    headers
        .get("x-conformance-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u16>().ok())
        .and_then(|v| StatusCode::from_u16(v).ok())
        .unwrap_or(StatusCode::OK)
}

/// The user of `X-Conformance-User: NAME`, standing in for what an
/// authentication layer verifies.
pub fn conformance_user(headers: &HeaderMap) -> Option<AuthUser> {
    header_user(headers, "x-conformance-user", "")
}

/// The request attribute of `X-Conformance-Attribute: NAME=VALUE` (split
/// at the first `=`; the bytes are UTF-8), standing in for what an
/// application's own layer decides (docs/http.md, Request attributes).
pub fn conformance_attributes(headers: &HeaderMap) -> Option<Attributes> {
    let text = std::str::from_utf8(headers.get("x-conformance-attribute")?.as_bytes()).ok()?;
    let (name, value) = text.split_once('=')?;
    let mut attributes = Attributes::new();
    attributes.insert(name, value);
    Some(attributes)
}

async fn panic_as_500(req: Request, next: Next) -> Response {
    match AssertUnwindSafe(next.run(req)).catch_unwind().await {
        Ok(response) => response,
        Err(_) => {
            let mut response = Response::new(axum::body::Body::from("the handler panicked"));
            *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
            response
        }
    }
}

/// Stands in for an authentication layer: `X-Conformance-User: NAME` is
/// user NAME, put where the limiter looks ([`AuthUser`]).
async fn conformance_user_layer(req: Request, next: Next) -> Response {
    let user = conformance_user(req.headers());
    with_user(req, user, next).await
}

/// Stands in for the application's own layer: `X-Conformance-Attribute:
/// NAME=VALUE` leaves the attribute where the limiter looks
/// ([`Attributes`]).
async fn conformance_attribute_layer(mut req: Request, next: Next) -> Response {
    if let Some(attributes) = conformance_attributes(req.headers()) {
        req.extensions_mut().insert(attributes);
    }
    next.run(req).await
}

/// - `GET /hello`: 5 per second per IP (aligned), 30 per minute per user.
/// - `POST /upload`: 5 per second per IP, and a per-user byte budget: a
///   bucket of 2 MiB refilled at 1 MiB per minute, charged the body's size.
/// - `POST /batch`: 5 per second per IP, and 100 items per minute per
///   user, charged `X-Batch-Size`.
/// - `GET /`: no limit.
///
/// The user is the name in `Authorization: Bearer <name>`, else the API
/// key, else the IP. Per-user policies are overridable: `redis-cli
/// RL.OVERRIDE SET 'rl:{user:alice}:override:user-minute' 1000 1m`.
pub fn demo_app(limiter: &RateLimiter) -> Router {
    let secs = Duration::from_secs;
    let per_ip = || Policy::fixed("ip-second", 5, secs(1)).aligned();
    let per_user = |p: Policy| p.key(KeyKind::User).overridable();
    Router::new()
        .route("/", get(index))
        .route(
            "/hello",
            get(hello).route_layer(limiter.layer([
                per_ip(),
                per_user(Policy::sliding("user-minute", 30, secs(60))),
            ])),
        )
        .route(
            "/upload",
            post(upload).route_layer(
                limiter.layer([
                    per_ip(),
                    per_user(Policy::token("upload-bytes", 1 << 20, secs(60)).burst(2 << 20))
                        .cost(Cost::BodyBytes),
                ]),
            ),
        )
        .route(
            "/batch",
            post(batch).route_layer(
                limiter.layer([
                    per_ip(),
                    per_user(Policy::fixed("batch-items", 100, secs(60)))
                        .cost(Cost::Header("X-Batch-Size".into())),
                ]),
            ),
        )
        .layer(middleware::from_fn(bearer_user))
}

/// Believes any bearer name. A real authentication layer verifies a token,
/// then inserts the same extension.
async fn bearer_user(req: Request, next: Next) -> Response {
    let user = header_user(req.headers(), AUTHORIZATION.as_str(), "Bearer ");
    with_user(req, user, next).await
}

fn header_user(headers: &HeaderMap, name: &str, prefix: &str) -> Option<AuthUser> {
    headers
        .get(name)
        // The name is UTF-8 (to_str would refuse any byte outside ASCII).
        .and_then(|v| std::str::from_utf8(v.as_bytes()).ok())
        .and_then(|v| v.strip_prefix(prefix))
        .map(|name| AuthUser(name.trim().to_string()))
        .filter(|u| !u.0.is_empty())
}

async fn with_user(mut req: Request, user: Option<AuthUser>, next: Next) -> Response {
    if let Some(user) = user {
        req.extensions_mut().insert(user);
    }
    next.run(req).await
}

async fn index() -> &'static str {
    "librl axum demo: GET /hello, POST /upload, POST /batch (X-Batch-Size)\n"
}

async fn hello(user: Option<Extension<AuthUser>>) -> String {
    match user {
        Some(Extension(AuthUser(name))) => format!("hello, {name}\n"),
        None => "hello\n".to_string(),
    }
}

async fn upload(body: axum::body::Bytes) -> String {
    format!("received {} bytes\n", body.len())
}

async fn batch() -> &'static str {
    "batch accepted\n"
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn target(pairs: &[(&str, &str)]) -> RedisTarget {
        let vars: HashMap<&str, &str> = pairs.iter().copied().collect();
        redis_from(|name| vars.get(name).map(|v| v.to_string()))
    }

    #[test]
    fn cluster_nodes_win_over_the_url() {
        assert_eq!(
            target(&[]),
            RedisTarget::Url("redis://127.0.0.1:6379".into())
        );
        assert_eq!(
            target(&[
                ("REDIS_URL", "redis://10.0.0.1:6380"),
                (
                    "REDIS_CLUSTER_NODES",
                    "10.0.0.2:7000, redis://10.0.0.3:7000"
                )
            ]),
            RedisTarget::Cluster(vec![
                "redis://10.0.0.2:7000".into(),
                "redis://10.0.0.3:7000".into()
            ])
        );
    }
}
