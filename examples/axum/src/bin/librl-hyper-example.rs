//! `scripts/serve-example hyper`: the policy-file app of the axum example
//! on a bare hyper 1 server, `librl-tower`'s layer over a plain tower
//! service (docs/http/rust.md, hyper): every path and method answers `ok`
//! behind the configuration file `LIBRL_POLICIES`, on `PORT` (or
//! `LISTEN`), until killed. The peer address and the conformance user go
//! in as extensions, as a hyper application gives them; a handler that
//! panics (`X-Conformance-Fail: 1`) takes its connection down unanswered,
//! as a panic in hyper does.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use librl_axum_example::{
    conformance_answer, conformance_attributes, conformance_user, listen_address,
    policy_file_limiter,
};
use librl_tower::{PeerAddr, RequestBody};
use tower_layer::Layer;
use tower_service::Service;

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
    let app = limiter.config_layer().layer(Handler);
    let listener = tokio::net::TcpListener::bind(listen_address()).await?;
    eprintln!(
        "librl hyper example: listening on http://{}",
        listener.local_addr()?
    );
    loop {
        let (stream, peer) = listener.accept().await?;
        let app = app.clone();
        let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
            req.extensions_mut().insert(PeerAddr(peer));
            if let Some(user) = conformance_user(req.headers()) {
                req.extensions_mut().insert(user);
            }
            if let Some(attributes) = conformance_attributes(req.headers()) {
                req.extensions_mut().insert(attributes);
            }
            app.clone().call(req)
        });
        tokio::spawn(async move {
            // A connection's error (the client went away) is its own.
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The handler as a tower service: `ok`, with the status, delay and
/// failure the request's conformance headers ask for.
#[derive(Clone, Copy)]
struct Handler;

type Answering = Pin<Box<dyn Future<Output = Result<Response<Full<Bytes>>, Infallible>> + Send>>;

impl Service<Request<RequestBody<Incoming>>> for Handler {
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = Answering;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<RequestBody<Incoming>>) -> Answering {
        Box::pin(async move {
            let status = conformance_answer(req.headers()).await;
            let mut response = Response::new(Full::new(Bytes::from_static(b"ok")));
            *response.status_mut() = status;
            Ok(response)
        })
    }
}
