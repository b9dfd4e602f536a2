//! The server guard the project's Rust test suites share (the module's
//! tests/, clients/rust's tests, the tower crate's and the axum example's):
//! where the module and the servers are (scripts/servers.env, overridable
//! by environment variables), free loopback ports, fresh working
//! directories; one [`Builder`] for every server a test starts, giving a
//! [`Process`] that is ready only when the process answering on its port
//! is ours, and is stopped (SHUTDOWN, then SIGKILL) and reaped on drop;
//! the 3-primary [`Cluster`] bootstrap, and [`move_slot`], which moves a
//! slot between primaries while a test calls into it (`slots.rs`). It
//! speaks the few RESP commands it needs itself, so each suite keeps
//! whichever `redis` crate it tests with.

mod slots;

pub use slots::{move_slot, slot_owner, wait_for_owner, Moved, Node, SlotMove};

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The repository's root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The server binaries' paths, relative to the root, as the Makefile
/// reads them.
const SERVERS_ENV: &str = include_str!("../../scripts/servers.env");

/// The binary named by `var` (`VALKEY_SERVER`, `REDIS8_SERVER`,
/// `VALKEY8_SERVER`, `REDIS_SERVER`): the variable when set, else where
/// scripts/servers.env says the install script puts it, else (Debian's
/// redis-server, which servers.env does not name) `redis-server` on PATH.
pub fn server_binary(var: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(var) {
        return PathBuf::from(path);
    }
    let relative = SERVERS_ENV.lines().find_map(|line| {
        let (name, path) = line.split_once('=')?;
        (name.trim() == var).then(|| path.trim())
    });
    let Some(relative) = relative else {
        assert_eq!(var, "REDIS_SERVER", "scripts/servers.env names no {var}");
        return PathBuf::from("redis-server");
    };
    let path = root().join(relative);
    assert!(
        path.exists(),
        "{} is missing: run scripts/install-deps.sh test (make test does), or set {var}",
        path.display()
    );
    path
}

