//! A request's whole life (docs/request-life.md):
//! REFUND per algorithm, BLOCK penalties, RESERVE pacing on TOKEN, the same
//! options in RL.ALL clauses, with PEEK and the modes; and a workload mixing
//! all four options (WAIT included) with every existing command, replicated
//! and persisted byte for byte. WAIT's blocking is in tests/wait.rs, stored
//! values of encoding version 1 in tests/upgrade.rs, bad input in
//! tests/lifecycle_errors.rs.
//!
//! Times: every call is bracketed by the server's clock (`timed`), and a
//! reply's times are checked against absolute instants (a window's end, a
//! block's end, a reservation's turn) that the test knows exactly, most
//! from PEXPIRETIME. Short windows and blocks are waited out with
//! sub-second sleeps; anything that must outlive a restart or a replica's
//! catching up lasts an hour or more and is never slept out.

mod common;

use common::*;
use std::time::Duration;

const HOUR: i64 = 3_600_000;

fn sleep_ms(ms: i64) {
    if ms > 0 {
        std::thread::sleep(Duration::from_millis(ms as u64));
    }
}

/// Waits until the server's clock reads at least `at`.
fn until_server_ms(con: &mut redis::Connection, at: i64) {
    loop {
        let now = server_ms(con);
        if now >= at {
            return;
        }
        sleep_ms((at - now).min(50));
    }
}

