//! Load: 50 clients, each on its own connection and thread, hammer one key
//! per limiter for several short windows, and every reply must agree with an
//! exact model of the algorithm.
//!
//! How the check is exact without guessing the server's clock: the module
//! propagates every admitted call to the AOF rewritten with the primary's
//! decision time (`... COST c NOW ms`), in execution order, and a denied
//! call propagates nothing. So the AOF is the exact admission history:
//!
//! * the model replays it and must accept every admission (FIXED: no window
//!   over its limit; SLIDING: no `(t - window, t]` over the limit; TOKEN: the
//!   bucket never below zero), and the admitted replies the clients received
//!   must be, as a multiset, exactly the replies the model gives;
//! * every denied reply must be what the model answers for that call at some
//!   server time within the client's send..receive interval (both clocks are
//!   the machine's wall clock in ms), given the admissions before it in
//!   execution order. For FIXED this ties each denial to a full window;
//! * FIXED: each window but the last admits exactly `limit` (50 clients
//!   exhaust a 20-call window within its first milliseconds).
//!
//! That premise needs a wall clock that moves steadily for the run. A run
//! during which the wall clock was stepped (against the monotonic clock) is
//! not evidence either way: it is run again, up to three times, and a
//! failure says how far the clock moved.

mod common;

use common::*;
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const CLIENTS: usize = 50;
const RUN: Duration = Duration::from_millis(1200);
const WINDOW_MS: u64 = 250;

/// The load tests run one at a time: each already saturates the machine.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// One call as its client saw it.
#[derive(Clone, Debug)]
struct Call {
    key: String,
    cost: u64,
    /// Wall clock (ms) just before sending and just after the reply.
    sent_ms: u64,
    received_ms: u64,
    reply: [i64; 6],
}

/// Starts a server that keeps an AOF of every admitted call.
fn start(flavor: Flavor) -> Server {
    Server::builder(flavor)
        .args(&[
            "--appendonly",
            "yes",
            "--appendfsync",
            "no",
            "--auto-aof-rewrite-percentage",
            "0",
        ])
        .start()
}

