//! What the tests of a request's whole life (REFUND, BLOCK, RESERVE, WAIT:
//! tests/lifecycle.rs, wait.rs, upgrade.rs, lifecycle_errors.rs) share:
//! calls bracketed by the server's clock, replication offsets, blocked
//! clients, and values in the encoding-version-1 layouts written by hand.

use super::{cmd, info_field, info_i64, limiter, pexpiretime, rl_all, server_ms, snapshot};
use redis::Value;

/// 2100-01-01T00:00:00Z in Unix ms: a time no test reaches. A stored value
/// whose times lie there is decided with the clock standing still at them
/// (docs/commands.md: a clock that steps back stands still at the newest
/// time the limiter has seen), so every reply on it is exact.
pub const FAR: i64 = 4_102_444_800_000;

/// A limiter call with the server's clock read just before and just after
/// it: the call was decided at some `now` in `before..=after`.
#[derive(Clone, Copy, Debug)]
pub struct Timed {
    pub reply: [i64; 6],
    pub before: i64,
    pub after: i64,
}

impl Timed {
    /// Asserts that the reply's reset_after ends at the absolute time `end`
    /// (`end - now` for some `now` in the bracket).
    #[track_caller]
    pub fn resets_at(&self, end: i64, what: &str) {
        let r = self.reply[5];
        assert!(
            end - self.after <= r && r <= end - self.before,
            "{what}: reset_after {r} does not end at {end} (now {}..{}): {:?}",
            self.before,
            self.after,
            self.reply
        );
    }

    /// Asserts that the reply's retry_after ends at the absolute time `at`.
    #[track_caller]
    pub fn retries_at(&self, at: i64, what: &str) {
        let r = self.reply[2];
        assert!(
            at - self.after <= r && r <= at - self.before,
            "{what}: retry_after {r} does not end at {at} (now {}..{}): {:?}",
            self.before,
            self.after,
            self.reply
        );
    }

    /// The absolute times `now + ms` can be, for `now` in the bracket.
    pub fn plus(&self, ms: i64) -> (i64, i64) {
        (self.before + ms, self.after + ms)
    }
}

/// One limiter call, bracketed by the server's clock.
pub fn timed(con: &mut redis::Connection, args: &[&str]) -> Timed {
    let before = server_ms(con);
    let reply = limiter(con, args);
    let after = server_ms(con);
    Timed {
        reply,
        before,
        after,
    }
}

/// One `RL.CONCURRENT` call bracketed by the server's clock: its six
/// limiter integers, and the lease id.
pub fn timed_lease(con: &mut redis::Connection, args: &[&str]) -> (Timed, i64) {
    let before = server_ms(con);
    let [a, b, c, d, e, f, id] = crate::common::lease(con, args);
    let after = server_ms(con);
    let reply = [a, b, c, d, e, f];
    (
        Timed {
            reply,
            before,
            after,
        },
        id,
    )
}

/// `RL.ALL args...` bracketed by the server's clock.
pub fn timed_all(
    con: &mut redis::Connection,
    args: &[&str],
) -> ((i64, i64, Vec<[i64; 6]>), i64, i64) {
    let before = server_ms(con);
    let reply = crate::common::rl_all(con, args);
    let after = server_ms(con);
    (reply, before, after)
}

/// The key's expiry is `now + reset_after` for the call's `now`: PTTL
/// follows reset_after.
#[track_caller]
pub fn expiry_follows_reset(con: &mut redis::Connection, key: &str, t: &Timed, what: &str) {
    let at = pexpiretime(con, key);
    let (lo, hi) = t.plus(t.reply[5]);
    assert!(
        lo <= at && at <= hi,
        "{what}: {key} expires at {at}, not now + reset_after in {lo}..={hi}: {:?}",
        t.reply
    );
}

#[track_caller]
pub fn assert_in(what: &str, got: i64, lo: i64, hi: i64) {
    assert!(lo <= got && got <= hi, "{what}: {got} not in {lo}..={hi}");
}

/// The replication stream's length so far (moves only when something is
/// propagated, given `--repl-ping-replica-period 3600`).
pub fn repl_offset(con: &mut redis::Connection) -> i64 {
    info_i64(con, "replication", "master_repl_offset")
}

pub fn blocked_clients(con: &mut redis::Connection) -> i64 {
    info_i64(con, "clients", "blocked_clients")
}

