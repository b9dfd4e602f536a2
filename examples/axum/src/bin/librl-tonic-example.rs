//! `scripts/serve-example tonic`: the policy-file app of the axum example
//! behind tonic's server (docs/http/rust.md, tonic): `librl-tower`'s layer
//! in `Server::builder().layer(...)`, after an interceptor that gives it
//! the peer (tonic's `TcpConnectInfo`) and the conformance user, over
//! tonic's routes, whose fallback answers every path and method `ok`.
//! HTTP/1.1 is accepted beside HTTP/2, so plain HTTP clients (the
//! black-box runner) reach it as gRPC clients do. Serves the configuration
//! file `LIBRL_POLICIES` on `PORT` (or `LISTEN`) until killed.

use std::process::ExitCode;

use axum::http::HeaderMap;
use librl_axum_example::{
    conformance_answer, conformance_attributes, conformance_user, listen_address,
    policy_file_limiter,
};
use librl_tower::PeerAddr;
use tonic::service::{InterceptorLayer, Routes};
use tonic::transport::server::TcpIncoming;
use tonic::transport::Server;
use tonic::{Request, Status};

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
    let limiter = policy_file_limiter()?;
    let routes = Routes::from(axum::Router::new().fallback(ok));
    let listener = tokio::net::TcpListener::bind(listen_address()).await?;
    eprintln!(
        "librl tonic example: listening on http://{}",
        listener.local_addr()?
    );
    Server::builder()
        .accept_http1(true)
        .layer(InterceptorLayer::new(
            |mut req: Request<()>| -> Result<_, Status> {
                if let Some(peer) = req.remote_addr() {
                    req.extensions_mut().insert(PeerAddr(peer));
                }
                let headers = req.metadata().clone().into_headers();
                if let Some(user) = conformance_user(&headers) {
                    req.extensions_mut().insert(user);
                }
                if let Some(attributes) = conformance_attributes(&headers) {
                    req.extensions_mut().insert(attributes);
                }
                Ok(req)
            },
        ))
        .layer(limiter.config_layer())
        .add_routes(routes)
        .serve_with_incoming(TcpIncoming::from(listener))
        .await?;
    Ok(())
}

async fn ok(headers: HeaderMap) -> (axum::http::StatusCode, &'static str) {
    (conformance_answer(&headers).await, "ok")
}
