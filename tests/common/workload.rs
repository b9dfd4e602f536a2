//! Workloads: a small deterministic generator, a mixed workload of every
//! command, and a workload of RL.FIXED calls only. The same seed and
//! prefix give the same calls, so a run can be repeated on another server
//! and the replies compared.

use super::{aligned_windows, all_parts, assert_same_dataset, error_line, int, six, Snapshot};
use redis::Value;
use std::collections::BTreeMap;

/// A small deterministic generator, so every run makes the same calls.
pub struct Lcg(pub u64);

impl Lcg {
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

// ---------------------------------------------------------------------------
// A mixed workload of every command
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallKind {
    Limiter,
    All,
    Set,
    Get,
    Del,
    List,
}

#[derive(Clone, Debug)]
pub struct Call {
    pub args: Vec<Vec<u8>>,
    pub kind: CallKind,
    pub peek: bool,
}

impl Call {
    pub fn command(&self) -> redis::Cmd {
        let mut c = redis::cmd(std::str::from_utf8(&self.args[0]).unwrap());
        for a in &self.args[1..] {
            c.arg(a.as_slice());
        }
        c
    }

    pub fn has(&self, word: &[u8]) -> bool {
        self.args.iter().any(|a| a.as_slice() == word)
    }
}

pub const KEYS: u64 = 60;
pub const OKEYS: u64 = 6;

pub fn limiter_key(prefix: &str, i: u64) -> Vec<u8> {
    let mut key = format!("{prefix}:k:{i}").into_bytes();
    if i == 7 {
        // A binary key name must replicate and persist byte for byte.
        key.extend(b"\x00\xff\r\n bin");
    }
    key
}

pub fn okey(prefix: &str, j: u64) -> Vec<u8> {
    format!("{prefix}:o:{j}").into_bytes()
}

pub fn arg_bytes(s: impl AsRef<str>) -> Vec<u8> {
    s.as_ref().as_bytes().to_vec()
}

/// One limiter clause on key `i`: the algorithm's word and the arguments
/// after it. Each key keeps one algorithm and one window (kind `i % 6`:
/// FIXED, FIXED ALIGNED, SLIDING, SLIDING APPROX, TOKEN BURST, TOKEN);
/// limits sometimes change between calls, costs vary (sometimes above the
/// limit), and keys with unaligned windows sometimes name an override.
pub fn clause(
    rng: &mut Lcg,
    prefix: &str,
    aligned: &[&str],
    i: u64,
) -> (&'static str, Vec<Vec<u8>>) {
    let base = 3 + (i % 10) * 3;
    let limit = if rng.chance(15) { base + 2 } else { base };
    let aligned_window = aligned[(i / 6) as usize % aligned.len()];
    let (word, window, options, overridable): (&str, &str, Vec<Vec<u8>>, bool) = match i % 6 {
        0 => (
            "FIXED",
            ["1h", "90m", "2h"][(i / 6) as usize % 3],
            vec![],
            true,
        ),
        1 => ("FIXED", aligned_window, vec![arg_bytes("ALIGNED")], false),
        2 => (
            "SLIDING",
            ["1h", "7200s"][(i / 6) as usize % 2],
            vec![],
            true,
        ),
        3 => ("SLIDING", aligned_window, vec![arg_bytes("APPROX")], false),
        4 => (
            "TOKEN",
            "1d",
            vec![arg_bytes("BURST"), arg_bytes((base + 2).to_string())],
            true,
        ),
        _ => ("TOKEN", "2d", vec![], true),
    };
    let capacity = if i % 6 == 4 { base + 2 } else { limit };
    let mut args = vec![
        limiter_key(prefix, i),
        arg_bytes(limit.to_string()),
        arg_bytes(window),
    ];
    args.extend(options);
    match rng.below(10) {
        0..=5 => {}
        6 | 7 => args.extend([arg_bytes("COST"), arg_bytes((2 + rng.below(2)).to_string())]),
        8 => args.extend([
            arg_bytes("COST"),
            arg_bytes((capacity + 1 + rng.below(3)).to_string()),
        ]),
        _ => args.extend([arg_bytes("COST"), arg_bytes("1")]),
    }
    if overridable && rng.chance(30) {
        args.extend([arg_bytes("OVERRIDE"), okey(prefix, rng.below(OKEYS))]);
    }
    (word, args)
}

/// A limiter call (`kind`: one limiter or RL.ALL), PEEK one time in ten.
fn maybe_peeking(rng: &mut Lcg, mut argv: Vec<Vec<u8>>, kind: CallKind) -> Call {
    let peek = rng.chance(10);
    if peek {
        argv.push(arg_bytes("PEEK"));
    }
    Call {
        args: argv,
        kind,
        peek,
    }
}

/// A deterministic mix of every command on keys under `prefix`: the three
/// limiters and RL.ALL (admitted, denied, PEEK, COST above the limit,
/// overrides), and RL.OVERRIDE.SET (with and without BURST and TTL), GET,
/// DEL and LIST. The same seed and prefix give the same calls.
pub fn mixed_calls(prefix: &str, aligned: &[&str], seed: u64, steps: usize) -> Vec<Call> {
    let mut rng = Lcg(seed);
    let mut calls = Vec::with_capacity(steps);
    for _ in 0..steps {
        let roll = rng.below(100);
        let call = if roll < 55 {
            let i = rng.below(KEYS);
            let (word, args) = clause(&mut rng, prefix, aligned, i);
            let mut argv = vec![arg_bytes(format!("RL.{word}"))];
            argv.extend(args);
            maybe_peeking(&mut rng, argv, CallKind::Limiter)
        } else if roll < 70 {
            let n = 1 + rng.below(3) as usize;
            let mut picked: Vec<u64> = Vec::new();
            while picked.len() < n {
                let i = rng.below(KEYS);
                if !picked.contains(&i) {
                    picked.push(i);
                }
            }
            let mut argv = vec![arg_bytes("RL.ALL")];
            for i in picked {
                let (word, args) = clause(&mut rng, prefix, aligned, i);
                argv.push(arg_bytes(word));
                argv.extend(args);
            }
            maybe_peeking(&mut rng, argv, CallKind::All)
        } else if roll < 80 {
            let mut argv = vec![
                arg_bytes("RL.OVERRIDE.SET"),
                okey(prefix, rng.below(OKEYS)),
                arg_bytes((5 + 5 * rng.below(6)).to_string()),
                arg_bytes(["1d", "36h"][rng.below(2) as usize]),
            ];
            if rng.chance(50) {
                argv.extend([
                    arg_bytes("BURST"),
                    arg_bytes((5 + 5 * rng.below(7)).to_string()),
                ]);
            }
            if rng.chance(50) {
                argv.extend([
                    arg_bytes("TTL"),
                    arg_bytes(["1h", "2h", "5400s"][rng.below(3) as usize]),
                ]);
            }
            Call {
                args: argv,
                kind: CallKind::Set,
                peek: false,
            }
        } else if roll < 88 {
            Call {
                args: vec![arg_bytes("RL.OVERRIDE.GET"), okey(prefix, rng.below(OKEYS))],
                kind: CallKind::Get,
                peek: false,
            }
        } else if roll < 94 {
            let mut argv = vec![arg_bytes("RL.OVERRIDE.DEL"), okey(prefix, rng.below(OKEYS))];
            if rng.chance(50) {
                argv.push(okey(prefix, rng.below(OKEYS)));
            }
            Call {
                args: argv,
                kind: CallKind::Del,
                peek: false,
            }
        } else {
            Call {
                args: vec![
                    arg_bytes("RL.OVERRIDE.LIST"),
                    arg_bytes("0"),
                    arg_bytes("MATCH"),
                    arg_bytes(format!("{prefix}:o:*")),
                    arg_bytes("COUNT"),
                    arg_bytes("1000"),
                ],
                kind: CallKind::List,
                peek: false,
            }
        };
        calls.push(call);
    }
    calls
}

/// Sends `calls` as pipelines; every reply must be a success.
pub fn run_calls(con: &mut redis::Connection, calls: &[Call]) -> Vec<Value> {
    let mut replies = Vec::with_capacity(calls.len());
    for chunk in calls.chunks(250) {
        let mut pipe = redis::pipe();
        for call in chunk {
            pipe.add_command(call.command());
        }
        let got: Vec<Value> = pipe
            .query(con)
            .unwrap_or_else(|e| panic!("the workload failed: {}", error_line(&e)));
        replies.extend(got);
    }
    replies
}

/// What a workload did, to check that it really was mixed.
#[derive(Debug, Default)]
pub struct Tally {
    pub admitted: usize,
    pub denied: usize,
    /// Denied with a cost above the limit (retry_after -1).
    pub never: usize,
    pub peeks: usize,
    pub all_admitted: usize,
    pub all_denied: usize,
    pub sets_with_ttl: usize,
    pub sets_without_ttl: usize,
    pub gets_found: usize,
    pub deleted: usize,
    pub listed: usize,
    /// Calls per INFO rl command name, and limiter outcomes.
    pub calls: BTreeMap<&'static str, i64>,
    pub allowed: BTreeMap<&'static str, i64>,
    pub refused: BTreeMap<&'static str, i64>,
}

pub fn stats_name(command: &[u8]) -> &'static str {
    match command.to_ascii_uppercase().as_slice() {
        b"RL.FIXED" => "fixed",
        b"RL.SLIDING" => "sliding",
        b"RL.TOKEN" => "token",
        b"RL.CONCURRENT" => "concurrent",
        b"RL.ALL" => "all",
        b"RL.OVERRIDE.SET" => "override_set",
        b"RL.OVERRIDE.GET" => "override_get",
        b"RL.OVERRIDE.DEL" => "override_del",
        b"RL.OVERRIDE.LIST" => "override_list",
        other => panic!("not an RL command: {}", String::from_utf8_lossy(other)),
    }
}

