//! Primaries, replicas, AOF rewrites and crashes.

use super::{
    assert_same_dataset, assert_same_snapshot, cmd, digest, info_field, info_i64, limiter,
    pexpiretime, process_id, server_ms, signal, snapshot, wait_until, Flavor, Server, Snapshot,
};

/// Append-only with every write on disk before the reply.
pub const AOF: [&str; 4] = ["--appendonly", "yes", "--appendfsync", "always"];

/// A server that syncs replicas at once (no diskless-sync delay of 5 s),
/// started with `extra`.
pub fn start_primary(flavor: Flavor, extra: &[&str]) -> Server {
    let mut args = vec!["--repl-diskless-sync-delay", "0"];
    args.extend_from_slice(extra);
    Server::builder(flavor).args(&args).start()
}

/// A replica of `primary` (same flavor), with the link up.
pub fn start_replica(primary: &Server) -> Server {
    let replica = Server::start(primary.flavor);
    let mut rcon = replica.conn();
    cmd(
        &mut rcon,
        &["REPLICAOF", "127.0.0.1", &primary.port.to_string()],
    )
    .unwrap();
    wait_until("the replication link", || {
        info_field(&mut rcon, "replication", "master_link_status") == "up"
    });
    replica
}

/// A primary and its replica that never ping each other, so that only
/// propagated commands move the replication offset.
pub fn quiet_primary_and_replica(flavor: Flavor) -> (Server, Server) {
    primary_and_replica(flavor, &["--repl-ping-replica-period", "3600"])
}

/// A primary started with `primary_extra` and a replica of the same
/// flavor attached to it, with the link up.
pub fn primary_and_replica(flavor: Flavor, primary_extra: &[&str]) -> (Server, Server) {
    let primary = start_primary(flavor, primary_extra);
    let replica = start_replica(&primary);
    (primary, replica)
}

/// A replica that applies what `calls` sends its primary at least
/// `late_ms` after the primary decided it (stopped with SIGSTOP meanwhile)
/// ends with the primary's dataset exactly: it applies the primary's
/// clock, not its own, which would give later window ends, block ends and
/// turns.
pub fn assert_late_replica_agrees(
    flavor: Flavor,
    late_ms: u64,
    calls: impl FnOnce(&mut redis::Connection),
) {
    let (primary, replica) = primary_and_replica(flavor, &[]);
    let (mut p, mut r) = (primary.conn(), replica.conn());
    let pid = process_id(&mut r);
    signal(pid, "-STOP");
    calls(&mut p);
    std::thread::sleep(std::time::Duration::from_millis(late_ms));
    signal(pid, "-CONT");
    wait_in_sync(&mut p, &mut r);
    assert_same_dataset(&format!("{flavor:?} late replica"), &mut p, &mut r);
}

/// Waits until the replica has processed everything the primary has
/// propagated so far (its offset at least the primary's: pings may move
/// both further meanwhile).
pub fn wait_in_sync(primary: &mut redis::Connection, replica: &mut redis::Connection) {
    let offset = |con: &mut redis::Connection, field: &str| -> i64 {
        info_field(con, "replication", field).parse().unwrap_or(-1)
    };
    let target = offset(primary, "master_repl_offset");
    wait_until("the replica to catch up", || {
        offset(replica, "slave_repl_offset") >= target
    });
}

/// Waits until no AOF rewrite is running or scheduled.
pub fn wait_no_aof_rewrite(con: &mut redis::Connection) {
    wait_until("the AOF rewrite to finish", || {
        info_field(con, "persistence", "aof_rewrite_in_progress") == "0"
            && info_field(con, "persistence", "aof_rewrite_scheduled") == "0"
    });
}

