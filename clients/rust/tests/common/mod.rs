//! Real servers for the client's tests: `redis-server` (Debian's 7.0 from
//! PATH, or `REDIS_SERVER`) and `valkey-server` (`VALKEY_SERVER`, or the
//! project's `.deps` copy), each loading `LIBRL_MODULE` (default: the
//! release module at the repository's root), on free loopback ports; and a
//! 3-primary cluster of them. Every process is stopped and reaped on drop.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    Redis,
    Valkey,
}

pub const FLAVORS: [Flavor; 2] = [Flavor::Redis, Flavor::Valkey];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn existing(path: PathBuf, hint: &str) -> PathBuf {
    assert!(path.exists(), "{} is missing: {hint}", path.display());
    path
}

pub fn module_path() -> PathBuf {
    let path = std::env::var_os("LIBRL_MODULE")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/release/librl.so"));
    existing(
        path,
        "run `cargo build --release -p librl` (make test does)",
    )
}

fn binary(flavor: Flavor) -> PathBuf {
    match flavor {
        Flavor::Redis => std::env::var_os("REDIS_SERVER")
            .map_or_else(|| PathBuf::from("redis-server"), PathBuf::from),
        Flavor::Valkey => existing(
            std::env::var_os("VALKEY_SERVER")
                .map_or_else(|| root().join(installed_at("VALKEY_SERVER")), PathBuf::from),
            "run scripts/install-deps.sh (make test does)",
        ),
    }
}

/// Where the install script puts a server: its line in
/// scripts/servers.env, the paths written once for the Makefile and every
/// suite.
fn installed_at(var: &str) -> &'static str {
    include_str!("../../../../scripts/servers.env")
        .lines()
        .find_map(|line| {
            let (name, path) = line.split_once('=')?;
            (name.trim() == var).then(|| path.trim())
        })
        .unwrap_or_default()
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free loopback port")
}

static NEXT_DIR: AtomicUsize = AtomicUsize::new(0);

pub struct Server {
    pub flavor: Flavor,
    pub port: u16,
    /// A cluster node's bus port (not port + 10000, which may not exist).
    pub bus_port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

impl Server {
    pub fn start(flavor: Flavor) -> Server {
        Server::start_with(flavor, &[])
    }

    /// A node for a cluster; its bus gets a free port of its own.
    pub fn start_cluster_node(flavor: Flavor) -> Server {
        Server::start_with(
            flavor,
            &["--cluster-enabled", "yes", "--cluster-node-timeout", "5000"],
        )
    }

