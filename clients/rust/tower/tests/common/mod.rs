//! What the layer's tests share: a `redis-server` with the module and a
//! 3-primary cluster of them (librl-test-support's guard and bootstrap),
//! the configuration the tests start from, and an axum app served on a
//! free loopback port.
#![allow(dead_code, unused_imports)]

use std::convert::Infallible;
use std::net::SocketAddr;

use axum::Router;
use bytes::Bytes;
use http::header::HOST;
use http::{HeaderMap, HeaderValue, Method, Request, Uri};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper_util::rt::TokioIo;
use librl_test_support as support;
use librl_tower::{Builder, Config, RateLimiter};

pub use support::{free_port, Cluster, Process as Redis};

fn builder<'p>() -> support::Builder<'p> {
    support::Builder::new("redis-server", support::server_binary("REDIS_SERVER"))
        .dir_prefix("librl-tower-test")
}

/// Debian's redis-server (or `REDIS_SERVER`) with the module.
pub fn redis() -> Redis {
    builder().start()
}

/// Three of them splitting the slots.
pub fn cluster() -> Cluster {
    Cluster::start(builder)
}

pub fn conn(redis: &Redis) -> redis::Connection {
    redis::Client::open(redis.url())
        .unwrap()
        .get_connection()
        .expect("cannot connect")
}

/// The default configuration, except that the tests' requests, all from
/// loopback, are limited.
pub fn config() -> Config {
    Config {
        exempt_loopback: false,
        ..Config::default()
    }
}

/// A limiter of [`config`] on `redis`.
pub fn limiter(redis: &Redis) -> Builder {
    RateLimiter::builder(config()).redis_url(redis.url())
}

/// An axum app served (with the peer's address) on a free loopback
/// port, until dropped.
pub struct Served {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    task: tokio::task::JoinHandle<()>,
}

/// Every path answers `ok` behind `limiter`'s configured routes.
pub async fn serve_ok(limiter: &RateLimiter) -> Served {
    serve(
        Router::new()
            .fallback(|| async { "ok" })
            .layer(limiter.config_layer()),
    )
    .await
}

pub async fn serve(app: Router) -> Served {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap();
    });
    Served { base, task }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// An HTTP client that talks to loopback directly, whatever the proxy
/// variables say.
pub fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// One request on a fresh connection to `addr` (`127.0.0.1:PORT`), its
/// request target sent exactly as given (hyper's client sends the URI it
/// is given; a URL parser would remove `.` and `..` segments before they
/// reach the app). `chunked`: the body without Content-Length. The
/// status, headers and body (as text) of the response.
pub async fn send(
    addr: &str,
    method: Method,
    target: Vec<u8>,
    headers: Vec<(String, HeaderValue)>,
    body: Bytes,
    chunked: bool,
) -> Result<(u16, HeaderMap, String), String> {
    let uri = Uri::from_maybe_shared(Bytes::from(target))
        .map_err(|e| format!("the request target is not one HTTP/1.1 can send: {e}"))?;
    let mut request = Request::builder()
        .method(method)
        .uri(uri)
        .header(HOST, addr);
    for (name, value) in headers {
        request = request.header(name.as_str(), value);
    }
    let body: BoxBody<Bytes, Infallible> = if chunked {
        // A stream of unknown length: hyper sends it chunked.
        let frames = futures_util::stream::once(async move { Ok(Frame::data(body)) });
        StreamBody::new(frames).boxed()
    } else {
        Full::new(body).boxed()
    };
    let request = request.body(body).map_err(|e| e.to_string())?;
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("no connection: {e}"))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("no answer: {e}"))?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok((status, headers, String::from_utf8_lossy(&body).into_owned()))
}