/// `CLIENTS` threads, each with its own connection, started together at
/// the start of an aligned window (so that the first ALIGNED window is a
/// whole one, which 50 clients exhaust at once like every other) and
/// calling for `RUN`. Client `c`'s `i`-th call is `commands[(c + i) % n]`
/// with `COST cost_of(c)`.
fn hammer(
    server: &Server,
    commands: &[Vec<&str>],
    cost_of: impl Fn(usize) -> u64 + Sync,
) -> Vec<Call> {
    let (connected, start_ms) = (Barrier::new(CLIENTS), AtomicU64::new(0));
    let start_known = Barrier::new(CLIENTS);
    let per_client: Vec<Vec<Call>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let (connected, start_ms, start_known, cost_of) =
                    (&connected, &start_ms, &start_known, &cost_of);
                scope.spawn(move || {
                    let mut con = server.conn();
                    let cost = cost_of(c);
                    let cost_text = cost.to_string();
                    let mut calls = Vec::new();
                    if connected.wait().is_leader() {
                        let next_window = (unix_ms() / WINDOW_MS + 1) * WINDOW_MS;
                        start_ms.store(next_window, Ordering::SeqCst);
                    }
                    start_known.wait();
                    let start = start_ms.load(Ordering::SeqCst);
                    let wait = start.saturating_sub(unix_ms());
                    std::thread::sleep(Duration::from_millis(wait));
                    let deadline = Instant::now() + RUN;
                    let mut i = c;
                    while Instant::now() < deadline {
                        let base = &commands[i % commands.len()];
                        i += 1;
                        let mut args = base.clone();
                        args.extend(["COST", &cost_text]);
                        let sent_ms = unix_ms();
                        let reply = limiter(&mut con, &args);
                        let received_ms = unix_ms();
                        calls.push(Call {
                            key: base[1].to_string(),
                            cost,
                            sent_ms,
                            received_ms,
                            reply,
                        });
                    }
                    calls
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    per_client.into_iter().flatten().collect()
}

/// The wall clock minus the monotonic clock since `base`, in µs: it moves
/// only when the wall clock is stepped or slewed. The read of the closest
/// pair of a few, so that a thread preempted between the two reads does not
/// look like a step.
fn wall_offset_us(base: Instant) -> i128 {
    let mut best = (Duration::MAX, 0i128);
    for _ in 0..5 {
        let before = base.elapsed();
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let gap = base.elapsed().saturating_sub(before);
        if gap < best.0 {
            best = (gap, wall.as_micros() as i128 - before.as_micros() as i128);
        }
    }
    best.1
}

/// Runs one flavor's `attempt` (which starts its own server) until it
/// passes, running it again only when the wall clock moved by more than
/// 1 ms during a failed attempt.
fn on_a_steady_clock(what: &str, attempt: impl Fn()) {
    const TRIES: usize = 3;
    for n in 1..=TRIES {
        let base = Instant::now();
        let before = wall_offset_us(base);
        let outcome = catch_unwind(AssertUnwindSafe(&attempt));
        let moved = wall_offset_us(base) - before;
        match outcome {
            Ok(()) => return,
            Err(_) if moved.abs() > 1_000 && n < TRIES => {
                eprintln!(
                    "{what}: the wall clock moved {moved} µs during attempt {n}; running it again"
                )
            }
            Err(e) => {
                eprintln!("{what}: the wall clock moved {moved} µs during attempt {n}");
                std::panic::resume_unwind(e)
            }
        }
    }
}

/// An admitted call as the AOF recorded it.
#[derive(Clone, Copy, Debug)]
struct Admission {
    now: u64,
    cost: u64,
}

/// The commands of the server's AOF increments, in order.
fn aof_commands(server: &Server) -> Vec<Vec<Vec<u8>>> {
    let dir = server.dir.join("appendonlydir");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 1, "one AOF increment expected: {files:?}");
    let bytes = std::fs::read(&files[0]).unwrap();
    let mut at = 0usize;
    let line = |at: &mut usize| -> String {
        let end = at_or_panic(bytes[*at..].windows(2).position(|w| w == b"\r\n")) + *at;
        let text = String::from_utf8(bytes[*at..end].to_vec()).unwrap();
        *at = end + 2;
        text
    };
    let mut commands = Vec::new();
    while at < bytes.len() {
        let header = line(&mut at);
        let n: usize = header.strip_prefix('*').expect("an array").parse().unwrap();
        let mut args = Vec::with_capacity(n);
        for _ in 0..n {
            let len: usize = line(&mut at)
                .strip_prefix('$')
                .expect("a bulk string")
                .parse()
                .unwrap();
            args.push(bytes[at..at + len].to_vec());
            at += len + 2;
        }
        commands.push(args);
    }
    commands
}

fn at_or_panic(found: Option<usize>) -> usize {
    found.expect("a truncated AOF line")
}

/// The admissions the AOF recorded for `command` on `key`, in execution
/// order, checking their canonical form on the way.
fn admissions(
    aof: &[Vec<Vec<u8>>],
    command: &str,
    key: &str,
    canonical: &[&str],
) -> Vec<Admission> {
    let mut out = Vec::new();
    for args in aof {
        if !args[0].eq_ignore_ascii_case(command.as_bytes()) || args[1] != key.as_bytes() {
            continue;
        }
        let text: Vec<String> = args
            .iter()
            .map(|a| String::from_utf8(a.clone()).unwrap())
            .collect();
        let n = text.len();
        assert!(n == canonical.len() + 6, "unexpected form: {text:?}");
        assert_eq!(text[2..2 + canonical.len()], *canonical, "{text:?}");
        assert_eq!(text[n - 4], "COST", "{text:?}");
        assert_eq!(text[n - 2], "NOW", "{text:?}");
        out.push(Admission {
            cost: text[n - 3].parse().unwrap(),
            now: text[n - 1].parse().unwrap(),
        });
    }
    for pair in out.windows(2) {
        assert!(
            pair[0].now <= pair[1].now,
            "the server clock stepped back: {pair:?}"
        );
    }
    out
}

/// An exact model of one limiter key.
trait Model: Clone {
    /// The reply of a call at `now` that changes nothing: what the call
    /// would get if it ran now (admitted or denied).
    fn peek(&self, now: u64, cost: u64) -> [i64; 6];
    /// Records an admitted call.
    fn commit(&mut self, now: u64, cost: u64);
}

/// What checking replies against a model found.
struct Checked<M> {
    /// The model after each prefix of the admissions.
    states: Vec<M>,
    admitted: usize,
    denied: usize,
}

/// Replays `admitted` through `model`, then checks every reply in `calls`.
fn check<M: Model>(what: &str, model: M, history: &[Admission], calls: &[Call]) -> Checked<M> {
    let mut states = vec![model];
    let mut expected = Vec::new();
    for (i, a) in history.iter().enumerate() {
        let mut m = states.last().unwrap().clone();
        let reply = m.peek(a.now, a.cost);
        assert_eq!(
            reply[0], 1,
            "{what}: admission #{i} {a:?} breaks the limit: the model says {reply:?}"
        );
        m.commit(a.now, a.cost);
        expected.push((a.cost, reply));
        states.push(m);
    }
    let mut got: Vec<(u64, [i64; 6])> = calls
        .iter()
        .filter(|c| c.reply[0] == 1)
        .map(|c| (c.cost, c.reply))
        .collect();
    assert_eq!(
        got.len(),
        history.len(),
        "{what}: admitted replies vs admissions in the AOF"
    );
    got.sort_unstable();
    expected.sort_unstable();
    if got != expected {
        let first = got.iter().zip(&expected).position(|(a, b)| a != b);
        panic!("{what}: admitted replies differ from the model's; first difference at {first:?}: got {:?}, want {:?}",
            first.map(|i| got[i]), first.map(|i| expected[i]));
    }
    let mut denied = 0;
    for call in calls.iter().filter(|c| c.reply[0] == 0) {
        denied += 1;
        let explained = (call.sent_ms..=call.received_ms).any(|t| {
            // The call ran after every admission logged before `t` and before
            // every admission logged after it; those at `t` may be either.
            let lo = history.partition_point(|a| a.now < t);
            let hi = history.partition_point(|a| a.now <= t);
            (lo..=hi).any(|k| states[k].peek(t, call.cost) == call.reply)
        });
        assert!(
            explained,
            "{what}: denied reply {call:?} matches no state of the model in its time interval; \
             the model there says {:?}; the admissions logged within 20 ms of it: {:?}",
            states[history.partition_point(|a| a.now < call.sent_ms)].peek(call.sent_ms, call.cost),
            history
                .iter()
                .filter(|a| a.now + 20 >= call.sent_ms && a.now <= call.received_ms + 20)
                .collect::<Vec<_>>()
        );
    }
    Checked {
        states,
        admitted: history.len(),
        denied,
    }
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap()
}

/// A model's denial: `count` of `limit` used, nothing left beyond it,
/// retry after `retry` ms, the window resetting in `reset` ms.
fn denied(count: u64, retry: i64, limit: u64, reset: i64) -> [i64; 6] {
    [
        0,
        to_i64(count),
        retry,
        to_i64(limit),
        to_i64(limit.saturating_sub(count)),
        reset,
    ]
}

// ---------------------------------------------------------------------------
// FIXED

#[derive(Clone, Debug)]
struct FixedModel {
    limit: u64,
    window: u64,
    aligned: bool,
    /// Every window opened so far: (start, end, admitted units).
    windows: Vec<(u64, u64, u64)>,
}

impl FixedModel {
    fn live(&self, now: u64) -> Option<(u64, u64, u64)> {
        self.windows.last().copied().filter(|w| now.max(w.0) < w.1)
    }
}

impl Model for FixedModel {
    fn peek(&self, now: u64, cost: u64) -> [i64; 6] {
        let (end, count, now) = match self.live(now) {
            Some((s, e, c)) => (e, c, now.max(s)),
            None => {
                let s = if self.aligned {
                    now - now % self.window
                } else {
                    now
                };
                (s + self.window, 0, now)
            }
        };
        let l = self.limit;
        if count + cost <= l {
            [
                1,
                to_i64(count + cost),
                0,
                to_i64(l),
                to_i64(l - count - cost),
                to_i64(end - now),
            ]
        } else {
            let live = self.live(now).is_some();
            let retry = if cost > l { -1 } else { to_i64(end - now) };
            let reset = if live { to_i64(end - now) } else { 0 };
            denied(count, retry, l, reset)
        }
    }

    fn commit(&mut self, now: u64, cost: u64) {
        match self.live(now) {
            Some(_) => self.windows.last_mut().unwrap().2 += cost,
            None => {
                let s = if self.aligned {
                    now - now % self.window
                } else {
                    now
                };
                self.windows.push((s, s + self.window, cost));
            }
        }
    }
}

#[test]
fn fixed_windows_admit_exactly_the_limit_under_load() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    const LIMIT: u64 = 20;
    for flavor in flavors() {
        on_a_steady_clock(&format!("{flavor:?}"), || {
            let server = start(flavor);
            let window = format!("{WINDOW_MS}ms");
            let aligned = vec!["RL.FIXED", "fx:aligned", "20", &window, "ALIGNED"];
            let rolling = vec!["RL.FIXED", "fx:rolling", "20", &window];
            let calls = hammer(&server, &[aligned, rolling], |_| 1);
            let aof = aof_commands(&server);
            for (key, is_aligned) in [("fx:aligned", true), ("fx:rolling", false)] {
                let canonical: &[&str] = if is_aligned {
                    &["20", &window, "ALIGNED"]
                } else {
                    &["20", &window]
                };
                let history = admissions(&aof, "RL.FIXED", key, canonical);
                let mine: Vec<Call> = calls.iter().filter(|c| c.key == key).cloned().collect();
                let what = format!("{flavor:?} {key}");
                let model = FixedModel {
                    limit: LIMIT,
                    window: WINDOW_MS,
                    aligned: is_aligned,
                    windows: Vec::new(),
                };
                let checked = check(&what, model, &history, &mine);
                let windows = &checked.states.last().unwrap().windows;
                for (i, w) in windows.iter().enumerate() {
                    assert!(w.2 <= LIMIT, "{what}: window {w:?} over the limit");
                    if is_aligned {
                        assert_eq!(w.0 % WINDOW_MS, 0, "{what}: {w:?} not aligned");
                    }
                    if i + 1 < windows.len() {
                        assert_eq!(
                            w.2, LIMIT,
                            "{what}: window {i} of {windows:?} not exhausted"
                        );
                    }
                }
                assert!(windows.len() >= 3, "{what}: only {windows:?}");
                eprintln!(
                "{what}: {} calls, {} admitted in {} windows of {LIMIT}, {} denied, all explained by the model",
                mine.len(),
                checked.admitted,
                windows.len(),
                checked.denied
            );
            }
        });
    }
}

