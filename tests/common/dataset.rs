//! Datasets: every key with its DUMP payload and absolute expiry, and the
//! comparisons the replication, persistence and bad-input tests make.

use redis::Value;
use std::collections::BTreeMap;

/// `(key, DUMP payload, PEXPIRETIME)` of every key, sorted by key.
pub type Snapshot = Vec<(Vec<u8>, Vec<u8>, i64)>;

/// Every key with its DUMP payload and absolute expiry, sorted: two
/// datasets are equal exactly when these are. KEYS, then DUMP and
/// PEXPIRETIME pipelined a thousand keys at a time.
pub fn snapshot(con: &mut redis::Connection) -> Snapshot {
    let mut keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(con).unwrap();
    keys.sort();
    let mut out = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(1000) {
        let mut pipe = redis::pipe();
        for k in chunk {
            pipe.cmd("DUMP").arg(k).cmd("PEXPIRETIME").arg(k);
        }
        let replies: Vec<Value> = pipe.query(con).unwrap();
        for (k, pair) in chunk.iter().zip(replies.chunks(2)) {
            let dump = match &pair[0] {
                Value::BulkString(b) => b.clone(),
                // Expired since KEYS: as a DUMP of it reads (PEXPIRETIME -2).
                Value::Nil => Vec::new(),
                other => panic!("DUMP {}: {other:?}", k.escape_ascii()),
            };
            let Value::Int(at) = pair[1] else {
                panic!("PEXPIRETIME {}: {:?}", k.escape_ascii(), pair[1]);
            };
            out.push((k.clone(), dump, at));
        }
    }
    out
}

pub fn digest(con: &mut redis::Connection) -> String {
    redis::cmd("DEBUG").arg("DIGEST").query(con).unwrap()
}

pub fn pexpiretime(con: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("PEXPIRETIME").arg(key).query(con).unwrap()
}

pub fn exists(con: &mut redis::Connection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query::<i64>(con).unwrap() == 1
}

pub fn dbsize(con: &mut redis::Connection) -> i64 {
    redis::cmd("DBSIZE").query(con).unwrap()
}

/// Panics with the differences (the first ten of them, not two whole
/// datasets) when two snapshots differ.
#[track_caller]
pub fn assert_same_snapshot(got: &Snapshot, want: &Snapshot, what: &str) {
    if got == want {
        return;
    }
    let want_map: BTreeMap<&Vec<u8>, (&Vec<u8>, i64)> =
        want.iter().map(|(k, v, at)| (k, (v, *at))).collect();
    let got_map: BTreeMap<&Vec<u8>, (&Vec<u8>, i64)> =
        got.iter().map(|(k, v, at)| (k, (v, *at))).collect();
    let mut problems = Vec::new();
    for (k, (v, at)) in &want_map {
        match got_map.get(k) {
            None => problems.push(format!("{} missing", k.escape_ascii())),
            Some((gv, gat)) if (gv, gat) != (v, at) => problems.push(format!(
                "{}: value {}, expiry {gat} instead of {at}",
                k.escape_ascii(),
                if gv == v { "same" } else { "differs" }
            )),
            _ => {}
        }
    }
    for k in got_map.keys().filter(|k| !want_map.contains_key(*k)) {
        problems.push(format!("{} extra", k.escape_ascii()));
    }
    let n = problems.len();
    problems.truncate(10);
    panic!(
        "{what}: {n} of {} keys differ, first: {}",
        want.len(),
        problems.join("; ")
    );
}

/// Whether a key is an override of the workloads (named `...:o:...`), the
/// only keys allowed to live without an expiry.
pub fn is_workload_override(key: &[u8]) -> bool {
    key.windows(3).any(|w| w == b":o:")
}

/// Two servers hold the same dataset: the same snapshot and the same
/// `DEBUG DIGEST`; the dataset is not empty and every key but a workload's
/// override has an expiry. Returns the snapshot.
#[track_caller]
pub fn assert_same_dataset(
    what: &str,
    a: &mut redis::Connection,
    b: &mut redis::Connection,
) -> Snapshot {
    let snap = snapshot(a);
    assert!(!snap.is_empty(), "{what}: the dataset is empty");
    let no_expiry: Vec<String> = snap
        .iter()
        .filter(|(k, _, at)| *at <= 0 && !is_workload_override(k))
        .map(|(k, _, _)| k.escape_ascii().to_string())
        .collect();
    assert!(no_expiry.is_empty(), "{what}: no expiry on {no_expiry:?}");
    assert_same_snapshot(&snapshot(b), &snap, what);
    assert_eq!(digest(a), digest(b), "{what}: digests differ");
    snap
}

/// The keys of a snapshot that still live at `now_ms` (no expiry, or one
/// after it): what two snapshots taken either side of `now_ms` must agree
/// on when keys with short lives may expire in between.
pub fn alive_at(snap: &Snapshot, now_ms: i64) -> Snapshot {
    snap.iter()
        .filter(|(_, _, at)| *at == -1 || *at > now_ms)
        .cloned()
        .collect()
}
