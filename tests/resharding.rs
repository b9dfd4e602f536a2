//! Calls into a slot while it moves ([Operations, Redis Cluster]): a
//! populated slot (20,000 limiter keys) moved between two primaries of a
//! real cluster key by key, with `MIGRATE` in batches as `redis-cli
//! --cluster reshard` does, and on Valkey 9 also atomically (`CLUSTER
//! MIGRATESLOTS`), while four callers keep calling into it: a plain
//! limiter, one naming an override that was never set, one naming an
//! override that exists, and an RL.ALL over keys of different ages. A
//! small router over one redis-rs connection per node follows MOVED and
//! ASK, retries TRYAGAIN for up to a second (a package's timeout), and
//! counts every redirection and TRYAGAIN per kind of call; the figures are
//! printed, and afterwards every subject's count is exactly the calls
//! admitted and every moved key is as it was.
//!
//! [Operations, Redis Cluster]: ../docs/operations.md#redis-cluster

mod common;

use common::*;
use librl_test_support as support;
use redis::cluster_routing::get_slot;
use redis::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Every key of the test shares this hash tag: one slot.
const TAG: &str = "hot";
/// Limiter keys filling the slot besides the callers' own.
const FILL: usize = 20_000;
/// Subjects per kind of call, called in turn.
const SUBJECTS: usize = 20;
/// How long one call may keep retrying TRYAGAIN: a package's timeout.
const CALL_TIMEOUT: Duration = Duration::from_secs(1);

fn cluster(flavor: Flavor) -> support::Cluster {
    support::Cluster::start(|| {
        Server::options(flavor).args(&["--cluster-config-file", "nodes.conf"])
    })
}

/// One call as a caller saw it.
struct Outcome {
    started: Instant,
    ended: Instant,
    ok: bool,
}

/// What one kind of call met, over all its calls.
#[derive(Default)]
struct Tally {
    outcomes: Vec<Outcome>,
    /// TRYAGAIN replies (a call that retried met several).
    tryagain: u64,
    ask: u64,
    moved: u64,
    /// Calls that met TRYAGAIN at least once.
    met_tryagain: u64,
    /// Calls that failed with anything but TRYAGAIN.
    other_errors: Vec<String>,
    /// Calls admitted, per subject.
    admitted: [u64; SUBJECTS],
}

/// One connection per node; sends a call to the slot's owner as it last
/// knew it, following MOVED (and remembering it) and ASK (ASKING and the
/// call, together), as cluster clients do.
struct Router {
    conns: HashMap<u16, redis::Connection>,
    owner: u16,
}

impl Router {
    fn new(owner: u16) -> Router {
        Router {
            conns: HashMap::new(),
            owner,
        }
    }

    fn conn(&mut self, port: u16) -> &mut redis::Connection {
        self.conns.entry(port).or_insert_with(|| {
            redis::Client::open(support::url(port))
                .and_then(|c| c.get_connection())
                .expect("cannot connect")
        })
    }