// ---------------------------------------------------------------------------
// SLIDING

#[derive(Clone, Debug)]
struct LogModel {
    limit: u64,
    window: u64,
    /// Every admitted call: (time, cost), oldest first.
    log: Vec<(u64, u64)>,
}

impl Model for LogModel {
    fn peek(&self, now: u64, cost: u64) -> [i64; 6] {
        let now = now.max(self.log.last().map_or(0, |e| e.0));
        let w = self.window;
        let live: Vec<(u64, u64)> = self
            .log
            .iter()
            .copied()
            .filter(|&(t, _)| t + w > now)
            .collect();
        let count: u64 = live.iter().map(|e| e.1).sum();
        let l = self.limit;
        if count + cost <= l {
            return [
                1,
                to_i64(count + cost),
                0,
                to_i64(l),
                to_i64(l - count - cost),
                to_i64(w),
            ];
        }
        let retry = if cost > l {
            -1
        } else {
            // The oldest entries leave first, each `window` after it came.
            let must_leave = count + cost - l;
            let mut left = 0;
            live.iter()
                .find(|e| {
                    left += e.1;
                    left >= must_leave
                })
                .map_or(to_i64(w), |e| to_i64(e.0 + w - now))
        };
        let reset = live.last().map_or(0, |e| to_i64(e.0 + w - now));
        denied(count, retry, l, reset)
    }

