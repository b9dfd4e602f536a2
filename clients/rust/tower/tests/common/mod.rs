//! What the layer's tests share: a `redis-server` with the module and a
//! 3-primary cluster of them (librl-test-support's guard and bootstrap),
//! the configuration the tests start from, and an axum app served on a
//! free loopback port.
#![allow(dead_code, unused_imports)]

use std::net::SocketAddr;

use axum::Router;
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