    /// One attempt, redirections followed; an error reply (TRYAGAIN
    /// among them) comes back as `Err`.
    fn send(&mut self, args: &[String], tally: &mut Tally) -> Result<Value, String> {
        let mut asking: Option<u16> = None;
        for _ in 0..5 {
            let port = asking.unwrap_or(self.owner);
            let mut c = redis::cmd(&args[0]);
            c.arg(&args[1..]);
            let reply = if asking.take().is_some() {
                redis::pipe()
                    .cmd("ASKING")
                    .ignore()
                    .add_command(c)
                    .query::<Vec<Value>>(self.conn(port))
                    .map(|mut v| v.remove(0))
            } else {
                c.query::<Value>(self.conn(port))
            };
            let e = match reply {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            let line = error_line(&e);
            // "MOVED 3999 127.0.0.1:6381": the port after the last colon.
            let to = || -> u16 {
                let addr = line.split(' ').nth(2).unwrap_or_default();
                let port = addr.rsplit(':').next().and_then(|p| p.parse().ok());
                port.unwrap_or_else(|| panic!("no address in {line:?}"))
            };
            match e.code() {
                Some("MOVED") => {
                    tally.moved += 1;
                    self.owner = to();
                }
                Some("ASK") => {
                    tally.ask += 1;
                    asking = Some(to());
                }
                Some("TRYAGAIN") => {
                    tally.tryagain += 1;
                    return Err(line);
                }
                _ => return Err(line),
            }
        }
        Err("too many redirections".to_string())
    }

    /// A call as a package makes it: TRYAGAIN retried from the owner
    /// after 2 ms, then twice as long each time up to 50 ms, for at most
    /// `CALL_TIMEOUT`.
    fn call(&mut self, args: &[String], tally: &mut Tally) -> Result<Value, String> {
        let started = Instant::now();
        let mut wait = Duration::from_millis(2);
        let mut met = false;
        let result = loop {
            match self.send(args, tally) {
                Err(e) if e.starts_with("TRYAGAIN") => {
                    met = true;
                    if started.elapsed() + wait > CALL_TIMEOUT {
                        break Err(e);
                    }
                    std::thread::sleep(wait);
                    wait = (wait * 2).min(Duration::from_millis(50));
                }
                other => break other,
            }
        };
        tally.met_tryagain += u64::from(met);
        if let Err(e) = &result {
            if !e.starts_with("TRYAGAIN") {
                tally.other_errors.push(e.clone());
            }
        }
        tally.outcomes.push(Outcome {
            started,
            ended: Instant::now(),
            ok: result.is_ok(),
        });
        result
    }
}

fn words(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// The kinds of call watched, each on its own subjects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// RL.FIXED without OVERRIDE: one key.
    Plain,
    /// RL.FIXED naming an override that was never set.
    UnsetOverride,
    /// RL.FIXED naming an override that exists.
    SetOverride,
    /// RL.ALL over a long-lived key and a short-lived one (absent most of
    /// the time): keys of different ages.
    MixedAges,
}

const KINDS: [Kind; 4] = [
    Kind::Plain,
    Kind::UnsetOverride,
    Kind::SetOverride,
    Kind::MixedAges,
];

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Plain => "plain",
            Kind::UnsetOverride => "unset override",
            Kind::SetOverride => "set override",
            Kind::MixedAges => "RL.ALL mixed ages",
        }
    }

    /// The limiter key whose count the calls make, for subject `j`.
    fn key(self, j: usize) -> String {
        format!("{{{TAG}}}:{:?}:{j}", self)
    }

    fn okey(self, j: usize) -> String {
        format!("{}:o", self.key(j))
    }

    /// A call of this kind for subject `j`; `cost` 0 reads its count.
    fn args(self, j: usize, cost: u64) -> Vec<String> {
        let (key, okey, cost) = (self.key(j), self.okey(j), cost.to_string());
        match self {
            Kind::Plain => words(&["RL.FIXED", &key, "1000000", "1h", "COST", &cost]),
            Kind::UnsetOverride | Kind::SetOverride => words(&[
                "RL.FIXED", &key, "1000000", "1h", "COST", &cost, "OVERRIDE", &okey,
            ]),
            Kind::MixedAges => words(&[
                "RL.ALL",
                "FIXED",
                &key,
                "1000000",
                "1h",
                "COST",
                &cost,
                "FIXED",
                &format!("{key}:short"),
                "1000000",
                "300ms",
            ]),
        }
    }

    /// The count of subject `j`'s long-lived key, from a read.
    fn count(self, reply: &Value) -> i64 {
        match self {
            Kind::MixedAges => all_parts(reply).2[0][1],
            _ => six(reply)[1],
        }
    }
}

/// What one kind met while the slot was half-moved.
#[derive(Debug)]
struct During {
    /// Calls started while the slot was half-moved.
    calls: usize,
    /// Of those, the calls that succeeded before it stopped being.
    ok: usize,
    /// The longest time without a successful call, while half-moved.
    stall: Duration,
}

fn during(tally: &Tally, moved: &support::Moved) -> During {
    let (from, to) = (moved.opened, moved.closed);
    let calls = tally
        .outcomes
        .iter()
        .filter(|o| o.started >= from && o.started < to)
        .count();
    let ok = tally
        .outcomes
        .iter()
        .filter(|o| o.ok && o.started >= from && o.ended < to)
        .count();
    let mut last = from;
    let mut stall = Duration::ZERO;
    for o in tally.outcomes.iter().filter(|o| o.ok && o.ended > from) {
        let end = o.ended.min(to);
        stall = stall.max(end.saturating_duration_since(last));
        last = last.max(end);
    }
    stall = stall.max(to.saturating_duration_since(last));
    During { calls, ok, stall }
}