pub fn tally(calls: &[Call], replies: &[Value]) -> Tally {
    assert_eq!(calls.len(), replies.len());
    let mut t = Tally::default();
    for (call, reply) in calls.iter().zip(replies) {
        let name = stats_name(&call.args[0]);
        *t.calls.entry(name).or_default() += 1;
        let allowed = match call.kind {
            CallKind::Limiter => {
                let r = six(reply);
                if !call.peek && r[0] == 0 && r[2] == -1 {
                    t.never += 1;
                }
                Some(r[0] == 1)
            }
            CallKind::All => {
                let (allowed, retry, clauses) = all_parts(reply);
                assert!(!clauses.is_empty(), "{call:?}");
                if !call.peek && allowed == 0 && retry == -1 {
                    t.never += 1;
                }
                match (call.peek, allowed) {
                    (false, 1) => t.all_admitted += 1,
                    (false, _) => t.all_denied += 1,
                    _ => {}
                }
                Some(allowed == 1)
            }
            CallKind::Set => {
                assert_eq!(reply, &Value::Okay, "{call:?}");
                if call.has(b"TTL") {
                    t.sets_with_ttl += 1;
                } else {
                    t.sets_without_ttl += 1;
                }
                None
            }
            CallKind::Get => {
                if let Value::Array(fields) = reply {
                    assert_eq!(fields.len(), 4, "{reply:?}");
                    t.gets_found += 1;
                } else {
                    assert_eq!(reply, &Value::Nil, "{call:?}");
                }
                None
            }
            CallKind::Del => {
                t.deleted += int(reply) as usize;
                None
            }
            CallKind::List => {
                let Value::Array(parts) = reply else {
                    panic!("{reply:?}")
                };
                if let Value::Array(entries) = &parts[1] {
                    t.listed += entries.len();
                }
                None
            }
        };
        if let Some(allowed) = allowed {
            if call.peek {
                t.peeks += 1;
            } else if allowed {
                t.admitted += 1;
            } else {
                t.denied += 1;
            }
            let bucket = if allowed {
                &mut t.allowed
            } else {
                &mut t.refused
            };
            *bucket.entry(name).or_default() += 1;
        }
    }
    t
}