fn with<'a>(base: &[&'a str], more: &[&'a str]) -> Vec<&'a str> {
    [base, more].concat()
}

// ---------------------------------------------------------------------------
// REFUND
// ---------------------------------------------------------------------------

#[test]
fn fixed_refund_lowers_the_current_window_never_below_zero() {
    on_each_server(|_, con| {
        let f = ["RL.FIXED", "f", "5", "1h"];
        assert_eq!(
            limiter(con, &with(&f, &["COST", "3"])),
            [1, 3, 0, 5, 2, HOUR]
        );
        let end = pexpiretime(con, "f");

        let r = timed(con, &with(&f, &["REFUND", "1"]));
        assert_eq!(r.reply[..5], [1, 2, 0, 5, 3], "{r:?}");
        r.resets_at(end, "refund 1");
        assert_eq!(
            pexpiretime(con, "f"),
            end,
            "a refund keeps the window's end"
        );

        // PEEK answers as the refund would, and changes nothing.
        let peek = changes_nothing(con, "REFUND PEEK", |con| {
            timed(con, &with(&f, &["REFUND", "1", "PEEK"]))
        });
        assert_eq!(peek.reply[..5], [1, 1, 0, 5, 4], "{peek:?}");
        peek.resets_at(end, "refund peek");

        // More than was recorded: down to 0, and the empty limiter's key goes.
        assert_eq!(
            limiter(con, &with(&f, &["REFUND", "10"])),
            [1, 0, 0, 5, 5, 0]
        );
        assert!(!exists(con, "f"), "an emptied limiter keeps no key");
        // Nothing recorded: nothing to give back, nothing written.
        changes_nothing(con, "refund of a missing key", |con| {
            assert_eq!(
                limiter(con, &with(&f, &["REFUND", "2"])),
                [1, 0, 0, 5, 5, 0]
            );
        });
        assert!(!exists(con, "f"));
        // The next admitted call opens a window as on an empty key.
        assert_eq!(
            limiter(con, &with(&f, &["COST", "5"])),
            [1, 5, 0, 5, 0, HOUR]
        );

        // ALIGNED: the aligned window's count drops; its end stays.
        let w = aligned_windows(con)[0];
        let a = ["RL.FIXED", "a", "5", w, "ALIGNED"];
        assert_eq!(limiter(con, &with(&a, &["COST", "4"]))[..2], [1, 4]);
        let aligned_end = pexpiretime(con, "a");
        let r = timed(con, &with(&a, &["REFUND", "3"]));
        assert_eq!(r.reply[..5], [1, 1, 0, 5, 4], "{r:?}");
        r.resets_at(aligned_end, "aligned refund");
        assert_eq!(pexpiretime(con, "a"), aligned_end);
    });
}

#[test]
fn fixed_refund_leaves_an_ended_window_untouched() {
    on_each_server(|_, con| {
        // A window that ended long ago, kept without expiry (as RESTORE
        // without a TTL would keep it): nothing of it counts any more.
        let now = server_ms(con) as u64;
        let ended = fixed_v1(now - 10_000, now - 5_000, 3);
        put(con, "ended", &ended, 0);
        changes_nothing(con, "refund on an ended window", |con| {
            assert_eq!(
                limiter(con, &["RL.FIXED", "ended", "5", "1h", "REFUND", "2"]),
                [1, 0, 0, 5, 5, 0]
            );
        });
        assert_eq!(get_bytes(con, "ended"), Some(ended));
        // The ended window does not count: a new one opens.
        assert_eq!(
            limiter(con, &["RL.FIXED", "ended", "5", "1h", "COST", "5"]),
            [1, 5, 0, 5, 0, HOUR]
        );
    });
}

#[test]
fn sliding_refund_removes_the_newest_units_first() {
    on_each_server(|_, con| {
        let s = ["RL.SLIDING", "s", "10", "1h"];
        assert_eq!(
            limiter(con, &with(&s, &["COST", "4"])),
            [1, 4, 0, 10, 6, HOUR]
        );
        let first_end = pexpiretime(con, "s");
        // The second entry is logged at a later millisecond.
        until_server_ms(con, first_end - HOUR + 2);
        assert_eq!(
            limiter(con, &with(&s, &["COST", "3"]))[..5],
            [1, 7, 0, 10, 3]
        );
        let second_end = pexpiretime(con, "s");
        assert!(second_end > first_end);

        // 2 of the newest entry's 3 units: it still holds one.
        let r = timed(con, &with(&s, &["REFUND", "2"]));
        assert_eq!(r.reply[..5], [1, 5, 0, 10, 5], "{r:?}");
        r.resets_at(second_end, "the newest entry still counts");
        assert_eq!(pexpiretime(con, "s"), second_end);

        // Its last unit, then one of the older entry's: only that is left.
        let r = timed(con, &with(&s, &["REFUND", "2"]));
        assert_eq!(r.reply[..5], [1, 3, 0, 10, 7], "{r:?}");
        r.resets_at(first_end, "only the first entry is left");
        expiry_follows_reset(con, "s", &r, "after the refund");
        assert_eq!(pexpiretime(con, "s"), first_end);

        // The log counts exactly what is left: 7 more fit, 8 wait for the
        // first entry to leave the window.
        let peek = timed(con, &with(&s, &["COST", "7", "PEEK"]));
        assert_eq!(peek.reply[..5], [1, 10, 0, 10, 0], "{peek:?}");
        let denied = timed(con, &with(&s, &["COST", "8", "PEEK"]));
        assert_eq!(denied.reply[..2], [0, 3], "{denied:?}");
        denied.retries_at(first_end, "the first entry leaves");
        denied.resets_at(first_end, "the first entry leaves");

        assert_eq!(
            limiter(con, &with(&s, &["REFUND", "100"])),
            [1, 0, 0, 10, 10, 0]
        );
        assert!(!exists(con, "s"));
    });
}

#[test]
fn approx_refund_lowers_only_the_current_window() {
    on_each_server(|server, con| {
        const W: i64 = 1000;
        let a = ["RL.SLIDING", "a", "10", "1s", "APPROX"];
        // Windows are aligned to the second: each attempt must make its
        // calls inside the windows it planned for, or it starts again.
        for attempt in 0.. {
            assert!(
                attempt < 8,
                "{:?}: no attempt fit its windows",
                server.flavor
            );
            cmd(con, &["DEL", "a"]).unwrap();
            let now = server_ms(con);
            until_server_ms(con, now - now % W + W + 20);
            let first = timed(con, &with(&a, &["COST", "6"]));
            let k = first.before / W;
            if first.after / W != k || first.after % W > 400 {
                continue;
            }
            assert_eq!(first.reply[..5], [1, 6, 0, 10, 4]);
            // The next window: the first one's 6 now weigh in as previous.
            until_server_ms(con, (k + 1) * W + 20);
            let second = timed(con, &with(&a, &["COST", "2"]));
            let refund = timed(con, &with(&a, &["REFUND", "5"]));
            let again = changes_nothing(con, "a second refund", |con| {
                timed(con, &with(&a, &["REFUND", "1"]))
            });
            if second.before / W != k + 1 || again.after / W != k + 1 {
                continue;
            }
            let start = (k + 1) * W;
            let weighted = |now: i64| 6 * (W - (now - start)) / W;
            // Only the current window's 2 go; the previous window's 6 are
            // history and keep weighing in.
            assert_eq!(refund.reply[..3], [1, refund.reply[1], 0], "{refund:?}");
            assert_in(
                "count after the refund",
                refund.reply[1],
                weighted(refund.after),
                weighted(refund.before),
            );
            assert_eq!(refund.reply[3..5], [10, 10 - refund.reply[1]]);
            // The key lives while the previous window still weighs in.
            refund.resets_at(start + W, "the previous window stops counting");
            assert_eq!(pexpiretime(con, "a"), start + W);
            // Nothing of the current window is left: nothing changes.
            assert_eq!(again.reply[..3], [1, again.reply[1], 0], "{again:?}");
            assert_in(
                "count after a second refund",
                again.reply[1],
                weighted(again.after),
                weighted(again.before),
            );
            break;
        }
    });
}

#[test]
fn token_refund_returns_tokens_up_to_the_capacity() {
    on_each_server(|_, con| {
        // 10 per hour: a token every 360 s, so a refund of 4 brings the
        // bucket's full time 4 * 360 s closer, exactly.
        let t = ["RL.TOKEN", "t", "10", "1h"];
        assert_eq!(
            limiter(con, &with(&t, &["COST", "6"])),
            [1, 6, 0, 10, 4, 2_160_000]
        );
        let full_at = pexpiretime(con, "t");
        let r = timed(con, &with(&t, &["REFUND", "4"]));
        assert_eq!(r.reply[..5], [1, 2, 0, 10, 8], "{r:?}");
        r.resets_at(full_at - 1_440_000, "4 tokens back");
        assert_eq!(pexpiretime(con, "t"), full_at - 1_440_000);
        // Up to the capacity: a full bucket is no key.
        assert_eq!(
            limiter(con, &with(&t, &["REFUND", "100"])),
            [1, 0, 0, 10, 10, 0]
        );
        assert!(!exists(con, "t"));
        changes_nothing(con, "refund on a full bucket", |con| {
            assert_eq!(
                limiter(con, &with(&t, &["REFUND", "1"])),
                [1, 0, 0, 10, 10, 0]
            );
        });
        // BURST: the capacity, not the rate, caps the refund.
        let b = ["RL.TOKEN", "b", "1", "1h", "BURST", "20"];
        assert_eq!(
            limiter(con, &with(&b, &["COST", "15"]))[..5],
            [1, 15, 0, 20, 5]
        );
        let r = timed(con, &with(&b, &["REFUND", "5"]));
        assert_eq!(r.reply[..5], [1, 10, 0, 20, 10], "{r:?}");
        expiry_follows_reset(con, "b", &r, "BURST refund");
    });
}

/// The turn of a call of `cost` on a token bucket that is full again at
/// `full_at` (its PEXPIRETIME), of `capacity` tokens refilling one per
/// `per_token` ms: the bucket holds `cost` tokens, after every earlier
/// reservation, `(capacity - cost) * per_token` before it is full.
fn turn(full_at: i64, capacity: i64, cost: i64, per_token: i64) -> i64 {
    full_at - (capacity - cost) * per_token
}

#[test]
fn token_refund_repays_a_reservations_debt_first() {
    on_each_server(|_, con| {
        // One token an hour, a bucket of two, waits of up to 3 h.
        let q = ["RL.TOKEN", "q", "1", "1h", "BURST", "2"];
        let reserve = with(&q, &["RESERVE", "3h"]);
        assert_eq!(
            limiter(con, &with(&q, &["COST", "2"])),
            [1, 2, 0, 2, 0, 2 * HOUR]
        );
        for k in 1..=3 {
            let full_at = pexpiretime(con, "q");
            let r = timed(con, &reserve);
            assert_eq!(r.reply[..2], [1, 2 + k], "reservation {k}: {r:?}");
            assert_eq!(r.reply[3..5], [2, 0], "reservation {k}: {r:?}");
            r.retries_at(turn(full_at, 2, 1, HOUR), &format!("reservation {k}"));
            assert_eq!(pexpiretime(con, "q"), full_at + HOUR, "reservation {k}");
            expiry_follows_reset(con, "q", &r, &format!("reservation {k}"));
        }
        // The fourth turn is 4 h away: denied by the hour too many, and
        // nothing reserved.
        let full_at = pexpiretime(con, "q");
        let denied = changes_nothing(con, "a denied reservation", |con| timed(con, &reserve));
        assert_eq!(denied.reply[..2], [0, 5], "{denied:?}");
        denied.retries_at(turn(full_at, 2, 1, HOUR) - 3 * HOUR, "the extra wait");
        // A refund repays the debt: the bucket is full an hour sooner and
        // the next caller's turn comes an hour sooner.
        let r = timed(con, &with(&q, &["REFUND", "1"]));
        assert_eq!(r.reply[..5], [1, 4, 0, 2, 0], "{r:?}");
        assert_eq!(pexpiretime(con, "q"), full_at - HOUR);
        expiry_follows_reset(con, "q", &r, "refund in debt");
        let again = timed(con, &reserve);
        assert_eq!(again.reply[..2], [1, 5], "{again:?}");
        again.retries_at(turn(full_at - HOUR, 2, 1, HOUR), "the refunded turn");
        // Everything back: the debt, then the bucket.
        assert_eq!(
            limiter(con, &with(&q, &["REFUND", "10"])),
            [1, 0, 0, 2, 2, 0]
        );
        assert!(!exists(con, "q"));
    });
}

#[test]
fn refund_with_an_override_uses_its_limits() {
    on_each_server(|_, con| {
        ok(con, &["RL.OVERRIDE.SET", "o", "20", "1h", "BURST", "30"]);
        let f = ["RL.FIXED", "kf", "5", "1m", "OVERRIDE", "o"];
        assert_eq!(
            limiter(con, &with(&f, &["COST", "15"])),
            [1, 15, 0, 20, 5, HOUR]
        );
        let r = timed(con, &with(&f, &["REFUND", "5"]));
        assert_eq!(r.reply[..5], [1, 10, 0, 20, 10], "{r:?}");
        expiry_follows_reset(con, "kf", &r, "FIXED refund with override");
        // Without the override the call's own limit applies to the counts.
        assert_eq!(
            limiter(con, &["RL.FIXED", "kf", "5", "1m", "REFUND", "1"])[..5],
            [1, 9, 0, 5, 0]
        );

        let s = ["RL.SLIDING", "ks", "5", "1m", "OVERRIDE", "o"];
        assert_eq!(
            limiter(con, &with(&s, &["COST", "12"]))[..5],
            [1, 12, 0, 20, 8]
        );
        assert_eq!(
            limiter(con, &with(&s, &["REFUND", "2"]))[..5],
            [1, 10, 0, 20, 10]
        );

        let t = ["RL.TOKEN", "kt", "1", "1m", "OVERRIDE", "o"];
        assert_eq!(
            limiter(con, &with(&t, &["COST", "25"]))[..5],
            [1, 25, 0, 30, 5]
        );
        let r = timed(con, &with(&t, &["REFUND", "5"]));
        assert_eq!(r.reply[..5], [1, 20, 0, 30, 10], "{r:?}");
        expiry_follows_reset(con, "kt", &r, "TOKEN refund with override");
        // A missing override: the call's own values.
        let m = ["RL.FIXED", "km", "5", "1m", "OVERRIDE", "o:none"];
        assert_eq!(
            limiter(con, &with(&m, &["COST", "4"]))[..5],
            [1, 4, 0, 5, 1]
        );
        assert_eq!(
            limiter(con, &with(&m, &["REFUND", "1"]))[..5],
            [1, 3, 0, 5, 2]
        );
    });
}

#[test]
fn refund_in_monitor_and_off_modes() {
    on_each_server(|_, con| {
        set_mode(con, "monitor");
        let m = ["RL.FIXED", "m", "2", "1h"];
        assert_eq!(limiter(con, &with(&m, &["COST", "2"]))[..2], [1, 2]);
        // Would be denied: admitted, retry_after kept, nothing counted.
        let would = limiter(con, &m);
        assert_eq!(would[..2], [1, 2], "{would:?}");
        assert!(would[2] > 0, "{would:?}");
        // The refund changes the state exactly as in `on`.
        assert_eq!(
            limiter(con, &with(&m, &["REFUND", "1"]))[..5],
            [1, 1, 0, 2, 1]
        );
        set_mode(con, "on");
        assert_eq!(limiter(con, &m)[..2], [1, 2]);

        set_mode(con, "off");
        changes_nothing(con, "REFUND in mode off", |con| {
            assert_eq!(
                limiter(con, &with(&m, &["REFUND", "1"])),
                [1, 0, 0, 2, 2, 0]
            );
            assert_eq!(
                limiter(con, &["RL.TOKEN", "m:t", "3", "1h", "REFUND", "2"]),
                [1, 0, 0, 3, 3, 0]
            );
        });
        set_mode(con, "on");
        assert_eq!(limiter(con, &m)[..2], [0, 2]);
    });
}

// ---------------------------------------------------------------------------
// BLOCK
// ---------------------------------------------------------------------------

#[test]
fn block_denies_every_call_until_denied_at_plus_duration() {
    on_each_server(|server, con| {
        let flavor = server.flavor;
        // 3 per second, BLOCK 2500 ms: the block outlives the window.
        let login = ["RL.FIXED", "login", "3", "1s", "BLOCK", "2500ms"];
        let first = timed(con, &login);
        assert_eq!(first.reply, [1, 1, 0, 3, 2, 1000]);
        let window_end = pexpiretime(con, "login");
        assert_eq!(limiter(con, &login)[..2], [1, 2]);
        assert_eq!(limiter(con, &login)[..2], [1, 3]);

        // The denial that starts it: retry_after is the whole block, and
        // the key lives until the block's end.
        let start = timed(con, &login);
        assert_eq!(start.reply, [0, 3, 2500, 3, 0, 2500], "{flavor:?}");
        let end = pexpiretime(con, "login");
        assert_in("block's start", end - 2500, start.before, start.after);

        // During the block: denied with the time left, written nothing,
        // not extended; over the limit: never; PEEK: shown.
        changes_nothing(con, "calls during a block", |con| {
            let d = timed(con, &login);
            assert_eq!(d.reply[..2], [0, 3], "{d:?}");
            assert_eq!(d.reply[3..5], [3, 0], "{d:?}");
            d.retries_at(end, "time left");
            d.resets_at(end, "the key's life");
            let plain = timed(con, &["RL.FIXED", "login", "3", "1s"]);
            plain.retries_at(end, "a call without BLOCK");
            let over = limiter(con, &with(&login, &["COST", "4"]));
            assert_eq!(over[..3], [0, 3, -1], "{over:?}");
            let peek = timed(con, &with(&login, &["PEEK"]));
            assert_eq!(peek.reply[..2], [0, 3], "{peek:?}");
            peek.retries_at(end, "PEEK shows the block");
            // A higher limit does not help either.
            let higher = timed(con, &["RL.FIXED", "login", "100", "1s"]);
            assert_eq!(higher.reply[..2], [0, 3], "{higher:?}");
            higher.retries_at(end, "whatever the counts say");
        });

        // REFUND gives units back but does not lift the block.
        let r = timed(con, &with(&login, &["REFUND", "1"]));
        assert_eq!(r.reply[..5], [1, 2, 0, 3, 1], "{r:?}");
        r.resets_at(end, "the key lives for the block");
        assert_eq!(pexpiretime(con, "login"), end);
        let still = timed(con, &login);
        assert_eq!(still.reply[0], 0, "REFUND lifted the block: {still:?}");
        still.retries_at(end, "after the refund");

        // The window has ended, the block has not: the counts are empty.
        until_server_ms(con, window_end + 5);
        let d = timed(con, &login);
        assert_eq!(d.reply[..2], [0, 0], "{d:?}");
        assert_eq!(d.reply[3..5], [3, 3], "{d:?}");
        d.retries_at(end, "the block outlives the window");
        d.resets_at(end, "the block outlives the window");

        // It ends at denied_at + duration exactly: every call decided
        // before `end` is denied, every call decided at or after it is the
        // algorithm's own (here: admitted in a new window).
        until_server_ms(con, end - 40);
        let mut denied_near_end = 0;
        loop {
            let t = timed(con, &["RL.FIXED", "login", "3", "1s"]);
            if t.reply[0] == 1 {
                assert!(t.after >= end, "admitted before the block's end: {t:?}");
                assert_eq!(t.reply, [1, 1, 0, 3, 2, 1000], "{t:?}");
                break;
            }
            assert!(t.before < end, "denied after the block's end {end}: {t:?}");
            t.retries_at(end, "near the end");
            denied_near_end += 1;
            sleep_ms(1);
        }
        assert!(denied_near_end > 0, "{flavor:?}: no call before the end");
    });
}

#[test]
fn peek_shows_a_block_but_never_starts_one() {
    on_each_server(|_, con| {
        let p = ["RL.FIXED", "p", "1", "1h"];
        assert_eq!(limiter(con, &p)[..2], [1, 1]);
        let window_end = pexpiretime(con, "p");
        changes_nothing(con, "PEEK with BLOCK", |con| {
            // The limiter's own denial: the window's end, not a 2 h block.
            let peek = timed(con, &with(&p, &["BLOCK", "2h", "PEEK"]));
            assert_eq!(peek.reply[..2], [0, 1], "{peek:?}");
            peek.retries_at(window_end, "PEEK with BLOCK");
            let plain = timed(con, &p);
            plain.retries_at(window_end, "no block was started");
        });
        // A real denial with BLOCK starts one; PEEK then shows it.
        let start = timed(con, &with(&p, &["BLOCK", "2h"]));
        assert_eq!(start.reply, [0, 1, 2 * HOUR, 1, 0, 2 * HOUR]);
        let end = pexpiretime(con, "p");
        assert_in("block's start", end - 2 * HOUR, start.before, start.after);
        let peek = changes_nothing(con, "PEEK during a block", |con| {
            timed(con, &with(&p, &["PEEK"]))
        });
        peek.retries_at(end, "PEEK shows the block");
        peek.resets_at(end, "PEEK shows the block");
    });
}

#[test]
fn del_lifts_a_block_and_a_denial_over_the_limit_starts_one() {
    on_each_server(|_, con| {
        // COST above the limit on an empty key: denied with -1, and with
        // BLOCK that denial starts a block on a key that had no state.
        let x = ["RL.FIXED", "x", "3", "1h"];
        let start = timed(con, &with(&x, &["COST", "5", "BLOCK", "2h"]));
        assert_eq!(start.reply, [0, 0, -1, 3, 3, 2 * HOUR], "{start:?}");
        let end = pexpiretime(con, "x");
        assert_in("block's start", end - 2 * HOUR, start.before, start.after);
        let d = timed(con, &x);
        assert_eq!(d.reply[..2], [0, 0], "{d:?}");
        assert_eq!(d.reply[3..5], [3, 3], "{d:?}");
        d.retries_at(end, "blocked");
        d.resets_at(end, "the key lives for the block");
        // REFUND on a key holding only a block: nothing to give back.
        changes_nothing(con, "refund of a block alone", |con| {
            let r = timed(con, &with(&x, &["REFUND", "1"]));
            assert_eq!(r.reply[..5], [1, 0, 0, 3, 3], "{r:?}");
            r.resets_at(end, "the block");
        });
        // DEL lifts it.
        assert_eq!(cmd_int(con, &["DEL", "x"]), 1);
        assert_eq!(limiter(con, &x), [1, 1, 0, 3, 2, HOUR]);
    });
}

#[test]
fn block_works_on_every_algorithm() {
    on_each_server(|_, con| {
        let w = aligned_windows(con)[0];
        let cases: [(&str, Vec<&str>); 4] = [
            ("sliding", vec!["RL.SLIDING", "b:s", "2", "1h"]),
            ("approx", vec!["RL.SLIDING", "b:a", "2", w, "APPROX"]),
            ("token", vec!["RL.TOKEN", "b:t", "2", "1h"]),
            ("fixed aligned", vec!["RL.FIXED", "b:f", "2", w, "ALIGNED"]),
        ];
        for (what, args) in cases {
            let key = args[1];
            assert_eq!(
                limiter(con, &with(&args, &["COST", "2"]))[..2],
                [1, 2],
                "{what}"
            );
            let start = timed(con, &with(&args, &["BLOCK", "90m"]));
            assert_eq!(
                start.reply[..5],
                [0, 2, 5_400_000, 2, 0],
                "{what}: {start:?}"
            );
            // The key lives for the later of the limiter's own life and the
            // block (an aligned day outlives 90 m; the others do not).
            assert!(start.reply[5] >= 5_400_000, "{what}: {start:?}");
            expiry_follows_reset(con, key, &start, what);
            let (end_lo, end_hi) = start.plus(5_400_000);
            let d = changes_nothing(con, what, |con| timed(con, &args));
            assert_eq!(d.reply[0], 0, "{what}: {d:?}");
            let left = d.reply[2];
            assert_in(what, left, end_lo - d.after, end_hi - d.before);
            expiry_follows_reset(con, key, &d, what);
        }
        // A RESERVE denied (the wait exceeds max_wait) with BLOCK starts one.
        let r = ["RL.TOKEN", "b:r", "1", "1h", "BURST", "1"];
        assert_eq!(limiter(con, &r)[..2], [1, 1]);
        let start = timed(con, &with(&r, &["RESERVE", "10m", "BLOCK", "2h"]));
        assert_eq!(start.reply, [0, 1, 2 * HOUR, 1, 0, 2 * HOUR], "{start:?}");
        let end = pexpiretime(con, "b:r");
        // During it, a reservation that would fit is denied too.
        let d = changes_nothing(con, "RESERVE during a block", |con| {
            timed(con, &with(&r, &["RESERVE", "3h"]))
        });
        assert_eq!(d.reply[..2], [0, 1], "{d:?}");
        d.retries_at(end, "RESERVE during a block");
    });
}

#[test]
fn block_in_monitor_mode_starts_and_reports_but_admits() {
    on_each_server(|_, con| {
        set_mode(con, "monitor");
        let m = ["RL.FIXED", "mb", "1", "1h", "BLOCK", "2h"];
        assert_eq!(limiter(con, &m)[..2], [1, 1]);
        let start = timed(con, &m);
        // `on` would deny and start a block: monitor starts it too, and
        // admits with retry_after kept.
        assert_eq!(start.reply, [1, 1, 2 * HOUR, 1, 0, 2 * HOUR], "{start:?}");
        let end = pexpiretime(con, "mb");
        assert_in("block's start", end - 2 * HOUR, start.before, start.after);
        let d = timed(con, &m);
        assert_eq!(d.reply[..2], [1, 1], "{d:?}");
        d.retries_at(end, "monitor during a block");
        set_mode(con, "on");
        let d = timed(con, &m);
        assert_eq!(d.reply[0], 0, "{d:?}");
        d.retries_at(end, "on during the block monitor started");
        set_mode(con, "off");
        changes_nothing(con, "BLOCK in mode off", |con| {
            assert_eq!(limiter(con, &m), [1, 0, 0, 1, 1, 0]);
            assert_eq!(
                limiter(
                    con,
                    &["RL.FIXED", "mb:new", "1", "1h", "COST", "2", "BLOCK", "1h"]
                ),
                [1, 0, 0, 1, 1, 0]
            );
        });
        set_mode(con, "on");
    });
}

// ---------------------------------------------------------------------------
// RESERVE
// ---------------------------------------------------------------------------

#[test]
fn reserve_queues_callers_a_token_apart_and_denies_beyond_max_wait() {
    on_each_server(|_, con| {
        // One token every 10 s, a bucket of 3, waits of up to 5 m.
        const P: i64 = 10_000;
        let q = ["RL.TOKEN", "q", "1", "10s", "BURST", "3"];
        let reserve = with(&q, &["RESERVE", "5m"]);
        // A full bucket: RESERVE takes what is there, with no wait.
        assert_eq!(
            limiter(con, &with(&reserve, &["COST", "3"])),
            [1, 3, 0, 3, 0, 3 * P]
        );
        // Then each caller queues one token behind the last: count beyond
        // the capacity, remaining 0, reset_after until full again.
        for k in 1..=4 {
            let full_at = pexpiretime(con, "q");
            let r = timed(con, &reserve);
            assert_eq!(r.reply[..2], [1, 3 + k], "caller {k}: {r:?}");
            assert_eq!(r.reply[3..5], [3, 0], "caller {k}: {r:?}");
            r.retries_at(turn(full_at, 3, 1, P), &format!("caller {k}"));
            assert_eq!(pexpiretime(con, "q"), full_at + P, "caller {k}");
            expiry_follows_reset(con, "q", &r, &format!("caller {k}"));
        }
        // Two units: the later one's turn.
        let full_at = pexpiretime(con, "q");
        let r = timed(con, &with(&reserve, &["COST", "2"]));
        assert_eq!(r.reply[..2], [1, 9], "{r:?}");
        r.retries_at(turn(full_at, 3, 2, P), "two units");
        // Beyond max_wait: denied with the extra wait, nothing reserved.
        let full_at = pexpiretime(con, "q");
        let short = changes_nothing(con, "a denied reservation", |con| {
            timed(con, &with(&q, &["RESERVE", "30s"]))
        });
        assert_eq!(short.reply[..2], [0, 9], "{short:?}");
        assert_eq!(short.reply[3..5], [3, 0], "{short:?}");
        short.retries_at(turn(full_at, 3, 1, P) - 30_000, "the wait beyond max_wait");
        short.resets_at(full_at, "a denial's reset_after");
        // A cost above the capacity never fits.
        let never = changes_nothing(con, "RESERVE over the capacity", |con| {
            limiter(con, &with(&reserve, &["COST", "4"]))
        });
        assert_eq!(never[..3], [0, 9, -1], "{never:?}");
        // A plain call waits for the whole queue, as RESERVE 0 does.
        let plain = changes_nothing(con, "a plain call behind the queue", |con| {
            [timed(con, &q), timed(con, &with(&q, &["RESERVE", "0"]))]
        });
        for p in plain {
            assert_eq!(p.reply[..2], [0, 9], "{p:?}");
            p.retries_at(turn(full_at, 3, 1, P), "a plain call");
        }
        // PEEK answers as the reservation would, and reserves nothing.
        let peek = changes_nothing(con, "RESERVE PEEK", |con| {
            timed(con, &with(&reserve, &["PEEK"]))
        });
        assert_eq!(peek.reply[..2], [1, 10], "{peek:?}");
        peek.retries_at(turn(full_at, 3, 1, P), "RESERVE PEEK");
        let real = timed(con, &reserve);
        assert_eq!(real.reply[..2], [1, 10], "{real:?}");
        real.retries_at(turn(full_at, 3, 1, P), "after the PEEK");
    });
}

#[test]
fn reserve_zero_and_wait_zero_are_the_plain_call() {
    on_each_server(|_, con| {
        // Buckets whose clock stands still in 2100: every reply is exact,
        // so the three forms can be compared value for value.
        // (Units of 1/1000 token: 1 is a bucket just short of full.)
        let at = FAR as u64;
        for (missing, cost) in [
            (1u128, 1),
            (3000, 1),
            (3000, 2),
            (3500, 2),
            (4000, 1),
            (5000, 1),
            (2000, 6),
        ] {
            let value = token_v1(at, 1000, missing);
            let mut replies = Vec::new();
            for (key, extra) in [
                ("plain", &[][..]),
                ("reserve0", &["RESERVE", "0"][..]),
                ("wait0", &["WAIT", "0ms"][..]),
            ] {
                put(con, key, &value, FAR + HOUR);
                let cost = cost.to_string();
                let args = with(
                    &["RL.TOKEN", key, "2", "1s", "BURST", "5", "COST", &cost],
                    extra,
                );
                let reply = limiter(con, &args);
                let after = limiter(con, &["RL.TOKEN", key, "2", "1s", "BURST", "5", "PEEK"]);
                replies.push((reply, after, pexpiretime(con, key)));
            }
            assert_eq!(
                replies[0], replies[1],
                "RESERVE 0, {missing} missing, cost {cost}"
            );
            assert_eq!(
                replies[0], replies[2],
                "WAIT 0, {missing} missing, cost {cost}"
            );
        }
        // And on a live bucket: a reservation that would need a wait is
        // denied exactly as the plain call.
        let t = ["RL.TOKEN", "live", "1", "1h", "BURST", "2", "COST", "2"];
        assert_eq!(limiter(con, &t)[..2], [1, 2]);
        let full_at = pexpiretime(con, "live");
        changes_nothing(con, "RESERVE 0 on an empty bucket", |con| {
            for extra in [&[][..], &["RESERVE", "0"][..], &["WAIT", "0"][..]] {
                let d = timed(
                    con,
                    &with(&["RL.TOKEN", "live", "1", "1h", "BURST", "2"], extra),
                );
                assert_eq!(d.reply[..2], [0, 2], "{extra:?}: {d:?}");
                d.retries_at(turn(full_at, 2, 1, HOUR), &format!("{extra:?}"));
            }
        });
    });
}

#[test]
fn reserve_in_monitor_mode_reports_without_reserving() {
    on_each_server(|_, con| {
        let q = ["RL.TOKEN", "mq", "1", "1h", "BURST", "1"];
        assert_eq!(limiter(con, &q)[..2], [1, 1]);
        let full_at = pexpiretime(con, "mq");
        set_mode(con, "monitor");
        // Within max_wait: reserved as in `on`.
        let r = timed(con, &with(&q, &["RESERVE", "2h"]));
        assert_eq!(r.reply[..2], [1, 2], "{r:?}");
        r.retries_at(turn(full_at, 1, 1, HOUR), "monitor reservation");
        assert_eq!(pexpiretime(con, "mq"), full_at + HOUR);
        // Beyond it: admitted in the reply, the extra wait kept, nothing
        // reserved.
        let d = changes_nothing(con, "monitor, denied reservation", |con| {
            timed(con, &with(&q, &["RESERVE", "30m"]))
        });
        assert_eq!(d.reply[..2], [1, 2], "{d:?}");
        d.retries_at(
            turn(full_at + HOUR, 1, 1, HOUR) - 1_800_000,
            "monitor denial",
        );
        set_mode(con, "off");
        changes_nothing(con, "RESERVE in mode off", |con| {
            assert_eq!(
                limiter(con, &with(&q, &["RESERVE", "2h"])),
                [1, 0, 0, 1, 1, 0]
            );
        });
        set_mode(con, "on");
    });
}

// ---------------------------------------------------------------------------
// RL.ALL
// ---------------------------------------------------------------------------

#[test]
fn all_refunds_per_clause_all_or_nothing() {
    on_each_server(|_, con| {
        let (ok_, _, _) = rl_all(
            con,
            &[
                "FIXED", "a", "5", "1h", "COST", "3", "SLIDING", "b", "5", "1h", "COST", "2",
            ],
        );
        assert_eq!(ok_, 1);
        let (allowed, retry, clauses) = rl_all(
            con,
            &[
                "FIXED", "a", "5", "1h", "REFUND", "2", "SLIDING", "b", "5", "1h", "REFUND", "1",
            ],
        );
        assert_eq!((allowed, retry), (1, 0));
        assert_eq!(clauses[0][..5], [1, 1, 0, 5, 4]);
        assert_eq!(clauses[1][..5], [1, 1, 0, 5, 4]);
        // A refund in one clause, a cost in another.
        let (allowed, _, clauses) = rl_all(
            con,
            &[
                "FIXED", "a", "5", "1h", "REFUND", "1", "TOKEN", "c", "1", "1h", "BURST", "3",
            ],
        );
        assert_eq!(allowed, 1);
        assert_eq!(clauses[0], [1, 0, 0, 5, 5, 0]);
        assert_eq!(clauses[1][..5], [1, 1, 0, 3, 2]);
        assert!(!exists(con, "a"), "a refund to zero in RL.ALL deletes too");
        // All-or-nothing: a clause that denies keeps every refund from
        // happening.
        assert_eq!(limiter(con, &["RL.FIXED", "full", "1", "1h"])[..2], [1, 1]);
        changes_nothing(con, "a denied RL.ALL with a refund", |con| {
            let (allowed, retry, clauses) = rl_all(
                con,
                &[
                    "FIXED", "full", "1", "1h", "SLIDING", "b", "5", "1h", "REFUND", "1",
                ],
            );
            assert_eq!(allowed, 0);
            assert!(retry > 0);
            assert_eq!(clauses[0][..2], [0, 1]);
            // The refund's clause as its PEEK: it would be admitted.
            assert_eq!(clauses[1][..5], [1, 0, 0, 5, 5]);
        });
        // PEEK over the whole call.
        changes_nothing(con, "RL.ALL PEEK with a refund", |con| {
            let (allowed, _, clauses) =
                rl_all(con, &["SLIDING", "b", "5", "1h", "REFUND", "1", "PEEK"]);
            assert_eq!(allowed, 1);
            assert_eq!(clauses[0][..5], [1, 0, 0, 5, 5]);
        });
    });
}

#[test]
fn all_blocks_per_clause() {
    on_each_server(|_, con| {
        let call = [
            "FIXED", "x", "1", "1h", "BLOCK", "2h", "TOKEN", "y", "5", "1h",
        ];
        assert_eq!(rl_all(con, &call).0, 1);
        // x denies: its block starts; y records nothing and replies its PEEK.
        let y_before = snapshot_of(con, "y");
        let (reply, before, after) = timed_all(con, &call);
        let (allowed, retry, clauses) = reply;
        assert_eq!((allowed, retry), (0, 2 * HOUR), "{clauses:?}");
        assert_eq!(clauses[0], [0, 1, 2 * HOUR, 1, 0, 2 * HOUR]);
        assert_eq!(clauses[1][..5], [1, 2, 0, 5, 3]);
        assert_eq!(snapshot_of(con, "y"), y_before, "y recorded a denied call");
        let end = pexpiretime(con, "x");
        assert_in("block's start", end - 2 * HOUR, before, after);
        // During the block, with or without BLOCK, PEEK or not: denied by
        // x with its time left, nothing written.
        changes_nothing(con, "RL.ALL during a block", |con| {
            for extra in [&[][..], &["PEEK"][..]] {
                let args = with(&["FIXED", "x", "1", "1h", "TOKEN", "y", "5", "1h"], extra);
                let ((allowed, retry, clauses), before, after) = timed_all(con, &args);
                assert_eq!(allowed, 0);
                assert_in("top retry_after", retry, end - after, end - before);
                assert_eq!(clauses[0][..2], [0, 1]);
            }
        });
        // A clause with BLOCK that would admit starts nothing when another
        // denies.
        assert_eq!(limiter(con, &["RL.FIXED", "z", "1", "1h"])[0], 1);
        changes_nothing(con, "BLOCK on an admitting clause", |con| {
            let (allowed, _, clauses) = rl_all(
                con,
                &[
                    "FIXED", "w", "5", "1h", "BLOCK", "2h", "FIXED", "z", "1", "1h",
                ],
            );
            assert_eq!(allowed, 0);
            assert_eq!(clauses[0][0], 1);
        });
        // PEEK never starts a block in RL.ALL either.
        changes_nothing(con, "RL.ALL PEEK with BLOCK", |con| {
            let (allowed, _, _) = rl_all(con, &["FIXED", "z", "1", "1h", "BLOCK", "2h", "PEEK"]);
            assert_eq!(allowed, 0);
        });
    });
}

/// A key's DUMP and expiry.
fn snapshot_of(con: &mut redis::Connection, key: &str) -> (Option<Vec<u8>>, i64) {
    let dump: Option<Vec<u8>> = redis::cmd("DUMP").arg(key).query(con).unwrap();
    (dump, pexpiretime(con, key))
}

#[test]
fn all_reserves_on_token_clauses_when_every_other_clause_admits() {
    on_each_server(|_, con| {
        const P: i64 = 10_000;
        let call = |max_wait: &'static str| {
            vec![
                "FIXED", "d", "100", "1d", "TOKEN", "p", "1", "10s", "BURST", "1", "RESERVE",
                max_wait,
            ]
        };
        let (allowed, retry, clauses) = rl_all(con, &call("1m"));
        assert_eq!((allowed, retry), (1, 0), "{clauses:?}");
        // The bucket is empty: the call is admitted now and waits its turn.
        let full_at = pexpiretime(con, "p");
        let ((allowed, retry, clauses), before, after) = timed_all(con, &call("1m"));
        assert_eq!(allowed, 1, "{clauses:?}");
        let at = turn(full_at, 1, 1, P);
        assert_in("RL.ALL's wait", retry, at - after, at - before);
        assert_eq!(clauses[0][..5], [1, 2, 0, 100, 98]);
        assert_eq!(clauses[1][..5], [1, 2, retry, 1, 0]);
        assert_eq!(pexpiretime(con, "p"), full_at + P);
        // The next turn is 20 s away: beyond a 5 s max_wait nothing is
        // recorded anywhere, and the wait beyond it is the retry_after.
        let full_at = pexpiretime(con, "p");
        changes_nothing(con, "RL.ALL with a reservation beyond max_wait", |con| {
            let ((allowed, retry, clauses), before, after) = timed_all(con, &call("5s"));
            assert_eq!(allowed, 0, "{clauses:?}");
            let at = turn(full_at, 1, 1, P) - 5000;
            assert_in("RL.ALL's extra wait", retry, at - after, at - before);
            assert_eq!(clauses[0][..2], [1, 3], "the FIXED clause's PEEK");
            assert_eq!(clauses[1][..3], [0, 2, retry]);
        });
        // Another clause denies now: nothing is reserved.
        denied_by_a_full_clause(
            con,
            "RL.ALL denied by another clause",
            "e",
            &["TOKEN", "p", "1", "10s", "BURST", "1", "RESERVE", "1m"],
        );
        // The largest wait of two reserving clauses.
        assert_eq!(
            limiter(con, &["RL.TOKEN", "p2", "1", "30s", "BURST", "1"])[0],
            1
        );
        let p2_full = pexpiretime(con, "p2");
        let ((allowed, retry, clauses), before, after) = timed_all(
            con,
            &[
                "TOKEN", "p", "1", "10s", "BURST", "1", "RESERVE", "1m", "TOKEN", "p2", "1", "30s",
                "BURST", "1", "RESERVE", "1m",
            ],
        );
        assert_eq!(allowed, 1, "{clauses:?}");
        let at = turn(p2_full, 1, 1, 30_000);
        assert_in("the largest wait", retry, at - after, at - before);
        assert!(
            clauses[0][2] < retry && clauses[1][2] == retry,
            "{clauses:?}"
        );
    });
}

