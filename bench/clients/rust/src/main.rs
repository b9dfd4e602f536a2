//! `client-bench --module PATH --redis-server PATH [--calls N]`: starts a
//! redis-server with librl, then a 3-primary cluster of them, and times
//! RL.FIXED through librl-client against INCR on the same blocking
//! connection (one call at a time, so each is one round trip plus the
//! server's work). Prints one JSON object:
//!
//! ```text
//! {"client":"redis-rs","standalone":{"rl_us":..,"incr_us":..,"rl_commands_per_call":..},
//!  "cluster":{...}}
//! ```
//!
//! `rl_commands_per_call` is the commands the servers processed per
//! RL.FIXED call (1.0 when no call needed a redirect or a COMMAND GETKEYS).
//! The µs figures are medians of calls timed one by one, RL.FIXED and INCR
//! taking turns.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use librl_client::Fixed;
use redis::ConnectionLike;

struct Server {
    port: u16,
    bus_port: u16,
    dir: PathBuf,
    child: Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

fn start(args: &Args, cluster: bool, n: usize) -> Result<Server, String> {
    let port = free_port()?;
    let bus_port = free_port()?;
    let dir = std::env::temp_dir().join(format!("librl-client-bench-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut cmd = Command::new(&args.redis_server);
    cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args([
            "--save",
            "",
            "--appendonly",
            "no",
            "--logfile",
            "server.log",
        ])
        .arg("--dir")
        .arg(&dir);
    if cluster {
        cmd.args([
            "--cluster-enabled",
            "yes",
            "--cluster-port",
            &bus_port.to_string(),
        ]);
    }
    let child = cmd
        .arg("--loadmodule")
        .arg(&args.module)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("{}: {e}", args.redis_server.display()))?;
    let server = Server {
        port,
        bus_port,
        dir,
        child,
    };
    wait_for("the server to answer PING", || {
        connect(&server).is_ok_and(|mut c| redis::cmd("PING").query::<String>(&mut c).is_ok())
    })?;
    Ok(server)
}

fn url(server: &Server) -> String {
    format!("redis://127.0.0.1:{}/", server.port)
}

fn connect(server: &Server) -> redis::RedisResult<redis::Connection> {
    redis::Client::open(url(server))?.get_connection_with_timeout(Duration::from_secs(1))
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        if Instant::now() > deadline {
            return Err(format!("timed out waiting for {what}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

fn start_cluster(args: &Args) -> Result<Vec<Server>, String> {
    let nodes = (1..=3)
        .map(|n| start(args, true, n))
        .collect::<Result<Vec<_>, _>>()?;
    let mut cons = nodes
        .iter()
        .map(connect)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    for (con, (from, to)) in cons
        .iter_mut()
        .zip([(0, 5460), (5461, 10922), (10923, 16383)])
    {
        redis::cmd("CLUSTER")
            .arg("ADDSLOTSRANGE")
            .arg(from)
            .arg(to)
            .query::<()>(con)
            .map_err(|e| e.to_string())?;
    }
    for node in &nodes[1..] {
        redis::cmd("CLUSTER")
            .arg("MEET")
            .arg("127.0.0.1")
            .arg(node.port)
            .arg(node.bus_port)
            .query::<()>(&mut cons[0])
            .map_err(|e| e.to_string())?;
    }
    wait_for("cluster_state:ok", || {
        cons.iter_mut().all(|c| {
            redis::cmd("CLUSTER")
                .arg("INFO")
                .query::<String>(c)
                .is_ok_and(|i| {
                    i.contains("cluster_state:ok") && i.contains("cluster_known_nodes:3")
                })
        })
    })?;
    Ok(nodes)
}

/// Commands all `servers` have processed so far.
fn processed(servers: &[Server]) -> Result<u64, String> {
    let mut total = 0;
    for server in servers {
        let mut con = connect(server).map_err(|e| e.to_string())?;
        let info: String = redis::cmd("INFO")
            .arg("stats")
            .query(&mut con)
            .map_err(|e| e.to_string())?;
        total += info
            .lines()
            .find_map(|l| l.strip_prefix("total_commands_processed:"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .ok_or("no total_commands_processed")?;
    }
    Ok(total)
}

/// Times `calls` calls of `call(i)` (the warm-up).
fn warm_up(calls: u64, mut call: impl FnMut(u64) -> redis::RedisResult<()>) -> Result<(), String> {
    (0..calls).try_for_each(|i| call(i).map_err(|e| e.to_string()))
}

/// The median of `v` in µs.
fn median_us(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v.get(v.len() / 2).map_or(0.0, |d| d.as_secs_f64() * 1e6)
}

/// RL.FIXED through the client and INCR on the same connection, one of
/// each in turn (their order alternating), each call timed alone: the
/// medians hold up on a machine whose load comes and goes. Keys cycle over
/// 1000 names; every call is admitted.
fn measure<C: ConnectionLike + librl_client::Connection>(
    con: &mut C,
    servers: &[Server],
    calls: u64,
) -> Result<String, String> {
    let rl_call = |con: &mut C, i: u64| {
        librl_client::Command::query(
            &Fixed::new(format!("bench:{}", i % 1000), 1 << 50, "1h"),
            con,
        )
        .map(|_| ())
    };
    let incr_call = |con: &mut C, i: u64| {
        redis::cmd("INCR")
            .arg(format!("incr:{}", i % 1000))
            .query::<i64>(con)
            .map(|_| ())
    };
    // Warm up: connections made, slots learnt, keys created.
    warm_up(1000, |i| rl_call(con, i))?;
    warm_up(1000, |i| incr_call(con, i))?;
    let (mut rl, mut incr) = (Vec::new(), Vec::new());
    let before = processed(servers)?;
    for i in 0..calls {
        for first in [i % 2 == 0, i % 2 == 1] {
            let started = Instant::now();
            if first {
                rl_call(con, i).map_err(|e| e.to_string())?;
                rl.push(started.elapsed());
            } else {
                incr_call(con, i).map_err(|e| e.to_string())?;
                incr.push(started.elapsed());
            }
        }
    }
    let after = processed(servers)?;
    // Less the INCR calls, and the one INFO per node that counts itself.
    let rl_commands = (after - before).saturating_sub(calls + servers.len() as u64);
    Ok(format!(
        "{{\"rl_us\":{:.2},\"incr_us\":{:.2},\"rl_commands_per_call\":{:.3}}}",
        median_us(rl),
        median_us(incr),
        rl_commands as f64 / calls as f64
    ))
}

struct Args {
    module: PathBuf,
    redis_server: PathBuf,
    calls: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        module: PathBuf::from("target/release/librl.so"),
        redis_server: PathBuf::from("redis-server"),
        calls: 20_000,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--module" => args.module = PathBuf::from(value),
            "--redis-server" => args.redis_server = PathBuf::from(value),
            "--calls" => {
                args.calls = value
                    .parse()
                    .ok()
                    .filter(|&n| (1..=10_000_000).contains(&n))
                    .ok_or("--calls: an integer from 1 to 10000000")?
            }
            _ => return Err(format!("unknown argument {flag}")),
        }
    }
    Ok(args)
}

fn run() -> Result<String, String> {
    let args = parse_args()?;
    let standalone = {
        let server = start(&args, false, 0)?;
        let mut con = connect(&server).map_err(|e| e.to_string())?;
        measure(&mut con, std::slice::from_ref(&server), args.calls)?
    };
    let cluster = {
        let nodes = start_cluster(&args)?;
        let urls: Vec<String> = nodes.iter().map(url).collect();
        let mut con = redis::cluster::ClusterClient::new(urls)
            .and_then(|c| c.get_connection())
            .map_err(|e| e.to_string())?;
        measure(&mut con, &nodes, args.calls)?
    };
    Ok(format!(
        "{{\"client\":\"redis-rs\",\"standalone\":{standalone},\"cluster\":{cluster}}}"
    ))
}

fn main() {
    match run() {
        Ok(json) => println!("{json}"),
        Err(e) => {
            eprintln!("client-bench: {e}");
            std::process::exit(1);
        }
    }
}