    fn commit(&mut self, now: u64, cost: u64) {
        let now = now.max(self.log.last().map_or(0, |e| e.0));
        self.log.push((now, cost));
    }
}

#[derive(Clone, Debug)]
struct ApproxModel {
    limit: u64,
    window: u64,
    /// (aligned window start, its count, the previous window's count).
    state: Option<(u64, u64, u64)>,
}

impl ApproxModel {
    /// (now, window start, current, previous, count).
    fn at(&self, now: u64) -> (u64, u64, u64, u64, u64) {
        let w = self.window;
        let now = now.max(self.state.map_or(0, |s| s.0));
        let start = now - now % w;
        let (current, previous) = match self.state {
            Some((s, c, p)) if s == start => (c, p),
            Some((s, c, _)) if s + w == start => (0, c),
            _ => (0, 0),
        };
        let weighted = previous * (w - (now - start)) / w;
        (now, start, current, previous, current + weighted)
    }

    fn fits(&self, now: u64, cost: u64) -> bool {
        self.at(now).4 + cost <= self.limit
    }
}

impl Model for ApproxModel {
    fn peek(&self, now: u64, cost: u64) -> [i64; 6] {
        let (now, start, current, previous, count) = self.at(now);
        let (l, w) = (self.limit, self.window);
        if count + cost <= l {
            return [
                1,
                to_i64(count + cost),
                0,
                to_i64(l),
                to_i64(l - count - cost),
                to_i64(start + 2 * w - now),
            ];
        }
        let retry = if cost > l {
            -1
        } else {
            // Brute force: nothing else is admitted meanwhile.
            (1..=2 * w + 1)
                .find(|&d| self.fits(now + d, cost))
                .map_or(-2, to_i64)
        };
        let reset = if current > 0 {
            to_i64(start + 2 * w - now)
        } else if previous > 0 {
            to_i64(start + w - now)
        } else {
            0
        };
        [
            0,
            to_i64(count),
            retry,
            to_i64(l),
            to_i64(l.saturating_sub(count)),
            reset,
        ]
    }