fn error_stat(port: u16, code: &str) -> u64 {
    support::info_field(port, "errorstats", &format!("errorstat_{code}"))
        .and_then(|v| v.strip_prefix("count=")?.parse().ok())
        .unwrap_or(0)
}

/// Fills the slot with `FILL` limiter keys and each kind's subjects (one
/// call each), and sets the existing overrides.
fn populate(con: &mut redis::Connection) {
    let mut fill = redis::pipe();
    for i in 0..FILL {
        fill.cmd("RL.FIXED")
            .arg(format!("{{{TAG}}}:fill:{i}"))
            .arg(10)
            .arg("1h")
            .ignore();
    }
    fill.query::<()>(con).unwrap();
    for j in 0..SUBJECTS {
        ok(
            con,
            &[
                "RL.OVERRIDE",
                "SET",
                &Kind::SetOverride.okey(j),
                "2000000",
                "1h",
            ],
        );
        for kind in KINDS {
            let args = kind.args(j, 1);
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            cmd(con, &refs).unwrap();
        }
    }
}

/// A few filling keys as they are stored: value and absolute expiry.
fn sample(port: u16) -> Vec<(Vec<u8>, i64)> {
    let mut con = redis::Client::open(support::url(port))
        .unwrap()
        .get_connection()
        .unwrap();
    (0..FILL)
        .step_by(FILL / 8)
        .map(|i| {
            let key = format!("{{{TAG}}}:fill:{i}");
            let dump: Vec<u8> = redis::cmd("DUMP").arg(&key).query(&mut con).unwrap();
            let at: i64 = redis::cmd("PEXPIRETIME").arg(&key).query(&mut con).unwrap();
            (dump, at)
        })
        .collect()
}

