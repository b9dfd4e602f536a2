//! The server guard the project's Rust test suites share (the module's
//! tests/, clients/rust's tests, the tower crate's): where the module and
//! the servers are (scripts/servers.env, overridable by environment
//! variables), free loopback ports, fresh working directories, and a
//! server process that is ready only when the process answering on its
//! port is ours, and is stopped (SHUTDOWN, then SIGKILL) and reaped on
//! drop. It speaks the few RESP commands it needs itself, so each suite
//! keeps whichever `redis` crate it tests with.

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
/// scripts/servers.env says the install script puts it; `None` when
/// neither names it (Debian's redis-server: on PATH).
pub fn server_binary(var: &str) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(var) {
        return Some(PathBuf::from(path));
    }
    let relative = SERVERS_ENV.lines().find_map(|line| {
        let (name, path) = line.split_once('=')?;
        (name.trim() == var).then(|| path.trim())
    })?;
    let path = root().join(relative);
    assert!(
        path.exists(),
        "{} is missing: run scripts/install-deps.sh test (make test does), or set {var}",
        path.display()
    );
    Some(path)
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

/// How a server process is started: its binary, directory and arguments,
/// the module's own arguments (`None`: no `--loadmodule`), and whether it
/// is a cluster node, whose bus gets a free port of its own
/// (`--cluster-port`; port + 10000 does not exist above 55535).
pub struct Launch<'a> {
    pub binary: &'a Path,
    pub dir: &'a Path,
    pub args: &'a [String],
    pub module_args: Option<&'a [String]>,
    pub cluster_bus: bool,
}

/// A started server: its port, its bus port (0 when not a cluster node)
/// and its process.
pub struct Started {
    pub port: u16,
    pub bus_port: u16,
    pub child: Child,
}

impl Launch<'_> {
    /// Starts the server, up to five times: first on `ports` when given (a
    /// restart keeps its port and bus port), then on fresh ones (a port
    /// lost to another process since is replaced). None when it never
    /// answered as itself within `ready_within`.
    pub fn start(&self, ports: Option<(u16, u16)>, ready_within: Duration) -> Option<Started> {
        for attempt in 0..5 {
            let (port, bus_port) = match ports {
                Some(ports) if attempt == 0 => ports,
                _ => (free_port(), if self.cluster_bus { free_port() } else { 0 }),
            };
            let mut cmd = Command::new(self.binary);
            cmd.arg("--port")
                .arg(port.to_string())
                .args(["--bind", "127.0.0.1", "--save", ""])
                .arg("--dir")
                .arg(self.dir)
                .args(["--logfile", "server.log"])
                .args(self.args);
            if self.cluster_bus {
                cmd.arg("--cluster-port").arg(bus_port.to_string());
            }
            if let Some(module_args) = self.module_args {
                cmd.arg("--loadmodule").arg(module_path()).args(module_args);
            }
            let mut child = cmd
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot spawn {}: {e}", self.binary.display()));
            if wait_ready(port, &mut child, ready_within) {
                return Some(Started {
                    port,
                    bus_port,
                    child,
                });
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        None
    }
}

/// The slot ranges of a cluster of three primaries.
pub const THREE_PRIMARIES: [(u16, u16); 3] = [(0, 5460), (5461, 10922), (10923, 16383)];

/// Makes one cluster of the nodes `(port, bus_port)`: the first three
/// take [`THREE_PRIMARIES`]' slots, every other node is met; returns each
/// node's id.
pub fn form_cluster(nodes: &[(u16, u16)]) -> Vec<String> {
    let t = Duration::from_secs(10);
    let ids: Vec<String> = nodes
        .iter()
        .map(|&(port, _)| match command(port, &["CLUSTER", "MYID"], t) {
            Ok(Reply::Text(id)) => id,
            other => panic!("CLUSTER MYID on {port}: {other:?}"),
        })
        .collect();
    for (&(port, _), (from, to)) in nodes.iter().zip(THREE_PRIMARIES) {
        let (from, to) = (from.to_string(), to.to_string());
        let reply = command(port, &["CLUSTER", "ADDSLOTSRANGE", &from, &to], t);
        assert!(
            matches!(reply, Ok(Reply::Text(_))),
            "ADDSLOTSRANGE on {port}: {reply:?}"
        );
    }
    let first = nodes[0].0;
    for &(port, bus) in &nodes[1..] {
        let (port, bus) = (port.to_string(), bus.to_string());
        let reply = command(first, &["CLUSTER", "MEET", "127.0.0.1", &port, &bus], t);
        assert!(
            matches!(reply, Ok(Reply::Text(_))),
            "CLUSTER MEET {port}: {reply:?}"
        );
    }
    ids
}