// ---------------------------------------------------------------------------
// Nothing changed, nothing propagated; the rest replicated byte for byte
// ---------------------------------------------------------------------------

#[test]
fn calls_that_change_nothing_propagate_nothing() {
    for_each_flavor(|flavor| {
        let (primary, replica) = quiet_primary_and_replica(flavor);
        let (mut p, mut r) = (primary.conn(), replica.conn());
        let con = &mut p;
        let aligned = aligned_windows(con)[0];
        limiter(con, &["RL.FIXED", "f", "5", "1h", "COST", "2"]);
        limiter(con, &["RL.SLIDING", "s", "5", "1h"]);
        limiter(con, &["RL.TOKEN", "t", "1", "1h", "BURST", "1"]);
        limiter(con, &["RL.FIXED", "full", "1", "1h"]);
        limiter(con, &["RL.FIXED", "blocked", "1", "1h"]);
        limiter(con, &["RL.FIXED", "blocked", "1", "1h", "BLOCK", "2h"]);
        let now = server_ms(con) as u64;
        put(con, "ended", &fixed_v1(now - 10_000, now - 5_000, 3), 0);
        wait_in_sync(con, &mut r);
        let offset = repl_offset(con);
        let replica_before = snapshot(&mut r);

        let unchanged: &[&[&str]] = &[
            // Refunds with nothing to give back.
            &["RL.FIXED", "missing", "5", "1h", "REFUND", "1"],
            &["RL.FIXED", "ended", "5", "1h", "REFUND", "1"],
            &["RL.SLIDING", "missing", "5", "1h", "REFUND", "1"],
            &[
                "RL.SLIDING",
                "missing",
                "5",
                aligned,
                "APPROX",
                "REFUND",
                "1",
            ],
            &["RL.TOKEN", "missing", "5", "1h", "REFUND", "1"],
            // PEEK with every option.
            &["RL.FIXED", "f", "5", "1h", "REFUND", "1", "PEEK"],
            &["RL.SLIDING", "s", "5", "1h", "REFUND", "1", "PEEK"],
            &["RL.FIXED", "full", "1", "1h", "BLOCK", "1h", "PEEK"],
            &[
                "RL.TOKEN", "t", "1", "1h", "BURST", "1", "RESERVE", "2h", "PEEK",
            ],
            &[
                "RL.TOKEN", "t", "1", "1h", "BURST", "1", "WAIT", "2h", "PEEK",
            ],
            // Denials that start no block, reservations beyond max_wait.
            &["RL.FIXED", "full", "1", "1h"],
            &["RL.TOKEN", "t", "1", "1h", "BURST", "1", "RESERVE", "10m"],
            &["RL.TOKEN", "t", "1", "1h", "BURST", "1", "WAIT", "10m"],
            &[
                "RL.TOKEN", "t", "1", "1h", "BURST", "1", "RESERVE", "2h", "COST", "2",
            ],
            // Calls during a block.
            &["RL.FIXED", "blocked", "1", "1h"],
            &["RL.FIXED", "blocked", "1", "1h", "BLOCK", "2h"],
            &["RL.FIXED", "blocked", "1", "1h", "COST", "5", "BLOCK", "2h"],
        ];
        let primary_before = snapshot(con);
        for args in unchanged {
            limiter(con, args);
        }
        let all_unchanged: &[&[&str]] = &[
            &[
                "FIXED", "missing", "5", "1h", "REFUND", "1", "TOKEN", "missing2", "1", "1h",
                "REFUND", "2",
            ],
            &[
                "FIXED", "full", "1", "1h", "SLIDING", "s", "5", "1h", "REFUND", "1",
            ],
            &[
                "FIXED", "full", "1", "1h", "TOKEN", "t", "1", "1h", "BURST", "1", "RESERVE", "2h",
            ],
            &[
                "FIXED", "f", "5", "1h", "BLOCK", "1h", "FIXED", "blocked", "1", "1h",
            ],
        ];
        for args in all_unchanged {
            rl_all(con, args);
        }
        assert_same_snapshot(
            &snapshot(con),
            &primary_before,
            &format!("{flavor:?} primary"),
        );
        assert_eq!(
            repl_offset(con),
            offset,
            "{flavor:?}: a call that changed nothing was propagated"
        );
        assert_same_snapshot(
            &snapshot(&mut r),
            &replica_before,
            &format!("{flavor:?} replica"),
        );

        // Each change propagates, and the replica ends with the same bytes.
        let changes: &[&[&str]] = &[
            &["RL.FIXED", "f", "5", "1h", "REFUND", "1"],
            &["RL.SLIDING", "s", "5", "1h", "REFUND", "1"],
            &["RL.FIXED", "full", "1", "1h", "BLOCK", "2h"],
            &["RL.TOKEN", "t", "1", "1h", "BURST", "1", "RESERVE", "2h"],
            &["RL.FIXED", "blocked", "1", "1h", "REFUND", "1"],
        ];
        for args in changes {
            let before = repl_offset(con);
            limiter(con, args);
            assert!(
                repl_offset(con) > before,
                "{flavor:?}: {args:?} was not propagated"
            );
        }
        let before = repl_offset(con);
        rl_all(
            con,
            &[
                "FIXED", "f", "5", "1h", "REFUND", "1", "TOKEN", "t2", "1", "1h",
            ],
        );
        assert!(
            repl_offset(con) > before,
            "{flavor:?}: RL.ALL refund was not propagated"
        );
        // (Every key but the workloads' overrides must expire.)
        cmd(con, &["DEL", "ended"]).unwrap();
        wait_in_sync(con, &mut r);
        assert_same_dataset(&format!("{flavor:?} replica"), con, &mut r);
        assert!(
            !exists(&mut r, "s"),
            "{flavor:?}: the emptied key stays on the replica"
        );
    });
}

