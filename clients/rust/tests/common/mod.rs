//! Real servers for the client's tests: `redis-server` (Debian's 7.0 from
//! PATH, or `REDIS_SERVER`), Redis 8.2, Valkey 8.1 and Valkey 9.1
//! (`REDIS8_SERVER`, `VALKEY8_SERVER`, `VALKEY_SERVER`, or where
//! scripts/servers.env puts them), each loading `LIBRL_MODULE` (default: the
//! release module at the repository's root), on free loopback ports; and a
//! 3-primary cluster of them. The processes and the cluster are
//! librl-test-support's: ready when they answer as themselves, stopped and
//! reaped on drop.
#![allow(dead_code)]

use librl_client::{Command, Fixed};
use librl_test_support as support;
use std::time::{Duration, Instant};

pub use support::{Cluster, Process as Server};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// Redis 7.0
    Redis,
    Redis8,
    Valkey8,
    /// Valkey 9.1
    Valkey,
}

/// The four servers the project supports: every standalone suite runs on
/// each (a server starts in a fraction of a second).
pub const FLAVORS: [Flavor; 4] = [
    Flavor::Redis,
    Flavor::Redis8,
    Flavor::Valkey8,
    Flavor::Valkey,
];

/// The oldest and newest, for the cluster suites (three servers each).
pub const CLUSTER_FLAVORS: [Flavor; 2] = [Flavor::Redis, Flavor::Valkey];

fn builder<'p>(flavor: Flavor) -> support::Builder<'p> {
    let var = match flavor {
        Flavor::Redis => "REDIS_SERVER",
        Flavor::Redis8 => "REDIS8_SERVER",
        Flavor::Valkey8 => "VALKEY8_SERVER",
        Flavor::Valkey => "VALKEY_SERVER",
    };
    support::Builder::new(format!("{flavor:?}"), support::server_binary(var))
        .dir_prefix("librl-client-test")
}

/// A server of `flavor` with the module loaded.
pub fn server(flavor: Flavor) -> Server {
    builder(flavor).start()
}

/// Three primaries of `flavor` splitting the 16384 slots, the module on
/// each.
pub fn cluster(flavor: Flavor) -> Cluster {
    Cluster::start(|| builder(flavor).args(&["--cluster-node-timeout", "5000"]))
}

/// What the tests ask of a server beyond the guard: connections.
pub trait Connect {
    fn url_resp3(&self) -> String;
    fn conn(&self) -> redis::Connection;
}

impl Connect for Server {
    fn url_resp3(&self) -> String {
        format!("{}?protocol=resp3", self.url())
    }

    fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection())
            .expect("cannot connect")
    }
}

/// Runs `body` against a fresh server of each flavor.
pub fn on_each_server(body: impl Fn(&Server)) {
    for flavor in FLAVORS {
        let server = server(flavor);
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

/// What the tests ask of a cluster beyond its start: connections and
/// per-node statistics.
pub trait ClusterStats {
    fn conns(&self) -> Vec<redis::Connection>;
    fn reset_stats(&self);
    fn stats(&self, name: &str) -> Vec<(u64, u64, u64)>;
}

impl ClusterStats for Cluster {
    fn conns(&self) -> Vec<redis::Connection> {
        self.nodes.iter().map(Server::conn).collect()
    }

    /// `CONFIG RESETSTAT` on every node.
    fn reset_stats(&self) {
        for mut con in self.conns() {
            let () = redis::cmd("CONFIG")
                .arg("RESETSTAT")
                .query(&mut con)
                .unwrap();
        }
    }

    /// Calls of `name`, of `COMMAND GETKEYS` and MOVED errors, per node.
    fn stats(&self, name: &str) -> Vec<(u64, u64, u64)> {
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

/// A server error comes back as one: a limiter call on a plain string is
/// WRONGTYPE (on `con`, a connection to a server or to a cluster).
pub fn assert_server_errors_come_back<C: librl_client::Connection + redis::ConnectionLike>(
    con: &mut C,
) {
    let () = redis::cmd("SET").arg("plain").arg("x").query(con).unwrap();
    let e = Fixed::new("plain", 1, "1h").query(con).unwrap_err();
    assert_eq!(e.code(), Some("WRONGTYPE"), "{e}");
}