/// Moves the test's slot `how` while every kind calls into it; checks
/// what every call met and every count afterwards; returns the figures.
fn run(flavor: Flavor, how: support::SlotMove) {
    let _turn = ClusterTurn::take();
    let cluster = cluster(flavor);
    let slot = get_slot(TAG.as_bytes());
    let source = cluster.owner(slot);
    let target = (source + 1) % 3;
    let (source_port, target_port) = (cluster.nodes[source].port, cluster.nodes[target].port);
    let mut con = redis::Client::open(support::url(source_port))
        .unwrap()
        .get_connection()
        .unwrap();
    populate(&mut con);
    let stored = sample(source_port);
    let keys_before = cmd_int(&mut con, &["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]);
    let moving = AtomicBool::new(true);
    let (tallies, moved) = std::thread::scope(|scope| {
        let callers: Vec<_> = KINDS
            .into_iter()
            .map(|kind| {
                let moving = &moving;
                scope.spawn(move || {
                    let mut router = Router::new(source_port);
                    let mut tally = Tally::default();
                    // Calls before the move, during it, and a round of
                    // every subject after it.
                    let (mut j, mut after) = (0, SUBJECTS);
                    while moving.load(Ordering::SeqCst) || after > 0 {
                        if !moving.load(Ordering::SeqCst) {
                            after -= 1;
                        }
                        let subject = j % SUBJECTS;
                        if router.call(&kind.args(subject, 1), &mut tally).is_ok() {
                            tally.admitted[subject] += 1;
                        }
                        j += 1;
                    }
                    (kind, tally, router)
                })
            })
            .collect();
        // The callers stop even if the move fails.
        struct Stop<'a>(&'a AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::SeqCst);
            }
        }
        let stop = Stop(&moving);
        std::thread::sleep(Duration::from_millis(200));
        let moved = cluster.move_slot(slot, source, target, how);
        drop(stop);
        let tallies: Vec<(Kind, Tally, Router)> =
            callers.into_iter().map(|c| c.join().unwrap()).collect();
        (tallies, moved)
    });
    let ports: Vec<u16> = cluster.nodes.iter().map(|n| n.port).collect();
    let served = |code| ports.iter().map(|&p| error_stat(p, code)).sum::<u64>();
    eprintln!(
        "{flavor:?} {how:?}: {} keys in {} MIGRATE calls; the slot was half-moved for {:?} \
         (moved in {:?}); the servers answered TRYAGAIN {} times, ASK {} times",
        moved.keys,
        moved.batches,
        moved.closed - moved.opened,
        moved.finished - moved.opened,
        served("TRYAGAIN"),
        served("ASK"),
    );
    for (kind, mut tally, mut router) in tallies {
        let d = during(&tally, &moved);
        let slowest = tally
            .outcomes
            .iter()
            .map(|o| o.ended - o.started)
            .max()
            .unwrap_or_default();
        let failed = tally.outcomes.iter().filter(|o| !o.ok).count();
        eprintln!(
            "{flavor:?} {how:?} {:>17}: {} calls, {} failed ({} met TRYAGAIN, {} TRYAGAIN and {} ASK \
             replies, {} MOVED); while half-moved {} calls, {} ok, longest without a success {:?}; \
             slowest call {:?}",
            kind.name(),
            tally.outcomes.len(),
            failed,
            tally.met_tryagain,
            tally.tryagain,
            tally.ask,
            tally.moved,
            d.calls,
            d.ok,
            d.stall,
            slowest,
        );
        let what = format!("{flavor:?} {how:?} {}", kind.name());
        assert!(
            tally.other_errors.is_empty(),
            "{what}: {:?}",
            tally.other_errors
        );
        match (how, kind) {
            (support::SlotMove::Atomic, _) => {
                assert_eq!((failed, tally.tryagain, tally.ask), (0, 0, 0), "{what}");
            }
            (_, Kind::Plain) => assert_eq!((failed, tally.tryagain), (0, 0), "{what}"),
            // The server's rule, as documented: a call naming a key that
            // is absent where it asks cannot run anywhere while the slot
            // is half-moved...
            (_, Kind::UnsetOverride) => {
                assert!(d.calls > 0 && tally.met_tryagain > 0, "{what}: {d:?}");
                assert_eq!(d.ok, 0, "{what}: {d:?}");
            }
            // ... which an RL.ALL meets once its short-lived key has
            // expired.
            (_, Kind::MixedAges) => assert!(tally.met_tryagain > 0, "{what}: {d:?}"),
            // An existing override meets it while it and its limiter key
            // are on different sides: from one's MIGRATE batch to the
            // other's, however long that is.
            (_, Kind::SetOverride) => {}
        }
        // Every admitted call counted exactly once, on the new owner.
        for j in 0..SUBJECTS {
            let read = router.call(&kind.args(j, 0), &mut tally).unwrap();
            assert_eq!(
                kind.count(&read),
                i64::try_from(tally.admitted[j] + 1).unwrap(),
                "{what}: subject {j}"
            );
        }
        assert_eq!(router.owner, target_port, "{what}");
    }
    // Every key moved, stored as it was.
    let mut con = redis::Client::open(support::url(target_port))
        .unwrap()
        .get_connection()
        .unwrap();
    let slot_arg = slot.to_string();
    assert_eq!(
        cmd_int(&mut con, &["CLUSTER", "COUNTKEYSINSLOT", &slot_arg]),
        keys_before
    );
    let arrived = sample(target_port);
    // MIGRATE carries a key's remaining time to live, so its absolute
    // expiry may shift by the time the transfer took; an atomic move
    // carries the expiry itself.
    let shift = match how {
        support::SlotMove::Keys { .. } => (moved.finished - moved.opened).as_millis(),
        support::SlotMove::Atomic => 0,
    };
    for ((value, at), (was, was_at)) in arrived.iter().zip(&stored) {
        assert_eq!(value, was, "{flavor:?} {how:?}");
        assert!(
            at.abs_diff(*was_at) as u128 <= shift,
            "{flavor:?} {how:?}: {at} was {was_at}"
        );
    }
    let mut con = redis::Client::open(support::url(source_port))
        .unwrap()
        .get_connection()
        .unwrap();
    assert_eq!(
        cmd_int(&mut con, &["CLUSTER", "COUNTKEYSINSLOT", &slot_arg]),
        0
    );
}

#[test]
fn calls_keep_their_counts_while_a_populated_slot_moves_key_by_key() {
    for_each_flavor(|flavor| {
        run(
            flavor,
            support::SlotMove::Keys {
                batch: 100,
                pause: Duration::from_millis(10),
            },
        );
    });
}

