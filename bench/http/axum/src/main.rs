//! make bench-http's axum app (bench/README.md, "make bench-http"): the
//! routes /open and /half served one of four ways, by the first argument:
//!
//! - `none`: no limiter;
//! - `librl`: librl-tower's layer on the policies file (LIBRL_POLICIES);
//! - `peer`: the same check as a Lua script through redis-rs (axum has no
//!   Redis-backed limiter to pick: tower-governor keeps its state in the
//!   process), the fixed window of `bench/lua/fixed_window.lua` in the
//!   style of application-kit, with the same headers as librl's;
//! - `floor`: a bare handler sending the same RL.ALL through the same
//!   client path as librl-tower's: the `PipelinedConnection` made by
//!   `librl_tower::pipelined_connection` (the checks of one scheduler turn
//!   in one write, the reply read straight into an `AllDecision`).
//!
//! Env: PORT, REDIS_URL. The limits are the policies file's: /open
//! 1,000,000,000 a minute per client address (never refuses), /half 1 per
//! 10 s per X-Client header.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use librl_tower::PipelinedConnection;
use librl_tower::{Config, RateLimiter};
use redis::aio::ConnectionManager;

/// One route's limit: its name in keys and headers, the limit and the window.
struct Limit {
    name: &'static str,
    limit: u64,
    window_s: u64,
}

const OPEN: Limit = Limit {
    name: "open",
    limit: 1_000_000_000,
    window_s: 60,
};
const HALF: Limit = Limit {
    name: "half",
    limit: 1,
    window_s: 10,
};

async fn ok() -> &'static str {
    "ok"
}

fn routes() -> Router<()> {
    Router::new()
        .route("/open", get(ok))
        .route("/half", get(ok))
}

/// The subject of a route's limit: the peer address for /open, the X-Client header for /half.
fn subject(limit: &Limit, req: &Request) -> String {
    if limit.name == "open" {
        let peer = req.extensions().get::<ConnectInfo<SocketAddr>>();
        format!(
            "ip:{}",
            peer.map(|c| c.0.ip().to_string()).unwrap_or_default()
        )
    } else {
        let client = req.headers().get("x-client").and_then(|v| v.to_str().ok());
        format!("header:x-client:{}", client.unwrap_or(""))
    }
}

fn limit_of(req: &Request) -> &'static Limit {
    if req.uri().path() == "/open" {
        &OPEN
    } else {
        &HALF
    }
}

struct Peer {
    redis: ConnectionManager,
    script: redis::Script,
}

/// The Lua fixed window, with librl's headers (both sets) written from its reply.
async fn peer(State(p): State<Arc<Peer>>, req: Request, next: Next) -> Response {
    let limit = limit_of(&req);
    let key = format!("lua:{{{}}}:{}", subject(limit, &req), limit.name);
    let mut conn = p.redis.clone();
    let reply: redis::RedisResult<(i64, i64, i64, i64)> = p
        .script
        .key(&key)
        .arg(limit.limit)
        .arg(limit.window_s)
        .arg(1)
        .invoke_async(&mut conn)
        .await;
    let Ok((over, count, ttl_s, max)) = reply else {
        return next.run(req).await; // fail open, as librl's default
    };
    let remaining = (max - count).max(0);
    let reset = ttl_s.max(0);
    let mut response = if over == 1 {
        let mut r = StatusCode::TOO_MANY_REQUESTS.into_response();
        r.headers_mut()
            .insert("retry-after", HeaderValue::from(reset.max(1)));
        r
    } else {
        next.run(req).await
    };
    let h: &mut HeaderMap = response.headers_mut();
    let policy = format!("\"{}\";q={};w={}", limit.name, limit.limit, limit.window_s);
    let now = format!("\"{}\";r={};t={}", limit.name, remaining, reset);
    h.insert(
        "ratelimit-policy",
        HeaderValue::from_str(&policy).unwrap_or(HeaderValue::from_static("")),
    );
    h.insert(
        "ratelimit",
        HeaderValue::from_str(&now).unwrap_or(HeaderValue::from_static("")),
    );
    h.insert("x-ratelimit-limit", HeaderValue::from(limit.limit));
    h.insert("x-ratelimit-remaining", HeaderValue::from(remaining));
    h.insert("x-ratelimit-reset", HeaderValue::from(reset));
    response
}

/// librl's RL.ALL for this request's key, and nothing else.
async fn floor(State(redis): State<PipelinedConnection>, req: Request, next: Next) -> Response {
    let limit = limit_of(&req);
    let key = format!("rl:{{{}}}:{}", subject(limit, &req), limit.name);
    let max = limit.limit.to_string();
    let window = format!("{}ms", limit.window_s * 1000);
    let reply = redis
        .all(&[b"FIXED", key.as_bytes(), max.as_bytes(), window.as_bytes()])
        .await;
    match reply {
        Ok(decision) if decision.allowed => next.run(req).await,
        Ok(_) => StatusCode::TOO_MANY_REQUESTS.into_response(),
        Err(_) => StatusCode::SERVICE_UNAVAILABLE.into_response(),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let variant = std::env::args().nth(1).unwrap_or_default();
    let url = std::env::var("REDIS_URL")?;
    let app = match variant.as_str() {
        "none" => routes(),
        "librl" => {
            let config = Config::from_file(std::env::var("LIBRL_POLICIES")?)?;
            let limiter = RateLimiter::builder(config).redis_url(url).build()?;
            routes().layer(limiter.config_layer())
        }
        "peer" => {
            let redis = ConnectionManager::new(redis::Client::open(url)?).await?;
            let script = redis::Script::new(include_str!("../../../lua/fixed_window.lua"));
            let state = Arc::new(Peer { redis, script });
            routes().layer(middleware::from_fn_with_state(state, peer))
        }
        "floor" => {
            let redis = librl_tower::pipelined_connection(&redis::Client::open(url)?).await?;
            routes().layer(middleware::from_fn_with_state(redis, floor))
        }
        other => return Err(format!("unknown variant {other:?}: none|librl|peer|floor").into()),
    };
    let listener =
        tokio::net::TcpListener::bind(("127.0.0.1", std::env::var("PORT")?.parse::<u16>()?))
            .await?;
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