#[test]
fn a_late_replica_applies_the_primarys_block_end_and_turns() {
    for_each_flavor(|flavor| {
        assert_late_replica_agrees(flavor, 150, |p| {
            for i in 0..10 {
                let key = format!("late:{i}");
                limiter(p, &["RL.FIXED", &key, "1", "1h"]);
                limiter(p, &["RL.FIXED", &key, "1", "1h", "BLOCK", "2h"]);
                let t = format!("late:t:{i}");
                limiter(p, &["RL.TOKEN", &t, "1", "1h", "BURST", "1"]);
                limiter(
                    p,
                    &["RL.TOKEN", &t, "1", "1h", "BURST", "1", "RESERVE", "1d"],
                );
                limiter(p, &["RL.TOKEN", &t, "1", "1h", "BURST", "1", "REFUND", "1"]);
            }
        });
    });
}

// ---------------------------------------------------------------------------
// A workload mixing REFUND, BLOCK, RESERVE and WAIT with every command
// ---------------------------------------------------------------------------

const LIFE_KEYS: u64 = 36;
const FAST_KEYS: u64 = 3;
/// A fast bucket: a token a millisecond, so WAIT waits a few ms, and 120 s
/// of capacity, so that its key outlives any restart of a test.
const FAST_RATE: &str = "1000";
const FAST_CAPACITY: &str = "120000";