    fn commit(&mut self, now: u64, cost: u64) {
        let (_, start, current, previous, _) = self.at(now);
        self.state = Some((start, current + cost, previous));
    }
}

#[test]
fn sliding_never_counts_more_than_the_limit_under_load() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    const LIMIT: u64 = 25;
    for flavor in flavors() {
        on_a_steady_clock(&format!("{flavor:?}"), || {
            let server = start(flavor);
            let window = format!("{WINDOW_MS}ms");
            let exact = vec!["RL.SLIDING", "sl:log", "25", &window];
            let approx = vec!["RL.SLIDING", "sl:approx", "25", &window, "APPROX"];
            // Costs 1, 2 and 3, so that retry_after must count whole entries.
            let calls = hammer(&server, &[exact, approx], |c| 1 + (c % 3) as u64);
            let aof = aof_commands(&server);

            let what = format!("{flavor:?} sl:log");
            let history = admissions(&aof, "RL.SLIDING", "sl:log", &["25", &window]);
            let mine: Vec<Call> = calls
                .iter()
                .filter(|c| c.key == "sl:log")
                .cloned()
                .collect();
            let model = LogModel {
                limit: LIMIT,
                window: WINDOW_MS,
                log: Vec::new(),
            };
            let checked = check(&what, model, &history, &mine);
            // Explicitly: no interval (t - window, t] holds more than the limit.
            for a in &history {
                let inside: u64 = history
                    .iter()
                    .filter(|b| b.now <= a.now && b.now + WINDOW_MS > a.now)
                    .map(|b| b.cost)
                    .sum();
                assert!(
                    inside <= LIMIT,
                    "{what}: {inside} units in the window ending at {}",
                    a.now
                );
            }
            for c in &mine {
                assert!(c.reply[1] <= to_i64(LIMIT), "{what}: {c:?}");
            }
            let span = history.last().unwrap().now - history[0].now;
            assert!(
                span >= 3 * WINDOW_MS,
                "{what}: admissions span only {span} ms"
            );
            eprintln!(
            "{what}: {} calls, {} admitted over {span} ms, {} denied, all explained by the model",
            mine.len(),
            checked.admitted,
            checked.denied
        );

            let what = format!("{flavor:?} sl:approx");
            let history = admissions(&aof, "RL.SLIDING", "sl:approx", &["25", &window, "APPROX"]);
            let mine: Vec<Call> = calls
                .iter()
                .filter(|c| c.key == "sl:approx")
                .cloned()
                .collect();
            let model = ApproxModel {
                limit: LIMIT,
                window: WINDOW_MS,
                state: None,
            };
            let checked = check(&what, model, &history, &mine);
            // APPROX never admits more than the limit in one aligned window.
            let mut per_window: HashMap<u64, u64> = HashMap::new();
            for a in &history {
                *per_window.entry(a.now / WINDOW_MS).or_default() += a.cost;
            }
            assert!(
                per_window.values().all(|&n| n <= LIMIT),
                "{what}: {per_window:?}"
            );
            eprintln!(
                "{what}: {} calls, {} admitted, {} denied, all explained by the model",
                mine.len(),
                checked.admitted,
                checked.denied
            );
        });
    }
}

