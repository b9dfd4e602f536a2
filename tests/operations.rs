//! Operations: the `rl.mode` config (on, off, monitor) set at load, by
//! `MODULE LOADEX` and by `CONFIG SET`; the `INFO rl` counters; a mixed
//! workload of every command through a replica, AOF and RDB restarts and a
//! promotion; ACL key patterns and categories.
//!
//! Windows are long (an hour or more; aligned ones chosen so that they do
//! not end for at least ten minutes) so that nothing expires while a test
//! runs, and every wait is for a condition, never a fixed sleep.

mod common;

use common::*;
use redis::Value;
use std::collections::BTreeMap;

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

fn info_i64(con: &mut redis::Connection, section: &str, field: &str) -> i64 {
    let value = info_field(con, section, field);
    value
        .parse()
        .unwrap_or_else(|_| panic!("INFO {section} {field} is {value:?}"))
}

fn config_mode(con: &mut redis::Connection) -> String {
    let pair: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("rl.mode")
        .query(con)
        .unwrap();
    assert_eq!(pair.len(), 2, "CONFIG GET rl.mode: {pair:?}");
    assert_eq!(pair[0], "rl.mode");
    pair[1].clone()
}

fn set_mode(con: &mut redis::Connection, mode: &str) {
    cmd(con, &["CONFIG", "SET", "rl.mode", mode]).unwrap_or_else(|e| panic!("{mode}: {e}"));
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        other => panic!("not an integer: {other:?}"),
    }
}

fn six(v: &Value) -> [i64; 6] {
    match v {
        Value::Array(items) => items
            .iter()
            .map(int)
            .collect::<Vec<_>>()
            .try_into()
            .unwrap_or_else(|items| panic!("not six integers: {items:?}")),
        other => panic!("not a limiter reply: {other:?}"),
    }
}

/// RL.ALL's `[allowed, retry_after, [six]...]`.
fn all_parts(v: &Value) -> (i64, i64, Vec<[i64; 6]>) {
    let Value::Array(items) = v else {
        panic!("not an RL.ALL reply: {v:?}")
    };
    assert!(items.len() >= 3, "{items:?}");
    (
        int(&items[0]),
        int(&items[1]),
        items[2..].iter().map(six).collect(),
    )
}

fn rl_all(con: &mut redis::Connection, args: &[&str]) -> (i64, i64, Vec<[i64; 6]>) {
    let reply = cmd(con, &[&["RL.ALL"], args].concat()).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    all_parts(&reply)
}

fn dbsize(con: &mut redis::Connection) -> i64 {
    redis::cmd("DBSIZE").query(con).unwrap()
}

/// Writes since the last save: moves with every change to the dataset.
fn dirty(con: &mut redis::Connection) -> i64 {
    info_i64(con, "persistence", "rdb_changes_since_last_save")
}

/// Lookups that found or missed a key: move with every read.
fn lookups(con: &mut redis::Connection) -> i64 {
    info_i64(con, "stats", "keyspace_hits") + info_i64(con, "stats", "keyspace_misses")
}

fn module_names(con: &mut redis::Connection) -> Vec<String> {
    let modules: Vec<Vec<Value>> = redis::cmd("MODULE").arg("LIST").query(con).unwrap();
    modules
        .iter()
        .filter_map(|fields| {
            fields.chunks(2).find_map(|pair| match pair {
                [Value::BulkString(k), Value::BulkString(v)] if k == b"name" => {
                    Some(String::from_utf8_lossy(v).into_owned())
                }
                _ => None,
            })
        })
        .collect()
}

/// The server's clock in Unix milliseconds.
fn now_ms(con: &mut redis::Connection) -> i64 {
    let t: Vec<i64> = redis::cmd("TIME").query(con).unwrap();
    t[0] * 1000 + t[1] / 1000
}

/// Aligned windows that do not end within the next ten minutes (by the
/// server's clock), so that no aligned window rolls over during a test.
fn aligned_windows(con: &mut redis::Connection) -> Vec<&'static str> {
    let now = now_ms(con);
    let windows: Vec<&str> = [
        ("1h", 3_600_000i64),
        ("1d", 86_400_000),
        ("7d", 7 * 86_400_000),
        ("365d", 365 * 86_400_000),
        ("3650d", 3650 * 86_400_000),
    ]
    .into_iter()
    .filter(|&(_, ms)| ms - now % ms > 600_000)
    .map(|(name, _)| name)
    .collect();
    assert!(!windows.is_empty(), "no aligned window is safe at {now}");
    windows
}

// ---------------------------------------------------------------------------
// A mixed workload of every command
// ---------------------------------------------------------------------------

/// A small deterministic generator, so every run makes the same calls.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Limiter,
    All,
    Set,
    Get,
    Del,
    List,
}

#[derive(Clone, Debug)]
struct Call {
    args: Vec<Vec<u8>>,
    kind: Kind,
    peek: bool,
}

impl Call {
    fn command(&self) -> redis::Cmd {
        let mut c = redis::cmd(std::str::from_utf8(&self.args[0]).unwrap());
        for a in &self.args[1..] {
            c.arg(a.as_slice());
        }
        c
    }

    fn has(&self, word: &[u8]) -> bool {
        self.args.iter().any(|a| a.as_slice() == word)
    }
}

const KEYS: u64 = 60;
const OKEYS: u64 = 6;

fn limiter_key(prefix: &str, i: u64) -> Vec<u8> {
    let mut key = format!("{prefix}:k:{i}").into_bytes();
    if i == 7 {
        // A binary key name must replicate and persist byte for byte.
        key.extend(b"\x00\xff\r\n bin");
    }
    key
}

fn okey(prefix: &str, j: u64) -> Vec<u8> {
    format!("{prefix}:o:{j}").into_bytes()
}

fn b(s: impl AsRef<str>) -> Vec<u8> {
    s.as_ref().as_bytes().to_vec()
}

/// One limiter clause on key `i`: the algorithm's word and the arguments
/// after it. Each key keeps one algorithm and one window (kind `i % 6`:
/// FIXED, FIXED ALIGNED, SLIDING, SLIDING APPROX, TOKEN BURST, TOKEN);
/// limits sometimes change between calls, costs vary (sometimes above the
/// limit), and keys with unaligned windows sometimes name an override.
fn clause(rng: &mut Lcg, prefix: &str, aligned: &[&str], i: u64) -> (&'static str, Vec<Vec<u8>>) {
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
        1 => ("FIXED", aligned_window, vec![b("ALIGNED")], false),
        2 => (
            "SLIDING",
            ["1h", "7200s"][(i / 6) as usize % 2],
            vec![],
            true,
        ),
        3 => ("SLIDING", aligned_window, vec![b("APPROX")], false),
        4 => (
            "TOKEN",
            "1d",
            vec![b("BURST"), b((base + 2).to_string())],
            true,
        ),
        _ => ("TOKEN", "2d", vec![], true),
    };
    let capacity = if i % 6 == 4 { base + 2 } else { limit };
    let mut args = vec![limiter_key(prefix, i), b(limit.to_string()), b(window)];
    args.extend(options);
    match rng.below(10) {
        0..=5 => {}
        6 | 7 => args.extend([b("COST"), b((2 + rng.below(2)).to_string())]),
        8 => args.extend([b("COST"), b((capacity + 1 + rng.below(3)).to_string())]),
        _ => args.extend([b("COST"), b("1")]),
    }
    if overridable && rng.chance(30) {
        args.extend([b("OVERRIDE"), okey(prefix, rng.below(OKEYS))]);
    }
    (word, args)
}

/// A deterministic mix of every command on keys under `prefix`: the three
/// limiters and RL.ALL (admitted, denied, PEEK, COST above the limit,
/// overrides), and RL.OVERRIDE.SET (with and without BURST and TTL), GET,
/// DEL and LIST. The same seed and prefix give the same calls.
fn mixed_calls(prefix: &str, aligned: &[&str], seed: u64, steps: usize) -> Vec<Call> {
    let mut rng = Lcg(seed);
    let mut calls = Vec::with_capacity(steps);
    for _ in 0..steps {
        let roll = rng.below(100);
        let call = if roll < 55 {
            let i = rng.below(KEYS);
            let (word, args) = clause(&mut rng, prefix, aligned, i);
            let mut argv = vec![b(format!("RL.{word}"))];
            argv.extend(args);
            let peek = rng.chance(10);
            if peek {
                argv.push(b("PEEK"));
            }
            Call {
                args: argv,
                kind: Kind::Limiter,
                peek,
            }
        } else if roll < 70 {
            let n = 1 + rng.below(3) as usize;
            let mut picked: Vec<u64> = Vec::new();
            while picked.len() < n {
                let i = rng.below(KEYS);
                if !picked.contains(&i) {
                    picked.push(i);
                }
            }
            let mut argv = vec![b("RL.ALL")];
            for i in picked {
                let (word, args) = clause(&mut rng, prefix, aligned, i);
                argv.push(b(word));
                argv.extend(args);
            }
            let peek = rng.chance(10);
            if peek {
                argv.push(b("PEEK"));
            }
            Call {
                args: argv,
                kind: Kind::All,
                peek,
            }
        } else if roll < 80 {
            let mut argv = vec![
                b("RL.OVERRIDE.SET"),
                okey(prefix, rng.below(OKEYS)),
                b((5 + 5 * rng.below(6)).to_string()),
                b(["1d", "36h"][rng.below(2) as usize]),
            ];
            if rng.chance(50) {
                argv.extend([b("BURST"), b((5 + 5 * rng.below(7)).to_string())]);
            }
            if rng.chance(50) {
                argv.extend([b("TTL"), b(["1h", "2h", "5400s"][rng.below(3) as usize])]);
            }
            Call {
                args: argv,
                kind: Kind::Set,
                peek: false,
            }
        } else if roll < 88 {
            Call {
                args: vec![b("RL.OVERRIDE.GET"), okey(prefix, rng.below(OKEYS))],
                kind: Kind::Get,
                peek: false,
            }
        } else if roll < 94 {
            let mut argv = vec![b("RL.OVERRIDE.DEL"), okey(prefix, rng.below(OKEYS))];
            if rng.chance(50) {
                argv.push(okey(prefix, rng.below(OKEYS)));
            }
            Call {
                args: argv,
                kind: Kind::Del,
                peek: false,
            }
        } else {
            Call {
                args: vec![
                    b("RL.OVERRIDE.LIST"),
                    b("0"),
                    b("MATCH"),
                    b(format!("{prefix}:o:*")),
                    b("COUNT"),
                    b("1000"),
                ],
                kind: Kind::List,
                peek: false,
            }
        };
        calls.push(call);
    }
    calls
}

