//! A demo API with a rate limit on each route. Configured from the
//! environment (see `Config::from_env`), plus `LISTEN` (default
//! `127.0.0.1:3000`).

use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::Request;
use axum::http::header::AUTHORIZATION;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Extension, Router};
use librl_axum_example::{AuthUser, Config, Cost, Policy, RateLimiter, Scope};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .init();
    let config = Config::from_env()?;
    let listen = std::env::var("LISTEN").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let redis = if config.cluster_nodes.is_empty() {
        config.redis_url.clone()
    } else {
        format!("cluster {}", config.cluster_nodes.join(","))
    };
    tracing::info!(
        "redis {redis} (fail-{:?}), trusted proxies {:?}, loopback exempt: {}",
        config.fail_mode,
        config.trusted_proxies,
        config.exempt_loopback
    );
    let app = demo_router(&RateLimiter::new(config)?);
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    tracing::info!("listening on http://{}", listener.local_addr()?);
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await?;
    Ok(())
}

/// - `GET /hello`: 5 per second per IP (aligned), 30 per minute per client.
/// - `POST /upload`: 5 per second per IP, and a per-client byte budget: a
///   bucket of 2 MiB refilled at 1 MiB per minute, charged the body's size.
/// - `POST /batch`: 5 per second per IP, and 100 items per minute per
///   client, charged `X-Batch-Size`.
/// - `GET /`: no limit.
///
/// A client is its `X-Api-Key`, else the user of `Authorization: Bearer
/// <name>`, else its IP. Per-client policies are overridable: `redis-cli
/// RL.OVERRIDE.SET 'rl:{user:alice}:override:client-minute' 1000 1m`.
fn demo_router(limiter: &RateLimiter) -> Router {
    let secs = Duration::from_secs;
    let per_ip = || {
        Policy::fixed("ip-second", 5, secs(1))
            .aligned()
            .scope(Scope::Ip)
    };
    Router::new()
        .route("/", get(index))
        .route(
            "/hello",
            get(hello).route_layer(limiter.layer([
                per_ip(),
                Policy::sliding("client-minute", 30, secs(60)).overridable(),
            ])),
        )
        .route(
            "/upload",
            post(upload).route_layer(
                limiter.layer([
                    per_ip(),
                    Policy::token("upload-bytes", 1 << 20, secs(60))
                        .burst(2 << 20)
                        .cost(Cost::BodyBytes)
                        .overridable(),
                ]),
            ),
        )
        .route(
            "/batch",
            post(batch).route_layer(
                limiter.layer([
                    per_ip(),
                    Policy::fixed("batch-items", 100, secs(60))
                        .cost(Cost::Header("x-batch-size".parse().unwrap()))
                        .overridable(),
                ]),
            ),
        )
        // Outside the route layers, so it runs first and the limiter sees
        // its AuthUser.
        .layer(middleware::from_fn(demo_auth))
}

/// Stands in for a real authentication layer: it believes any bearer
/// name. A real one verifies a token, then inserts the same extension.
async fn demo_auth(mut req: Request, next: Next) -> Response {
    let user = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|name| AuthUser(name.trim().to_string()));
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