// ---------------------------------------------------------------------------
// TOKEN

#[derive(Clone, Debug)]
struct BucketModel {
    rate: u64,
    window: u64,
    capacity: u64,
    /// (time, level in 1/window tokens) as of the last admission; None: full.
    state: Option<(u64, u128)>,
}

impl BucketModel {
    fn full(&self) -> u128 {
        u128::from(self.capacity) * u128::from(self.window)
    }

    fn level(&self, now: u64) -> (u64, u128) {
        match self.state {
            None => (now, self.full()),
            Some((at, level)) => {
                let now = now.max(at);
                let refill = u128::from(now - at) * u128::from(self.rate);
                (now, (level + refill).min(self.full()))
            }
        }
    }
}

impl Model for BucketModel {
    fn peek(&self, now: u64, cost: u64) -> [i64; 6] {
        let (_, level) = self.level(now);
        let (w, r) = (u128::from(self.window), u128::from(self.rate));
        let need = u128::from(cost) * w;
        let c = to_i64(self.capacity);
        let reply = |allowed: i64, level: u128, retry: i64| {
            let missing = self.full() - level;
            let count = to_i64(u64::try_from(missing.div_ceil(w)).unwrap());
            let reset = to_i64(u64::try_from(missing.div_ceil(r)).unwrap());
            [allowed, count, retry, c, c - count, reset]
        };
        if need <= level {
            reply(1, level - need, 0)
        } else if cost > self.capacity {
            reply(0, level, -1)
        } else {
            let retry = to_i64(u64::try_from((need - level).div_ceil(r)).unwrap());
            reply(0, level, retry)
        }
    }

    fn commit(&mut self, now: u64, cost: u64) {
        let (now, level) = self.level(now);
        let need = u128::from(cost) * u128::from(self.window);
        self.state = Some((now, level - need));
    }
}

#[test]
fn token_bucket_never_goes_below_zero_under_load() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // 20 tokens per 250 ms (one per 12.5 ms), bursts of 30.
    const RATE: u64 = 20;
    const CAPACITY: u64 = 30;
    for flavor in flavors() {
        on_a_steady_clock(&format!("{flavor:?}"), || {
            let server = start(flavor);
            let window = format!("{WINDOW_MS}ms");
            let bucket = vec!["RL.TOKEN", "tk", "20", &window, "BURST", "30"];
            let calls = hammer(&server, &[bucket], |c| 1 + (c % 3) as u64);
            let aof = aof_commands(&server);
            let what = format!("{flavor:?} tk");
            let history = admissions(&aof, "RL.TOKEN", "tk", &["20", &window, "BURST", "30"]);
            let model = BucketModel {
                rate: RATE,
                window: WINDOW_MS,
                capacity: CAPACITY,
                state: None,
            };
            let checked = check(&what, model, &history, &calls);
            for c in &calls {
                assert!(
                    c.reply[4] >= 0 && c.reply[1] <= to_i64(CAPACITY),
                    "{what}: {c:?}"
                );
            }
            // The aggregate bound: the initial burst plus what refilled.
            let admitted: u64 = history.iter().map(|a| a.cost).sum();
            let elapsed = history.last().unwrap().now - history[0].now;
            let bound = CAPACITY + RATE * elapsed / WINDOW_MS + 1;
            assert!(
                admitted <= bound,
                "{what}: {admitted} units admitted, bound {bound}"
            );
            // ... and under load the bucket is drained about as fast as it
            // refills (loosely: a stalled machine may waste some refill).
            assert!(
                2 * admitted >= bound,
                "{what}: only {admitted} units admitted, bound {bound}"
            );
            eprintln!(
            "{what}: {} calls, {} admitted ({admitted} units, bound {bound}) over {elapsed} ms, {} denied, all explained by the model",
            calls.len(),
            checked.admitted,
            checked.denied
        );
        });
    }
}