fn life_key(prefix: &str, i: u64) -> Vec<u8> {
    format!("{prefix}:l:{i}").into_bytes()
}

fn life_okey(prefix: &str, j: u64) -> Vec<u8> {
    // Named `:o:` like the mixed workload's overrides (no TTL allowed).
    format!("{prefix}:o:{j}").into_bytes()
}

fn fast_key(prefix: &str, j: u64) -> Vec<u8> {
    format!("{prefix}:fast:{j}").into_bytes()
}

fn fast_call(prefix: &str, j: u64, tail: &[&str]) -> Vec<Vec<u8>> {
    let mut argv = vec![
        arg_bytes("RL.TOKEN"),
        fast_key(prefix, j),
        arg_bytes(FAST_RATE),
        arg_bytes("1s"),
        arg_bytes("BURST"),
        arg_bytes(FAST_CAPACITY),
    ];
    argv.extend(tail.iter().map(arg_bytes));
    argv
}

/// One clause on key `i` (kind `i % 6`: FIXED, FIXED ALIGNED, SLIDING,
/// SLIDING APPROX, TOKEN BURST, TOKEN), with a cost or a refund, sometimes
/// BLOCK, on TOKEN sometimes RESERVE (any max_wait) or WAIT 0 (never
/// blocks on these slow buckets), and sometimes an override. Long windows
/// and blocks: nothing ends during a test.
/// Key `i`'s algorithm word, window and options.
fn life_kind<'a>(aligned: &[&'a str], i: u64) -> (&'static str, &'a str, &'static [&'static str]) {
    let aligned_window = aligned[(i / 6) as usize % aligned.len()];
    match i % 6 {
        0 => ("FIXED", "1h", &[]),
        1 => ("FIXED", aligned_window, &["ALIGNED"]),
        2 => ("SLIDING", "2h", &[]),
        3 => ("SLIDING", aligned_window, &["APPROX"]),
        4 => ("TOKEN", "1d", &["BURST", "6"]),
        _ => ("TOKEN", "2d", &[]),
    }
}