/// Sends `calls` as pipelines; every reply must be a success.
fn run_calls(con: &mut redis::Connection, calls: &[Call]) -> Vec<Value> {
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
struct Tally {
    admitted: usize,
    denied: usize,
    /// Denied with a cost above the limit (retry_after -1).
    never: usize,
    peeks: usize,
    all_admitted: usize,
    all_denied: usize,
    sets_with_ttl: usize,
    sets_without_ttl: usize,
    gets_found: usize,
    deleted: usize,
    listed: usize,
    /// Calls per INFO rl command name, and limiter outcomes.
    calls: BTreeMap<&'static str, i64>,
    allowed: BTreeMap<&'static str, i64>,
    refused: BTreeMap<&'static str, i64>,
}

fn stats_name(command: &[u8]) -> &'static str {
    match command.to_ascii_uppercase().as_slice() {
        b"RL.FIXED" => "fixed",
        b"RL.SLIDING" => "sliding",
        b"RL.TOKEN" => "token",
        b"RL.ALL" => "all",
        b"RL.OVERRIDE.SET" => "override_set",
        b"RL.OVERRIDE.GET" => "override_get",
        b"RL.OVERRIDE.DEL" => "override_del",
        b"RL.OVERRIDE.LIST" => "override_list",
        other => panic!("not an RL command: {}", String::from_utf8_lossy(other)),
    }
}