/// The module the servers load: `LIBRL_MODULE`, else the release build.
pub fn module_path() -> PathBuf {
    let path = std::env::var_os("LIBRL_MODULE")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/release/librl.so"));
    assert!(
        path.exists(),
        "{} is missing: build it first with cargo build --release (make test does)",
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

/// A new empty directory for one server, named after `prefix`.
pub fn fresh_dir(prefix: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "{prefix}-{}-{}",
        std::process::id(),
        NEXT_DIR.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("cannot create a test directory");
    dir
}

/// A stopped server's directory goes, unless a test is failing: then it
/// stays for its log and data files, and says where.
pub fn clean_up(dir: &Path) {
    if !std::thread::panicking() {
        let _ = std::fs::remove_dir_all(dir);
    } else {
        eprintln!("server files kept in {}", dir.display());
    }
}

/// A reply as far as the guard reads one: a line's text (status, error,
/// integer or bulk string), or an array's elements.
#[derive(Debug, PartialEq, Eq)]
pub enum Reply {
    Text(String),
    Error(String),
    Array(Vec<Reply>),
    Nil,
}

/// Sends one command to the server on `port` and reads its reply;
/// `Err` when it cannot be reached or the connection drops.
pub fn command(port: u16, args: &[&str], timeout: Duration) -> std::io::Result<Reply> {
    let mut stream = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let mut out = format!("*{}\r\n", args.len());
    for a in args {
        out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    stream.write_all(out.as_bytes())?;
    read_reply(&mut BufReader::new(stream))
}

fn read_reply(r: &mut impl BufRead) -> std::io::Result<Reply> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    let line = line.trim_end_matches(['\r', '\n']);
    let (kind, rest) = line.split_at(line.len().min(1));
    let n = || rest.parse::<i64>().unwrap_or(-1);
    Ok(match kind {
        "+" | ":" => Reply::Text(rest.to_string()),
        "-" => Reply::Error(rest.to_string()),
        "$" if n() < 0 => Reply::Nil,
        "$" => {
            let mut buf = vec![0u8; usize::try_from(n()).unwrap_or(0) + 2];
            r.read_exact(&mut buf)?;
            buf.truncate(buf.len() - 2);
            Reply::Text(String::from_utf8_lossy(&buf).into_owned())
        }
        "*" if n() < 0 => Reply::Nil,
        "*" => Reply::Array((0..n()).map(|_| read_reply(r)).collect::<Result<_, _>>()?),
        _ => return Err(std::io::ErrorKind::InvalidData.into()),
    })
}

/// A field of `INFO section` (or `CLUSTER INFO` when `section` is
/// `"cluster-info"`), as the server on `port` reports it.
pub fn info_field(port: u16, section: &str, field: &str) -> Option<String> {
    let args: &[&str] = if section == "cluster-info" {
        &["CLUSTER", "INFO"]
    } else {
        &["INFO", section]
    };
    let Ok(Reply::Text(info)) = command(port, args, Duration::from_secs(5)) else {
        return None;
    };
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .map(|v| v.trim().to_string())
}

/// Waits until the server `child` answers PING on `port` as itself (another
/// test's server can take the port between `free_port` and our bind, and
/// ours then exits); false when it exits or `timeout` passes.
pub fn wait_ready(port: u16, child: &mut Child, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        // PING fails with LOADING while an AOF or RDB is read back.
        let pong = command(port, &["PING"], Duration::from_millis(200));
        if matches!(pong, Ok(Reply::Text(ref s)) if s == "PONG") {
            let pid = info_field(port, "server", "process_id").and_then(|p| p.parse().ok());
            return pid == Some(child.id()) && matches!(child.try_wait(), Ok(None));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Stops `child` (the server on `port`): `SHUTDOWN NOSAVE NOW FORCE`
/// (SIGTERM if the server cannot be told), then SIGKILL if it has not
/// exited within `grace`; reaps it. A normal exit lets valgrind write its
/// leak summary.
pub fn stop(port: u16, child: &mut Child, grace: Duration) {
    if let Ok(None) = child.try_wait() {
        // A server that takes SHUTDOWN closes the connection instead of
        // replying; one that cannot be reached or refuses gets SIGTERM.
        let reply = command(port, &["SHUTDOWN", "NOSAVE", "NOW", "FORCE"], grace);
        let told = matches!(&reply, Err(e) if matches!(
            e.kind(),
            std::io::ErrorKind::UnexpectedEof
                | std::io::ErrorKind::ConnectionReset
                | std::io::ErrorKind::BrokenPipe
        ));
        if !told {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
        }
        let deadline = Instant::now() + grace;
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

/// The redis-rs URL of the server on `port`.
pub fn url(port: u16) -> String {
    format!("redis://127.0.0.1:{port}/")
}

/// Writes files into a server's working directory before it starts.
type Prepare<'p> = Box<dyn FnOnce(&Path) + 'p>;

/// How a server process starts, written once for every suite:
/// `Builder::new(name, binary)`, then any of the options, then
/// [`Builder::start`]. By default the module is loaded with no arguments,
/// the server is ready within 20 s and given 10 s to stop.
pub struct Builder<'p> {
    launch: Launch,
    prepare: Option<Prepare<'p>>,
    dir_prefix: String,
}

/// What starting (and restarting) the process takes.
struct Launch {
    name: String,
    binary: PathBuf,
    args: Vec<String>,
    module_args: Option<Vec<String>>,
    cluster_bus: bool,
    ready_within: Duration,
    grace: Duration,
}

fn owned(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

impl<'p> Builder<'p> {
    /// A server of `binary`, called `name` in failure messages.
    pub fn new(name: impl Into<String>, binary: PathBuf) -> Builder<'p> {
        Builder {
            launch: Launch {
                name: name.into(),
                binary,
                args: Vec::new(),
                module_args: Some(Vec::new()),
                cluster_bus: false,
                ready_within: Duration::from_secs(20),
                grace: Duration::from_secs(10),
            },
            prepare: None,
            dir_prefix: "librl-test".to_string(),
        }
    }

    /// Extra `--option value` arguments for the server.
    pub fn args(mut self, extra: &[&str]) -> Builder<'p> {
        self.launch.args.extend(owned(extra));
        self
    }

    /// The module's own arguments, after its path (`--loadmodule
    /// librl.so mode monitor`).
    pub fn module_args(mut self, args: &[&str]) -> Builder<'p> {
        self.launch.module_args = Some(owned(args));
        self
    }

    /// No `--loadmodule`: the test loads it with `MODULE LOAD` or `MODULE
    /// LOADEX` (which need `--enable-module-command yes` in `args`).
    pub fn without_module(mut self) -> Builder<'p> {
        self.launch.module_args = None;
        self
    }

    /// A cluster node (`--cluster-enabled yes`) whose bus gets a free port
    /// of its own (`--cluster-port`; port + 10000 does not exist above
    /// 55535), in [`Process::bus_port`].
    pub fn cluster_node(mut self) -> Builder<'p> {
        self.launch
            .args
            .extend(owned(&["--cluster-enabled", "yes"]));
        self.launch.cluster_bus = true;
        self
    }

    /// `prepare` writes files (an AOF or RDB to load) into the server's
    /// fresh working directory before it starts.
    pub fn prepared(mut self, prepare: impl FnOnce(&Path) + 'p) -> Builder<'p> {
        self.prepare = Some(Box::new(prepare));
        self
    }

    /// The working directory's name starts with `prefix`.
    pub fn dir_prefix(mut self, prefix: &str) -> Builder<'p> {
        self.dir_prefix = prefix.to_string();
        self
    }

    /// How long the server may take to answer as itself, and to stop.
    pub fn timeouts(mut self, ready_within: Duration, grace: Duration) -> Builder<'p> {
        self.launch.ready_within = ready_within;
        self.launch.grace = grace;
        self
    }

    /// Starts the server in a fresh directory; panics with its log when it
    /// never answers as itself.
    pub fn start(self) -> Process {
        let dir = fresh_dir(&self.dir_prefix);
        if let Some(prepare) = self.prepare {
            prepare(&dir);
        }
        let mut process = Process {
            port: 0,
            bus_port: 0,
            dir,
            child: None,
            launch: self.launch,
        };
        process.boot();
        process
    }
}