/// Whether calls on key `i` sometimes carry BLOCK: once blocked, a key
/// stays so for the test, so only some keys are.
fn blockable(i: u64) -> bool {
    i.is_multiple_of(3) || i == 4
}

/// How many of the workload's keys are blocked now: a PEEK with a limit
/// no workload call comes near is denied only by a block.
fn blocked_keys(con: &mut redis::Connection, prefix: &str, aligned: &[&str]) -> usize {
    (0..LIFE_KEYS)
        .filter(|&i| blockable(i))
        .filter(|&i| {
            let (word, window, options) = life_kind(aligned, i);
            let key = String::from_utf8(life_key(prefix, i)).unwrap();
            let command = format!("RL.{word}");
            let mut args = vec![command.as_str(), &key, "100000", window];
            args.extend(options.iter().filter(|o| **o != "BURST" && **o != "6"));
            args.push("PEEK");
            limiter(con, &args)[0] == 0
        })
        .count()
}

fn life_clause(
    rng: &mut Lcg,
    prefix: &str,
    aligned: &[&str],
    i: u64,
) -> (&'static str, Vec<Vec<u8>>) {
    let limit = 2 + i % 5;
    let (word, window, options) = life_kind(aligned, i);
    let token = word == "TOKEN";
    let mut args = vec![
        life_key(prefix, i),
        arg_bytes(limit.to_string()),
        arg_bytes(window),
    ];
    args.extend(options.iter().map(arg_bytes));
    let refund = rng.chance(22);
    if refund {
        args.extend([
            arg_bytes("REFUND"),
            arg_bytes((1 + rng.below(3)).to_string()),
        ]);
    } else {
        match rng.below(10) {
            0..=5 => {}
            6..=8 => args.extend([arg_bytes("COST"), arg_bytes((1 + rng.below(2)).to_string())]),
            _ => args.extend([arg_bytes("COST"), arg_bytes((limit + 5).to_string())]),
        }
        // Some keys get blocks (once blocked, a key stays so for the test),
        // the others keep deciding.
        if blockable(i) && rng.chance(30) {
            args.extend([
                arg_bytes("BLOCK"),
                arg_bytes(["1h", "90m", "2h"][rng.below(3) as usize]),
            ]);
        }
        if token {
            match rng.below(10) {
                0..=5 => args.extend([
                    arg_bytes("RESERVE"),
                    arg_bytes(["0", "10m", "1d", "2d", "3d"][rng.below(5) as usize]),
                ]),
                6 => args.extend([arg_bytes("WAIT"), arg_bytes("0")]),
                _ => {}
            }
        }
    }
    if i % 6 != 1 && i % 6 != 3 && rng.chance(20) {
        args.extend([arg_bytes("OVERRIDE"), life_okey(prefix, rng.below(3))]);
    }
    (word, args)
}

