//! The example binary as `scripts/serve-example axum` runs it: a policy
//! file (conformance/examples/policies.yaml), and the demo routes in code.

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use librl_test_support::{free_port, server_binary, Builder, Process as Redis};

/// Debian's redis-server (or `REDIS_SERVER`) with the module.
fn redis() -> Redis {
    Builder::new("redis-server", server_binary("REDIS_SERVER"))
        .dir_prefix("librl-axum-example-test")
        .start()
}

struct App(Child, String);

impl Drop for App {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(redis: &Redis, policies: Option<&str>) -> App {
    let port = free_port();
    let mut command = Command::new(env!("CARGO_BIN_EXE_librl-axum-example"));
    command
        .env("REDIS_URL", redis.url())
        .env("PORT", port.to_string())
        .env_remove("REDIS_CLUSTER_NODES")
        .env_remove("LISTEN")
        .stdout(Stdio::null());
    match policies {
        Some(path) => command.env("LIBRL_POLICIES", path),
        None => command.env_remove("LIBRL_POLICIES"),
    };
    let mut child = command.spawn().expect("cannot start the example");
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(child.try_wait().unwrap().is_none(), "the example exited");
        assert!(Instant::now() < deadline, "the example did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    App(child, format!("http://127.0.0.1:{port}"))
}

fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

#[tokio::test]
async fn serves_the_sample_policy_file_on_every_path_and_method() {
    let redis = redis();
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../conformance/examples/policies.yaml"
    );
    let app = start(&redis, Some(file));
    let http = http();
    let anything = http
        .delete(format!("{}/any/path", app.1))
        .send()
        .await
        .unwrap();
    assert_eq!(anything.status().as_u16(), 200);
    assert_eq!(
        anything.headers()["ratelimit-policy"],
        "\"ip-second\";q=5;w=1, \"client-minute\";q=30;w=60"
    );
    assert_eq!(anything.text().await.unwrap(), "ok");
    let health = http.get(format!("{}/health", app.1)).send().await.unwrap();
    assert!(
        health.headers().get("ratelimit").is_none(),
        "an exempt route"
    );
    // login-failures counts only failures: a 401 is counted, a 200 refunded.
    let login = |status: &'static str| {
        http.post(format!("{}/login", app.1))
            .header("x-conformance-status", status)
            .send()
    };
    assert_eq!(
        login("200").await.unwrap().headers()["x-ratelimit-remaining"],
        "4"
    );
    let failed = login("401").await.unwrap();
    assert_eq!(failed.status().as_u16(), 401);
    assert_eq!(failed.headers()["x-ratelimit-remaining"], "4");
    assert_eq!(
        login("401").await.unwrap().headers()["x-ratelimit-remaining"],
        "3"
    );
}

#[tokio::test]
async fn the_demo_routes_limit_in_code() {
    let redis = redis();
    let app = start(&redis, None);
    let http = http();
    // The demo keeps the default configuration: a loopback client is
    // limited like any other (exempt_loopback is off), by the per-IP policy
    // and, with a bearer user, the per-user ones.
    let hello = http
        .get(format!("{}/hello", app.1))
        .bearer_auth("alice")
        .send()
        .await
        .unwrap();
    assert_eq!(
        hello.headers()["ratelimit-policy"],
        "\"ip-second\";q=5;w=1, \"user-minute\";q=30;w=60"
    );
    assert_eq!(hello.text().await.unwrap(), "hello, alice\n");
    let batch = |size: &'static str| {
        http.post(format!("{}/batch", app.1))
            .bearer_auth("bob")
            .header("x-batch-size", size)
            .send()
    };
    assert_eq!(batch("100").await.unwrap().status().as_u16(), 200);
    let denied = batch("1").await.unwrap();
    assert_eq!(denied.status().as_u16(), 429);
    assert!(denied
        .text()
        .await
        .unwrap()
        .contains("\"policy\":\"batch-items\""));
    let index = http.get(format!("{}/", app.1)).send().await.unwrap();
    assert!(index.headers().get("ratelimit").is_none());
}

#[test]
fn a_configuration_that_does_not_start_is_named_on_stderr() {
    let dir = std::env::temp_dir().join(format!("librl-axum-example-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.yaml");
    std::fs::write(
        &file,
        "policies:\n  - {name: p, algorithm: fixed, limit: 5, window: 1s, burst: 9}\n",
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_librl-axum-example"))
        .env("LIBRL_POLICIES", &file)
        .env("PORT", free_port().to_string())
        .output()
        .expect("cannot start the example");
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr).trim(),
        "librl: configuration: policies[0].burst: burst is for token policies, not fixed"
    );
}