/// Valkey 9's atomic slot migration, which the module declares it
/// supports (Valkey refuses `CLUSTER MIGRATESLOTS` while any loaded module
/// has not): no call meets TRYAGAIN or ASK, the writes made during the
/// move reach the target, and the keys arrive as they were.
#[test]
fn calls_never_meet_tryagain_while_a_slot_moves_atomically() {
    for_each_flavor(|flavor| {
        if flavor == Flavor::Valkey9 {
            run(flavor, support::SlotMove::Atomic);
        }
    });
}

/// A caller waiting in `RL.CONCURRENT ... WAIT` on the node its slot
/// leaves is sent on when its turn comes there (the lease it waits for
/// ends, or its deadline passes): `TRYAGAIN`, nothing taken, no key left
/// behind in a slot the node no longer serves; sent again, it reaches the
/// key's node. Regression: it used to take a lease on the old node, beside
/// the holder's on the new one (two leases for a limit of one), in a key
/// no client could reach.
fn waiters_when_their_slot_moves(flavor: Flavor, how: support::SlotMove) {
    let _turn = ClusterTurn::take();
    let cluster = cluster(flavor);
    let slot = get_slot(TAG.as_bytes());
    let source = cluster.owner(slot);
    let target = (source + 1) % 3;
    let source_port = cluster.nodes[source].port;
    let connect = |port| {
        redis::Client::open(support::url(port))
            .unwrap()
            .get_connection()
            .unwrap()
    };
    let mut con = connect(source_port);
    // One slot each: held for 3 s (the waiter's turn comes when it ends),
    // and for a minute (the waiter's turn is its deadline). Both turns lie
    // well beyond the move: at 700 ms a move slowed by a busy machine came
    // after the first turn, and that waiter was admitted on the old node.
    let ends = format!("{{{TAG}}}:ends");
    let held = format!("{{{TAG}}}:held");
    lease(&mut con, &["RL.CONCURRENT", &ends, "1", "3s"]);
    let holder = lease(&mut con, &["RL.CONCURRENT", &held, "1", "1m"]);
    let waiters: Vec<_> = [(ends.clone(), "8s"), (held.clone(), "3s")]
        .into_iter()
        .map(|(key, wait)| {
            let mut w = connect(source_port);
            std::thread::spawn(move || {
                cmd(&mut w, &["RL.CONCURRENT", &key, "1", "1m", "WAIT", wait])
            })
        })
        .collect();
    wait_until("two waiters", || blocked_clients(&mut con) == 2);
    cluster.move_slot(slot, source, target, how);
    let what = format!("{flavor:?} {how:?}");
    for waiter in waiters {
        let reply = waiter.join().unwrap();
        assert!(
            matches!(&reply, Err(e) if e.starts_with("TRYAGAIN")),
            "{what}: {reply:?}"
        );
    }
    let slot_arg = slot.to_string();
    assert_eq!(
        cmd_int(&mut con, &["CLUSTER", "COUNTKEYSINSLOT", &slot_arg]),
        0,
        "{what}: keys left behind"
    );
    assert_eq!(counters(&mut con)["rl_errors_slot_moved"], 2, "{what}");
    // On the key's node: the holder's lease alone, and room for the
    // caller sent again once it is released.
    let mut con = connect(cluster.nodes[target].port);
    let read = lease(&mut con, &["RL.CONCURRENT", &held, "1", "1m", "COST", "0"]);
    assert_eq!(read[1], 1, "{what}: {read:?}");
    let id = holder[6].to_string();
    lease(
        &mut con,
        &["RL.CONCURRENT", &held, "1", "1m", "RELEASE", &id],
    );
    assert_eq!(
        lease(&mut con, &["RL.CONCURRENT", &held, "1", "1m"])[0],
        1,
        "{what}"
    );
}

#[test]
fn waiters_are_sent_on_when_their_slot_moves() {
    for_each_flavor(|flavor| {
        let keys = support::SlotMove::Keys {
            batch: 100,
            pause: Duration::from_millis(10),
        };
        waiters_when_their_slot_moves(flavor, keys);
        if flavor == Flavor::Valkey9 {
            waiters_when_their_slot_moves(flavor, support::SlotMove::Atomic);
        }
    });
}