/// Runs a mixed workload on `con` and checks that it was mixed enough.
pub fn workload(con: &mut redis::Connection, prefix: &str, seed: u64, steps: usize) -> Tally {
    let aligned = aligned_windows(con);
    let calls = mixed_calls(prefix, &aligned, seed, steps);
    let replies = run_calls(con, &calls);
    let t = tally(&calls, &replies);
    assert!(
        t.admitted >= steps / 10
            && t.denied >= steps / 10
            && t.never >= 5
            && t.peeks >= 5
            && t.all_admitted >= 5
            && t.all_denied >= 5
            && t.sets_with_ttl >= 5
            && t.sets_without_ttl >= 5
            && t.gets_found >= 5
            && t.deleted >= 5
            && t.listed >= 5,
        "the workload is not mixed enough: {t:?}"
    );
    t
}

/// A mixed workload whose replies are not checked for being mixed (in
/// monitor every limiter call is admitted).
pub fn mixed_calls_on(con: &mut redis::Connection, prefix: &str, seed: u64, steps: usize) {
    let aligned = aligned_windows(con);
    run_calls(con, &mixed_calls(prefix, &aligned, seed, steps));
}

/// `assert_same_dataset` after mixed workloads: more than ten keys, and
/// among them an override without TTL.
#[track_caller]
pub fn assert_same_mixed_dataset(
    what: &str,
    a: &mut redis::Connection,
    b: &mut redis::Connection,
) -> Snapshot {
    let snap = assert_same_dataset(what, a, b);
    assert!(snap.len() > 10, "{what}: only {} keys", snap.len());
    assert!(
        snap.iter()
            .any(|(k, _, at)| super::is_workload_override(k) && *at == -1),
        "{what}: no override without TTL"
    );
    snap
}