    fn start_with(flavor: Flavor, extra: &[&str]) -> Server {
        let dir = std::env::temp_dir().join(format!(
            "librl-client-test-{}-{}",
            std::process::id(),
            NEXT_DIR.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("cannot create a test directory");
        let cluster = extra.contains(&"--cluster-enabled");
        for _ in 0..5 {
            let port = free_port();
            let bus_port = if cluster { free_port() } else { 0 };
            let mut cmd = Command::new(binary(flavor));
            cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(&dir)
                .args(["--logfile", "server.log"])
                .args(extra);
            if cluster {
                cmd.args(["--cluster-port", &bus_port.to_string()]);
            }
            cmd.arg("--loadmodule").arg(module_path());
            let mut child = cmd
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("cannot spawn the server");
            if wait_ready(port, &mut child) {
                return Server {
                    flavor,
                    port,
                    bus_port,
                    dir,
                    child: Some(child),
                };
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!(
            "{flavor:?} did not start; log:\n{}",
            std::fs::read_to_string(dir.join("server.log")).unwrap_or_default()
        );
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn url_resp3(&self) -> String {
        format!("redis://127.0.0.1:{}/?protocol=resp3", self.port)
    }

    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection())
            .expect("cannot connect")
    }

    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn wait_ready(port: u16, child: &mut Child) -> bool {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        if let Ok(mut con) = client.get_connection_with_timeout(Duration::from_millis(200)) {
            if redis::cmd("PING").query::<String>(&mut con).is_ok() {
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("server files kept in {}", self.dir.display());
        }
    }
}

/// Runs `body` against a fresh server of each flavor.
pub fn on_each_server(body: impl Fn(&Server)) {
    for flavor in FLAVORS {
        let server = Server::start(flavor);
        body(&server);
    }
}

pub fn info_field(con: &mut redis::Connection, section: &str, field: &str) -> Option<String> {
    let info: String = redis::cmd("INFO").arg(section).query(con).unwrap();
    // Module commands keep their registered case: cmdstat_RL.FIXED.
    let field = field.to_ascii_lowercase();
    info.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        (name.to_ascii_lowercase() == field).then(|| value.trim().to_string())
    })
}

/// `calls` of a command in `INFO commandstats` (0 when never called).
/// `name` as the server lists it: `rl.fixed`, `command|getkeys`.
pub fn command_calls(con: &mut redis::Connection, name: &str) -> u64 {
    info_field(con, "commandstats", &format!("cmdstat_{name}"))
        .and_then(|v| {
            v.split(',')
                .find_map(|kv| kv.strip_prefix("calls=")?.parse().ok())
        })
        .unwrap_or(0)
}

/// `count` of an error in `INFO errorstats` (0 when never seen).
pub fn error_count(con: &mut redis::Connection, prefix: &str) -> u64 {
    info_field(con, "errorstats", &format!("errorstat_{prefix}"))
        .and_then(|v| v.strip_prefix("count=")?.parse().ok())
        .unwrap_or(0)
}

/// The server's clock in Unix milliseconds.
pub fn server_ms(con: &mut redis::Connection) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(con).unwrap();
    s * 1000 + us / 1000
}

pub fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Three primaries splitting the 16384 slots, the module on each.
pub struct Cluster {
    pub nodes: Vec<Server>,
    pub ids: Vec<String>,
}

impl Cluster {
    pub fn start(flavor: Flavor) -> Cluster {
        let nodes: Vec<Server> = (0..3).map(|_| Server::start_cluster_node(flavor)).collect();
        let mut cons: Vec<redis::Connection> = nodes.iter().map(Server::conn).collect();
        let ids: Vec<String> = cons
            .iter_mut()
            .map(|c| redis::cmd("CLUSTER").arg("MYID").query(c).unwrap())
            .collect();
        let ranges = [(0, 5460), (5461, 10922), (10923, 16383)];
        for (con, (from, to)) in cons.iter_mut().zip(ranges) {
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
        wait_until(
            "cluster_state:ok everywhere",
            Duration::from_secs(30),
            || {
                cons.iter_mut().all(|c| {
                    info_field_cluster(c, "cluster_state").as_deref() == Some("ok")
                        && info_field_cluster(c, "cluster_known_nodes").as_deref() == Some("3")
                        && info_field_cluster(c, "cluster_slots_ok").as_deref() == Some("16384")
                })
            },
        );
        Cluster { nodes, ids }
    }

    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(Server::url).collect()
    }

    /// The index of the node serving `slot`, by the static assignment.
    pub fn owner(&self, slot: u16) -> usize {
        match slot {
            0..=5460 => 0,
            5461..=10922 => 1,
            _ => 2,
        }
    }

    pub fn conns(&self) -> Vec<redis::Connection> {
        self.nodes.iter().map(Server::conn).collect()
    }

    /// `CONFIG RESETSTAT` on every node.
    pub fn reset_stats(&self) {
        for mut con in self.conns() {
            let () = redis::cmd("CONFIG")
                .arg("RESETSTAT")
                .query(&mut con)
                .unwrap();
        }
    }

    /// Total calls of `name` and of MOVED errors, per node.
    pub fn stats(&self, name: &str) -> Vec<(u64, u64, u64)> {
        self.conns()
            .iter_mut()
            .map(|c| {
                (
                    command_calls(c, name),
                    command_calls(c, "command|getkeys"),
                    error_count(c, "MOVED"),
                )
            })
            .collect()
    }
}

fn info_field_cluster(con: &mut redis::Connection, field: &str) -> Option<String> {
    let info: String = redis::cmd("CLUSTER").arg("INFO").query(con).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .map(|v| v.trim().to_string())
}