/// `BGREWRITEAOF`, waiting until it has completed successfully.
pub fn bgrewriteaof(con: &mut redis::Connection) {
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

/// SIGKILL, then start again on the same directory and port; a fresh
/// connection.
pub fn crash_and_restart(server: &mut Server) -> redis::Connection {
    server.kill();
    server.restart();
    server.conn()
}

/// Waits until the server's clock has moved on by more than `ms`, so that
/// a replay that read the clock would give other window ends and TTLs.
pub fn let_the_clock_move(con: &mut redis::Connection, ms: i64) {
    let t0 = server_ms(con);
    wait_until("the clock to move", || server_ms(con) > t0 + ms);
}

/// What `server`'s AOF (it runs with [`AOF`]) gives back of what `con`
/// wrote, each time after the clock has moved on `clock_ms`: after a
/// SIGKILL; after a rewrite (the state then lives in the base file); and
/// after `more` calls on top of the rewrite (in the incremental file): the
/// same keys, values and expiry times, and the same digest. Returns a
/// connection after the last restart, and the dataset it holds.
pub fn assert_aof_restores(
    server: &mut Server,
    con: &mut redis::Connection,
    clock_ms: i64,
    more: impl FnOnce(&mut redis::Connection),
) -> (redis::Connection, Snapshot) {
    let flavor = server.flavor;
    let mut restarted = |con: &mut redis::Connection, want: &Snapshot, what: &str| {
        let want_digest = digest(con);
        let_the_clock_move(con, clock_ms);
        let mut con = crash_and_restart(server);
        let what = format!("{flavor:?}: {what}");
        assert_same_snapshot(&snapshot(&mut con), want, &what);
        assert_eq!(digest(&mut con), want_digest, "{what}");
        con
    };
    let before = snapshot(con);
    let mut con = restarted(con, &before, "AOF after SIGKILL");
    bgrewriteaof(&mut con);
    assert_same_snapshot(&snapshot(&mut con), &before, "the rewrite changed nothing");
    let mut con = restarted(&mut con, &before, "rewritten AOF");
    more(&mut con);
    let after_more = snapshot(&mut con);
    assert_ne!(
        after_more, before,
        "{flavor:?}: the calls on top changed nothing"
    );
    let con = restarted(&mut con, &after_more, "rewritten AOF plus increments");
    (con, after_more)
}

/// `SAVE`, then a SIGKILL and a restart after the clock has moved on
/// `clock_ms`: dump.rdb is loaded, and gives back the same keys, values,
/// expiry times and digest. Returns a connection after the restart.
pub fn assert_rdb_restores(
    server: &mut Server,
    con: &mut redis::Connection,
    clock_ms: i64,
) -> redis::Connection {
    let flavor = server.flavor;
    cmd(con, &["SAVE"]).unwrap();
    let before = snapshot(con);
    let digest_before = digest(con);
    let_the_clock_move(con, clock_ms);
    let mut con = crash_and_restart(server);
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
    assert_eq!(digest(&mut con), digest_before, "{flavor:?}: RDB load");
    con
}

pub fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

// ---------------------------------------------------------------------------
// A FIXED limiter that must carry on exactly where it was
// ---------------------------------------------------------------------------

/// Spends 3 of a limit of 5 on `args` (`RL.FIXED key 5 window [ALIGNED]`)
/// and returns the window's end.
pub fn use_three_of_five(con: &mut redis::Connection, args: &[&str]) -> i64 {
    let mut with_cost = args.to_vec();
    with_cost.extend(["COST", "2"]);
    assert_eq!(limiter(con, &with_cost)[..5], [1, 2, 0, 5, 3], "{args:?}");
    assert_eq!(limiter(con, args)[..5], [1, 3, 0, 5, 2], "{args:?}");
    pexpiretime(con, args[1])
}

/// One admitted call on `args`, checked to be `expected` (the first five
/// fields) with a reset_after that ends the window exactly at `end`.
pub fn admitted_in_window(
    con: &mut redis::Connection,
    args: &[&str],
    expected: [i64; 5],
    end: i64,
) {
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
pub fn continues_with_two_more(con: &mut redis::Connection, args: &[&str], end: i64) {
    admitted_in_window(con, args, [1, 4, 0, 5, 1], end);
    admitted_in_window(con, args, [1, 5, 0, 5, 0], end);
    let denied = limiter(con, args);
    assert_eq!(denied[..2], [0, 5], "{args:?}: {denied:?}");
    assert_eq!(denied[3..5], [5, 0], "{args:?}: {denied:?}");
    assert!(denied[2] > 0 && denied[2] == denied[5], "{denied:?}");
    assert_eq!(pexpiretime(con, args[1]), end, "{args:?}: the window moved");
}
