//! Real processes for the tests: `redis-server` with the release-built
//! librl on a free loopback port (killed and reaped on drop), and a
//! 3-primary cluster of them.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

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
            "librl-tower-test-{}-{}",
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

    /// The node serving `slot` (the ranges `start` assigned).
    pub fn owner(&self, slot: u16) -> &Redis {
        &self.nodes[match slot {
            0..=5460 => 0,
            5461..=10922 => 1,
            _ => 2,
        }]
    }
}