/// A deterministic mix of limiter and RL.ALL calls with REFUND, BLOCK,
/// RESERVE and WAIT on keys under `prefix`, plus WAITs that really wait (a
/// few ms) on fast buckets. The same seed and prefix give the same calls.
fn life_calls(prefix: &str, aligned: &[&str], seed: u64, steps: usize) -> Vec<Call> {
    let mut rng = Lcg(seed);
    let mut calls = Vec::with_capacity(steps + 8);
    let limiter_call = |args: Vec<Vec<u8>>, peek: bool| Call {
        args,
        kind: CallKind::Limiter,
        peek,
    };
    for j in 0..3 {
        let mut argv = vec![arg_bytes("RL.OVERRIDE.SET"), life_okey(prefix, j)];
        argv.extend([
            arg_bytes((4 + j * 3).to_string()),
            arg_bytes("3h"),
            arg_bytes("BURST"),
            arg_bytes("9"),
        ]);
        calls.push(Call {
            args: argv,
            kind: CallKind::Set,
            peek: false,
        });
    }
    // Empty the fast buckets, so WAIT on them waits.
    for j in 0..FAST_KEYS {
        calls.push(limiter_call(
            fast_call(prefix, j, &["COST", FAST_CAPACITY]),
            false,
        ));
    }
    for _ in 0..steps {
        let roll = rng.below(100);
        if roll < 8 {
            let j = rng.below(FAST_KEYS);
            let cost = (1 + rng.below(12)).to_string();
            let option = if rng.chance(70) { "WAIT" } else { "RESERVE" };
            calls.push(limiter_call(
                fast_call(prefix, j, &["COST", &cost, option, "25ms"]),
                false,
            ));
        } else if roll < 75 {
            let i = rng.below(LIFE_KEYS);
            let (word, args) = life_clause(&mut rng, prefix, aligned, i);
            let mut argv = vec![arg_bytes(format!("RL.{word}"))];
            argv.extend(args);
            let peek = rng.chance(10);
            if peek {
                argv.push(arg_bytes("PEEK"));
            }
            calls.push(limiter_call(argv, peek));
        } else {
            let n = 1 + rng.below(3) as usize;
            let mut picked: Vec<u64> = Vec::new();
            while picked.len() < n {
                let i = rng.below(LIFE_KEYS);
                if !picked.contains(&i) {
                    picked.push(i);
                }
            }
            let mut argv = vec![arg_bytes("RL.ALL")];
            for i in picked {
                let (word, args) = life_clause(&mut rng, prefix, aligned, i);
                argv.push(arg_bytes(word));
                argv.extend(args);
            }
            let peek = rng.chance(10);
            if peek {
                argv.push(arg_bytes("PEEK"));
            }
            calls.push(Call {
                args: argv,
                kind: CallKind::All,
                peek,
            });
        }
    }
    calls
}

