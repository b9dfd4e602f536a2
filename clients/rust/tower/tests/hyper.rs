//! The layer outside axum: a bare hyper 1 server (hyper-util's tokio
//! executor, a `tower_service::Service` stack), the peer address given as
//! `PeerAddr`, against a real redis-server with the module.

mod common;

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use librl_tower::{PeerAddr, Policy, RequestBody};
use tower_layer::Layer;
use tower_service::Service;

#[tokio::test]
async fn limits_a_bare_hyper_service() {
    let redis = common::redis();
    let limiter = common::limiter(&redis).build().unwrap();
    let layer = limiter.layer([Policy::fixed("hyper", 2, Duration::from_secs(60))]);
    let app = layer.layer(tower_service_fn(
        |_req: Request<RequestBody<Incoming>>| async {
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from("ok"))))
        },
    ));

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, peer) = listener.accept().await.unwrap();
            let app = app.clone();
            // What a hyper user writes: the peer recorded, then the stack.
            let service = service_fn(move |mut req: Request<Incoming>| {
                req.extensions_mut().insert(PeerAddr(peer));
                app.clone().call(req)
            });
            tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(stream), service));
        }
    });

    let http = common::http();
    let url = format!("http://{addr}/anything");
    for (status, remaining) in [(200, "1"), (200, "0"), (429, "0")] {
        let response = http.get(&url).send().await.unwrap();
        assert_eq!(response.status().as_u16(), status);
        assert_eq!(response.headers()["x-ratelimit-remaining"], remaining);
        assert_eq!(response.headers()["ratelimit-policy"], "\"hyper\";q=2;w=60");
    }
}

/// A closure as a `tower_service::Service` (tower's `service_fn` without
/// the `tower` crate).
fn tower_service_fn<F>(f: F) -> FnService<F> {
    FnService(f)
}

#[derive(Clone)]
struct FnService<F>(F);

impl<F, Fut, Req, Res, E> Service<Req> for FnService<F>
where
    F: FnMut(Req) -> Fut,
    Fut: std::future::Future<Output = Result<Res, E>>,
{
    type Response = Res;
    type Error = E;
    type Future = Fut;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), E>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Req) -> Fut {
        (self.0)(req)
    }
}
