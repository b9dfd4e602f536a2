//! Real servers for the client's tests: `redis-server` (Debian's 7.0 from
//! PATH, or `REDIS_SERVER`) and `valkey-server` (`VALKEY_SERVER`, or where
//! scripts/servers.env puts it), each loading `LIBRL_MODULE` (default: the
//! release module at the repository's root), on free loopback ports; and a
//! 3-primary cluster of them. The processes are librl-test-support's
//! guard's: ready when they answer as themselves, stopped and reaped on
//! drop.
#![allow(dead_code)]

use librl_test_support as support;
use std::path::PathBuf;
use std::process::Child;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    Redis,
    Valkey,
}

pub const FLAVORS: [Flavor; 2] = [Flavor::Redis, Flavor::Valkey];

fn binary(flavor: Flavor) -> PathBuf {
    match flavor {
        Flavor::Redis => {
            support::server_binary("REDIS_SERVER").unwrap_or_else(|| PathBuf::from("redis-server"))
        }
        Flavor::Valkey => support::server_binary("VALKEY_SERVER")
            .expect("scripts/servers.env names VALKEY_SERVER"),
    }
}

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
        let dir = support::fresh_dir("librl-client-test");
        let mut args: Vec<String> = ["--appendonly", "no"].map(String::from).to_vec();
        args.extend(extra.iter().map(|s| s.to_string()));
        let launch = support::Launch {
            binary: &binary(flavor),
            dir: &dir,
            args: &args,
            module_args: Some(&[]),
            cluster_bus: extra.contains(&"--cluster-enabled"),
        };
        let Some(started) = launch.start(None, Duration::from_secs(20)) else {
            panic!(
                "{flavor:?} did not start; log:\n{}",
                std::fs::read_to_string(dir.join("server.log")).unwrap_or_default()
            );
        };
        Server {
            flavor,
            port: started.port,
            bus_port: started.bus_port,
            dir,
            child: Some(started.child),
        }
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

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
        support::clean_up(&self.dir);
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
        let ports: Vec<(u16, u16)> = nodes.iter().map(|n| (n.port, n.bus_port)).collect();
        let ids = support::form_cluster(&ports);
        let mut cons: Vec<redis::Connection> = nodes.iter().map(Server::conn).collect();
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