pub fn get_bytes(con: &mut redis::Connection, key: &str) -> Option<Vec<u8>> {
    redis::cmd("GET").arg(key).query(con).unwrap()
}

/// Stores `value` at `key`, expiring at `expire_at` (Unix ms; none if 0).
pub fn put(con: &mut redis::Connection, key: &str, value: &[u8], expire_at: i64) {
    let _: () = redis::cmd("SET").arg(key).arg(value).query(con).unwrap();
    if expire_at > 0 {
        let set: i64 = redis::cmd("PEXPIREAT")
            .arg(key)
            .arg(expire_at)
            .query(con)
            .unwrap();
        assert_eq!(set, 1, "PEXPIREAT {key} {expire_at}");
    }
}

/// PONG, or a panic naming `what`.
#[track_caller]
pub fn alive(con: &mut redis::Connection, what: &str) {
    assert_eq!(
        cmd(con, &["PING"]),
        Ok(Value::SimpleString("PONG".into())),
        "{what}: the server does not answer"
    );
}

/// Runs `body`, and asserts that it changed nothing: the same DUMP and
/// absolute expiry of every key.
#[track_caller]
pub fn changes_nothing<T>(
    con: &mut redis::Connection,
    what: &str,
    body: impl FnOnce(&mut redis::Connection) -> T,
) -> T {
    let before = snapshot(con);
    let out = body(con);
    crate::common::assert_same_snapshot(&snapshot(con), &before, what);
    out
}

/// RL.ALL of a FIXED clause on `full` (1 per hour, its one unit spent
/// here first) and the clause `token` (one that would reserve or wait):
/// denied at once by the FIXED clause, reserving nothing, changing nothing.
#[track_caller]
pub fn denied_by_a_full_clause(
    con: &mut redis::Connection,
    what: &str,
    full: &str,
    token: &[&str],
) {
    assert_eq!(limiter(con, &["RL.FIXED", full, "1", "1h"])[0], 1);
    let args = [&["FIXED", full, "1", "1h"][..], token].concat();
    changes_nothing(con, what, |con| {
        let (allowed, retry, clauses) = rl_all(con, &args);
        assert_eq!(allowed, 0, "{what}: {clauses:?}");
        assert!(retry > 0, "{what}: {clauses:?}");
        assert_eq!(clauses[0][0], 0, "{what}: {clauses:?}");
    });
}

/// The server's log holds no sign of a crash or a panic.
#[track_caller]
pub fn log_is_clean(log: &str, what: &str) {
    for bad in [
        "panic",
        "BUG REPORT",
        "crashed by signal",
        "ASSERTION FAILED",
    ] {
        assert!(!log.contains(bad), "{what}: {bad:?} in the log:\n{log}");
    }
}

/// The server's process id, from INFO.
pub fn process_id(con: &mut redis::Connection) -> u32 {
    info_field(con, "server", "process_id").parse().unwrap()
}

/// Sends `sig` (`-STOP`, `-CONT`) to the server process `pid`.
pub fn signal(pid: u32, sig: &str) {
    let pid = pid.to_string();
    let status = std::process::Command::new("kill")
        .args([sig, &pid])
        .status()
        .expect("cannot run kill");
    assert!(status.success(), "kill {sig} {pid} failed");
}

// ---------------------------------------------------------------------------
// Encoding version 1, by hand (src/state: `00 'r' 'l' 01 tag` then
// little-endian fields)
// ---------------------------------------------------------------------------

fn v1(tag: u8) -> Vec<u8> {
    vec![0, b'r', b'l', 1, tag]
}

/// An RL.FIXED window `[start, end)` with `count` units.
pub fn fixed_v1(start_ms: u64, end_ms: u64, count: u64) -> Vec<u8> {
    let mut out = v1(b'F');
    for f in [start_ms, end_ms, count] {
        out.extend(f.to_le_bytes());
    }
    out
}

/// An RL.TOKEN bucket as of `at_ms`, `missing` 1/`window_ms` tokens short
/// of full.
pub fn token_v1(at_ms: u64, window_ms: u64, missing: u128) -> Vec<u8> {
    let mut out = v1(b'T');
    out.extend(at_ms.to_le_bytes());
    out.extend(window_ms.to_le_bytes());
    out.extend(missing.to_le_bytes());
    out
}
