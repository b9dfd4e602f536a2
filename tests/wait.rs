//! WAIT (docs/request-life.md, WAIT): RESERVE, and the server
//! holds the reply until the reserved millisecond, serving other clients
//! meanwhile. Where a client cannot be blocked (MULTI, scripts, functions,
//! replication, AOF replay) WAIT acts as RESERVE. Waiters show in
//! `INFO clients`, keep their reservation when they disconnect, and leave
//! the server healthy on `CLIENT UNBLOCK`, `SHUTDOWN` and `MODULE UNLOAD`.
//!
//! The reserved millisecond is known exactly: on a bucket of one token the
//! next unit's turn is when the bucket is full again, its PEXPIRETIME.

mod common;

use common::*;
use redis::Value;
use std::time::{Duration, Instant};

/// How late a held reply may arrive after its reserved millisecond here.
/// The 2 ms of docs/request-life.md, WAIT, is for an idle server and is measured by `make bench`;
/// these tests run four servers at once, next to other test files, on CI
/// machines of two loaded cores, where a thread may wait its turn for tens
/// of ms. The servers of the timing tests run at `--hz 1`, so a reply held
/// by a blocked-client timeout (checked only at the server's tick) would be
/// up to 1000 ms late and fail this bound, while a module timer is not.
/// (Under valgrind, `LIBRL_SLOW=1`, ten times as much.)
fn lateness_ms() -> i64 {
    if slow() {
        2000
    } else {
        200
    }
}

fn sleep_ms(ms: i64) {
    if ms > 0 {
        std::thread::sleep(Duration::from_millis(ms as u64));
    }
}