/// What a lifecycle workload did, to check that it really was mixed.
#[derive(Debug, Default)]
struct LifeTally {
    refunds: usize,
    blocks_started: usize,
    blocked_keys: usize,
    denied_with_block: usize,
    reserved: usize,
    reserve_denied: usize,
    waited: usize,
    all_admitted: usize,
    all_denied: usize,
}

fn value_after(call: &Call, option: &[u8]) -> Option<Vec<u8>> {
    let at = call
        .args
        .iter()
        .position(|a| a.eq_ignore_ascii_case(option))?;
    call.args.get(at + 1).cloned()
}

fn life_workload(con: &mut redis::Connection, prefix: &str, seed: u64, steps: usize) -> LifeTally {
    let aligned = aligned_windows(con);
    let calls = life_calls(prefix, &aligned, seed, steps);
    let replies = run_calls(con, &calls);
    let mut t = LifeTally::default();
    for (call, reply) in calls.iter().zip(&replies) {
        match call.kind {
            CallKind::Limiter if !call.peek => {
                let r = six(reply);
                if call.has(b"REFUND") {
                    assert_eq!(r[..3], [1, r[1], 0], "{call:?}: {r:?}");
                    t.refunds += 1;
                }
                let block_ms = value_after(call, b"BLOCK").map(|d| match d.as_slice() {
                    b"1h" => HOUR,
                    b"90m" => 5_400_000,
                    _ => 2 * HOUR,
                });
                if r[0] == 0 && block_ms.is_some() {
                    t.denied_with_block += 1;
                    // (A start over the limit says -1, as a call during a
                    // block may: such starts are not counted here.)
                    if Some(r[2]) == block_ms {
                        t.blocks_started += 1;
                    }
                }
                if call.has(b"WAIT") && value_after(call, b"WAIT").as_deref() == Some(b"25ms") {
                    if r[0] == 1 {
                        assert_eq!(r[2], 0, "WAIT replies when the caller may act: {call:?}");
                        t.waited += 1;
                    }
                } else if call.has(b"RESERVE") {
                    match r[0] {
                        1 if r[2] > 0 => t.reserved += 1,
                        0 => t.reserve_denied += 1,
                        _ => {}
                    }
                }
            }
            CallKind::All if !call.peek => {
                let (allowed, _, _) = all_parts(reply);
                if allowed == 1 {
                    t.all_admitted += 1;
                } else {
                    t.all_denied += 1;
                }
            }
            _ => {}
        }
    }
    t.blocked_keys = blocked_keys(con, prefix, &aligned);
    eprintln!("lifecycle workload {prefix} (seed {seed}): {t:?}");
    assert!(
        t.refunds >= 20
            && t.blocked_keys >= 3
            && t.denied_with_block >= 5
            && t.reserved >= 5
            && t.reserve_denied >= 3
            && t.waited >= 10
            && t.all_admitted >= 5
            && t.all_denied >= 5,
        "the lifecycle workload is not mixed enough: {t:?}"
    );
    t
}

#[test]
fn replica_equals_primary_after_a_workload_of_every_option() {
    for_each_flavor(|flavor| {
        let (primary, replica) = primary_and_replica(flavor, &[]);
        let (mut p, mut r) = (primary.conn(), replica.conn());
        life_workload(&mut p, "L1", 7, 500);
        workload(&mut p, "w", 41, 500);
        life_workload(&mut p, "L2", 8, 500);
        cmd(&mut p, &["COPY", "L1:l:4", "L1:l:copied"]).unwrap();
        life_workload(&mut p, "L1", 9, 300);
        wait_in_sync(&mut p, &mut r);
        assert_eq!(
            blocked_clients(&mut r),
            0,
            "{flavor:?}: the replica blocked"
        );
        assert_same_mixed_dataset(&format!("{flavor:?} replica"), &mut p, &mut r);
    });
}

#[test]
fn aof_rewrite_and_rdb_restore_a_workload_of_every_option() {
    for_each_flavor(|flavor| {
        let mut server = Server::builder(flavor).args(&AOF).start();
        let mut con = server.conn();
        life_workload(&mut con, "L1", 17, 500);
        workload(&mut con, "w", 51, 500);
        life_workload(&mut con, "L2", 18, 500);
        let (mut con, after_more) = assert_aof_restores(&mut server, &mut con, 20, |con| {
            life_workload(con, "L3", 19, 400);
        });

        cmd(&mut con, &["SAVE"]).unwrap();
        let digest_saved = digest(&mut con);
        let dump = server.dir.join("dump.rdb");
        let from_rdb = Server::builder(flavor)
            .prepared(|dir| {
                std::fs::copy(&dump, dir.join("dump.rdb")).unwrap();
            })
            .start();
        let mut rcon = from_rdb.conn();
        assert_same_snapshot(
            &snapshot(&mut rcon),
            &after_more,
            &format!("{flavor:?}: RDB load"),
        );
        assert_eq!(digest(&mut rcon), digest_saved, "{flavor:?}: RDB load");
    });
}
