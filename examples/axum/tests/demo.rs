//! The demo binary, configured from the environment as an operator would.

mod common;

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, http, send, Redis};

struct Demo(Child);

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn the_demo_limits_its_routes_as_configured() {
    let redis = Redis::start();
    let port = free_port();
    let mut demo = Demo(
        Command::new(env!("CARGO_BIN_EXE_librl-axum-example"))
            .env("REDIS_URL", redis.url())
            .env("LISTEN", format!("127.0.0.1:{port}"))
            .env("EXEMPT_LOOPBACK", "false")
            .env("RATE_LIMIT_FAIL_MODE", "closed")
            .stdout(Stdio::null())
            .spawn()
            .expect("cannot start the demo"),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(demo.0.try_wait().unwrap().is_none(), "the demo exited");
        assert!(Instant::now() < deadline, "the demo did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    let base = format!("http://127.0.0.1:{port}");
    let client = http();

    let hello = send(client.get(format!("{base}/hello")).bearer_auth("alice")).await;
    assert_eq!((hello.status, hello.body.as_str()), (200, "hello, alice\n"));
    assert_eq!(
        hello.header("ratelimit-policy"),
        Some("\"ip-second\";q=5;w=1, \"client-minute\";q=30;w=60")
    );

    let batch = |size: &str| {
        client
            .post(format!("{base}/batch"))
            .bearer_auth("bob")
            .header("x-batch-size", size.to_string())
    };
    let full = send(batch("100")).await;
    assert_eq!(full.status, 200, "{full:?}");
    assert_eq!(full.int("x-ratelimit-remaining"), 0);
    let denied = send(batch("1")).await;
    assert_eq!(denied.status, 429);
    assert_eq!(denied.problem()["policy"], "batch-items");

    let index = send(client.get(format!("{base}/"))).await;
    assert_eq!(index.status, 200);
    assert_eq!(index.header("ratelimit"), None);
}