// ---------------------------------------------------------------------------
// RL.FIXED only
// ---------------------------------------------------------------------------

/// What a FIXED workload did, to check that it really was mixed.
#[derive(Debug, Default)]
pub struct FixedTally {
    pub admitted: usize,
    pub denied: usize,
    /// Denied with a cost above the limit (retry_after -1).
    pub never: usize,
    pub peeks: usize,
}

pub const FIXED_WORKLOAD_KEYS: u64 = 30;

pub fn fixed_workload_key(prefix: &str, i: u64) -> Vec<u8> {
    let mut key = format!("{prefix}:{i}").into_bytes();
    if i == 7 {
        // A binary key name must replicate and persist byte for byte.
        key.extend(b"\x00\xff\r\n bin");
    }
    key
}

/// A deterministic mix of RL.FIXED calls on many keys: admitted and denied,
/// COST (including cost above the limit), ALIGNED, PEEK and limits that
/// change between calls, on keys `prefix:0`.. Sent as one pipeline.
pub fn fixed_workload(
    con: &mut redis::Connection,
    prefix: &str,
    seed: u64,
    steps: usize,
) -> FixedTally {
    let aligned = aligned_windows(con);
    let unaligned = ["1h", "90m", "7200s", "5400000ms"];
    let mut rng = Lcg(seed);
    let mut pipe = redis::pipe();
    let mut kinds = Vec::with_capacity(steps);
    for _ in 0..steps {
        let i = rng.below(FIXED_WORKLOAD_KEYS);
        let limit = 1 + i % 5;
        let is_aligned = i.is_multiple_of(3);
        let window = if is_aligned {
            aligned[(i as usize / 3) % aligned.len()]
        } else {
            unaligned[i as usize % unaligned.len()]
        };
        let roll = rng.below(10);
        let (limit, cost, peek) = match roll {
            0 => (limit, 1 + rng.below(2), true),
            1 => (limit, limit + 1 + rng.below(3), false),
            2 => (limit + 2, 1, false),
            _ => (limit, 1 + rng.below(3), false),
        };
        let cmd = pipe
            .cmd("RL.FIXED")
            .arg(fixed_workload_key(prefix, i))
            .arg(limit)
            .arg(window);
        if is_aligned {
            cmd.arg("ALIGNED");
        }
        if cost != 1 || roll.is_multiple_of(2) {
            cmd.arg("COST").arg(cost);
        }
        if peek {
            cmd.arg("PEEK");
        }
        kinds.push(peek);
    }
    let replies: Vec<Vec<i64>> = pipe.query(con).unwrap();
    let mut tally = FixedTally::default();
    for (reply, peek) in replies.iter().zip(kinds) {
        assert_eq!(reply.len(), 6, "{reply:?}");
        match (peek, reply[0]) {
            (true, _) => tally.peeks += 1,
            (false, 1) => tally.admitted += 1,
            (false, _) => {
                tally.denied += 1;
                if reply[2] == -1 {
                    tally.never += 1;
                }
            }
        }
    }
    assert!(
        tally.admitted >= 50 && tally.denied >= 50 && tally.never >= 10 && tally.peeks >= 10,
        "the workload is not mixed enough: {tally:?}"
    );
    tally
}

