//! Real processes for the tests: `redis-server` with the freshly built librl
//! on a free loopback port (killed and reaped on drop), and apps served on
//! free ports inside the test's runtime.
#![allow(dead_code)]

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use librl_axum_example::Config;

/// `LIBRL_MODULE`, else the module built at the repository's root.
pub fn module_path() -> PathBuf {
    let path = std::env::var_os("LIBRL_MODULE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/release/librl.so")
        });
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --release` at the repository root (make test does)",
        path.display()
    );
    path
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free loopback port")
}

static NEXT_DIR: AtomicUsize = AtomicUsize::new(0);

pub struct Redis {
    pub port: u16,
    /// A cluster node's bus port (0 otherwise).
    pub bus_port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

impl Redis {
    pub fn start() -> Redis {
        for _ in 0..5 {
            if let Some(redis) = Redis::try_start_on(free_port()) {
                return redis;
            }
        }
        panic!("redis-server did not start");
    }

    /// On a given port, for an app that was pointed at it before.
    pub fn start_on(port: u16) -> Redis {
        Redis::try_start_on(port).expect("redis-server did not start")
    }

    /// A cluster-enabled node, its bus on a free port of its own.
    pub fn start_cluster_node() -> Redis {
        for _ in 0..5 {
            if let Some(redis) = Redis::try_start(free_port(), Some(free_port())) {
                return redis;
            }
        }
        panic!("redis-server did not start");
    }

    fn try_start_on(port: u16) -> Option<Redis> {
        Redis::try_start(port, None)
    }

    fn try_start(port: u16, bus_port: Option<u16>) -> Option<Redis> {
        let dir = std::env::temp_dir().join(format!(
            "librl-axum-test-{}-{}",
            std::process::id(),
            NEXT_DIR.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).expect("cannot create a test directory");
        let mut child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .args(["--logfile", "server.log"])
            .args(bus_port.map_or(Vec::new(), |bus| {
                vec![
                    "--cluster-enabled".to_string(),
                    "yes".to_string(),
                    "--cluster-port".to_string(),
                    bus.to_string(),
                ]
            }))
            .arg("--loadmodule")
            .arg(module_path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot spawn redis-server (is it on PATH?)");
        let redis = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                break;
            }
            if let Ok(mut con) = redis.get_connection_with_timeout(Duration::from_millis(200)) {
                if redis::cmd("PING").query::<String>(&mut con).is_ok() {
                    return Some(Redis {
                        port,
                        bus_port: bus_port.unwrap_or(0),
                        dir,
                        child: Some(child),
                    });
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!(
            "redis-server on {port} did not start; log:\n{}",
            std::fs::read_to_string(dir.join("server.log")).unwrap_or_default()
        );
        let _ = child.kill();
        let _ = child.wait();
        None
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .unwrap()
            .get_connection()
            .expect("cannot connect")
    }

    /// SIGSTOP: the server keeps its connections and answers nothing.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, sig: &str) {
        let pid = self.child.as_ref().expect("not running").id().to_string();
        let status = Command::new("kill").args([sig, &pid]).status().unwrap();
        assert!(status.success(), "kill {sig} {pid} failed");
    }

    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A configuration for tests: loopback is not exempt (every test client is
/// 127.0.0.1), and Redis gets half a second.
pub fn config(redis_url: &str) -> Config {
    Config {
        redis_url: redis_url.to_string(),
        exempt_loopback: false,
        redis_timeout: Duration::from_millis(500),
        ..Config::default()
    }
}

/// Serves `app` on a free loopback port; returns its base URL.
pub async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap();
    });
    format!("http://{addr}")
}

/// What the tests read from a response.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }

    /// The headers' integer value; panics when absent.
    pub fn int(&self, name: &str) -> u64 {
        self.header(name)
            .unwrap_or_else(|| panic!("no {name} in {self:?}"))
            .parse()
            .unwrap()
    }

    /// The body as problem details, after checking the content type.
    pub fn problem(&self) -> serde_json::Value {
        assert_eq!(
            self.header("content-type"),
            Some("application/problem+json"),
            "{self:?}"
        );
        let problem: serde_json::Value = serde_json::from_str(&self.body).unwrap();
        assert_eq!(problem["status"], self.status, "{problem}");
        assert_eq!(problem["type"], "about:blank");
        problem
    }
}

pub async fn send(request: reqwest::RequestBuilder) -> Answer {
    let response = request.send().await.expect("the app did not answer");
    Answer {
        status: response.status().as_u16(),
        headers: response.headers().clone(),
        body: response.text().await.unwrap(),
    }
}

pub fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// Three cluster-enabled `redis-server`s with librl, splitting the slots.
pub struct Cluster {
    pub nodes: Vec<Redis>,
}

impl Cluster {
    pub fn start() -> Cluster {
        let nodes: Vec<Redis> = (0..3).map(|_| Redis::start_cluster_node()).collect();
        let mut cons: Vec<redis::Connection> = nodes.iter().map(Redis::conn).collect();
        for (con, (from, to)) in cons
            .iter_mut()
            .zip([(0, 5460), (5461, 10922), (10923, 16383)])
        {
            let () = redis::cmd("CLUSTER")
                .arg("ADDSLOTSRANGE")
                .arg(from)
                .arg(to)
                .query(con)
                .unwrap();
        }
        for node in &nodes[1..] {
            let () = redis::cmd("CLUSTER")
                .arg("MEET")
                .arg("127.0.0.1")
                .arg(node.port)
                .arg(node.bus_port)
                .query(&mut cons[0])
                .unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while !cons.iter_mut().all(|c| {
            let info: String = redis::cmd("CLUSTER").arg("INFO").query(c).unwrap();
            info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:3")
        }) {
            assert!(Instant::now() < deadline, "the cluster did not form");
            std::thread::sleep(Duration::from_millis(20));
        }
        Cluster { nodes }
    }

    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(Redis::url).collect()
    }

    /// Summed over the nodes: `(calls of name, COMMAND GETKEYS, MOVED)`.
    pub fn stats(&self, name: &str) -> (u64, u64, u64) {
        let mut sum = (0, 0, 0);
        for node in &self.nodes {
            let mut con = node.conn();
            let mut field = |section: &str, field: &str, key: &str| -> u64 {
                let info: String = redis::cmd("INFO").arg(section).query(&mut con).unwrap();
                info.lines()
                    .find_map(|l| {
                        let (name, value) = l.split_once(':')?;
                        (name.eq_ignore_ascii_case(field)).then(|| {
                            value
                                .split(',')
                                .find_map(|kv| kv.strip_prefix(key)?.parse().ok())
                                .unwrap_or(0)
                        })
                    })
                    .unwrap_or(0)
            };
            sum.0 += field("commandstats", &format!("cmdstat_{name}"), "calls=");
            sum.1 += field("commandstats", "cmdstat_command|getkeys", "calls=");
            sum.2 += field("errorstats", "errorstat_MOVED", "count=");
        }
        sum
    }
}