fn with<'a>(base: &[&'a str], more: &[&'a str]) -> Vec<&'a str> {
    [base, more].concat()
}

/// What a client holding a WAIT got.
#[derive(Debug)]
struct Held {
    reply: Result<Value, String>,
    /// The server's clock just after the reply (None when the connection
    /// is gone).
    arrived_ms: Option<i64>,
    took: Duration,
}

struct Waiter {
    id: i64,
    handle: std::thread::JoinHandle<Held>,
}

impl Waiter {
    /// Sends `args` on a connection of its own, in a thread of its own.
    fn start(server: &Server, args: &[&str]) -> Waiter {
        let mut con = server.conn();
        con.set_read_timeout(Some(timeout(60, 600))).unwrap();
        let id = cmd_int(&mut con, &["CLIENT", "ID"]);
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let handle = std::thread::spawn(move || {
            let argv: Vec<&str> = args.iter().map(String::as_str).collect();
            let started = Instant::now();
            let reply = cmd(&mut con, &argv);
            let took = started.elapsed();
            let arrived_ms = redis::cmd("TIME")
                .query::<Vec<i64>>(&mut con)
                .ok()
                .map(|t| t[0] * 1000 + t[1] / 1000);
            Held {
                reply,
                arrived_ms,
                took,
            }
        });
        Waiter { id, handle }
    }

    fn join(self) -> Held {
        self.handle.join().expect("the waiter's thread panicked")
    }
}

fn wait_for_blocked(con: &mut redis::Connection, n: i64) {
    wait_until(&format!("{n} blocked client(s)"), || {
        blocked_clients(con) == n
    });
}

/// A reply that must be the six integers `want`.
#[track_caller]
fn six_of(held: &Held) -> [i64; 6] {
    match &held.reply {
        Ok(v) => six(v),
        Err(e) => panic!("the waiter got an error: {e} ({held:?})"),
    }
}

#[track_caller]
fn arrived_in_time(held: &Held, reserved: i64, what: &str) -> i64 {
    let arrived = held.arrived_ms.expect("the waiter's connection is gone");
    assert!(
        arrived >= reserved,
        "{what}: replied at {arrived}, before the reserved {reserved}: {held:?}"
    );
    assert!(
        arrived - reserved <= lateness_ms(),
        "{what}: replied {} ms after the reserved {reserved}: {held:?}",
        arrived - reserved
    );
    arrived - reserved
}

// ---------------------------------------------------------------------------
// The reply at the reserved millisecond
// ---------------------------------------------------------------------------

#[test]
fn wait_replies_at_the_reserved_millisecond() {
    for_each_flavor(|flavor| {
        let server = Server::builder(flavor).args(&["--hz", "1"]).start();
        let mut con = server.conn();
        let con = &mut con;
        // Two a second, a bucket of one: a turn every 500 ms.
        let w = ["RL.TOKEN", "w", "2", "1s", "BURST", "1"];
        let mut lateness = Vec::new();
        for round in 0..4 {
            cmd(con, &["DEL", "w"]).unwrap();
            assert_eq!(limiter(con, &w), [1, 1, 0, 1, 0, 500]);
            // 0, 1 or 2 callers reserved ahead of the waiter.
            for _ in 0..round % 3 {
                assert_eq!(limiter(con, &with(&w, &["RESERVE", "5s"]))[0], 1);
            }
            let reserved = pexpiretime(con, "w");
            let waiter = Waiter::start(&server, &with(&w, &["WAIT", "5s"]));
            wait_for_blocked(con, 1);
            // The reservation is made when the call comes, not when it
            // replies.
            assert_eq!(
                pexpiretime(con, "w"),
                reserved + 500,
                "{flavor:?} round {round}"
            );
            let held = waiter.join();
            // At its turn the bucket is empty again: one token short,
            // full 500 ms later; retry_after 0, the caller may act.
            assert_eq!(
                six_of(&held),
                [1, 1, 0, 1, 0, 500],
                "{flavor:?} round {round}"
            );
            let arrived = held.arrived_ms.expect("the waiter's connection is gone");
            lateness.push((arrived - reserved, held));
        }
        let ms: Vec<i64> = lateness.iter().map(|(l, _)| *l).collect();
        eprintln!("{flavor:?}: WAIT replied {ms:?} ms after the reserved times (--hz 1)");
        for (round, (_, held)) in lateness.iter().enumerate() {
            let reserved = held.arrived_ms.unwrap() - ms[round];
            arrived_in_time(held, reserved, &format!("{flavor:?} round {round}"));
        }
    });
}

#[test]
fn wait_replies_at_once_when_it_need_not_or_may_not_wait() {
    on_each_server(|_, con| {
        // Tokens are there: no wait, the plain reply.
        let started = Instant::now();
        assert_eq!(
            limiter(
                con,
                &["RL.TOKEN", "n", "10", "1s", "BURST", "5", "WAIT", "1s"]
            ),
            [1, 1, 0, 5, 4, 100]
        );
        // The turn is an hour away: denied at once with the wait beyond
        // max_wait, nothing reserved.
        let d = ["RL.TOKEN", "d", "1", "1h", "BURST", "1"];
        assert_eq!(limiter(con, &d)[0], 1);
        let full_at = pexpiretime(con, "d");
        let denied = changes_nothing(con, "a denied WAIT", |con| {
            timed(con, &with(&d, &["WAIT", "1s"]))
        });
        assert_eq!(denied.reply[..2], [0, 1], "{denied:?}");
        denied.retries_at(full_at - 1000, "the wait beyond max_wait");
        // PEEK answers as RESERVE would, at once, and reserves nothing.
        let peek = changes_nothing(con, "WAIT PEEK", |con| {
            timed(con, &with(&d, &["WAIT", "2h", "PEEK"]))
        });
        assert_eq!(peek.reply[..2], [1, 2], "{peek:?}");
        peek.retries_at(full_at, "WAIT PEEK");
        // Mode off: the off reply, at once, nothing written.
        set_mode(con, "off");
        changes_nothing(con, "WAIT in mode off", |con| {
            assert_eq!(limiter(con, &with(&d, &["WAIT", "2h"])), [1, 0, 0, 1, 1, 0]);
        });
        set_mode(con, "on");
        // Monitor: a denial is admitted at once with its retry_after.
        set_mode(con, "monitor");
        let m = changes_nothing(con, "a denied WAIT in monitor", |con| {
            timed(con, &with(&d, &["WAIT", "1s"]))
        });
        assert_eq!(m.reply[..2], [1, 1], "{m:?}");
        m.retries_at(full_at - 1000, "monitor");
        set_mode(con, "on");
        assert!(
            slow() || started.elapsed() < Duration::from_secs(5),
            "a WAIT that should not wait waited: {:?}",
            started.elapsed()
        );
    });
}

#[test]
fn wait_in_monitor_mode_holds_an_admitted_call() {
    for_each_flavor(|flavor| {
        let server = Server::builder(flavor)
            .args(&["--hz", "1"])
            .module_args(&["mode", "monitor"])
            .start();
        let mut con = server.conn();
        let w = ["RL.TOKEN", "mw", "10", "1s", "BURST", "1"];
        assert_eq!(limiter(&mut con, &w)[..2], [1, 1]);
        let reserved = pexpiretime(&mut con, "mw");
        let waiter = Waiter::start(&server, &with(&w, &["WAIT", "1s"]));
        let held = waiter.join();
        assert_eq!(six_of(&held), [1, 1, 0, 1, 0, 100], "{flavor:?}");
        arrived_in_time(&held, reserved, &format!("{flavor:?} monitor"));
    });
}

// ---------------------------------------------------------------------------
// Other clients, INFO clients
// ---------------------------------------------------------------------------

#[test]
fn other_clients_are_served_while_clients_wait() {
    for_each_flavor(|flavor| {
        let server = Server::builder(flavor).args(&["--hz", "1"]).start();
        let mut con = server.conn();
        let con = &mut con;
        // One a second, a bucket of one: turns 1 s apart.
        let o = ["RL.TOKEN", "o", "1", "1s", "BURST", "1"];
        assert_eq!(limiter(con, &o)[0], 1);
        let first_turn = pexpiretime(con, "o");
        let waiters: Vec<Waiter> = (0..3)
            .map(|_| Waiter::start(&server, &with(&o, &["WAIT", "10s"])))
            .collect();
        wait_until("3 waiters", || {
            blocked_clients(con) == 3 || waiters.iter().any(|w| w.handle.is_finished())
        });
        assert_eq!(
            blocked_clients(con),
            3,
            "{flavor:?}: INFO clients blocked_clients"
        );
        // Meanwhile: served at once, the same key included.
        let started = Instant::now();
        alive(con, "while clients wait");
        assert_eq!(limiter(con, &["RL.FIXED", "other", "5", "1h"])[..2], [1, 1]);
        let peek = limiter(con, &with(&o, &["PEEK"]));
        assert_eq!(peek[..2], [0, 4], "{flavor:?}: three reservations ahead");
        let served_in = started.elapsed();
        assert!(
            served_in < Duration::from_millis(lateness_ms() as u64),
            "{flavor:?}: other clients waited {served_in:?}"
        );
        assert!(
            waiters.iter().filter(|w| w.handle.is_finished()).count() < 3,
            "{flavor:?}: the waiters were not waiting meanwhile"
        );
        // Each replies at its turn, 1 s apart, first come first served.
        let mut arrivals: Vec<i64> = waiters
            .into_iter()
            .map(|w| {
                let held = w.join();
                assert_eq!(six_of(&held), [1, 1, 0, 1, 0, 1000], "{flavor:?}");
                held.arrived_ms.unwrap()
            })
            .collect();
        arrivals.sort();
        for (k, arrived) in arrivals.iter().enumerate() {
            let reserved = first_turn + 1000 * k as i64;
            assert!(
                *arrived >= reserved && *arrived - reserved <= lateness_ms(),
                "{flavor:?}: waiter {k} replied at {arrived}, reserved {reserved}"
            );
        }
        wait_for_blocked(con, 0);
    });
}

// ---------------------------------------------------------------------------
// Where a client cannot be blocked, WAIT is RESERVE
// ---------------------------------------------------------------------------

#[test]
fn wait_inside_multi_scripts_and_functions_acts_as_reserve() {
    on_each_server(|server, con| {
        let flavor = server.flavor;
        // One token every 10 s: a real WAIT would hold for seconds.
        const P: i64 = 10_000;
        let m = ["RL.TOKEN", "m", "1", "10s", "BURST", "1"];
        assert_eq!(limiter(con, &m)[0], 1);
        let started = Instant::now();

        // MULTI/EXEC.
        let full_at = pexpiretime(con, "m");
        let before = server_ms(con);
        let (a, b): (Vec<i64>, Vec<i64>) = redis::pipe()
            .atomic()
            .cmd("RL.TOKEN")
            .arg(&with(&m, &["WAIT", "1m"])[1..])
            .cmd("RL.TOKEN")
            .arg(&with(&m, &["WAIT", "1m"])[1..])
            .query(con)
            .unwrap();
        let after = server_ms(con);
        assert_eq!(a[..2], [1, 2], "{flavor:?} MULTI: {a:?}");
        assert_in(
            "MULTI's first wait",
            a[2],
            full_at - after,
            full_at - before,
        );
        assert_eq!(b[..2], [1, 3], "{flavor:?} MULTI: {b:?}");
        assert_in(
            "MULTI's second wait",
            b[2],
            full_at + P - after,
            full_at + P - before,
        );

        // A script.
        let full_at = pexpiretime(con, "m");
        let script = "return redis.call('RL.TOKEN', KEYS[1], 1, '10s', 'BURST', 1, 'WAIT', '1m')";
        let before = server_ms(con);
        let lua: Vec<i64> = redis::cmd("EVAL")
            .arg(script)
            .arg(1)
            .arg("m")
            .query(con)
            .unwrap();
        let after = server_ms(con);
        assert_eq!(lua[..2], [1, 4], "{flavor:?} EVAL: {lua:?}");
        assert_in("EVAL's wait", lua[2], full_at - after, full_at - before);

        // RL.ALL in a script.
        let full_at = pexpiretime(con, "m");
        let script = "return redis.call('RL.ALL', 'FIXED', KEYS[2], 10, '1h', \
                      'TOKEN', KEYS[1], 1, '10s', 'BURST', 1, 'WAIT', '1m')";
        let before = server_ms(con);
        let reply: Value = redis::cmd("EVAL")
            .arg(script)
            .arg(2)
            .arg("m")
            .arg("m:day")
            .query(con)
            .unwrap();
        let after = server_ms(con);
        let (allowed, retry, clauses) = all_parts(&reply);
        assert_eq!(allowed, 1, "{flavor:?} RL.ALL in EVAL: {clauses:?}");
        assert_in(
            "RL.ALL's wait in EVAL",
            retry,
            full_at - after,
            full_at - before,
        );
        assert_eq!(clauses[1][..3], [1, 5, retry]);

        // A function.
        let library = "#!lua name=rlwait\n\
                       redis.register_function('rlwait', function(keys, args) \
                       return redis.call('RL.TOKEN', keys[1], 1, '10s', 'BURST', 1, 'WAIT', '1m') end)";
        cmd(con, &["FUNCTION", "LOAD", "REPLACE", library]).unwrap();
        let full_at = pexpiretime(con, "m");
        let before = server_ms(con);
        let f: Vec<i64> = redis::cmd("FCALL")
            .arg("rlwait")
            .arg(1)
            .arg("m")
            .query(con)
            .unwrap();
        let after = server_ms(con);
        assert_eq!(f[..2], [1, 6], "{flavor:?} FCALL: {f:?}");
        assert_in("FCALL's wait", f[2], full_at - after, full_at - before);

        assert_eq!(blocked_clients(con), 0);
        assert!(
            slow() || started.elapsed() < Duration::from_secs(5),
            "{flavor:?}: WAIT held a call that cannot block ({:?})",
            started.elapsed()
        );
    });
}

// ---------------------------------------------------------------------------
// Disconnection, CLIENT UNBLOCK, SHUTDOWN, MODULE UNLOAD
// ---------------------------------------------------------------------------

#[test]
fn a_disconnected_waiter_keeps_its_reservation() {
    for_each_flavor(|flavor| {
        let server = Server::start(flavor);
        let mut con = server.conn();
        let con = &mut con;
        // Two a second, a bucket of one; two callers reserved ahead.
        let d = ["RL.TOKEN", "dw", "2", "1s", "BURST", "1"];
        assert_eq!(limiter(con, &d)[0], 1);
        for _ in 0..2 {
            assert_eq!(limiter(con, &with(&d, &["RESERVE", "5s"]))[0], 1);
        }
        let its_turn = pexpiretime(con, "dw");
        // A raw connection that sends WAIT and goes away while it waits.
        let mut raw = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        let argv = with(&d, &["WAIT", "5s"]);
        let wait: Vec<&[u8]> = argv.iter().map(|a| a.as_bytes()).collect();
        std::io::Write::write_all(&mut raw, &resp_commands([wait])).unwrap();
        wait_for_blocked(con, 1);
        raw.shutdown(std::net::Shutdown::Both).unwrap();
        drop(raw);
        wait_for_blocked(con, 0);
        // The next caller queues behind the gone waiter's turn.
        let next = timed(con, &with(&d, &["RESERVE", "5s"]));
        assert_eq!(next.reply[..2], [1, 5], "{flavor:?}: {next:?}");
        next.retries_at(its_turn + 500, "behind the disconnected waiter");
        // Its turn comes and goes: the server is fine.
        let now = server_ms(con);
        sleep_ms(its_turn - now + 50);
        alive(con, "after the gone waiter's turn");
        assert_eq!(blocked_clients(con), 0);
        log_is_clean(&server.log(), &format!("{flavor:?}"));
    });
}

#[test]
fn client_unblock_replies_at_once_and_the_server_stays_healthy() {
    for_each_flavor(|flavor| {
        let server = Server::builder(flavor)
            .args(&["--enable-module-command", "yes"])
            .start();
        let mut con = server.conn();
        let con = &mut con;
        // One token a second: the waiters' turns are 1 s and 2 s away.
        let u = ["RL.TOKEN", "cu", "1", "1s", "BURST", "1"];
        assert_eq!(limiter(con, &u)[0], 1);
        let first_turn = pexpiretime(con, "cu");

        let waiter = Waiter::start(&server, &with(&u, &["WAIT", "1m"]));
        wait_for_blocked(con, 1);
        assert_eq!(
            cmd(con, &["CLIENT", "UNBLOCK", &waiter.id.to_string()]),
            Ok(Value::Int(1)),
            "{flavor:?}: CLIENT UNBLOCK did not unblock the waiter"
        );
        let held = waiter.join();
        eprintln!(
            "{flavor:?}: after CLIENT UNBLOCK (timeout form) the waiter got {:?}",
            held.reply
        );
        let arrived = held.arrived_ms.expect("the waiter's connection is gone");
        assert!(
            arrived < first_turn,
            "{flavor:?}: not unblocked before its turn: {held:?}"
        );
        assert!(held.reply.is_ok(), "{flavor:?}: {held:?}");
        wait_for_blocked(con, 0);

        // The unblocked call's reservation stands: the next turn is after it.
        let waiter = Waiter::start(&server, &with(&u, &["WAIT", "1m"]));
        wait_for_blocked(con, 1);
        assert_eq!(pexpiretime(con, "cu"), first_turn + 2000);
        assert_eq!(
            cmd(con, &["CLIENT", "UNBLOCK", &waiter.id.to_string(), "ERROR"]),
            Ok(Value::Int(1)),
            "{flavor:?}: CLIENT UNBLOCK ERROR did not unblock the waiter"
        );
        let held = waiter.join();
        eprintln!(
            "{flavor:?}: after CLIENT UNBLOCK ERROR the waiter got {:?}",
            held.reply
        );
        let arrived = held.arrived_ms.expect("the waiter's connection is gone");
        assert!(
            arrived < first_turn + 1000,
            "{flavor:?}: not unblocked before its turn: {held:?}"
        );
        wait_for_blocked(con, 0);

        // Both turns come and go: the server is fine and keeps counting.
        let now = server_ms(con);
        sleep_ms(first_turn + 1000 - now + 50);
        alive(con, "after the unblocked waiters' turns");
        let next = timed(con, &u);
        assert_eq!(next.reply[0], 0, "{flavor:?}: {next:?}");
        next.retries_at(first_turn + 2000, "the reservations stand");
        assert_eq!(blocked_clients(con), 0);
        log_is_clean(&server.log(), &format!("{flavor:?}"));
        // Regression: the timeout form used to keep the module's handle on
        // the unblocked client for ever, so the module could never unload.
        assert_eq!(
            cmd(con, &["MODULE", "UNLOAD", "rl"]),
            Ok(Value::Okay),
            "{flavor:?}: a blocked-client handle outlived its waiter"
        );
    });
}

/// Whether process `pid` has exited (gone, or a zombie not yet reaped by
/// its parent, the test's server guard).
fn exited(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

#[test]
fn shutdown_with_a_waiter_exits_cleanly() {
    for_each_flavor(|flavor| {
        let server = Server::start(flavor);
        let mut con = server.conn();
        let pid = process_id(&mut con);
        // One token every 5 s: the waiter's turn is 5 s away.
        let s = ["RL.TOKEN", "sd", "1", "5s", "BURST", "1"];
        assert_eq!(limiter(&mut con, &s)[0], 1);
        let waiter = Waiter::start(&server, &with(&s, &["WAIT", "1m"]));
        wait_for_blocked(&mut con, 1);
        // And one waiting for a concurrency limiter's slot.
        let c = ["RL.CONCURRENT", "sdc", "1", "1h"];
        assert_eq!(lease(&mut con, &c)[0], 1);
        let slot = Waiter::start(&server, &with(&c, &["WAIT", "1m"]));
        wait_for_blocked(&mut con, 2);
        let shutdown = cmd(&mut con, &["SHUTDOWN", "NOSAVE"]);
        assert!(
            !matches!(&shutdown, Err(e) if e.starts_with("ERR")),
            "{flavor:?}: SHUTDOWN refused: {shutdown:?}"
        );
        wait_until("the server to exit", || exited(pid));
        for held in [waiter.join(), slot.join()] {
            assert!(held.reply.is_err(), "{flavor:?}: {held:?}");
            assert!(
                slow() || held.took < Duration::from_secs(4),
                "{flavor:?}: {held:?}"
            );
        }
        let log = server.log();
        assert!(
            log.contains("ready to exit, bye bye"),
            "{flavor:?}: no clean exit:\n{log}"
        );
        log_is_clean(&log, &format!("{flavor:?}"));
    });
}

#[test]
fn module_unload_while_a_client_waits_leaves_the_server_healthy() {
    for_each_flavor(|flavor| {
        let server = Server::builder(flavor)
            .args(&["--enable-module-command", "yes"])
            .start();
        let mut con = server.conn();
        let con = &mut con;
        let u = ["RL.TOKEN", "mu", "1", "1s", "BURST", "1"];
        assert_eq!(limiter(con, &u)[0], 1);
        let turn = pexpiretime(con, "mu");
        let waiter = Waiter::start(&server, &with(&u, &["WAIT", "1m"]));
        wait_for_blocked(con, 1);
        let unload = cmd(con, &["MODULE", "UNLOAD", "rl"]);
        eprintln!("{flavor:?}: MODULE UNLOAD rl while a client waits: {unload:?}");
        alive(con, "after MODULE UNLOAD");
        let held = waiter.join();
        if unload.is_err() {
            // Refused: the module and the waiter carry on.
            assert!(module_names(con).contains(&"rl".to_string()));
            assert_eq!(six_of(&held), [1, 1, 0, 1, 0, 1000], "{flavor:?}");
            assert!(held.arrived_ms.unwrap() >= turn, "{flavor:?}: {held:?}");
            assert_eq!(limiter(con, &["RL.FIXED", "after", "1", "1h"])[0], 1);
            // Once nobody waits, the module unloads (or refuses) cleanly.
            let later = cmd(con, &["MODULE", "UNLOAD", "rl"]);
            eprintln!("{flavor:?}: MODULE UNLOAD rl with no waiter: {later:?}");
        } else {
            eprintln!("{flavor:?}: the waiter got {:?}", held.reply);
            assert!(!module_names(con).contains(&"rl".to_string()));
        }
        let now = server_ms(con);
        sleep_ms(turn - now + 50);
        alive(con, "after the waiter's turn");
        log_is_clean(&server.log(), &format!("{flavor:?}"));
    });
}

// ---------------------------------------------------------------------------
// Replicas and AOF replay apply the reservation and never block
// ---------------------------------------------------------------------------

#[test]
fn replicas_and_aof_replay_apply_the_reservation_without_blocking() {
    for_each_flavor(|flavor| {
        let (mut primary, replica) = primary_and_replica(flavor, &AOF);
        let (mut p, mut r) = (primary.conn(), replica.conn());
        // One token every 3 s: the waiter waits 3 s.
        let w = ["RL.TOKEN", "rw", "1", "3s", "BURST", "1"];
        assert_eq!(limiter(&mut p, &w)[0], 1);
        let turn = pexpiretime(&mut p, "rw");
        let waiter = Waiter::start(&primary, &with(&w, &["WAIT", "1m"]));
        wait_for_blocked(&mut p, 1);
        // The replica has the reservation while the primary's client still
        // waits, and has not blocked anyone.
        cmd(&mut p, &["SET", "marker", "1", "PX", "3600000"]).unwrap();
        wait_in_sync(&mut p, &mut r);
        assert!(
            !waiter.handle.is_finished(),
            "{flavor:?}: the waiter was not held"
        );
        assert_eq!(
            blocked_clients(&mut r),
            0,
            "{flavor:?}: the replica blocked"
        );
        assert_eq!(
            pexpiretime(&mut r, "rw"),
            turn + 3000,
            "{flavor:?}: replica"
        );
        let held_state = assert_same_dataset(&format!("{flavor:?} replica"), &mut p, &mut r);
        // SIGKILL while the client waits: the AOF replays the reservation
        // without waiting for its turn.
        let started = Instant::now();
        let mut p = crash_and_restart(&mut primary);
        let restart = started.elapsed();
        assert!(
            slow() || restart < Duration::from_millis(2500),
            "{flavor:?}: the restart took {restart:?}: did the replay wait?"
        );
        assert_same_snapshot(
            &snapshot(&mut p),
            &held_state,
            &format!("{flavor:?}: AOF replay"),
        );
        assert_eq!(blocked_clients(&mut p), 0);
        assert!(
            waiter.join().reply.is_err(),
            "{flavor:?}: the waiter's server was killed"
        );
        // The replayed reservation stands: the next turn is after it.
        let next = timed(&mut p, &with(&w, &["RESERVE", "1m"]));
        assert_eq!(next.reply[0], 1, "{flavor:?}: {next:?}");
        next.retries_at(turn + 3000, "after the replayed reservation");
    });
}

// ---------------------------------------------------------------------------
// RL.ALL with a TOKEN WAIT clause
// ---------------------------------------------------------------------------

#[test]
fn all_with_a_wait_clause_holds_until_the_turn_and_counts_the_rest_at_once() {
    for_each_flavor(|flavor| {
        let server = Server::builder(flavor).args(&["--hz", "1"]).start();
        let mut con = server.conn();
        let con = &mut con;
        // Two a second, a bucket of one: the turn is 500 ms away.
        assert_eq!(
            limiter(con, &["RL.TOKEN", "pace", "2", "1s", "BURST", "1"])[0],
            1
        );
        let turn = pexpiretime(con, "pace");
        let call = [
            "FIXED", "day", "100", "1d", "TOKEN", "pace", "2", "1s", "BURST", "1", "WAIT", "1s",
        ];
        let before = server_ms(con);
        let started = Instant::now();
        let (allowed, retry, clauses) = rl_all(con, &call);
        let held = Held {
            reply: Ok(Value::Nil),
            arrived_ms: Some(server_ms(con)),
            took: started.elapsed(),
        };
        assert_eq!((allowed, retry), (1, 0), "{flavor:?}: {clauses:?}");
        assert_eq!(clauses[0][..5], [1, 1, 0, 100, 99], "{flavor:?}");
        assert_eq!(clauses[1], [1, 1, 0, 1, 0, 500], "{flavor:?}");
        arrived_in_time(&held, turn, &format!("{flavor:?} RL.ALL"));
        // The FIXED clause counted when the call came, not when it replied.
        let day_start = pexpiretime(con, "day") - 86_400_000;
        assert!(
            before <= day_start && day_start < turn,
            "{flavor:?}: the FIXED window opened at {day_start} (call at {before}, turn {turn})"
        );
        assert_eq!(pexpiretime(con, "pace"), turn + 500);

        // A WAIT clause beside a RESERVE clause whose turn comes later: the
        // reply is held for the WAIT clause's turn, and what is left of the
        // RESERVE clause's wait is the reply's retry_after (the module's
        // choice, a943477: a WAIT 0 clause beside RESERVE 1d must not hold
        // the call for a day).
        assert_eq!(
            limiter(con, &["RL.TOKEN", "slow", "1", "2s", "BURST", "1"])[0],
            1
        );
        let (pace_turn, slow_turn) = (pexpiretime(con, "pace"), pexpiretime(con, "slow"));
        let started = Instant::now();
        let (allowed, retry, clauses) = rl_all(
            con,
            &[
                "TOKEN", "pace", "2", "1s", "BURST", "1", "WAIT", "1s", "TOKEN", "slow", "1", "2s",
                "BURST", "1", "RESERVE", "1m",
            ],
        );
        let held = Held {
            reply: Ok(Value::Nil),
            arrived_ms: Some(server_ms(con)),
            took: started.elapsed(),
        };
        assert_eq!(allowed, 1, "{flavor:?}: {clauses:?}");
        arrived_in_time(
            &held,
            pace_turn,
            &format!("{flavor:?} RL.ALL WAIT and RESERVE"),
        );
        assert_eq!(retry, slow_turn - pace_turn, "{flavor:?}: {clauses:?}");
        assert_eq!(clauses[0], [1, 1, 0, 1, 0, 500], "{flavor:?}");
        assert_eq!(clauses[1][..3], [1, 2, retry], "{flavor:?}: {clauses:?}");

        // Another clause denies: at once, nothing reserved.
        let started = Instant::now();
        denied_by_a_full_clause(
            con,
            "RL.ALL with WAIT, denied by another clause",
            "full",
            &["TOKEN", "pace", "2", "1s", "BURST", "1", "WAIT", "1s"],
        );
        assert!(started.elapsed() < Duration::from_millis(lateness_ms() as u64));
        // A WAIT clause beyond its max_wait: at once, nothing reserved.
        changes_nothing(con, "RL.ALL with WAIT beyond max_wait", |con| {
            let (allowed, retry, clauses) = rl_all(
                con,
                &[
                    "FIXED", "day", "100", "1d", "TOKEN", "pace", "2", "1s", "BURST", "1", "WAIT",
                    "0",
                ],
            );
            assert_eq!(allowed, 0, "{clauses:?}");
            assert!(retry > 0, "{clauses:?}");
        });
    });
}

// ---------------------------------------------------------------------------
// RL.CONCURRENT: waiting for a free slot
// ---------------------------------------------------------------------------

/// A concurrency limiter's reply to a waiter: seven integers.
#[track_caller]
fn seven_of(held: &Held) -> [i64; 7] {
    match &held.reply {
        Ok(v) => seven(v),
        Err(e) => panic!("the waiter got an error: {e} ({held:?})"),
    }
}

/// `RELEASE id` on `base` (an RL.CONCURRENT call without options),
/// bracketed by the server's clock: its reply and when it was sent.
fn release(con: &mut redis::Connection, base: &[&str], id: i64) -> ([i64; 7], i64) {
    let sent = server_ms(con);
    let id = id.to_string();
    (lease(con, &with(base, &["RELEASE", &id])), sent)
}

/// Four callers waiting on a full key are served one per RELEASE, in the
/// order they came, each at once: not at the server's tick (`--hz 1`).
#[test]
fn concurrent_waiters_are_served_in_arrival_order_at_each_release() {
    for_each_flavor(|flavor| {
        let server = Server::builder(flavor).args(&["--hz", "1"]).start();
        let mut con = server.conn();
        let con = &mut con;
        let k = ["RL.CONCURRENT", "q", "1", "1m"];
        let mut id = lease(con, &k)[6];
        let waiters: Vec<Waiter> = (0..4)
            .map(|n| {
                let w = Waiter::start(&server, &with(&k, &["WAIT", "30s"]));
                wait_for_blocked(con, n + 1);
                w
            })
            .collect();
        let mut late = Vec::new();
        for (n, waiter) in waiters.into_iter().enumerate() {
            let (freed, sent) = release(con, &k, id);
            assert_eq!(freed[..2], [1, 0], "{flavor:?}: {freed:?}");
            let held = waiter.join();
            let r = seven_of(&held);
            assert_eq!(
                r[..6],
                [1, 1, 0, 1, 0, 60_000],
                "{flavor:?} waiter {n}: {r:?}"
            );
            assert!(r[6] > id, "{flavor:?}: {r:?}");
            let arrived = held.arrived_ms.expect("the waiter's connection is gone");
            late.push(arrived - sent);
            assert!(
                arrived - sent <= lateness_ms(),
                "{flavor:?} waiter {n}: served {} ms after the release",
                arrived - sent
            );
            // Only this one: the others still wait, in order.
            assert_eq!(blocked_clients(con), 3 - n as i64, "{flavor:?}");
            id = r[6];
        }
        eprintln!("{flavor:?}: each waiter served {late:?} ms after its RELEASE was sent (--hz 1)");
        let c = counters(con);
        assert_eq!((c["rl_waits"], c["rl_releases"]), (4, 4), "{flavor:?}");
        // The holder, the four releases and the four waiters.
        assert_eq!(c["rl_concurrent_allowed"], 9, "{flavor:?}");
        log_is_clean(&server.log(), &format!("{flavor:?}"));
    });
}

/// Arrival order holds across costs: a waiter that needs three slots is
/// not passed by one that needs one (a WAIT that comes while others wait
/// queues behind them even if its cost would fit); a release serves every
/// waiter that then fits, in order, in one go.
#[test]
fn concurrent_waiters_keep_their_order_whatever_their_cost() {
    for_each_flavor(|flavor| {
        let server = Server::start(flavor);
        let mut con = server.conn();
        let con = &mut con;
        let k = ["RL.CONCURRENT", "m", "3", "1m"];
        let two = lease(con, &with(&k, &["COST", "2"]))[6];
        let one = lease(con, &k)[6];
        let big = Waiter::start(&server, &with(&k, &["COST", "3", "WAIT", "30s"]));
        wait_for_blocked(con, 1);
        let small = Waiter::start(&server, &with(&k, &["WAIT", "30s"]));
        wait_for_blocked(con, 2);
        // One slot free: the first waiter needs three, and the second,
        // which needs one, waits behind it; so does a newcomer.
        assert_eq!(release(con, &k, one).0[..2], [1, 2]);
        let newcomer = Waiter::start(&server, &with(&k, &["WAIT", "30s"]));
        wait_for_blocked(con, 3);
        assert!(!big.handle.is_finished() && !small.handle.is_finished());
        assert_eq!(lease(con, &with(&k, &["COST", "0"]))[..2], [1, 2]);
        // Three free: the first is served and the key is full again.
        assert_eq!(release(con, &k, two).0[..2], [1, 0]);
        let big = seven_of(&big.join());
        assert_eq!(big[..5], [1, 3, 0, 3, 0], "{flavor:?}: {big:?}");
        assert_eq!(blocked_clients(con), 2, "{flavor:?}");
        // Its release serves the two others at once, in order.
        assert_eq!(release(con, &k, big[6]).0[..2], [1, 0]);
        let (small, newcomer) = (seven_of(&small.join()), seven_of(&newcomer.join()));
        assert_eq!((small[1], newcomer[1]), (1, 2), "{flavor:?}");
        assert!(small[6] < newcomer[6], "{flavor:?}: {small:?} {newcomer:?}");
        assert_eq!(blocked_clients(con), 0);
    });
}

/// A waiter is served when the leases it needs end by themselves (a
/// holder that never releases), at the lease's end, by a module timer:
/// not at the server's tick (`--hz 1`); and refused at its deadline,
/// having changed nothing.
#[test]
fn concurrent_waiters_are_served_when_a_lease_ends_and_refused_at_their_deadline() {
    for_each_flavor(|flavor| {
        let server = Server::builder(flavor).args(&["--hz", "1"]).start();
        let mut con = server.conn();
        let con = &mut con;
        let k = ["RL.CONCURRENT", "x", "1", "400ms"];
        let first = lease(con, &k)[6];
        let end = pexpiretime(con, "x");
        let waiter = Waiter::start(&server, &with(&k, &["WAIT", "5s"]));
        let held = waiter.join();
        let r = seven_of(&held);
        assert_eq!(r[..6], [1, 1, 0, 1, 0, 400], "{flavor:?}: {r:?}");
        assert!(r[6] > first);
        let late = arrived_in_time(&held, end, &format!("{flavor:?} a lease's end"));

        // A holder of an hour: the waiter's 300 ms run out.
        let h = ["RL.CONCURRENT", "h", "1", "1h"];
        lease(con, &h);
        // (x's lease ends meanwhile: only h is compared.)
        cmd(con, &["DEL", "x"]).unwrap();
        let before = snapshot(con);
        let sent = server_ms(con);
        let waiter = Waiter::start(&server, &with(&h, &["WAIT", "300ms"]));
        let held = waiter.join();
        let r = seven_of(&held);
        assert_eq!((r[0], r[1], r[6]), (0, 1, 0), "{flavor:?}: {r:?}");
        assert!(r[2] > 3_000_000 && r[2] == r[5], "{flavor:?}: {r:?}");
        let refused = arrived_in_time(&held, sent + 300, &format!("{flavor:?} the deadline"));
        assert_same_snapshot(&snapshot(con), &before, "a refused waiter wrote");
        // In monitor mode the waiter waits as in `on`, and its refusal
        // replies allowed 1, holding no lease.
        set_mode(con, "monitor");
        let held = Waiter::start(&server, &with(&h, &["WAIT", "100ms"])).join();
        let r = seven_of(&held);
        assert_eq!((r[0], r[1], r[6]), (1, 1, 0), "{flavor:?}: {r:?}");
        assert!(
            r[2] > 0 && held.took >= Duration::from_millis(100),
            "{held:?}"
        );
        set_mode(con, "on");
        assert_same_snapshot(&snapshot(con), &before, "a monitored refusal wrote");
        eprintln!(
            "{flavor:?}: served {late} ms after the lease's end, refused {refused} ms after \
             the deadline (--hz 1)"
        );
        let c = counters(con);
        assert_eq!(
            (c["rl_concurrent_allowed"], c["rl_concurrent_denied"]),
            (4, 1),
            "{flavor:?}"
        );
        assert_eq!(c["rl_concurrent_monitor_would_deny"], 1, "{flavor:?}");
        assert_eq!(blocked_clients(con), 0);
    });
}

/// WAIT answers at once where it need not or may not wait: a free slot,
/// `WAIT 0`, a COST above the limit, PEEK, mode off, and where the client
/// cannot be blocked (MULTI, a script).
#[test]
fn concurrent_wait_answers_at_once_when_it_need_not_or_may_not_wait() {
    on_each_server(|server, con| {
        let flavor = server.flavor;
        let k = ["RL.CONCURRENT", "n", "1", "1h"];
        assert_eq!(lease(con, &with(&k, &["WAIT", "10s"]))[..2], [1, 1]);
        let started = Instant::now();
        changes_nothing(con, "refusals that may not wait", |con| {
            for extra in [
                &["WAIT", "0"][..],
                &["WAIT", "10s", "COST", "2"],
                &["WAIT", "10s", "PEEK"],
            ] {
                let r = lease(con, &with(&k, extra));
                assert_eq!((r[0], r[6]), (0, 0), "{flavor:?} {extra:?}: {r:?}");
            }
            let multi: Vec<Vec<i64>> = redis::pipe()
                .atomic()
                .cmd("RL.CONCURRENT")
                .arg(&k[1..])
                .arg("WAIT")
                .arg("10s")
                .query(con)
                .unwrap();
            assert_eq!(multi[0][0], 0, "{flavor:?}: {multi:?}");
            let script = cmd(
                con,
                &[
                    "EVAL",
                    "return redis.call('RL.CONCURRENT', KEYS[1], 1, '1h', 'WAIT', '10s')",
                    "1",
                    "n",
                ],
            );
            assert_eq!(ints(&script.unwrap())[0], 0, "{flavor:?}");
            set_mode(con, "off");
            assert_eq!(
                lease(con, &with(&k, &["WAIT", "10s"])),
                [1, 0, 0, 1, 1, 0, 0]
            );
            set_mode(con, "on");
        });
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{flavor:?}: a call waited"
        );
        assert_eq!(blocked_clients(con), 0);
    });
}

/// A waiter whose client goes away leaves the queue (the next release
/// serves the next waiter, or leaves the slot free); `CLIENT UNBLOCK`
/// answers a waiter at once, refused (`ERROR`: the server's error);
/// `MODULE UNLOAD` is refused while any waits; the server stays healthy and
/// every call is counted once.
#[test]
fn concurrent_waiters_that_leave_or_are_unblocked_leave_the_queue() {
    for_each_flavor(|flavor| {
        let server = Server::builder(flavor)
            .args(&["--enable-module-command", "yes"])
            .start();
        let mut con = server.conn();
        let con = &mut con;
        let k = ["RL.CONCURRENT", "g", "1", "1h"];
        let holder = lease(con, &k)[6];
        // A raw connection that sends WAIT and goes away while it waits.
        let mut raw = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        let argv = with(&k, &["WAIT", "30s"]);
        let wait: Vec<&[u8]> = argv.iter().map(|a| a.as_bytes()).collect();
        std::io::Write::write_all(&mut raw, &resp_commands([wait])).unwrap();
        wait_for_blocked(con, 1);
        let unblocked = Waiter::start(&server, &with(&k, &["WAIT", "30s"]));
        wait_for_blocked(con, 2);
        let errored = Waiter::start(&server, &with(&k, &["WAIT", "30s"]));
        wait_for_blocked(con, 3);
        let served = Waiter::start(&server, &with(&k, &["WAIT", "30s"]));
        wait_for_blocked(con, 4);
        assert!(
            cmd(con, &["MODULE", "UNLOAD", "rl"]).is_err(),
            "{flavor:?}: unloaded while callers wait"
        );
        raw.shutdown(std::net::Shutdown::Both).unwrap();
        drop(raw);
        wait_for_blocked(con, 3);
        assert_eq!(
            cmd(con, &["CLIENT", "UNBLOCK", &unblocked.id.to_string()]),
            Ok(Value::Int(1))
        );
        let r = seven_of(&unblocked.join());
        assert_eq!((r[0], r[1], r[6]), (0, 1, 0), "{flavor:?}: {r:?}");
        assert!(r[2] > 0, "{flavor:?}: {r:?}");
        assert_eq!(
            cmd(
                con,
                &["CLIENT", "UNBLOCK", &errored.id.to_string(), "ERROR"]
            ),
            Ok(Value::Int(1))
        );
        let held = errored.join();
        assert!(
            matches!(&held.reply, Err(e) if e.starts_with("UNBLOCKED")),
            "{flavor:?}: {held:?}"
        );
        wait_for_blocked(con, 1);
        // The one left is served by the release.
        assert_eq!(release(con, &k, holder).0[0], 1);
        assert_eq!(seven_of(&served.join())[..2], [1, 1], "{flavor:?}");
        assert_eq!(blocked_clients(con), 0);
        let c = counters(con);
        assert_eq!(
            c["rl_concurrent_calls"],
            c["rl_concurrent_allowed"] + c["rl_concurrent_denied"],
            "{flavor:?}: {c:?}"
        );
        assert_eq!(
            (c["rl_concurrent_allowed"], c["rl_concurrent_denied"]),
            (3, 3)
        );
        alive(con, "after the waiters left");
        log_is_clean(&server.log(), &format!("{flavor:?}"));
        // No handle outlives its waiter: the module unloads.
        assert_eq!(
            cmd(con, &["MODULE", "UNLOAD", "rl"]),
            Ok(Value::Okay),
            "{flavor:?}"
        );
    });
}

/// Waiters served by a release and by a lease's end: their leases reach
/// the replica and the AOF as calls of their own, with the primary's time;
/// the replica and a restart hold the same leases, and never block.
#[test]
fn concurrent_waiters_leases_are_replicated_and_persisted() {
    for_each_flavor(|flavor| {
        let (mut primary, replica) = primary_and_replica(flavor, &AOF);
        let (mut p, mut r) = (primary.conn(), replica.conn());
        let k = ["RL.CONCURRENT", "rep", "2", "1h"];
        let a = lease(&mut p, &k)[6];
        lease(&mut p, &with(&k, &["COST", "1"]));
        let by_release = Waiter::start(&primary, &with(&k, &["WAIT", "30s"]));
        wait_for_blocked(&mut p, 1);
        release(&mut p, &k, a);
        assert_eq!(seven_of(&by_release.join())[..2], [1, 2]);
        let s = ["RL.CONCURRENT", "rep:short", "1", "200ms"];
        lease(&mut p, &s);
        let by_end = Waiter::start(&primary, &with(&s, &["WAIT", "30s"]));
        assert_eq!(seven_of(&by_end.join())[..2], [1, 1]);
        // Long leases, so that nothing ends while the datasets are compared.
        lease(&mut p, &["RL.CONCURRENT", "rep:short", "5", "1h"]);
        wait_in_sync(&mut p, &mut r);
        assert_eq!(
            blocked_clients(&mut r),
            0,
            "{flavor:?}: the replica blocked"
        );
        let snap = assert_same_dataset(&format!("{flavor:?} replica"), &mut p, &mut r);
        let mut p = crash_and_restart(&mut primary);
        assert_same_snapshot(&snapshot(&mut p), &snap, &format!("{flavor:?}: AOF replay"));
        assert_eq!(blocked_clients(&mut p), 0);
    });
}

/// `INFO rl`'s gauges: `rl_token_waiting` counts RL.TOKEN replies held
/// (a client that disconnected counts until its reserved time, when its
/// timer fires), `rl_concurrent_waiting` the callers queued for a slot,
/// `rl_clients_waiting` both; each goes back to 0 as its waiters leave.
#[test]
fn info_rl_gauges_the_clients_waiting_now() {
    for_each_flavor(|flavor| {
        let server = Server::start(flavor);
        let mut con = server.conn();
        let con = &mut con;
        let gauges = |con: &mut redis::Connection| {
            let c = counters(con);
            (
                c["rl_clients_waiting"],
                c["rl_token_waiting"],
                c["rl_concurrent_waiting"],
            )
        };
        assert_eq!(gauges(con), (0, 0, 0), "{flavor:?}");
        // A bucket of one token a second, empty: a WAIT's turn is 1 s away.
        let t = ["RL.TOKEN", "gt", "1", "1s", "BURST", "1"];
        assert_eq!(limiter(con, &t)[0], 1);
        let token = Waiter::start(&server, &with(&t, &["WAIT", "1m"]));
        wait_for_blocked(con, 1);
        // One slot, held: a WAIT queues for it.
        let c = ["RL.CONCURRENT", "gc", "1", "1m"];
        let id = lease(con, &c)[6];
        let concurrent = Waiter::start(&server, &with(&c, &["WAIT", "1m"]));
        wait_for_blocked(con, 2);
        assert_eq!(gauges(con), (2, 1, 1), "{flavor:?}");

        release(con, &c, id);
        assert_eq!(seven_of(&concurrent.join())[0], 1, "{flavor:?}");
        assert_eq!(gauges(con), (1, 1, 0), "{flavor:?}");
        cmd(con, &["CLIENT", "UNBLOCK", &token.id.to_string()]).unwrap();
        assert!(token.join().reply.is_ok(), "{flavor:?}");
        assert_eq!(gauges(con), (0, 0, 0), "{flavor:?}");

        // A waiter that goes away still holds its turn until it comes.
        let mut raw = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        let argv = with(&t, &["WAIT", "1m"]);
        let wait: Vec<&[u8]> = argv.iter().map(|a| a.as_bytes()).collect();
        std::io::Write::write_all(&mut raw, &resp_commands([wait])).unwrap();
        wait_for_blocked(con, 1);
        drop(raw);
        wait_for_blocked(con, 0);
        assert_eq!(gauges(con), (1, 1, 0), "{flavor:?}");
        let its_turn = pexpiretime(con, "gt") - 1000;
        wait_until("the gone waiter's turn", || gauges(con) == (0, 0, 0));
        assert!(server_ms(con) >= its_turn, "{flavor:?}");
        log_is_clean(&server.log(), &format!("{flavor:?}"));
    });
}