/// A started server: stopped (SHUTDOWN, then SIGKILL) and reaped on drop,
/// its directory removed unless a test is failing.
pub struct Process {
    pub port: u16,
    /// A cluster node's bus port (0 otherwise).
    pub bus_port: u16,
    pub dir: PathBuf,
    child: Option<Child>,
    launch: Launch,
}

impl Process {
    /// Starts the process (again, after `kill` or `stop`), up to five
    /// times: first on its old ports when it had them (a restart keeps its
    /// port and bus port, and its directory, so that RDB and AOF files are
    /// found), then on fresh ones (a port lost to another process since is
    /// replaced).
    fn boot(&mut self) {
        let spec = &self.launch;
        for attempt in 0..5 {
            let (port, bus_port) = if attempt == 0 && self.port != 0 {
                (self.port, self.bus_port)
            } else {
                (free_port(), if spec.cluster_bus { free_port() } else { 0 })
            };
            let mut cmd = Command::new(&spec.binary);
            cmd.arg("--port")
                .arg(port.to_string())
                .args(["--bind", "127.0.0.1", "--save", ""])
                .arg("--dir")
                .arg(&self.dir)
                .args(["--logfile", "server.log"])
                .args(&spec.args);
            if spec.cluster_bus {
                cmd.arg("--cluster-port").arg(bus_port.to_string());
            }
            if let Some(module_args) = &spec.module_args {
                cmd.arg("--loadmodule").arg(module_path()).args(module_args);
            }
            let mut child = cmd
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot spawn {}: {e}", spec.binary.display()));
            if wait_ready(port, &mut child, spec.ready_within) {
                self.port = port;
                self.bus_port = bus_port;
                self.child = Some(child);
                return;
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("{} did not start; log:\n{}", spec.name, self.log());
    }

    pub fn url(&self) -> String {
        url(self.port)
    }

    /// Graceful stop: `SHUTDOWN NOSAVE NOW FORCE` (SIGTERM if the server
    /// cannot be told), then SIGKILL after the grace time. A normal exit
    /// lets valgrind write its leak summary.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            stop(self.port, &mut child, self.launch.grace);
        }
    }