fn tally(calls: &[Call], replies: &[Value]) -> Tally {
    assert_eq!(calls.len(), replies.len());
    let mut t = Tally::default();
    for (call, reply) in calls.iter().zip(replies) {
        let name = stats_name(&call.args[0]);
        *t.calls.entry(name).or_default() += 1;
        let allowed = match call.kind {
            Kind::Limiter => {
                let r = six(reply);
                if !call.peek && r[0] == 0 && r[2] == -1 {
                    t.never += 1;
                }
                Some(r[0] == 1)
            }
            Kind::All => {
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
            Kind::Set => {
                assert_eq!(reply, &Value::Okay, "{call:?}");
                if call.has(b"TTL") {
                    t.sets_with_ttl += 1;
                } else {
                    t.sets_without_ttl += 1;
                }
                None
            }
            Kind::Get => {
                if let Value::Array(fields) = reply {
                    assert_eq!(fields.len(), 4, "{reply:?}");
                    t.gets_found += 1;
                } else {
                    assert_eq!(reply, &Value::Nil, "{call:?}");
                }
                None
            }
            Kind::Del => {
                t.deleted += int(reply) as usize;
                None
            }
            Kind::List => {
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
fn workload(con: &mut redis::Connection, prefix: &str, seed: u64, steps: usize) -> Tally {
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

// ---------------------------------------------------------------------------
// Primary, replica, persistence
// ---------------------------------------------------------------------------

type Snapshot = Vec<(Vec<u8>, Vec<u8>, i64)>;

/// Panics with the first difference (not two whole datasets) when two
/// snapshots differ.
#[track_caller]
fn assert_same_snapshot(got: &Snapshot, want: &Snapshot, what: &str) {
    if got == want {
        return;
    }
    let show = |k: &[u8]| k.escape_ascii().to_string();
    let got_keys: Vec<&Vec<u8>> = got.iter().map(|(k, _, _)| k).collect();
    let want_keys: Vec<&Vec<u8>> = want.iter().map(|(k, _, _)| k).collect();
    if got_keys != want_keys {
        let missing: Vec<String> = want_keys
            .iter()
            .filter(|k| !got_keys.contains(k))
            .map(|k| show(k))
            .collect();
        let extra: Vec<String> = got_keys
            .iter()
            .filter(|k| !want_keys.contains(k))
            .map(|k| show(k))
            .collect();
        panic!("{what}: keys differ: missing {missing:?}, extra {extra:?}");
    }
    let differing: Vec<String> = got
        .iter()
        .zip(want)
        .filter(|(g, w)| g != w)
        .map(|((k, gv, gat), (_, wv, wat))| {
            format!(
                "{} (value {}, expiry {gat} vs {wat})",
                show(k),
                if gv == wv { "same" } else { "differs" }
            )
        })
        .collect();
    panic!(
        "{what}: {} of {} keys differ: {}",
        differing.len(),
        want.len(),
        differing.join(", ")
    );
}

/// Snapshot and digest equal, the dataset not empty, every limiter key
/// with an expiry.
fn assert_same_dataset(
    what: &str,
    a: &mut redis::Connection,
    b: &mut redis::Connection,
) -> Vec<(Vec<u8>, Vec<u8>, i64)> {
    let snap = snapshot(a);
    assert!(snap.len() > 10, "{what}: only {} keys", snap.len());
    assert!(
        snap.iter()
            .filter(|(k, _, _)| !k.windows(3).any(|w| w == b":o:"))
            .all(|(_, _, at)| *at > 0),
        "{what}: a limiter key has no expiry"
    );
    assert!(
        snap.iter()
            .any(|(k, _, at)| k.windows(3).any(|w| w == b":o:") && *at == -1),
        "{what}: no override without TTL"
    );
    assert_same_snapshot(&snapshot(b), &snap, what);
    assert_eq!(digest(a), digest(b), "{what}: digests differ");
    snap
}

const COUNTED: [&str; 8] = [
    "fixed",
    "sliding",
    "token",
    "all",
    "override_set",
    "override_get",
    "override_del",
    "override_list",
];

const LIMITER_COUNTERS: [&str; 5] = ["calls", "allowed", "denied", "monitor_would_deny", "errors"];
const OVERRIDE_COUNTERS: [&str; 2] = ["calls", "errors"];

/// Every counter of `INFO rl`, checking that each is a plain
/// `name:integer` line and that exactly the expected fields are there.
fn counters(con: &mut redis::Connection) -> BTreeMap<String, i64> {
    let info: String = redis::cmd("INFO").arg("rl").query(con).unwrap();
    let mut found = BTreeMap::new();
    let mut mode = None;
    for line in info.lines() {
        let line = line.trim_end_matches('\r');
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, value) = line
            .split_once(':')
            .unwrap_or_else(|| panic!("not a field: {line:?}"));
        if name == "rl_mode" {
            mode = Some(value.to_string());
            continue;
        }
        assert!(
            name.bytes().all(|c| c.is_ascii_lowercase() || c == b'_'),
            "{line:?}"
        );
        let value: i64 = value
            .parse()
            .unwrap_or_else(|_| panic!("not a plain integer: {line:?}"));
        assert!(value >= 0, "{line:?}");
        assert!(found.insert(name.to_string(), value).is_none(), "{line:?}");
    }
    assert!(mode.is_some(), "no rl_mode in {info}");
    let mut expected: Vec<String> = Vec::new();
    for command in COUNTED {
        let names: &[&str] = if command.starts_with("override") {
            &OVERRIDE_COUNTERS
        } else {
            &LIMITER_COUNTERS
        };
        expected.extend(names.iter().map(|c| format!("rl_{command}_{c}")));
    }
    expected.sort();
    assert_eq!(
        found.keys().cloned().collect::<Vec<_>>(),
        expected,
        "INFO rl fields"
    );
    found
}

fn all_zero(counters: &BTreeMap<String, i64>) -> bool {
    counters.values().all(|&v| v == 0)
}

// ---------------------------------------------------------------------------
// rl.mode: where it is set
// ---------------------------------------------------------------------------

/// A limit of 1: the first call is admitted, the second one is what the
/// mode makes of a call that `on` denies.
fn second_call_of_one(con: &mut redis::Connection, key: &str) -> [i64; 6] {
    let args = ["RL.FIXED", key, "1", "1h"];
    limiter(con, &args);
    limiter(con, &args)
}

fn assert_behaves_as(con: &mut redis::Connection, mode: &str, key: &str) {
    assert_eq!(config_mode(con), mode);
    assert_eq!(info_field(con, "rl", "rl_mode"), mode);
    let before = dbsize(con);
    let r = second_call_of_one(con, key);
    match mode {
        "on" => {
            assert_eq!(r[..2], [0, 1], "{r:?}");
            assert!(r[2] > 0, "{r:?}");
        }
        "monitor" => {
            assert_eq!(r[..2], [1, 1], "{r:?}");
            assert!(r[2] > 0, "monitor keeps retry_after: {r:?}");
        }
        "off" => {
            assert_eq!(r, [1, 0, 0, 1, 1, 0]);
            assert_eq!(dbsize(con), before, "off created {key}");
        }
        _ => unreachable!(),
    }
}

#[test]
fn mode_defaults_to_on_and_config_set_changes_it_at_run_time() {
    on_each_server(|server, con| {
        assert_behaves_as(con, "on", "a");
        for (i, mode) in ["off", "monitor", "on", "monitor", "off", "on"]
            .into_iter()
            .enumerate()
        {
            set_mode(con, mode);
            assert_behaves_as(con, mode, &format!("k{i}"));
        }
        // Enum configs compare case-insensitively, like the server's own.
        set_mode(con, "MONITOR");
        assert_eq!(config_mode(con), "monitor");
        for bad in ["maybe", "", "1", "on off", "onn"] {
            let err = cmd(con, &["CONFIG", "SET", "rl.mode", bad]).unwrap_err();
            assert!(
                err.starts_with("ERR "),
                "{:?} {bad:?}: {err}",
                server.flavor
            );
            assert_eq!(config_mode(con), "monitor", "{bad:?} changed the mode");
        }
        // CONFIG GET with a pattern finds it too.
        let pairs: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("rl.*")
            .query(con)
            .unwrap();
        assert_eq!(pairs, ["rl.mode", "monitor"]);
    });
}

#[test]
fn mode_given_as_module_argument_at_load() {
    for flavor in FLAVORS {
        for mode in ["monitor", "off", "on"] {
            let server = Server::start_with_module_args(flavor, &[], &["mode", mode]);
            let mut con = server.conn();
            assert_behaves_as(&mut con, mode, "a");
            // Still settable at run time.
            set_mode(&mut con, "on");
            assert_behaves_as(&mut con, "on", "b");
        }
    }
}

fn without_module(flavor: Flavor) -> (Server, redis::Connection, String) {
    let server = Server::start_without_module(flavor, &["--enable-module-command", "yes"]);
    let mut con = server.conn();
    assert!(!module_names(&mut con).contains(&"rl".to_string()));
    assert!(cmd(&mut con, &["RL.FIXED", "a", "1", "1h"]).is_err());
    (server, con, module_path().to_string_lossy().into_owned())
}

#[test]
fn mode_given_to_module_loadex() {
    for flavor in FLAVORS {
        let (_server, mut con, path) = without_module(flavor);
        cmd(
            &mut con,
            &["MODULE", "LOADEX", &path, "CONFIG", "rl.mode", "monitor"],
        )
        .unwrap();
        assert!(module_names(&mut con).contains(&"rl".to_string()));
        assert_behaves_as(&mut con, "monitor", "a");
        set_mode(&mut con, "off");
        assert_behaves_as(&mut con, "off", "b");

        // An invalid value is refused and the module is not loaded.
        let (_server, mut con, path) = without_module(flavor);
        let err = cmd(
            &mut con,
            &["MODULE", "LOADEX", &path, "CONFIG", "rl.mode", "maybe"],
        )
        .unwrap_err();
        assert!(err.starts_with("ERR"), "{flavor:?}: {err}");
        assert!(!module_names(&mut con).contains(&"rl".to_string()));
        assert!(cmd(&mut con, &["RL.FIXED", "a", "1", "1h"]).is_err());

        // LOADEX ARGS and MODULE LOAD with arguments take `mode` too.
        for load in [
            vec!["MODULE", "LOADEX", &path, "ARGS", "mode", "off"],
            vec!["MODULE", "LOAD", &path, "mode", "off"],
        ] {
            let (_server, mut con, _) = without_module(flavor);
            cmd(&mut con, &load).unwrap_or_else(|e| panic!("{load:?}: {e}"));
            assert_behaves_as(&mut con, "off", "a");
        }
    }
}

/// Regression: Valkey 9.1 keeps a module's ACL category after the module
/// is unloaded (also after a LOADEX whose CONFIG was refused), and librl
/// used to treat "category already exists" as fatal, so it could not be
/// loaded again by that server process.
#[test]
fn module_loads_again_after_a_refused_loadex_and_after_unload() {
    for flavor in FLAVORS {
        let (server, mut con, path) = without_module(flavor);
        assert!(cmd(
            &mut con,
            &["MODULE", "LOADEX", &path, "CONFIG", "rl.mode", "maybe"],
        )
        .is_err());
        cmd(
            &mut con,
            &["MODULE", "LOADEX", &path, "CONFIG", "rl.mode", "monitor"],
        )
        .unwrap_or_else(|e| panic!("{flavor:?}: after a refused LOADEX: {e}\n{}", server.log()));
        assert_behaves_as(&mut con, "monitor", "a");
        cmd(&mut con, &["MODULE", "UNLOAD", "rl"]).unwrap();
        cmd(&mut con, &["MODULE", "LOAD", &path])
            .unwrap_or_else(|e| panic!("{flavor:?}: after MODULE UNLOAD: {e}\n{}", server.log()));
        assert_behaves_as(&mut con, "on", "b");
    }
}

/// Regression: the module arguments are read by looking up each config's
/// name (case-sensitively) among them, and anything else used to be
/// ignored, so a typo (`mod monitor`, `MODE monitor`, a dangling `mode`)
/// started the server silently in `on`. Now the module refuses to load.
#[test]
fn module_arguments_that_are_not_a_config_are_refused() {
    for flavor in FLAVORS {
        for args in [
            &["mod", "monitor"][..],
            &["mode"],
            &["mode", "monitor", "extra"],
            &["MODE", "monitor"],
        ] {
            let started = std::panic::catch_unwind(|| {
                let server = Server::start_with_module_args(flavor, &[], args);
                config_mode(&mut server.conn())
            });
            match started {
                // Refused: the server did not start.
                Err(_) => {}
                // Or understood, as CONFIG SET RL.MODE would be.
                Ok(mode) if args == ["MODE", "monitor"] => assert_eq!(mode, "monitor"),
                Ok(mode) => panic!("{flavor:?} {args:?}: loaded in mode {mode}"),
            }
        }
    }
}

// ---------------------------------------------------------------------------
// monitor
// ---------------------------------------------------------------------------

#[test]
fn monitor_admits_and_keeps_retry_after() {
    on_each_server(|_, con| {
        set_mode(con, "monitor");
        // FIXED: what on would deny is admitted with on's retry_after.
        let first = limiter(con, &["RL.FIXED", "f", "2", "1h", "COST", "2"]);
        assert_eq!(first[..5], [1, 2, 0, 2, 0]);
        let r = limiter(con, &["RL.FIXED", "f", "2", "1h"]);
        assert_eq!(r[..2], [1, 2], "{r:?}");
        assert!(r[2] > 3_590_000 && r[2] == r[5], "{r:?}");
        // The denied call recorded nothing.
        assert_eq!(limiter(con, &["RL.FIXED", "f", "2", "1h", "PEEK"])[1], 2);
        // A cost above the limit: -1, no wait helps.
        let r = limiter(con, &["RL.FIXED", "f", "2", "1h", "COST", "3"]);
        assert_eq!(r[..3], [1, 2, -1], "{r:?}");
        let r = limiter(con, &["RL.FIXED", "new", "2", "1h", "COST", "3"]);
        assert_eq!(r[..3], [1, 0, -1], "{r:?}");
        assert_eq!(dbsize(con), 1, "a denied call created a key");

        for args in [
            ["RL.SLIDING", "s", "1", "1h", ""],
            ["RL.SLIDING", "a", "1", "1h", "APPROX"],
            ["RL.TOKEN", "t", "1", "1d", ""],
        ] {
            let args: Vec<&str> = args.into_iter().filter(|a| !a.is_empty()).collect();
            assert_eq!(limiter(con, &args)[..3], [1, 1, 0], "{args:?}");
            let r = limiter(con, &args);
            assert_eq!(r[..2], [1, 1], "{args:?}: {r:?}");
            assert!(r[2] > 0, "{args:?}: {r:?}");
            let mut over = args.clone();
            over.extend(["COST", "2"]);
            assert_eq!(limiter(con, &over)[..3], [1, 1, -1], "{args:?}");
        }

        // RL.ALL: admitted at the top; clause replies still say which
        // limits would have refused the call; nothing recorded anywhere.
        let before = snapshot(con);
        let (allowed, retry, clauses) =
            rl_all(con, &["FIXED", "f", "2", "1h", "TOKEN", "fresh", "5", "1d"]);
        assert_eq!(allowed, 1);
        assert!(retry > 3_590_000 && retry == clauses[0][2], "{retry}");
        assert_eq!(clauses[0][..2], [0, 2]);
        assert_eq!(clauses[1][..2], [1, 1], "the TOKEN clause's PEEK reply");
        let (allowed, retry, _) = rl_all(
            con,
            &[
                "FIXED", "f", "2", "1h", "TOKEN", "fresh", "1", "1d", "COST", "2",
            ],
        );
        assert_eq!((allowed, retry), (1, -1));
        assert_same_snapshot(
            &snapshot(con),
            &before,
            "a call on would deny changed state",
        );
        // Admitted by every clause: recorded, as on would.
        let (allowed, retry, clauses) =
            rl_all(con, &["FIXED", "g", "2", "1h", "TOKEN", "fresh", "5", "1d"]);
        assert_eq!((allowed, retry), (1, 0));
        assert_eq!(clauses[0][..3], [1, 1, 0]);
        assert_eq!(clauses[1][..3], [1, 1, 0]);
        assert_ne!(snapshot(con), before);
    });
}

/// Strips `prefix` from every key of a snapshot that has it.
fn under_prefix(snap: &[(Vec<u8>, Vec<u8>, i64)], prefix: &str) -> Vec<(Vec<u8>, Vec<u8>, i64)> {
    snap.iter()
        .filter_map(|(k, v, at)| {
            k.strip_prefix(prefix.as_bytes())
                .map(|rest| (rest.to_vec(), v.clone(), *at))
        })
        .collect()
}

/// The keys and okeys a call names, without their prefix.
fn keys_of(call: &Call, prefix: &str) -> Vec<Vec<u8>> {
    call.args[1..]
        .iter()
        .filter_map(|a| a.strip_prefix(prefix.as_bytes()).map(<[u8]>::to_vec))
        .collect()
}

/// A FIXED limiter whose window ends in ten years: a PEEK of it says how
/// far away that end is by the module's own clock (TIME inside MULTI is
/// frozen on Valkey, so it cannot tell whether a MULTI crossed a
/// millisecond). Its PEEK is admitted, so it counts as allowed.
const CLOCK: [&str; 4] = ["RL.FIXED", "clock", "2", "3650d"];

fn clock_probe() -> redis::Cmd {
    let mut c = redis::cmd(CLOCK[0]);
    c.arg(&CLOCK[1..]).arg("PEEK");
    c
}

/// Waits until the system clock, which the server reads too, is early in
/// a millisecond, so that what is sent next runs within that millisecond.
fn early_in_a_millisecond() {
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(5);
    while std::time::Instant::now() < deadline {
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        if since.subsec_micros() % 1000 < 100 {
            return;
        }
        std::hint::spin_loop();
    }
}

struct Lockstep {
    calls: Vec<Call>,
    on: Vec<Value>,
    monitor: Vec<Value>,
    /// Whether the pair may be compared: no key of the call had a step
    /// that straddled a millisecond boundary, up to and including this one.
    comparable: Vec<bool>,
    /// Keys (without prefix) whose twins may have seen different clocks.
    tainted: std::collections::HashSet<Vec<u8>>,
}

/// Drives keys under `on` with the mode on and the same calls on the same
/// keys under `mon` in monitor, each pair in one MULTI, started early in a
/// millisecond so that both calls see the same clock. A clock probe
/// brackets each pair; a pair that straddled a millisecond anyway (the host was busy)
/// taints its keys, which are then left out of the comparison.
fn on_and_monitor_in_lockstep(con: &mut redis::Connection, steps: usize) -> Lockstep {
    let aligned = aligned_windows(con);
    let calls = mixed_calls("on", &aligned, 11, steps);
    let twins = mixed_calls("mon", &aligned, 11, steps);
    limiter(con, &CLOCK);
    let mut run = Lockstep {
        calls: calls.clone(),
        on: Vec::new(),
        monitor: Vec::new(),
        comparable: Vec::new(),
        tainted: Default::default(),
    };
    for (on_call, mon_call) in calls.iter().zip(&twins) {
        assert_eq!(keys_of(on_call, "on"), keys_of(mon_call, "mon"));
        let mut pipe = redis::pipe();
        pipe.atomic()
            .add_command(clock_probe())
            .add_command(on_call.command())
            .cmd("CONFIG")
            .arg("SET")
            .arg("rl.mode")
            .arg("monitor")
            .add_command(mon_call.command())
            .cmd("CONFIG")
            .arg("SET")
            .arg("rl.mode")
            .arg("on")
            .add_command(clock_probe());
        early_in_a_millisecond();
        let replies: Vec<Value> = pipe
            .query(con)
            .unwrap_or_else(|e| panic!("{on_call:?}: {}", error_line(&e)));
        assert_eq!(replies.len(), 6);
        let keys = keys_of(on_call, "on");
        if six(&replies[0])[5] != six(&replies[5])[5] {
            run.tainted.extend(keys.iter().cloned());
        }
        run.comparable
            .push(keys.iter().all(|k| !run.tainted.contains(k)));
        run.on.push(replies[1].clone());
        run.monitor.push(replies[3].clone());
    }
    run
}

#[test]
fn monitor_changes_state_exactly_as_on() {
    on_each_server(|server, con| {
        let run = on_and_monitor_in_lockstep(con, 400);
        let t = tally(&run.calls, &run.on);
        assert!(
            t.denied >= 40 && t.never >= 5 && t.all_denied >= 5 && t.peeks >= 5,
            "{t:?}"
        );
        let mut would_deny = 0;
        let mut compared = 0;
        for (i, call) in run.calls.iter().enumerate() {
            let (on, mon) = (&run.on[i], &run.monitor[i]);
            // Admitted in monitor whatever on says, and counted.
            let on_denied = match call.kind {
                Kind::Limiter => {
                    assert_eq!(six(mon)[0], 1, "{call:?}: monitor refused: {mon:?}");
                    six(on)[0] == 0
                }
                Kind::All => {
                    assert_eq!(all_parts(mon).0, 1, "{call:?}: monitor refused: {mon:?}");
                    all_parts(on).0 == 0
                }
                _ => false,
            };
            would_deny += usize::from(on_denied);
            if !run.comparable[i] {
                continue;
            }
            compared += 1;
            match call.kind {
                Kind::Limiter => {
                    let (on, mon) = (six(on), six(mon));
                    assert_eq!(mon[1..], on[1..], "{call:?}");
                    if on[0] == 0 {
                        assert!(on[2] > 0 || on[2] == -1, "{call:?}: {on:?}");
                    }
                }
                Kind::All => {
                    let (on_allowed, on_retry, on_clauses) = all_parts(on);
                    let (_, mon_retry, mon_clauses) = all_parts(mon);
                    assert_eq!(mon_retry, on_retry, "{call:?}");
                    assert_eq!(mon_clauses, on_clauses, "{call:?}");
                    if on_allowed == 0 {
                        assert!(on_retry > 0 || on_retry == -1, "{call:?}");
                    }
                }
                // Override commands are not subject to the mode.
                Kind::Set | Kind::Get | Kind::Del => assert_eq!(mon, on, "{call:?}"),
                Kind::List => {}
            }
        }
        eprintln!(
            "{:?}: {compared} of {} pairs compared, {} keys tainted",
            server.flavor,
            run.calls.len(),
            run.tainted.len()
        );
        assert!(would_deny >= 30, "{would_deny}");
        assert!(
            compared >= run.calls.len() / 2,
            "{:?}: only {compared} pairs comparable; tainted: {}",
            server.flavor,
            run.tainted.len()
        );
        let snap = snapshot(con);
        let untainted = |state: Vec<(Vec<u8>, Vec<u8>, i64)>| -> Vec<_> {
            state
                .into_iter()
                .filter(|(k, _, _)| !run.tainted.contains(k))
                .collect()
        };
        let on_state = untainted(under_prefix(&snap, "on"));
        assert!(on_state.len() > 15, "{}", on_state.len());
        assert_same_snapshot(
            &untainted(under_prefix(&snap, "mon")),
            &on_state,
            &format!(
                "{:?}: monitor left a different state than on",
                server.flavor
            ),
        );
        // Every call on denied was counted as such, and as a would-deny of
        // its twin in monitor.
        let c = counters(con);
        let mut total = 0;
        for command in ["fixed", "sliding", "token", "all"] {
            let denied = c[&format!("rl_{command}_denied")];
            assert_eq!(
                c[&format!("rl_{command}_monitor_would_deny")],
                denied,
                "{command}: {c:?}"
            );
            total += denied;
        }
        assert_eq!(total as usize, would_deny);
    });
}

// ---------------------------------------------------------------------------
// off
// ---------------------------------------------------------------------------

#[test]
fn off_reads_and_writes_nothing() {
    on_each_server(|server, con| {
        // State left by on, including a full limiter, an override and a
        // key of another type.
        limiter(con, &["RL.FIXED", "full", "2", "1h", "COST", "2"]);
        limiter(con, &["RL.SLIDING", "s", "3", "1h"]);
        limiter(con, &["RL.TOKEN", "t", "3", "1d"]);
        cmd(con, &["RL.OVERRIDE.SET", "o", "50", "1h", "BURST", "60"]).unwrap();
        cmd(con, &["RPUSH", "list", "x"]).unwrap();
        let before = snapshot(con);
        let (dirty_before, lookups_before) = (dirty(con), lookups(con));
        set_mode(con, "off");

        let cases: &[(&[&str], [i64; 6])] = &[
            (&["RL.FIXED", "full", "2", "1h"], [1, 0, 0, 2, 2, 0]),
            (
                &["RL.FIXED", "full", "2", "1h", "COST", "5"],
                [1, 0, 0, 2, 2, 0],
            ),
            (
                &["RL.FIXED", "new", "7", "1h", "ALIGNED"],
                [1, 0, 0, 7, 7, 0],
            ),
            (&["RL.FIXED", "new", "7", "1h", "PEEK"], [1, 0, 0, 7, 7, 0]),
            (
                &["RL.SLIDING", "s", "3", "1h", "COST", "3"],
                [1, 0, 0, 3, 3, 0],
            ),
            (
                &["RL.SLIDING", "sa", "4", "1h", "APPROX"],
                [1, 0, 0, 4, 4, 0],
            ),
            (&["RL.TOKEN", "t", "3", "1d"], [1, 0, 0, 3, 3, 0]),
            (
                &["RL.TOKEN", "t2", "3", "1d", "BURST", "9"],
                [1, 0, 0, 9, 9, 0],
            ),
            // The override is not read: the call's own values apply.
            (
                &["RL.FIXED", "full", "2", "1h", "OVERRIDE", "o"],
                [1, 0, 0, 2, 2, 0],
            ),
            (
                &["RL.TOKEN", "t", "3", "1d", "OVERRIDE", "o"],
                [1, 0, 0, 3, 3, 0],
            ),
            // Nor is the key: another type is not even noticed.
            (&["RL.FIXED", "list", "2", "1h"], [1, 0, 0, 2, 2, 0]),
            (
                &["RL.TOKEN", "t", "3", "1d", "OVERRIDE", "list"],
                [1, 0, 0, 3, 3, 0],
            ),
        ];
        for (args, want) in cases {
            assert_eq!(&limiter(con, args), want, "{:?} {args:?}", server.flavor);
        }
        let reply = cmd(
            con,
            &[
                "RL.ALL", "FIXED", "full", "2", "1h", "SLIDING", "s", "3", "1h", "TOKEN", "t", "1",
                "1d", "BURST", "4", "COST", "9", "OVERRIDE", "o",
            ],
        )
        .unwrap();
        let (allowed, retry, clauses) = all_parts(&reply);
        assert_eq!((allowed, retry), (1, 0));
        assert_eq!(
            clauses,
            [[1, 0, 0, 2, 2, 0], [1, 0, 0, 3, 3, 0], [1, 0, 0, 4, 4, 0]]
        );
        let (allowed, _, clauses) = rl_all(con, &["FIXED", "x", "1", "1h", "PEEK"]);
        assert_eq!((allowed, clauses), (1, vec![[1, 0, 0, 1, 1, 0]]));
        // Malformed calls are still refused.
        for bad in [
            &["RL.FIXED", "k", "0", "1h"][..],
            &["RL.TOKEN", "k", "1", "1d", "BURST"],
            &["RL.ALL", "FIXED", "k", "1", "1h", "FIXED", "k", "1", "1h"],
        ] {
            assert!(cmd(con, bad).unwrap_err().starts_with("ERR"), "{bad:?}");
        }
        // (Before the snapshot, whose DUMPs are lookups too.)
        assert_eq!(lookups(con), lookups_before, "off read a key");
        assert_eq!(dirty(con), dirty_before, "off wrote");
        assert_same_snapshot(&snapshot(con), &before, "off changed the dataset");

        // Back on, every limiter carries on from where on left it.
        set_mode(con, "on");
        assert_eq!(limiter(con, &["RL.FIXED", "full", "2", "1h"])[..2], [0, 2]);
        assert_eq!(limiter(con, &["RL.SLIDING", "s", "3", "1h"])[..2], [1, 2]);
        assert_eq!(limiter(con, &["RL.TOKEN", "t", "3", "1d"])[..2], [1, 2]);
        assert!(dirty(con) > dirty_before, "on's writes are not counted");
        // PEEK and okeys open keys for reading, which the server counts:
        // the check above would have seen off reading them.
        let lookups_on = lookups(con);
        limiter(con, &["RL.FIXED", "new", "7", "1h", "PEEK"]);
        limiter(con, &["RL.FIXED", "full", "2", "1h", "OVERRIDE", "o"]);
        assert!(
            lookups(con) >= lookups_on + 2,
            "module reads are not counted"
        );
    });
}

#[test]
fn override_commands_work_in_every_mode() {
    on_each_server(|_, con| {
        for mode in ["off", "monitor", "on"] {
            set_mode(con, mode);
            let okey = format!("o:{mode}");
            assert_eq!(
                cmd(con, &["RL.OVERRIDE.SET", &okey, "5", "1h"]).unwrap(),
                Value::Okay
            );
            let got = cmd(con, &["RL.OVERRIDE.GET", &okey]).unwrap();
            assert_eq!(
                got,
                Value::Array(vec![
                    Value::Int(5),
                    Value::Int(3_600_000),
                    Value::Int(0),
                    Value::Int(-1)
                ])
            );
            assert_eq!(
                cmd(con, &["RL.OVERRIDE.DEL", &okey]).unwrap(),
                Value::Int(1)
            );
        }
    });
}

// ---------------------------------------------------------------------------
// Modes and replication
// ---------------------------------------------------------------------------

#[test]
fn mode_of_a_replica_does_not_affect_replication() {
    for flavor in FLAVORS {
        // No pings, so only propagated commands move the offset.
        let (primary, replica) =
            primary_and_replica(flavor, &["--repl-ping-replica-period", "3600"]);
        let (mut pcon, mut rcon) = (primary.conn(), replica.conn());

        set_mode(&mut rcon, "off");
        workload(&mut pcon, "a", 21, 400);
        wait_in_sync(&mut pcon, &mut rcon);
        assert_same_dataset(&format!("{flavor:?} replica off"), &mut pcon, &mut rcon);

        set_mode(&mut rcon, "monitor");
        workload(&mut pcon, "b", 22, 400);
        wait_in_sync(&mut pcon, &mut rcon);
        assert_same_dataset(&format!("{flavor:?} replica monitor"), &mut pcon, &mut rcon);

        // A primary in monitor replicates what on would record.
        set_mode(&mut pcon, "monitor");
        set_mode(&mut rcon, "off");
        mixed_calls_on(&mut pcon, "c", 23, 400);
        wait_in_sync(&mut pcon, &mut rcon);
        assert_same_dataset(&format!("{flavor:?} primary monitor"), &mut pcon, &mut rcon);

        // A primary in off propagates no limiter call at all.
        set_mode(&mut pcon, "off");
        set_mode(&mut rcon, "on");
        let offset = info_i64(&mut pcon, "replication", "master_repl_offset");
        let aligned = aligned_windows(&mut pcon);
        let limiters: Vec<Call> = mixed_calls("a", &aligned, 24, 400)
            .into_iter()
            .filter(|c| matches!(c.kind, Kind::Limiter | Kind::All))
            .collect();
        run_calls(&mut pcon, &limiters);
        assert_eq!(
            info_i64(&mut pcon, "replication", "master_repl_offset"),
            offset,
            "{flavor:?}: off propagated something"
        );
        assert_same_dataset(&format!("{flavor:?} primary off"), &mut pcon, &mut rcon);
        // Replayed calls count nowhere on the replica.
        assert!(all_zero(&counters(&mut rcon)), "{:?}", counters(&mut rcon));
    }
}

/// A mixed workload whose replies are not checked for being mixed (in
/// monitor every limiter call is admitted).
fn mixed_calls_on(con: &mut redis::Connection, prefix: &str, seed: u64, steps: usize) {
    let aligned = aligned_windows(con);
    run_calls(con, &mixed_calls(prefix, &aligned, seed, steps));
}

// ---------------------------------------------------------------------------
// INFO rl
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// A limiter call admitted (in monitor: one that on admits too).
    Allowed,
    Denied,
    /// Admitted in monitor, denied by on.
    WouldDeny,
    /// An error reply from the module.
    Error,
    /// An override command that succeeded.
    Done,
    /// Refused by the server before the module runs (wrong arity): the
    /// server's own `rejected_calls` has it, the module never sees it.
    Rejected,
}

fn expect(expected: &mut BTreeMap<String, i64>, command: &str, counter: &str) {
    *expected
        .get_mut(&format!("rl_{command}_{counter}"))
        .unwrap_or_else(|| panic!("no field rl_{command}_{counter}")) += 1;
}

/// Makes the call and checks that it had `outcome`; returns what it adds
/// to the counters.
fn scripted(con: &mut redis::Connection, args: &[&str], outcome: Outcome) -> Vec<&'static str> {
    let reply = cmd(con, args);
    let allowed_retry = |v: &Value| -> (i64, i64) {
        if args[0].eq_ignore_ascii_case("RL.ALL") {
            let (a, r, _) = all_parts(v);
            (a, r)
        } else {
            let r = six(v);
            (r[0], r[2])
        }
    };
    match outcome {
        Outcome::Allowed => {
            let (a, r) = allowed_retry(&reply.unwrap_or_else(|e| panic!("{args:?}: {e}")));
            assert_eq!((a, r), (1, 0), "{args:?}");
            vec!["calls", "allowed"]
        }
        Outcome::Denied => {
            let (a, r) = allowed_retry(&reply.unwrap_or_else(|e| panic!("{args:?}: {e}")));
            assert_eq!(a, 0, "{args:?}");
            assert_ne!(r, 0, "{args:?}");
            vec!["calls", "denied"]
        }
        Outcome::WouldDeny => {
            let (a, r) = allowed_retry(&reply.unwrap_or_else(|e| panic!("{args:?}: {e}")));
            assert_eq!(a, 1, "{args:?}");
            assert_ne!(r, 0, "{args:?}");
            vec!["calls", "allowed", "monitor_would_deny"]
        }
        Outcome::Error => {
            let err = reply.unwrap_err();
            assert!(
                !err.contains("wrong number of arguments"),
                "{args:?}: {err}"
            );
            vec!["calls", "errors"]
        }
        Outcome::Done => {
            reply.unwrap_or_else(|e| panic!("{args:?}: {e}"));
            vec!["calls"]
        }
        Outcome::Rejected => {
            let err = reply.unwrap_err();
            assert!(err.contains("wrong number of arguments"), "{args:?}: {err}");
            vec![]
        }
    }
}

#[test]
fn info_counts_every_outcome_of_every_command_exactly() {
    use Outcome::*;
    on_each_server(|server, con| {
        let start = counters(con);
        assert!(all_zero(&start), "{start:?}");
        let mut expected = start.clone();
        cmd(con, &["RPUSH", "list", "x"]).unwrap();
        type Step<'a> = (&'a [&'a str], Outcome);
        let on: &[Step] = &[
            (&["RL.FIXED", "f", "2", "1h"], Allowed),
            (&["rl.fixed", "f", "2", "1h", "COST", "1"], Allowed),
            (&["RL.FIXED", "f", "2", "1h"], Denied),
            (&["RL.FIXED", "f", "2", "1h", "PEEK"], Denied),
            (&["RL.FIXED", "f2", "2", "1h", "PEEK"], Allowed),
            (&["RL.FIXED", "f", "2", "1h", "COST", "3"], Denied),
            (&["RL.FIXED", "f", "0", "1h"], Error),
            (&["RL.FIXED", "f", "2", "1h", "BOGUS"], Error),
            (&["RL.FIXED", "list", "2", "1h"], Error),
            (&["RL.FIXED", "f", "2"], Rejected),
            (&["RL.SLIDING", "s", "1", "1h"], Allowed),
            (&["RL.SLIDING", "s", "1", "1h"], Denied),
            (&["RL.SLIDING", "sa", "1", "1h", "APPROX"], Allowed),
            (&["RL.SLIDING", "sa", "1", "1h", "APPROX", "PEEK"], Denied),
            (&["RL.SLIDING", "s", "1", "1h", "APPROX"], Error),
            (&["RL.SLIDING", "s", "1", "0"], Error),
            (&["RL.TOKEN", "t", "1", "1d"], Allowed),
            (&["RL.TOKEN", "t", "1", "1d"], Denied),
            (&["RL.TOKEN", "t", "1", "1d", "BURST", "0"], Error),
            (&["RL.TOKEN", "f", "1", "1d"], Error),
            (&["RL.TOKEN"], Rejected),
            (
                &["RL.ALL", "FIXED", "a1", "1", "1h", "TOKEN", "a2", "5", "1d"],
                Allowed,
            ),
            (
                &["RL.ALL", "FIXED", "a1", "1", "1h", "TOKEN", "a2", "5", "1d"],
                Denied,
            ),
            (&["RL.ALL", "TOKEN", "a2", "5", "1d", "PEEK"], Allowed),
            (&["RL.ALL", "FIXED", "a1", "1", "1h", "PEEK"], Denied),
            (
                &["RL.ALL", "FIXED", "a3", "1", "1h", "FIXED", "a3", "1", "1h"],
                Error,
            ),
            (
                &["RL.ALL", "FIXED", "a3", "1", "1h", "OVERRIDE", "list"],
                Error,
            ),
            (&["RL.ALL", "PEEK"], Error),
            (&["RL.ALL"], Rejected),
            (&["RL.OVERRIDE.SET", "o", "5", "1h", "TTL", "2h"], Done),
            (&["RL.OVERRIDE.SET", "o", "0", "1h"], Error),
            (&["RL.OVERRIDE.SET", "f", "5", "1h"], Error),
            (&["RL.OVERRIDE.SET", "o", "5"], Rejected),
            (&["RL.OVERRIDE.GET", "o"], Done),
            (&["RL.OVERRIDE.GET", "missing"], Done),
            (&["RL.OVERRIDE.GET", "f"], Error),
            (&["RL.OVERRIDE.GET", "o", "extra"], Rejected),
            (&["RL.OVERRIDE.DEL", "missing", "o"], Done),
            (&["RL.OVERRIDE.DEL", "f"], Error),
            (&["RL.OVERRIDE.LIST", "0"], Done),
            (&["RL.OVERRIDE.LIST", "0", "COUNT", "0"], Error),
            (&["RL.OVERRIDE.LIST", "x"], Error),
        ];
        let monitor: &[Step] = &[
            (&["RL.FIXED", "f", "2", "1h"], WouldDeny),
            (&["RL.FIXED", "f", "2", "1h", "COST", "9"], WouldDeny),
            (&["RL.FIXED", "f", "2", "1h", "PEEK"], WouldDeny),
            (&["RL.FIXED", "m", "2", "1h"], Allowed),
            (&["RL.FIXED", "m", "x", "1h"], Error),
            (&["RL.SLIDING", "s", "1", "1h"], WouldDeny),
            (&["RL.SLIDING", "m2", "1", "1h"], Allowed),
            (&["RL.TOKEN", "t", "1", "1d"], WouldDeny),
            (&["RL.TOKEN", "t", "1", "1d", "COST", "2"], WouldDeny),
            (
                &["RL.ALL", "FIXED", "a1", "1", "1h", "TOKEN", "a2", "5", "1d"],
                WouldDeny,
            ),
            (&["RL.ALL", "FIXED", "m3", "1", "1h"], Allowed),
            (
                &[
                    "RL.ALL", "FIXED", "m3", "1", "1h", "SLIDING", "m3", "1", "1h",
                ],
                Error,
            ),
        ];
        let off: &[Step] = &[
            (&["RL.FIXED", "f", "2", "1h"], Allowed),
            (&["RL.FIXED", "f", "2", "1h", "PEEK"], Allowed),
            (&["RL.FIXED", "list", "2", "1h"], Allowed),
            (&["RL.FIXED", "f", "-1", "1h"], Error),
            (&["RL.SLIDING", "s", "1", "1h"], Allowed),
            (&["RL.TOKEN", "t", "1", "1d", "COST", "5"], Allowed),
            (
                &[
                    "RL.ALL", "FIXED", "a1", "1", "1h", "SLIDING", "s", "1", "1h",
                ],
                Allowed,
            ),
            (
                &["RL.ALL", "SLIDING", "s", "1", "1h", "APPROX", "ALIGNED"],
                Error,
            ),
            (&["RL.OVERRIDE.SET", "o2", "5", "1h"], Done),
            (&["RL.OVERRIDE.GET", "o2"], Done),
        ];
        for (mode, steps) in [("on", on), ("monitor", monitor), ("off", off)] {
            set_mode(con, mode);
            for &(args, outcome) in steps {
                let command = stats_name(args[0].as_bytes());
                for counter in scripted(con, args, outcome) {
                    expect(&mut expected, command, counter);
                }
            }
            assert_eq!(
                counters(con),
                expected,
                "{:?}: after the calls in {mode}",
                server.flavor
            );
        }
        // Calls from a script and inside MULTI count once each.
        set_mode(con, "on");
        let _: Value = redis::cmd("EVAL")
            .arg("return redis.call('RL.FIXED', KEYS[1], 1, '1h')")
            .arg(1)
            .arg("lua")
            .query(con)
            .unwrap();
        expect(&mut expected, "fixed", "calls");
        expect(&mut expected, "fixed", "allowed");
        let _: Vec<Value> = redis::pipe()
            .atomic()
            .cmd("RL.TOKEN")
            .arg("multi")
            .arg(1)
            .arg("1d")
            .cmd("RL.TOKEN")
            .arg("multi")
            .arg(1)
            .arg("1d")
            .query(con)
            .unwrap();
        for counter in ["calls", "allowed", "calls", "denied"] {
            expect(&mut expected, "token", counter);
        }
        let got = counters(con);
        assert_eq!(got, expected, "{:?}", server.flavor);
        // calls = allowed + denied + errors, for every limiter command.
        for command in ["fixed", "sliding", "token", "all"] {
            let field = |c: &str| got[&format!("rl_{command}_{c}")];
            assert_eq!(
                field("calls"),
                field("allowed") + field("denied") + field("errors"),
                "{command}"
            );
        }
        assert_eq!(info_field(con, "rl", "rl_mode"), "on");
    });
}

#[test]
fn replayed_calls_are_not_counted() {
    for flavor in FLAVORS {
        let (primary, replica) = primary_and_replica(flavor, &AOF);
        let (mut pcon, mut rcon) = (primary.conn(), replica.conn());
        let t = workload(&mut pcon, "w", 31, 500);
        wait_in_sync(&mut pcon, &mut rcon);
        assert_same_dataset(&format!("{flavor:?}"), &mut pcon, &mut rcon);
        let on_primary = counters(&mut pcon);
        for (name, calls) in &t.calls {
            assert_eq!(on_primary[&format!("rl_{name}_calls")], *calls, "{name}");
            assert_eq!(on_primary[&format!("rl_{name}_errors")], 0, "{name}");
        }
        for (name, n) in &t.allowed {
            assert_eq!(on_primary[&format!("rl_{name}_allowed")], *n, "{name}");
        }
        for (name, n) in &t.refused {
            assert_eq!(on_primary[&format!("rl_{name}_denied")], *n, "{name}");
        }
        let on_replica = counters(&mut rcon);
        assert!(all_zero(&on_replica), "{flavor:?}: {on_replica:?}");
        drop((pcon, rcon));
        drop(replica);

        // Nor are calls replayed from the AOF at start.
        let mut primary = primary;
        let before = snapshot(&mut primary.conn());
        primary.restart();
        let mut con = primary.conn();
        assert_same_snapshot(
            &snapshot(&mut con),
            &before,
            &format!("{flavor:?}: AOF replay"),
        );
        let after = counters(&mut con);
        assert!(all_zero(&after), "{flavor:?}: {after:?}");
    }
}

// ---------------------------------------------------------------------------
// Every command through a replica, AOF and RDB
// ---------------------------------------------------------------------------

#[test]
fn replica_equals_primary_after_every_command() {
    for flavor in FLAVORS {
        let (primary, replica) = primary_and_replica(flavor, &[]);
        let (mut pcon, mut rcon) = (primary.conn(), replica.conn());
        workload(&mut pcon, "w", 41, 800);
        // Keys moved on the primary keep counting there and on the replica.
        cmd(&mut pcon, &["COPY", "w:k:0", "w:k:copied"]).unwrap();
        cmd(&mut pcon, &["RENAME", "w:k:4", "w:k:renamed"]).unwrap();
        workload(&mut pcon, "w", 42, 400);
        limiter(&mut pcon, &["RL.FIXED", "w:k:copied", "9", "1h"]);
        limiter(
            &mut pcon,
            &["RL.TOKEN", "w:k:renamed", "9", "1d", "BURST", "9"],
        );
        wait_in_sync(&mut pcon, &mut rcon);
        assert_same_dataset(&format!("{flavor:?} replica"), &mut pcon, &mut rcon);
    }
}

const AOF: [&str; 4] = ["--appendonly", "yes", "--appendfsync", "always"];

fn wait_no_aof_rewrite(con: &mut redis::Connection) {
    wait_until("the AOF rewrite to finish", || {
        info_field(con, "persistence", "aof_rewrite_in_progress") == "0"
            && info_field(con, "persistence", "aof_rewrite_scheduled") == "0"
    });
}

fn bgrewriteaof(con: &mut redis::Connection) {
    wait_no_aof_rewrite(con);
    let before = info_i64(con, "persistence", "aof_rewrites");
    cmd(con, &["BGREWRITEAOF"]).unwrap();
    wait_until("the AOF rewrite to complete", || {
        info_field(con, "persistence", "aof_rewrite_in_progress") == "0"
            && info_field(con, "persistence", "aof_rewrite_scheduled") == "0"
            && info_i64(con, "persistence", "aof_rewrites") > before
    });
    assert_eq!(
        info_field(con, "persistence", "aof_last_bgrewrite_status"),
        "ok"
    );
}

/// SIGKILL, then start again on the same directory and port.
fn crash_and_restart(server: &mut Server) -> redis::Connection {
    server.kill();
    server.restart();
    server.conn()
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

#[test]
fn aof_restarts_restore_every_command() {
    for flavor in FLAVORS {
        let mut server = Server::start_with(flavor, &AOF);
        let mut con = server.conn();
        workload(&mut con, "w", 51, 800);
        let before = snapshot(&mut con);
        let digest_before = digest(&mut con);
        // The clock moves on while the server is down: a replay that read
        // it would give other window ends and TTLs.
        let t0 = now_ms(&mut con);
        wait_until("the clock to move", || now_ms(&mut con) > t0 + 20);
        let mut con = crash_and_restart(&mut server);
        assert_same_snapshot(
            &snapshot(&mut con),
            &before,
            &format!("{flavor:?}: AOF after SIGKILL"),
        );
        assert_eq!(digest(&mut con), digest_before);

        bgrewriteaof(&mut con);
        let mut con = crash_and_restart(&mut server);
        assert_same_snapshot(
            &snapshot(&mut con),
            &before,
            &format!("{flavor:?}: rewritten AOF"),
        );

        workload(&mut con, "w", 52, 400);
        let after_more = snapshot(&mut con);
        assert_ne!(after_more, before);
        let mut con = crash_and_restart(&mut server);
        assert_same_snapshot(
            &snapshot(&mut con),
            &after_more,
            &format!("{flavor:?}: rewritten AOF plus increments"),
        );

        // Replaying ignores the mode: a server started with the same AOF
        // and `mode off` still rebuilds every limiter.
        server.kill();
        let off = start_from_aof(flavor, &server.dir.join("appendonlydir"), "off");
        assert_same_snapshot(
            &snapshot(&mut off.conn()),
            &after_more,
            &format!("{flavor:?}: AOF replayed under mode off"),
        );
    }
}

/// A server started in `mode` on a copy of another server's AOF.
fn start_from_aof(flavor: Flavor, aof_dir: &std::path::Path, mode: &str) -> Server {
    Server::start_prepared_with_module_args(flavor, &AOF, &["mode", mode], |dir| {
        copy_dir(aof_dir, &dir.join("appendonlydir"));
    })
}

#[test]
fn rdb_restart_restores_every_command() {
    for flavor in FLAVORS {
        let mut server = Server::start(flavor);
        let mut con = server.conn();
        workload(&mut con, "w", 61, 800);
        cmd(&mut con, &["SAVE"]).unwrap();
        let before = snapshot(&mut con);
        let digest_before = digest(&mut con);
        let t0 = now_ms(&mut con);
        wait_until("the clock to move", || now_ms(&mut con) > t0 + 20);
        let mut con = crash_and_restart(&mut server);
        assert_eq!(
            info_i64(&mut con, "persistence", "rdb_last_load_keys_loaded"),
            before.len() as i64,
            "{flavor:?}: dump.rdb was not loaded"
        );
        assert_same_snapshot(
            &snapshot(&mut con),
            &before,
            &format!("{flavor:?}: RDB load"),
        );
        assert_eq!(digest(&mut con), digest_before);
    }
}

/// The algorithm of each clause of a limiter call or RL.ALL.
fn clause_words(call: &Call) -> Vec<Vec<u8>> {
    match call.kind {
        Kind::Limiter => vec![call.args[0][3..].to_vec()],
        _ => call.args[1..]
            .iter()
            .filter(|a| matches!(a.as_slice(), b"FIXED" | b"SLIDING" | b"TOKEN"))
            .cloned()
            .collect(),
    }
}

/// The same calls' replies from two servers with the same dataset, the
/// second server answering later: equal, except that remaining times may
/// differ by at most `elapsed_ms` (the span of both runs: a window or TTL
/// that a call of the run starts is anchored at that call's time). A token bucket whose
/// rate changes between calls (an override named by some calls and not
/// others) refills each gap at the rate of the call that ends it, so when
/// the gaps differ its times may drift by up to the ratio of the rates:
/// its time fields get a looser bound, its counts stay exact.
fn assert_same_replies(calls: &[Call], first: &[Value], second: &[Value], elapsed_ms: i64) {
    let close = |call: &Call, token: bool, a: i64, b: i64| {
        if a <= 0 || b <= 0 {
            assert_eq!(a, b, "{call:?}");
        } else if token {
            assert!((a - b).abs() <= 50 * elapsed_ms, "{call:?}: {a} then {b}");
        } else {
            assert!(
                (a - b).abs() <= elapsed_ms,
                "{call:?}: {a} then {b} ({elapsed_ms} ms apart)"
            );
        }
    };
    let same_limiter = |call: &Call, token: bool, a: [i64; 6], b: [i64; 6]| {
        assert_eq!(
            [a[0], a[1], a[3], a[4]],
            [b[0], b[1], b[3], b[4]],
            "{call:?}"
        );
        close(call, token, a[2], b[2]);
        close(call, token, a[5], b[5]);
    };
    for ((call, a), b) in calls.iter().zip(first).zip(second) {
        let words = clause_words(call);
        match call.kind {
            Kind::Limiter => same_limiter(call, words[0] == b"TOKEN", six(a), six(b)),
            Kind::All => {
                let (a_allowed, a_retry, a_clauses) = all_parts(a);
                let (b_allowed, b_retry, b_clauses) = all_parts(b);
                assert_eq!(a_allowed, b_allowed, "{call:?}");
                let any_token = words.iter().any(|w| w == b"TOKEN");
                close(call, any_token, a_retry, b_retry);
                assert_eq!(a_clauses.len(), words.len(), "{call:?}");
                assert_eq!(b_clauses.len(), words.len(), "{call:?}");
                for ((x, y), word) in a_clauses.into_iter().zip(b_clauses).zip(&words) {
                    same_limiter(call, word == b"TOKEN", x, y);
                }
            }
            Kind::Get => match (a, b) {
                (Value::Array(x), Value::Array(y)) => {
                    let (x, y): (Vec<i64>, Vec<i64>) =
                        (x.iter().map(int).collect(), y.iter().map(int).collect());
                    assert_eq!(x[..3], y[..3], "{call:?}");
                    close(call, false, x[3], y[3]);
                }
                _ => assert_eq!(a, b, "{call:?}"),
            },
            Kind::Set | Kind::Del => assert_eq!(a, b, "{call:?}"),
            // Cursor order is the server's own; checked by the datasets.
            Kind::List => {}
        }
    }
}

#[test]
fn promoted_replica_carries_on_exactly() {
    for flavor in FLAVORS {
        let (primary, replica) = primary_and_replica(flavor, &[]);
        let (mut pcon, mut rcon) = (primary.conn(), replica.conn());
        workload(&mut pcon, "w", 71, 800);
        wait_in_sync(&mut pcon, &mut rcon);
        assert_same_dataset(&format!("{flavor:?}"), &mut pcon, &mut rcon);
        // Promote the replica before the primary sees more calls; then the
        // same calls on both must get the same answers.
        cmd(&mut rcon, &["REPLICAOF", "NO", "ONE"]).unwrap();
        wait_until("the promotion", || {
            info_field(&mut rcon, "replication", "role") == "master"
        });
        let aligned = aligned_windows(&mut pcon);
        let calls = mixed_calls("w", &aligned, 72, 600);
        let t0 = now_ms(&mut pcon);
        let from_primary = run_calls(&mut pcon, &calls);
        let from_promoted = run_calls(&mut rcon, &calls);
        let elapsed = now_ms(&mut rcon) - t0 + 2;
        let t = tally(&calls, &from_primary);
        assert!(t.admitted > 50 && t.denied > 50, "{t:?}");
        assert_same_replies(&calls, &from_primary, &from_promoted, elapsed);
        // And the two datasets hold the same counts: a PEEK of every key
        // gives the same answer.
        let peeks: Vec<Call> = (0..KEYS)
            .map(|i| {
                let mut rng = Lcg(i);
                let (word, mut args) = clause(&mut rng, "w", &aligned, i);
                let cost = args.iter().position(|a| a.as_slice() == b"COST");
                if let Some(at) = cost {
                    args.drain(at..at + 2);
                }
                let mut argv = vec![b(format!("RL.{word}"))];
                argv.extend(args);
                argv.push(b("PEEK"));
                Call {
                    args: argv,
                    kind: Kind::Limiter,
                    peek: true,
                }
            })
            .collect();
        // (Windows the calls above opened are anchored in their run.)
        let a = run_calls(&mut pcon, &peeks);
        let b = run_calls(&mut rcon, &peeks);
        let elapsed = now_ms(&mut rcon) - t0 + 2;
        assert_same_replies(&peeks, &a, &b, elapsed);
    }
}

// ---------------------------------------------------------------------------
// ACL
// ---------------------------------------------------------------------------

fn user_conn(server: &Server, user: &str) -> redis::Connection {
    let mut con = server.conn();
    cmd(&mut con, &["AUTH", user, "pw"]).unwrap();
    con
}

fn assert_noperm(con: &mut redis::Connection, args: &[&str]) {
    let err = cmd(con, args).expect_err(&format!("{args:?} was allowed"));
    assert!(err.starts_with("NOPERM"), "{args:?}: {err}");
}

fn assert_allowed(con: &mut redis::Connection, args: &[&str]) {
    if let Err(e) = cmd(con, args) {
        panic!("{args:?}: {e}");
    }
}

/// One call of every command on `rl:` keys.
const EVERY_COMMAND_ON_RL_KEYS: [&[&str]; 12] = [
    &[
        "RL.OVERRIDE.SET",
        "rl:o",
        "9",
        "1h",
        "BURST",
        "9",
        "TTL",
        "2h",
    ],
    &["RL.FIXED", "rl:f", "5", "1h"],
    &["RL.FIXED", "rl:f", "5", "1h", "OVERRIDE", "rl:o", "PEEK"],
    &["RL.SLIDING", "rl:s", "5", "1h", "OVERRIDE", "rl:o"],
    &["RL.SLIDING", "rl:sa", "5", "1h", "APPROX"],
    &[
        "RL.TOKEN", "rl:t", "5", "1d", "BURST", "6", "OVERRIDE", "rl:o",
    ],
    &[
        "RL.ALL", "FIXED", "rl:a1", "5", "1h", "SLIDING", "rl:a2", "5", "1h", "OVERRIDE", "rl:o",
        "TOKEN", "rl:a3", "5", "1d",
    ],
    &["RL.ALL", "FIXED", "rl:a1", "5", "1h", "PEEK"],
    &["RL.OVERRIDE.GET", "rl:o"],
    &["RL.OVERRIDE.LIST", "0"],
    &["RL.OVERRIDE.SET", "rl:o2", "1", "1h"],
    &["RL.OVERRIDE.DEL", "rl:o2", "rl:none"],
];

/// Calls naming a key outside `rl:*`, as key or as okey.
const FOREIGN: [&[&str]; 12] = [
    &["RL.FIXED", "other", "5", "1h"],
    &["RL.FIXED", "rl:f", "1", "1h", "OVERRIDE", "other"],
    &[
        "RL.SLIDING",
        "rl:s",
        "1",
        "1h",
        "APPROX",
        "OVERRIDE",
        "other",
    ],
    &["RL.SLIDING", "other", "1", "1h", "PEEK"],
    &["RL.TOKEN", "rl:t", "1", "1d", "OVERRIDE", "other", "PEEK"],
    &[
        "RL.ALL", "FIXED", "rl:a1", "1", "1h", "FIXED", "other", "1", "1h",
    ],
    &["RL.ALL", "FIXED", "rl:a1", "1", "1h", "OVERRIDE", "other"],
    &["RL.ALL", "TOKEN", "other", "1", "1d", "PEEK"],
    &["RL.OVERRIDE.SET", "other", "1", "1h"],
    &["RL.OVERRIDE.GET", "other"],
    &["RL.OVERRIDE.DEL", "rl:o", "other"],
    &["RL.OVERRIDE.DEL", "other"],
];

#[test]
fn acl_key_patterns_apply_to_key_and_okey() {
    on_each_server(|server, admin| {
        cmd(admin, &["SET", "other", "x"]).unwrap();
        cmd(
            admin,
            &["ACL", "SETUSER", "all", "on", ">pw", "~rl:*", "+@all"],
        )
        .unwrap();
        cmd(
            admin,
            &[
                "ACL",
                "SETUSER",
                "named",
                "on",
                ">pw",
                "~rl:*",
                "+rl.fixed",
                "+rl.sliding",
                "+rl.token",
                "+rl.all",
                "+rl.override.set",
                "+rl.override.get",
                "+rl.override.del",
                "+rl.override.list",
            ],
        )
        .unwrap();
        for user in ["all", "named"] {
            let mut con = user_conn(server, user);
            for args in EVERY_COMMAND_ON_RL_KEYS {
                assert_allowed(&mut con, args);
            }
            let before = snapshot(admin);
            for args in FOREIGN {
                assert_noperm(&mut con, args);
            }
            assert_same_snapshot(
                &snapshot(admin),
                &before,
                &format!("{user}: a refused call wrote"),
            );
            // The named user has nothing but the RL commands.
            if user == "named" {
                assert_noperm(&mut con, &["GET", "rl:f"]);
            }
        }
        // A refused call never reached the module.
        let c = counters(admin);
        assert_eq!(c["rl_fixed_errors"] + c["rl_all_errors"], 0, "{c:?}");
    });
}

#[test]
fn acl_read_only_key_permission_allows_only_reads() {
    on_each_server(|server, admin| {
        cmd(admin, &["RL.OVERRIDE.SET", "rl:o", "3", "1h"]).unwrap();
        cmd(admin, &["RL.OVERRIDE.SET", "rl:ovr:1", "3", "1h"]).unwrap();
        cmd(
            admin,
            &["ACL", "SETUSER", "reader", "on", ">pw", "%R~rl:*", "+@all"],
        )
        .unwrap();
        let mut con = user_conn(server, "reader");
        assert_eq!(
            cmd(&mut con, &["RL.OVERRIDE.GET", "rl:o"]).unwrap(),
            Value::Array(vec![
                Value::Int(3),
                Value::Int(3_600_000),
                Value::Int(0),
                Value::Int(-1)
            ])
        );
        assert_allowed(&mut con, &["RL.OVERRIDE.LIST", "0", "MATCH", "rl:*"]);
        let before = snapshot(admin);
        for args in [
            &["RL.FIXED", "rl:f", "5", "1h"][..],
            &["RL.FIXED", "rl:f", "5", "1h", "PEEK"],
            &["RL.SLIDING", "rl:s", "5", "1h"],
            &["RL.TOKEN", "rl:t", "5", "1d", "PEEK"],
            &["RL.ALL", "FIXED", "rl:f", "5", "1h", "PEEK"],
            &["RL.OVERRIDE.SET", "rl:o", "5", "1h"],
            &["RL.OVERRIDE.DEL", "rl:o"],
        ] {
            assert_noperm(&mut con, args);
        }
        assert_same_snapshot(&snapshot(admin), &before, "snapshot");

        // Write-only: storing and deleting overrides need no read; a
        // limiter reads its key, RL.OVERRIDE.GET reads.
        cmd(
            admin,
            &["ACL", "SETUSER", "writer", "on", ">pw", "%W~rl:*", "+@all"],
        )
        .unwrap();
        let mut con = user_conn(server, "writer");
        assert_allowed(
            &mut con,
            &["RL.OVERRIDE.SET", "rl:w", "5", "1h", "TTL", "1h"],
        );
        assert_allowed(&mut con, &["RL.OVERRIDE.DEL", "rl:w"]);
        for args in [
            &["RL.FIXED", "rl:f", "5", "1h"][..],
            &["RL.TOKEN", "rl:t", "5", "1d"],
            &["RL.ALL", "SLIDING", "rl:s", "5", "1h"],
            &["RL.OVERRIDE.GET", "rl:o"],
        ] {
            assert_noperm(&mut con, args);
        }

        // Limiter keys writable, override keys only readable: an okey is
        // only read, so the limiters may name it.
        cmd(
            admin,
            &[
                "ACL",
                "SETUSER",
                "mixed",
                "on",
                ">pw",
                "~rl:lim:*",
                "%R~rl:ovr:*",
                "+@all",
            ],
        )
        .unwrap();
        let mut con = user_conn(server, "mixed");
        for args in [
            &["RL.FIXED", "rl:lim:f", "5", "1h", "OVERRIDE", "rl:ovr:1"][..],
            &["RL.SLIDING", "rl:lim:s", "5", "1h", "OVERRIDE", "rl:ovr:1"],
            &["RL.TOKEN", "rl:lim:t", "5", "1d", "OVERRIDE", "rl:ovr:1"],
            &[
                "RL.ALL", "FIXED", "rl:lim:a", "5", "1h", "OVERRIDE", "rl:ovr:1", "TOKEN",
                "rl:lim:b", "5", "1d", "OVERRIDE", "rl:ovr:1",
            ],
            &["RL.OVERRIDE.GET", "rl:ovr:1"],
        ] {
            assert_allowed(&mut con, args);
        }
        assert_eq!(
            limiter(
                &mut con,
                &["RL.FIXED", "rl:lim:f", "5", "1h", "OVERRIDE", "rl:ovr:1"]
            )[..4],
            [1, 2, 0, 3],
            "the override applied"
        );
        for args in [
            &["RL.FIXED", "rl:ovr:1", "5", "1h"][..],
            &[
                "RL.ALL", "FIXED", "rl:lim:a", "5", "1h", "FIXED", "rl:ovr:2", "5", "1h",
            ],
            &["RL.OVERRIDE.SET", "rl:ovr:1", "5", "1h"],
            &["RL.OVERRIDE.DEL", "rl:ovr:1"],
        ] {
            assert_noperm(&mut con, args);
        }
    });
}

const ALL_COMMANDS: [&str; 8] = [
    "rl.fixed",
    "rl.sliding",
    "rl.token",
    "rl.all",
    "rl.override.set",
    "rl.override.get",
    "rl.override.del",
    "rl.override.list",
];

fn category(con: &mut redis::Connection, name: &str) -> Result<Vec<String>, String> {
    let listed: Vec<String> = redis::cmd("ACL")
        .arg("CAT")
        .arg(name)
        .query(con)
        .map_err(|e| error_line(&e))?;
    Ok(listed.into_iter().map(|c| c.to_lowercase()).collect())
}

#[test]
fn acl_categories_where_the_server_supports_them() {
    on_each_server(|server, admin| {
        assert!(module_names(admin).contains(&"rl".to_string()));
        if server.flavor == Flavor::Redis {
            // Redis 7.0 has no module ACL categories: the module loads
            // without them and the category does not exist.
            let err = category(admin, "ratelimit").unwrap_err();
            assert!(err.starts_with("ERR"), "{err}");
            assert!(
                cmd(admin, &["ACL", "SETUSER", "u", "+@ratelimit"]).is_err(),
                "+@ratelimit accepted on Redis 7.0"
            );
            return;
        }
        let mut listed = category(admin, "ratelimit").unwrap();
        listed.sort();
        let mut want = ALL_COMMANDS.map(String::from).to_vec();
        want.sort();
        assert_eq!(listed, want);
        let write = category(admin, "write").unwrap();
        let read = category(admin, "read").unwrap();
        for c in [
            "rl.fixed",
            "rl.sliding",
            "rl.token",
            "rl.all",
            "rl.override.set",
            "rl.override.del",
        ] {
            assert!(write.contains(&c.to_string()), "{c} is not @write");
            assert!(!read.contains(&c.to_string()), "{c} is @read");
        }
        for c in ["rl.override.get", "rl.override.list"] {
            assert!(read.contains(&c.to_string()), "{c} is not @read");
            assert!(!write.contains(&c.to_string()), "{c} is @write");
        }

        // The category grants and revokes exactly these commands.
        cmd(
            admin,
            &["ACL", "SETUSER", "rlonly", "on", ">pw", "~*", "+@ratelimit"],
        )
        .unwrap();
        cmd(
            admin,
            &[
                "ACL",
                "SETUSER",
                "norl",
                "on",
                ">pw",
                "~*",
                "+@all",
                "-@ratelimit",
            ],
        )
        .unwrap();
        cmd(
            admin,
            &[
                "ACL", "SETUSER", "nowrite", "on", ">pw", "~*", "+@all", "-@write",
            ],
        )
        .unwrap();
        let (mut rlonly, mut norl, mut nowrite) = (
            user_conn(server, "rlonly"),
            user_conn(server, "norl"),
            user_conn(server, "nowrite"),
        );
        for args in EVERY_COMMAND_ON_RL_KEYS {
            assert_allowed(&mut rlonly, args);
            assert_noperm(&mut norl, args);
            let command = args[0].to_lowercase();
            if command == "rl.override.get" || command == "rl.override.list" {
                assert_allowed(&mut nowrite, args);
            } else {
                assert_noperm(&mut nowrite, args);
            }
        }
        assert_noperm(&mut rlonly, &["GET", "rl:f"]);
        assert_allowed(&mut norl, &["GET", "rl:f"]);
    });
}
