//! Persistence: AOF and RDB restarts, a rewritten AOF, and the key
//! commands that move a limiter's value (DUMP/RESTORE, COPY, RENAME). A
//! restart gives back the same state with the same absolute expiry times,
//! never extended by downtime; replaying ignores the mode.
//!
//! Windows are long (an hour or more, aligned ones chosen so that they do
//! not end for at least ten minutes) so nothing expires while a test runs,
//! and every wait is for a condition.

mod common;

use common::*;

// ---------------------------------------------------------------------------
// AOF and RDB
// ---------------------------------------------------------------------------

#[test]
fn aof_restart_restores_values_and_absolute_expiry() {
    for_each_flavor(|flavor| {
        let mut server = Server::builder(flavor).args(&AOF).start();
        let mut con = server.conn();
        fixed_workload(&mut con, "wl", 3, 600);
        assert_aof_restores(&mut server, &mut con, 50, |con| {
            fixed_workload(con, "wl2", 4, 300);
        });
    });
}

#[test]
fn rdb_restart_restores_values_and_absolute_expiry() {
    for_each_flavor(|flavor| {
        let mut server = Server::start(flavor);
        let mut con = server.conn();
        fixed_workload(&mut con, "wl", 5, 600);
        assert_rdb_restores(&mut server, &mut con, 50);
    });
}

/// Three of five used on a plain and on an aligned window; after a
/// SIGKILL and a restart (from the AOF when `server` runs with it, else
/// from an RDB saved just before), each admits exactly the two left, its
/// window ending where it did.
fn continues_exactly_after_restart(mut server: Server, save: bool) {
    let mut con = server.conn();
    let aligned = aligned_windows(&mut con)[0];
    let plain = ["RL.FIXED", "p", "5", "1h"];
    let with_aligned = ["RL.FIXED", "a", "5", aligned, "ALIGNED"];
    let plain_end = use_three_of_five(&mut con, &plain);
    let aligned_end = use_three_of_five(&mut con, &with_aligned);
    if save {
        cmd(&mut con, &["SAVE"]).unwrap();
    }
    let_the_clock_move(&mut con, 50);
    let mut con = crash_and_restart(&mut server);
    continues_with_two_more(&mut con, &plain, plain_end);
    continues_with_two_more(&mut con, &with_aligned, aligned_end);
}

#[test]
fn limiter_continues_exactly_after_aof_restart() {
    for_each_flavor(|flavor| {
        continues_exactly_after_restart(Server::builder(flavor).args(&AOF).start(), false);
    });
}

#[test]
fn limiter_continues_exactly_after_rewritten_aof_restart() {
    for_each_flavor(|flavor| {
        let mut server = Server::builder(flavor).args(&AOF).start();
        let mut con = server.conn();
        let plain = ["RL.FIXED", "p", "5", "1h"];
        limiter(&mut con, &["RL.FIXED", "p", "5", "1h", "COST", "2"]);
        bgrewriteaof(&mut con);
        // One unit in the rewritten base, one in the increment.
        assert_eq!(limiter(&mut con, &plain)[..2], [1, 3]);
        let end = pexpiretime(&mut con, "p");
        let mut con = crash_and_restart(&mut server);
        continues_with_two_more(&mut con, &plain, end);
    });
}

#[test]
fn limiter_continues_exactly_after_rdb_restart() {
    for_each_flavor(|flavor| continues_exactly_after_restart(Server::start(flavor), true));
}

#[test]
fn aof_restarts_restore_every_command() {
    for_each_flavor(|flavor| {
        let mut server = Server::builder(flavor).args(&AOF).start();
        let mut con = server.conn();
        workload(&mut con, "w", 51, 800);
        let (_, after_more) = assert_aof_restores(&mut server, &mut con, 20, |con| {
            workload(con, "w", 52, 400);
        });

        // Replaying ignores the mode: a server started with the same AOF
        // and `mode off` still rebuilds every limiter.
        server.kill();
        let off = start_from_aof(flavor, &server.dir.join("appendonlydir"), "off");
        assert_same_snapshot(
            &snapshot(&mut off.conn()),
            &after_more,
            &format!("{flavor:?}: AOF replayed under mode off"),
        );
    });
}

/// Leases taken, released, renewed and ended by themselves come back from
/// the AOF (after a SIGKILL, a rewrite, and increments on top of it) and
/// from an RDB byte for byte, with the same expiry, and a key's counter
/// goes on: its next lease gets the next id.
#[test]
fn leases_survive_restarts() {
    for_each_flavor(|flavor| {
        let next_id_goes_on = |con: &mut redis::Connection| {
            let args = ["RL.CONCURRENT", "l:c:5", "100", "1h"];
            let first = lease(con, &args);
            assert_eq!(lease(con, &args)[6], first[6] + 1, "{flavor:?}");
        };
        let mut server = Server::builder(flavor).args(&AOF).start();
        let mut con = server.conn();
        lease_workload(&mut con, "l", 71, 300);
        let (mut con, _) = assert_aof_restores(&mut server, &mut con, 20, |con| {
            lease_workload(con, "l2", 72, 200);
        });
        next_id_goes_on(&mut con);
        drop((con, server));
        let mut server = Server::start(flavor);
        let mut con = server.conn();
        lease_workload(&mut con, "l", 73, 300);
        let mut con = assert_rdb_restores(&mut server, &mut con, 20);
        next_id_goes_on(&mut con);
    });
}

/// A server started in `mode` on a copy of another server's AOF.
fn start_from_aof(flavor: Flavor, aof_dir: &std::path::Path, mode: &str) -> Server {
    Server::builder(flavor)
        .args(&AOF)
        .module_args(&["mode", mode])
        .prepared(|dir| {
            copy_dir(aof_dir, &dir.join("appendonlydir"));
        })
        .start()
}

#[test]
fn rdb_restart_restores_every_command() {
    for_each_flavor(|flavor| {
        let mut server = Server::start(flavor);
        let mut con = server.conn();
        workload(&mut con, "w", 61, 800);
        assert_rdb_restores(&mut server, &mut con, 20);
    });
}

// ---------------------------------------------------------------------------
// DUMP/RESTORE, COPY, RENAME
// ---------------------------------------------------------------------------

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
        // Restored without a TTL: the value counts its window from the
        // key's expiry (docs/operations.md, How keys are stored), so it
        // holds nothing to count from. It reads as empty, like a deleted
        // key, and the next admitted call opens a window and sets the
        // expiry again.
        redis::cmd("RESTORE")
            .arg("nottl")
            .arg(0)
            .arg(&payload)
            .query::<()>(con)
            .unwrap();
        assert_eq!(pexpiretime(con, "nottl"), -1);
        assert_eq!(
            limiter(con, &["RL.FIXED", "nottl", "3", "1h", "COST", "0"]),
            [1, 0, 0, 3, 3, 0]
        );
        assert_eq!(
            limiter(con, &["RL.FIXED", "nottl", "3", "1h"])[..5],
            [1, 1, 0, 3, 2]
        );
        assert!(pexpiretime(con, "nottl") > 0, "the write set no expiry");
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