    /// SIGKILL: no shutdown save, no AOF flush beyond what fsync policy did.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Killed and started again on its port, in its directory.
    pub fn restart(&mut self) {
        self.kill();
        self.boot();
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop();
        clean_up(&self.dir);
    }
}

/// The slot ranges of a cluster of three primaries.
pub const THREE_PRIMARIES: [(u16, u16); 3] = [(0, 5460), (5461, 10922), (10923, 16383)];

/// Three primaries splitting the 16384 slots ([`THREE_PRIMARIES`]), each
/// node started from `node()`'s builder (which `Cluster::start` makes a
/// cluster node); returns once every node sees the cluster whole.
pub struct Cluster {
    pub nodes: Vec<Process>,
    /// Each node's `CLUSTER MYID`.
    pub ids: Vec<String>,
}

impl Cluster {
    pub fn start<'p>(node: impl Fn() -> Builder<'p>) -> Cluster {
        let nodes: Vec<Process> = (0..3).map(|_| node().cluster_node().start()).collect();
        let t = Duration::from_secs(10);
        let ids: Vec<String> = nodes
            .iter()
            .map(|n| match command(n.port, &["CLUSTER", "MYID"], t) {
                Ok(Reply::Text(id)) => id,
                other => panic!("CLUSTER MYID on {}: {other:?}", n.port),
            })
            .collect();
        for (i, (n, (from, to))) in nodes.iter().zip(THREE_PRIMARIES).enumerate() {
            // Distinct epochs from the start, as redis-cli --cluster create
            // sets them: no equal epochs left to resolve by gossip while a
            // test moves a slot (a late bump can hand it back).
            let epoch = (i + 1).to_string();
            let reply = command(n.port, &["CLUSTER", "SET-CONFIG-EPOCH", &epoch], t);
            assert!(
                matches!(reply, Ok(Reply::Text(_))),
                "SET-CONFIG-EPOCH on {}: {reply:?}",
                n.port
            );
            let (from, to) = (from.to_string(), to.to_string());
            let reply = command(n.port, &["CLUSTER", "ADDSLOTSRANGE", &from, &to], t);
            assert!(
                matches!(reply, Ok(Reply::Text(_))),
                "ADDSLOTSRANGE on {}: {reply:?}",
                n.port
            );
        }
        for n in &nodes[1..] {
            let (port, bus) = (n.port.to_string(), n.bus_port.to_string());
            let reply = command(
                nodes[0].port,
                &["CLUSTER", "MEET", "127.0.0.1", &port, &bus],
                t,
            );
            assert!(
                matches!(reply, Ok(Reply::Text(_))),
                "CLUSTER MEET {port}: {reply:?}"
            );
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        let whole = |port| {
            let field = |name| info_field(port, "cluster-info", name);
            field("cluster_state").as_deref() == Some("ok")
                && field("cluster_known_nodes").as_deref() == Some("3")
                && field("cluster_slots_ok").as_deref() == Some("16384")
        };
        while !nodes.iter().all(|n| whole(n.port)) {
            assert!(Instant::now() < deadline, "the cluster did not form");
            std::thread::sleep(Duration::from_millis(20));
        }
        Cluster { nodes, ids }
    }

    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(Process::url).collect()
    }

    /// Node `i` as [`move_slot`] addresses it.
    pub fn node(&self, i: usize) -> Node<'_> {
        Node {
            port: self.nodes[i].port,
            id: &self.ids[i],
        }
    }

    /// Moves `slot` from node `from` to node `to` ([`move_slot`]), telling
    /// every node; returns once each names `to` as its owner.
    pub fn move_slot(&self, slot: u16, from: usize, to: usize, how: SlotMove) -> Moved {
        let all: Vec<u16> = self.nodes.iter().map(|n| n.port).collect();
        move_slot(slot, self.node(from), self.node(to), &all, how)
    }

    /// The index of the node serving `slot` (the ranges `start` assigned).
    pub fn owner(&self, slot: u16) -> usize {
        THREE_PRIMARIES
            .iter()
            .position(|&(from, to)| (from..=to).contains(&slot))
            .expect("a slot is below 16384")
    }
}
