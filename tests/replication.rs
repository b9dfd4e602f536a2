//! Replication and persistence: a real replica, AOF and RDB restarts, and
//! the key commands that move a limiter's value (DUMP/RESTORE, COPY,
//! RENAME). The primary decides; everything downstream must end up with the
//! same bytes and the same absolute expiry times.
//!
//! Windows are long (an hour or more, aligned ones chosen so that they do
//! not end for at least ten minutes) so nothing expires while a test runs.

mod common;

use common::*;
use std::time::Duration;

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// The server's clock in Unix milliseconds.
fn server_ms(con: &mut redis::Connection) -> i64 {
    let t: Vec<i64> = redis::cmd("TIME").query(con).unwrap();
    t[0] * 1000 + t[1] / 1000
}

fn pexpiretime(con: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("PEXPIRETIME").arg(key).query(con).unwrap()
}

fn info_i64(con: &mut redis::Connection, section: &str, field: &str) -> i64 {
    let value = info_field(con, section, field);
    value
        .parse()
        .unwrap_or_else(|_| panic!("INFO {section} {field} is {value:?}"))
}

/// Aligned windows that do not end within the next ten minutes (by the
/// server's clock), so that no aligned window rolls over during a test.
fn aligned_windows(con: &mut redis::Connection) -> Vec<&'static str> {
    let now = server_ms(con);
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
}

/// What a workload did, to check that it really was mixed.
#[derive(Debug, Default)]
struct Tally {
    admitted: usize,
    denied: usize,
    /// Denied with a cost above the limit (retry_after -1).
    never: usize,
    peeks: usize,
}

const WORKLOAD_KEYS: u64 = 30;