// ---------------------------------------------------------------------------
// RL.CONCURRENT only
// ---------------------------------------------------------------------------

/// What a lease workload did, to check that it really was mixed.
#[derive(Debug, Default)]
pub struct LeaseTally {
    pub taken: usize,
    pub refused: usize,
    pub released: usize,
    /// RELEASE or RENEW of a lease that had ended by itself (or never was).
    pub not_held: usize,
    pub renewed: usize,
    /// Leases of 40 ms, left to end by themselves.
    pub short: usize,
}

pub const LEASE_WORKLOAD_KEYS: u64 = 8;

/// A deterministic mix of RL.CONCURRENT calls on keys `prefix:c:0`..:
/// acquires (COST 1 or 2, some with 40 ms leases that end by themselves
/// while the workload runs), RELEASE and RENEW of held, ended and unknown
/// leases, PEEK and COST 0. It ends with a pause longer than the short
/// leases and one more acquire of an hour on each key, so the ended
/// leases are dropped and every key lives an hour or more.
pub fn lease_workload(
    con: &mut redis::Connection,
    prefix: &str,
    seed: u64,
    steps: usize,
) -> LeaseTally {
    let mut rng = Lcg(seed);
    let mut held: BTreeMap<u64, Vec<i64>> = BTreeMap::new();
    let mut tally = LeaseTally::default();
    let key = |i: u64| format!("{prefix}:c:{i}");
    let call = |con: &mut redis::Connection, args: &[String]| -> Vec<i64> {
        let mut c = redis::cmd(&args[0]);
        for a in &args[1..] {
            c.arg(a);
        }
        c.query(con)
            .unwrap_or_else(|e| panic!("{args:?}: {}", error_line(&e)))
    };
    for step in 0..steps {
        if step % 40 == 39 {
            std::thread::sleep(std::time::Duration::from_millis(15));
        }
        let i = rng.below(LEASE_WORKLOAD_KEYS);
        let limit = (3 + i % 4).to_string();
        let mut args = vec!["RL.CONCURRENT".to_string(), key(i), limit];
        let roll = rng.below(100);
        let ids = held.entry(i).or_default();
        if roll < 50 {
            let short = rng.chance(25);
            args.push(
                if short {
                    "40ms"
                } else {
                    ["1h", "2h"][(i % 2) as usize]
                }
                .into(),
            );
            let cost = 1 + rng.below(2);
            if cost > 1 || rng.chance(30) {
                args.extend(["COST".to_string(), cost.to_string()]);
            }
            let r = call(con, &args);
            if r[0] == 1 {
                tally.taken += 1;
                tally.short += usize::from(short);
                ids.push(r[6]);
            } else {
                tally.refused += 1;
            }
        } else if roll < 85 && !ids.is_empty() {
            let at = rng.below(ids.len() as u64) as usize;
            let renew = roll >= 75;
            let id = if renew { ids[at] } else { ids.swap_remove(at) };
            args.push(if renew { "3h" } else { "1h" }.into());
            args.extend([
                if renew { "RENEW" } else { "RELEASE" }.to_string(),
                id.to_string(),
            ]);
            let r = call(con, &args);
            match (r[0], renew) {
                (0, _) => tally.not_held += 1,
                (_, true) => tally.renewed += 1,
                (_, false) => tally.released += 1,
            }
        } else if roll < 90 {
            args.extend([
                "1h".to_string(),
                "RELEASE".to_string(),
                "424242".to_string(),
            ]);
            assert_eq!(call(con, &args)[0], 0);
        } else {
            args.push("1h".into());
            args.push(if roll < 95 { "PEEK" } else { "COST" }.into());
            if roll >= 95 {
                args.push("0".into());
            }
            call(con, &args);
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(50));
    for i in 0..LEASE_WORKLOAD_KEYS {
        let args = [
            "RL.CONCURRENT".to_string(),
            key(i),
            (3 + i % 4).to_string(),
            "1h".into(),
        ];
        call(con, &args);
    }
    let at_least = |n: usize, per: usize| n * per >= steps;
    assert!(
        at_least(tally.taken, 10)
            && at_least(tally.refused, 30)
            && at_least(tally.released, 20)
            && at_least(tally.renewed, 80)
            && at_least(tally.short, 50),
        "the lease workload is not mixed enough: {tally:?}"
    );
    tally
}
