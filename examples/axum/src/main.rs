//! `scripts/serve-example axum`: serves on `PORT` (default 8080; or
//! `LISTEN`, an address) until killed.
//!
//! - `LIBRL_POLICIES`: a configuration file (YAML or JSON, docs/http.md);
//!   every path and method answers `ok` behind its routes. Without it, the
//!   demo routes with their policies in code (`demo_app`).
//!   On SIGHUP it re-reads the file and reloads (docs/http.md, Reload).
//! - `REDIS_URL` (default `redis://127.0.0.1:6379`) or
//!   `REDIS_CLUSTER_NODES` (comma-separated `host:port`).

use std::net::SocketAddr;
use std::process::ExitCode;

use librl_axum_example::{
    conformance_resolvers, demo_app, env_var, listen_address, policy_file_app, redis_from,
    reload_on_sighup,
};
use librl_tower::{Config, RateLimiter};

/// A configuration that does not start is said in the contract's words on
/// stderr (`librl: configuration: policies[0].burst: ...`), with exit 1.
#[tokio::main]
async fn main() -> ExitCode {
    match serve().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

async fn serve() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .init();
    let redis = redis_from(env_var);
    let policies = env_var("LIBRL_POLICIES");
    let config = match &policies {
        Some(path) => Config::from_file(path)?,
        None => Config::default(),
    };
    let limiter = conformance_resolvers(RateLimiter::builder(config))
        .redis(redis.clone())
        .build()?;
    let app = match &policies {
        Some(path) => {
            reload_on_sighup(limiter.clone(), path.clone())?;
            policy_file_app(&limiter)
        }
        None => demo_app(&limiter),
    };
    let listener = tokio::net::TcpListener::bind(listen_address()).await?;
    tracing::info!(
        "listening on http://{} ({}), redis {redis:?}",
        listener.local_addr()?,
        policies.as_deref().unwrap_or("demo routes")
    );
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