fn workload_key(prefix: &str, i: u64) -> Vec<u8> {
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
fn workload(con: &mut redis::Connection, prefix: &str, seed: u64, steps: usize) -> Tally {
    let aligned = aligned_windows(con);
    let unaligned = ["1h", "90m", "7200s", "5400000ms"];
    let mut rng = Lcg(seed);
    let mut pipe = redis::pipe();
    let mut kinds = Vec::with_capacity(steps);
    for _ in 0..steps {
        let i = rng.below(WORKLOAD_KEYS);
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
            .arg(workload_key(prefix, i))
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
    let mut tally = Tally::default();
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

fn assert_same_dataset(
    what: &str,
    a: &mut redis::Connection,
    b: &mut redis::Connection,
) -> Vec<(Vec<u8>, Vec<u8>, i64)> {
    let snap = snapshot(a);
    assert!(!snap.is_empty(), "{what}: the dataset is empty");
    assert!(
        snap.iter().all(|(_, _, at)| *at > 0),
        "{what}: a key has no expiry"
    );
    assert_eq!(snap, snapshot(b), "{what}: snapshots differ");
    assert_eq!(digest(a), digest(b), "{what}: digests differ");
    snap
}

fn process_id(con: &mut redis::Connection) -> String {
    info_field(con, "server", "process_id")
}

fn signal(pid: &str, sig: &str) {
    let status = std::process::Command::new("kill")
        .args([sig, pid])
        .status()
        .expect("cannot run kill");
    assert!(status.success(), "kill {sig} {pid} failed");
}

/// Waits until no AOF rewrite is running or scheduled.
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

/// Spends 3 of a limit of 5 on `args` (`RL.FIXED key 5 window [ALIGNED]`)
/// and returns the window's end.
fn use_three_of_five(con: &mut redis::Connection, args: &[&str]) -> i64 {
    let mut with_cost = args.to_vec();
    with_cost.extend(["COST", "2"]);
    assert_eq!(limiter(con, &with_cost)[..5], [1, 2, 0, 5, 3], "{args:?}");
    assert_eq!(limiter(con, args)[..5], [1, 3, 0, 5, 2], "{args:?}");
    pexpiretime(con, args[1])
}

/// One admitted call on `args`, checked to be `expected` (the first five
/// fields) with a reset_after that ends the window exactly at `end`.
fn admitted_in_window(con: &mut redis::Connection, args: &[&str], expected: [i64; 5], end: i64) {
    let before = server_ms(con);
    let reply = limiter(con, args);
    let after = server_ms(con);
    assert_eq!(reply[..5], expected, "{args:?}: {reply:?}");
    assert!(
        end - after <= reply[5] && reply[5] <= end - before,
        "{args:?}: reset_after {} does not end at {end} (now {before}..{after})",
        reply[5]
    );
}

/// After `use_three_of_five` (and whatever happened since), exactly two
/// more units are admitted in the same window, then calls are denied.
fn continues_with_two_more(con: &mut redis::Connection, args: &[&str], end: i64) {
    admitted_in_window(con, args, [1, 4, 0, 5, 1], end);
    admitted_in_window(con, args, [1, 5, 0, 5, 0], end);
    let denied = limiter(con, args);
    assert_eq!(denied[..2], [0, 5], "{args:?}: {denied:?}");
    assert_eq!(denied[3..5], [5, 0], "{args:?}: {denied:?}");
    assert!(denied[2] > 0 && denied[2] == denied[5], "{denied:?}");
    assert_eq!(pexpiretime(con, args[1]), end, "{args:?}: the window moved");
}

/// After 2 of a limit of 3 were used in the window ending at `end`, `key`
/// admits exactly one more unit, then denies, and still ends at `end`.
fn admits_the_last_unit(con: &mut redis::Connection, key: &str, end: i64) {
    let args = ["RL.FIXED", key, "3", "1h"];
    admitted_in_window(con, &args, [1, 3, 0, 3, 0], end);
    let denied = limiter(con, &args);
    assert_eq!(denied[..2], [0, 3], "{key}: {denied:?}");
    assert_eq!(denied[3..5], [3, 0], "{key}: {denied:?}");
    assert_eq!(pexpiretime(con, key), end, "{key}: the window moved");
}

// ---------------------------------------------------------------------------
// A real replica
// ---------------------------------------------------------------------------

#[test]
fn replica_dataset_equals_primary_after_mixed_workload() {
    for flavor in FLAVORS {
        let (primary, replica) = primary_and_replica(flavor, &[]);
        let (mut pcon, mut rcon) = (primary.conn(), replica.conn());
        workload(&mut pcon, "wl", 1, 600);
        // Keys moved on the primary keep counting there and on the replica.
        cmd(&mut pcon, &["COPY", "wl:1", "wl:copied"]).unwrap();
        cmd(&mut pcon, &["RENAME", "wl:2", "wl:renamed"]).unwrap();
        workload(&mut pcon, "wl2", 2, 300);
        for key in ["wl:copied", "wl:renamed"] {
            for _ in 0..3 {
                limiter(&mut pcon, &["RL.FIXED", key, "4", "1h"]);
            }
        }
        wait_in_sync(&mut pcon, &mut rcon);
        let snap = assert_same_dataset(&format!("{flavor:?} replica"), &mut pcon, &mut rcon);
        assert!(snap.len() > 20, "{flavor:?}: only {} keys", snap.len());
    }
}

#[test]
fn late_replica_applies_the_primarys_clock() {
    for flavor in FLAVORS {
        let (primary, replica) = primary_and_replica(flavor, &[]);
        let (mut pcon, mut rcon) = (primary.conn(), replica.conn());
        // Stop the replica so it applies every call at least 200 ms after
        // the primary decided: its own clock would give later window ends.
        let pid = process_id(&mut rcon);
        signal(&pid, "-STOP");
        for i in 0..20 {
            let key = format!("late:{i}");
            limiter(&mut pcon, &["RL.FIXED", &key, "3", "1h"]);
            limiter(&mut pcon, &["RL.FIXED", &key, "3", "2h", "COST", "2"]);
        }
        std::thread::sleep(Duration::from_millis(200));
        signal(&pid, "-CONT");
        wait_in_sync(&mut pcon, &mut rcon);
        assert_same_dataset(&format!("{flavor:?} late replica"), &mut pcon, &mut rcon);
    }
}

#[test]
fn denied_calls_and_peek_replicate_nothing() {
    for flavor in FLAVORS {
        // No pings, so only propagated commands move the offset.
        let (primary, replica) =
            primary_and_replica(flavor, &["--repl-ping-replica-period", "3600"]);
        let (mut pcon, mut rcon) = (primary.conn(), replica.conn());
        let aligned = aligned_windows(&mut pcon)[0];
        limiter(&mut pcon, &["RL.FIXED", "full", "2", "1h", "COST", "2"]);
        limiter(
            &mut pcon,
            &["RL.FIXED", "al", "1", aligned, "ALIGNED", "COST", "1"],
        );
        wait_in_sync(&mut pcon, &mut rcon);
        let offset = info_i64(&mut pcon, "replication", "master_repl_offset");
        let replica_before = snapshot(&mut rcon);

        let denied: [&[&str]; 6] = [
            &["RL.FIXED", "full", "2", "1h"],
            &["RL.FIXED", "full", "2", "1h", "COST", "3"],
            &["RL.FIXED", "full", "9", "1h", "COST", "10"],
            &["RL.FIXED", "al", "1", aligned, "ALIGNED"],
            &["RL.FIXED", "missing", "2", "1h", "COST", "3"],
            &["RL.FIXED", "missing", "1", aligned, "ALIGNED", "COST", "2"],
        ];
        for args in denied {
            assert_eq!(limiter(&mut pcon, args)[0], 0, "{args:?}");
        }
        let peeks: [(&[&str], i64); 4] = [
            (&["RL.FIXED", "full", "2", "1h", "PEEK"], 0),
            (&["RL.FIXED", "full", "5", "1h", "PEEK"], 1),
            (&["RL.FIXED", "al", "1", aligned, "ALIGNED", "PEEK"], 0),
            (&["RL.FIXED", "missing", "2", "1h", "COST", "2", "PEEK"], 1),
        ];
        for (args, allowed) in peeks {
            assert_eq!(limiter(&mut pcon, args)[0], allowed, "{args:?}");
        }
        assert_eq!(
            info_i64(&mut pcon, "replication", "master_repl_offset"),
            offset,
            "{flavor:?}: a denied call or PEEK was propagated"
        );
        assert_eq!(snapshot(&mut rcon), replica_before);

        assert_eq!(
            limiter(&mut pcon, &["RL.FIXED", "missing", "2", "1h"])[0],
            1
        );
        assert!(
            info_i64(&mut pcon, "replication", "master_repl_offset") > offset,
            "{flavor:?}: an admitted call was not propagated"
        );
        wait_in_sync(&mut pcon, &mut rcon);
        assert_same_dataset(&format!("{flavor:?} replica"), &mut pcon, &mut rcon);
    }
}

#[test]
fn promoted_replica_continues_the_count() {
    for flavor in FLAVORS {
        let (mut primary, replica) = primary_and_replica(flavor, &[]);
        let (mut pcon, mut rcon) = (primary.conn(), replica.conn());
        let aligned = aligned_windows(&mut pcon)[0];
        let plain = ["RL.FIXED", "p", "5", "1h"];
        let with_aligned = ["RL.FIXED", "a", "5", aligned, "ALIGNED"];
        let plain_end = use_three_of_five(&mut pcon, &plain);
        let aligned_end = use_three_of_five(&mut pcon, &with_aligned);
        wait_in_sync(&mut pcon, &mut rcon);
        primary.kill();
        cmd(&mut rcon, &["REPLICAOF", "NO", "ONE"]).unwrap();
        continues_with_two_more(&mut rcon, &plain, plain_end);
        continues_with_two_more(&mut rcon, &with_aligned, aligned_end);
    }
}

// ---------------------------------------------------------------------------
// AOF and RDB
// ---------------------------------------------------------------------------

const AOF: [&str; 4] = ["--appendonly", "yes", "--appendfsync", "always"];

/// Kills the server with SIGKILL, starts it again on the same directory and
/// port, and returns a fresh connection.
fn crash_and_restart(server: &mut Server) -> redis::Connection {
    server.kill();
    server.restart();
    server.conn()
}

#[test]
fn aof_restart_restores_values_and_absolute_expiry() {
    for flavor in FLAVORS {
        let mut server = Server::start_with(flavor, &AOF);
        let mut con = server.conn();
        workload(&mut con, "wl", 3, 600);
        let before = snapshot(&mut con);
        let digest_before = digest(&mut con);
        // Let the clock move on: a replay that read it would give later ends.
        std::thread::sleep(Duration::from_millis(50));
        let mut con = crash_and_restart(&mut server);
        assert_eq!(snapshot(&mut con), before, "{flavor:?}: AOF replay");
        assert_eq!(digest(&mut con), digest_before, "{flavor:?}: AOF replay");

        // Rewritten: the state now lives in the base file, later calls in
        // the incremental one.
        bgrewriteaof(&mut con);
        let rewritten = snapshot(&mut con);
        assert_eq!(rewritten, before);
        let mut con = crash_and_restart(&mut server);
        assert_eq!(snapshot(&mut con), before, "{flavor:?}: rewritten AOF");

        workload(&mut con, "wl2", 4, 300);
        let after_more = snapshot(&mut con);
        let digest_more = digest(&mut con);
        assert_ne!(after_more, before);
        std::thread::sleep(Duration::from_millis(50));
        let mut con = crash_and_restart(&mut server);
        assert_eq!(
            snapshot(&mut con),
            after_more,
            "{flavor:?}: rewritten AOF plus increments"
        );
        assert_eq!(digest(&mut con), digest_more);
    }
}

#[test]
fn rdb_restart_restores_values_and_absolute_expiry() {
    for flavor in FLAVORS {
        let mut server = Server::start(flavor);
        let mut con = server.conn();
        workload(&mut con, "wl", 5, 600);
        cmd(&mut con, &["SAVE"]).unwrap();
        let before = snapshot(&mut con);
        let digest_before = digest(&mut con);
        std::thread::sleep(Duration::from_millis(50));
        let mut con = crash_and_restart(&mut server);
        assert_eq!(
            info_i64(&mut con, "persistence", "rdb_last_load_keys_loaded"),
            before.len() as i64,
            "{flavor:?}: dump.rdb was not loaded"
        );
        assert_eq!(snapshot(&mut con), before, "{flavor:?}: RDB load");
        assert_eq!(digest(&mut con), digest_before, "{flavor:?}: RDB load");
    }
}

#[test]
fn limiter_continues_exactly_after_aof_restart() {
    for flavor in FLAVORS {
        let mut server = Server::start_with(flavor, &AOF);
        let mut con = server.conn();
        let aligned = aligned_windows(&mut con)[0];
        let plain = ["RL.FIXED", "p", "5", "1h"];
        let with_aligned = ["RL.FIXED", "a", "5", aligned, "ALIGNED"];
        let plain_end = use_three_of_five(&mut con, &plain);
        let aligned_end = use_three_of_five(&mut con, &with_aligned);
        std::thread::sleep(Duration::from_millis(50));
        let mut con = crash_and_restart(&mut server);
        continues_with_two_more(&mut con, &plain, plain_end);
        continues_with_two_more(&mut con, &with_aligned, aligned_end);
    }
}

#[test]
fn limiter_continues_exactly_after_rewritten_aof_restart() {
    for flavor in FLAVORS {
        let mut server = Server::start_with(flavor, &AOF);
        let mut con = server.conn();
        let plain = ["RL.FIXED", "p", "5", "1h"];
        limiter(&mut con, &["RL.FIXED", "p", "5", "1h", "COST", "2"]);
        bgrewriteaof(&mut con);
        // One unit in the rewritten base, one in the increment.
        assert_eq!(limiter(&mut con, &plain)[..2], [1, 3]);
        let end = pexpiretime(&mut con, "p");
        let mut con = crash_and_restart(&mut server);
        continues_with_two_more(&mut con, &plain, end);
    }
}

#[test]
fn limiter_continues_exactly_after_rdb_restart() {
    for flavor in FLAVORS {
        let mut server = Server::start(flavor);
        let mut con = server.conn();
        let aligned = aligned_windows(&mut con)[0];
        let plain = ["RL.FIXED", "p", "5", "1h"];
        let with_aligned = ["RL.FIXED", "a", "5", aligned, "ALIGNED"];
        let plain_end = use_three_of_five(&mut con, &plain);
        let aligned_end = use_three_of_five(&mut con, &with_aligned);
        cmd(&mut con, &["SAVE"]).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let mut con = crash_and_restart(&mut server);
        continues_with_two_more(&mut con, &plain, plain_end);
        continues_with_two_more(&mut con, &with_aligned, aligned_end);
    }
}

// ---------------------------------------------------------------------------
// DUMP/RESTORE, COPY, RENAME
// ---------------------------------------------------------------------------

/// A limit of 3 with 2 used; returns the window's end.
fn two_of_three_used(con: &mut redis::Connection, key: &str) -> i64 {
    let reply = limiter(con, &["RL.FIXED", key, "3", "1h", "COST", "2"]);
    assert_eq!(reply[..5], [1, 2, 0, 3, 1]);
    pexpiretime(con, key)
}

#[test]
fn renamed_limiter_keeps_counting() {
    on_each_server(|_, con| {
        let end = two_of_three_used(con, "a");
        cmd(con, &["RENAME", "a", "b"]).unwrap();
        assert_eq!(pexpiretime(con, "b"), end);
        admits_the_last_unit(con, "b", end);
        // The old name is gone: it starts a window of its own.
        assert_eq!(limiter(con, &["RL.FIXED", "a", "3", "1h"])[..2], [1, 1]);
    });
}

#[test]
fn copied_limiter_counts_on_from_the_original_independently() {
    on_each_server(|_, con| {
        let end = two_of_three_used(con, "orig");
        cmd(con, &["COPY", "orig", "copy"]).unwrap();
        assert_eq!(pexpiretime(con, "copy"), end);
        admits_the_last_unit(con, "copy", end);
        // The original still had one unit left.
        admits_the_last_unit(con, "orig", end);
    });
}

#[test]
fn restored_limiter_keeps_counting() {
    on_each_server(|_, con| {
        let end = two_of_three_used(con, "orig");
        let payload: Vec<u8> = redis::cmd("DUMP").arg("orig").query(con).unwrap();
        redis::cmd("RESTORE")
            .arg("abs")
            .arg(end)
            .arg(&payload)
            .arg("ABSTTL")
            .query::<()>(con)
            .unwrap();
        assert_eq!(pexpiretime(con, "abs"), end);
        admits_the_last_unit(con, "abs", end);
        // Restored without a TTL: the stored window still ends where it
        // did, and the next admitted call puts the expiry back there.
        redis::cmd("RESTORE")
            .arg("nottl")
            .arg(0)
            .arg(&payload)
            .query::<()>(con)
            .unwrap();
        assert_eq!(pexpiretime(con, "nottl"), -1);
        admits_the_last_unit(con, "nottl", end);
        // REPLACE over a used-up limiter brings back the dumped count.
        redis::cmd("RESTORE")
            .arg("abs")
            .arg(end)
            .arg(&payload)
            .arg("ABSTTL")
            .arg("REPLACE")
            .query::<()>(con)
            .unwrap();
        admits_the_last_unit(con, "abs", end);
        admits_the_last_unit(con, "orig", end);
    });
}
