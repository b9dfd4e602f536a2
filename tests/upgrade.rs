//! Upgrades (docs/request-life.md: stored values written before
//! these options existed keep working unchanged; docs/operations.md, How
//! keys are stored): byte fixtures of values written by earlier librl
//! layouts, stored into a fresh server and used by every command and every
//! new option; the first write rewrites each in the current layout
//! (encoding version 3), whose exact bytes are pinned here too; and a
//! value of an encoding version no librl knows, refused cleanly.
//!
//! How the version-1 fixtures were made: by the module built from commit
//! d9f66f5 (the last before REFUND, BLOCK, RESERVE and WAIT), replaying
//! an AOF of the calls named on each fixture with the internal `NOW`
//! argument the primary propagates, so that they were decided at known
//! times, then `GET` and `PEXPIRETIME` of each key. Version 2 (a bucket in
//! debt, the block wrapper) is written out field by field. The times are
//! in 2100: a stored value whose times lie ahead of the server's clock is
//! decided with the clock standing still at them (docs/commands.md, The
//! limiter reply: a clock that steps back stands still at the newest time
//! the limiter has seen), so every reply on these values is exact.

mod common;

use common::*;

/// 2100-01-01T00:00:00Z, the `NOW` of the fixtures' calls.
const T: i64 = FAR;
const HOUR: i64 = 3_600_000;

/// `RL.FIXED up:fixed 5 1h COST 3 NOW T`: a window `[T, T + 1h)` holding 3
/// (`start_ms end_ms count`, little-endian u64s after `00 'r' 'l' 01 'F'`).
const FIXED: &[u8] = b"\x00\x72\x6c\x01\x46\x00\xd8\xc3\x2c\xbb\x03\x00\x00\x80\xc6\xfa\x2c\xbb\x03\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00";
const FIXED_EXPIRES: i64 = T + HOUR;

/// `RL.FIXED up:aligned 5 1h ALIGNED COST 2 NOW T+1234`: the aligned
/// window `[T, T + 1h)` holding 2.
const ALIGNED: &[u8] = b"\x00\x72\x6c\x01\x46\x00\xd8\xc3\x2c\xbb\x03\x00\x00\x80\xc6\xfa\x2c\xbb\x03\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00";
const ALIGNED_EXPIRES: i64 = T + HOUR;

/// `RL.SLIDING up:sliding 10 1h` with COST 2 at T, COST 1 at T+10 and
/// COST 3 at T+20: the compact exact log (`head tail last` u32s, `total
/// first_ms last_ms` u64s, then entries `varint(delta) varint(cost)` and
/// the data area's slack).
const SLIDING: &[u8] = b"\x00\x72\x6c\x01\x53\x00\x00\x00\x00\x06\x00\x00\x00\x04\x00\x00\x00\x06\x00\x00\x00\x00\x00\x00\x00\x00\xd8\xc3\x2c\xbb\x03\x00\x00\x14\xd8\xc3\x2c\xbb\x03\x00\x00\x00\x02\x0a\x01\x0a\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00";
const SLIDING_EXPIRES: i64 = T + 20 + HOUR;

/// `RL.SLIDING up:approx 10 1h APPROX` with COST 4 at T-30m and COST 2 at
/// T+15m: the window starting at T holds 2, the one before it 4
/// (`start_ms current previous`, u64s after `00 'r' 'l' 01 'A'`).
const APPROX: &[u8] = b"\x00\x72\x6c\x01\x41\x00\xd8\xc3\x2c\xbb\x03\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00";
const APPROX_EXPIRES: i64 = T + 2 * HOUR;

/// `RL.TOKEN up:token 2 1s BURST 5 COST 3 NOW T`: a bucket as of T, 3
/// tokens short (`at_ms window_ms` u64s, `missing` u128 in 1/1000 tokens).
const TOKEN: &[u8] = b"\x00\x72\x6c\x01\x54\x00\xd8\xc3\x2c\xbb\x03\x00\x00\xe8\x03\x00\x00\x00\x00\x00\x00\xb8\x0b\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00";
const TOKEN_EXPIRES: i64 = T + 1500;

/// `RL.OVERRIDE.SET up:override 20 1h BURST 30` (`limit window_ms burst`).
const OVERRIDE: &[u8] = b"\x00\x72\x6c\x01\x4f\x14\x00\x00\x00\x00\x00\x00\x00\x80\xee\x36\x00\x00\x00\x00\x00\x1e\x00\x00\x00\x00\x00\x00\x00";

/// `RL.OVERRIDE.SET up:override:plain 7 90s` (burst 0: unset).
const OVERRIDE_PLAIN: &[u8] = b"\x00\x72\x6c\x01\x4f\x07\x00\x00\x00\x00\x00\x00\x00\x90\x5f\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00";

/// Stores `fixture` at each of `keys` with the expiry it was written with.
fn load(con: &mut redis::Connection, fixture: &[u8], expires: i64, keys: &[&str]) {
    for key in keys {
        put(con, key, fixture, expires);
        assert_eq!(get_bytes(con, key).as_deref(), Some(fixture));
    }
}

/// Runs `body` on a fresh server of each flavor holding `fixture` under
/// each of `keys`, expiring at `expires`.
fn with_fixture(
    fixture: &[u8],
    expires: i64,
    keys: &[&str],
    body: impl Fn(&mut redis::Connection) + Sync,
) {
    on_each_server(|_, con| {
        load(con, fixture, expires, keys);
        body(con);
    });
}

#[test]
fn the_fixtures_are_what_they_say() {
    // The layouts as documented in src/state, read back from the bytes.
    let u64_at = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let t = T as u64;
    assert_eq!(FIXED[..5], *b"\x00rl\x01F");
    assert_eq!(
        [u64_at(FIXED, 5), u64_at(FIXED, 13), u64_at(FIXED, 21)],
        [t, t + 3_600_000, 3]
    );
    assert_eq!(
        [u64_at(ALIGNED, 5), u64_at(ALIGNED, 13), u64_at(ALIGNED, 21)],
        [t, t + 3_600_000, 2]
    );
    assert_eq!(SLIDING[..5], *b"\x00rl\x01S");
    assert_eq!(
        [
            u64_at(SLIDING, 17),
            u64_at(SLIDING, 25),
            u64_at(SLIDING, 33)
        ],
        [6, t, t + 20]
    );
    assert_eq!(APPROX[..5], *b"\x00rl\x01A");
    assert_eq!(
        [u64_at(APPROX, 5), u64_at(APPROX, 13), u64_at(APPROX, 21)],
        [t, 2, 4]
    );
    assert_eq!(TOKEN[..5], *b"\x00rl\x01T");
    assert_eq!([u64_at(TOKEN, 5), u64_at(TOKEN, 13)], [t, 1000]);
    assert_eq!(u128::from_le_bytes(TOKEN[21..37].try_into().unwrap()), 3000);
    assert_eq!(TOKEN, token_v1(t, 1000, 3000).as_slice());
    assert_eq!(FIXED, fixed_v1(t, t + 3_600_000, 3).as_slice());
    assert_eq!(OVERRIDE[..5], *b"\x00rl\x01O");
    assert_eq!(
        [
            u64_at(OVERRIDE, 5),
            u64_at(OVERRIDE, 13),
            u64_at(OVERRIDE, 21)
        ],
        [20, 3_600_000, 30]
    );
    assert_eq!(
        [
            u64_at(OVERRIDE_PLAIN, 5),
            u64_at(OVERRIDE_PLAIN, 13),
            u64_at(OVERRIDE_PLAIN, 21)
        ],
        [7, 90_000, 0]
    );
}

#[test]
fn fixed_values_of_version_1_keep_counting() {
    with_fixture(
        FIXED,
        FIXED_EXPIRES,
        &["f", "f:refund", "f:block", "f:cost"],
        |con| {
            load(con, ALIGNED, ALIGNED_EXPIRES, &["f:aligned"]);
            // 3 of 5 used, the window ending an hour after the clock's T.
            let f = ["RL.FIXED", "f", "5", "1h"];
            changes_nothing(con, "PEEK", |con| {
                assert_eq!(
                    limiter(con, &["RL.FIXED", "f", "5", "1h", "PEEK"]),
                    [1, 4, 0, 5, 1, HOUR]
                );
            });
            assert_eq!(limiter(con, &f), [1, 4, 0, 5, 1, HOUR]);
            assert_eq!(limiter(con, &f), [1, 5, 0, 5, 0, HOUR]);
            assert_eq!(limiter(con, &f), [0, 5, HOUR, 5, 0, HOUR]);
            assert_eq!(pexpiretime(con, "f"), FIXED_EXPIRES);
            assert_eq!(
                limiter(con, &["RL.FIXED", "f:cost", "5", "1h", "COST", "3"]),
                [0, 3, HOUR, 5, 2, HOUR]
            );
            assert_eq!(
                limiter(con, &["RL.FIXED", "f:cost", "5", "1h", "COST", "2"]),
                [1, 5, 0, 5, 0, HOUR]
            );
            assert_eq!(
                limiter(con, &["RL.FIXED", "f:aligned", "5", "1h", "ALIGNED"]),
                [1, 3, 0, 5, 2, HOUR]
            );
            assert_eq!(pexpiretime(con, "f:aligned"), ALIGNED_EXPIRES);

            // REFUND gives back what the old value recorded.
            assert_eq!(
                limiter(con, &["RL.FIXED", "f:refund", "5", "1h", "REFUND", "2"]),
                [1, 1, 0, 5, 4, HOUR]
            );
            assert_eq!(pexpiretime(con, "f:refund"), FIXED_EXPIRES);
            assert_eq!(
                limiter(con, &["RL.FIXED", "f:refund", "5", "1h", "COST", "4"]),
                [1, 5, 0, 5, 0, HOUR]
            );
            // BLOCK: a denial of the old value starts a block; the value's own
            // window still counts and the key outlives neither.
            let start = timed(con, &["RL.FIXED", "f:block", "3", "1h", "BLOCK", "10s"]);
            assert_eq!(start.reply, [0, 3, 10_000, 3, 0, HOUR], "{start:?}");
            assert_eq!(
                pexpiretime(con, "f:block"),
                FIXED_EXPIRES,
                "a block shortened or lengthened the key's life"
            );
            let blocked = timed(con, &["RL.FIXED", "f:block", "5", "1h"]);
            assert_eq!(blocked.reply[..2], [0, 3], "{blocked:?}");
            assert_in("time left", blocked.reply[2], 1, 10_000);
            assert_eq!(blocked.reply[3..], [5, 2, HOUR], "{blocked:?}");
        },
    );
}

#[test]
fn sliding_logs_of_version_1_keep_counting() {
    with_fixture(
        SLIDING,
        SLIDING_EXPIRES,
        &["s", "s:refund", "s:block"],
        |con| {
            // 6 units logged at T, T+10 and T+20; the clock stands at T+20.
            let s = ["RL.SLIDING", "s", "10", "1h"];
            changes_nothing(con, "PEEK", |con| {
                assert_eq!(limiter(con, &with(&s, &["PEEK"])), [1, 7, 0, 10, 3, HOUR]);
            });
            assert_eq!(limiter(con, &s), [1, 7, 0, 10, 3, HOUR]);
            assert_eq!(
                limiter(con, &with(&s, &["COST", "3"])),
                [1, 10, 0, 10, 0, HOUR]
            );
            // The oldest entry (2 at T) must leave for one more: at T + 1h.
            assert_eq!(limiter(con, &s), [0, 10, HOUR - 20, 10, 0, HOUR]);
            assert_eq!(pexpiretime(con, "s"), SLIDING_EXPIRES);

            // REFUND: the newest units first (3 at T+20, then 1 at T+10): the
            // 2 at T are left, counting until T + 1h.
            assert_eq!(
                limiter(con, &["RL.SLIDING", "s:refund", "10", "1h", "REFUND", "4"]),
                [1, 2, 0, 10, 8, HOUR - 20]
            );
            assert_eq!(pexpiretime(con, "s:refund"), T + HOUR);
            assert_eq!(
                limiter(con, &["RL.SLIDING", "s:refund", "10", "1h", "COST", "8"])[..5],
                [1, 10, 0, 10, 0]
            );
            // BLOCK.
            let start = limiter(con, &["RL.SLIDING", "s:block", "6", "1h", "BLOCK", "10s"]);
            assert_eq!(start, [0, 6, 10_000, 6, 0, HOUR]);
            assert_eq!(
                pexpiretime(con, "s:block"),
                SLIDING_EXPIRES,
                "a block shortened or lengthened the key's life"
            );
        },
    );
}

fn with<'a>(base: &[&'a str], more: &[&'a str]) -> Vec<&'a str> {
    [base, more].concat()
}

#[test]
fn approx_values_of_version_1_keep_counting() {
    with_fixture(
        APPROX,
        APPROX_EXPIRES,
        &["a", "a:refund", "a:empty", "a:block"],
        |con| {
            // The window at T holds 2, the one before 4; the clock stands at
            // T, so the previous window weighs in whole: 6.
            let a = ["RL.SLIDING", "a", "10", "1h", "APPROX"];
            changes_nothing(con, "PEEK", |con| {
                assert_eq!(
                    limiter(con, &with(&a, &["PEEK"])),
                    [1, 7, 0, 10, 3, 2 * HOUR]
                );
            });
            assert_eq!(limiter(con, &a), [1, 7, 0, 10, 3, 2 * HOUR]);
            assert_eq!(pexpiretime(con, "a"), APPROX_EXPIRES);
            // At limit 7 the next unit fits once the previous window's weight
            // drops by one: 1 ms later.
            assert_eq!(
                limiter(con, &["RL.SLIDING", "a", "7", "1h", "APPROX"]),
                [0, 7, 1, 7, 0, 2 * HOUR]
            );

            // REFUND: the current window only.
            let r = [
                "RL.SLIDING",
                "a:refund",
                "10",
                "1h",
                "APPROX",
                "REFUND",
                "1",
            ];
            assert_eq!(limiter(con, &r), [1, 5, 0, 10, 5, 2 * HOUR]);
            assert_eq!(pexpiretime(con, "a:refund"), APPROX_EXPIRES);
            // All of it: the previous window's 4 still count, until T + 1h.
            let r = ["RL.SLIDING", "a:empty", "10", "1h", "APPROX", "REFUND", "5"];
            assert_eq!(limiter(con, &r), [1, 4, 0, 10, 6, HOUR]);
            assert_eq!(pexpiretime(con, "a:empty"), T + HOUR);
            changes_nothing(con, "nothing left to refund", |con| {
                assert_eq!(limiter(con, &r), [1, 4, 0, 10, 6, HOUR]);
            });
            // BLOCK.
            let start = limiter(
                con,
                &["RL.SLIDING", "a:block", "6", "1h", "APPROX", "BLOCK", "10s"],
            );
            assert_eq!(start, [0, 6, 10_000, 6, 0, 2 * HOUR]);
            assert_eq!(
                pexpiretime(con, "a:block"),
                APPROX_EXPIRES,
                "a block shortened or lengthened the key's life"
            );
        },
    );
}

#[test]
fn token_buckets_of_version_1_keep_counting_refunding_and_reserving() {
    with_fixture(
        TOKEN,
        TOKEN_EXPIRES,
        &["t", "t:reserve", "t:refund", "t:block"],
        |con| {
            // Capacity 5, 3 tokens short, 2 a second; the clock stands at T.
            let t = ["RL.TOKEN", "t", "2", "1s", "BURST", "5"];
            changes_nothing(con, "PEEK", |con| {
                assert_eq!(limiter(con, &with(&t, &["PEEK"])), [1, 4, 0, 5, 1, 2000]);
            });
            assert_eq!(limiter(con, &t), [1, 4, 0, 5, 1, 2000]);
            assert_eq!(pexpiretime(con, "t"), T + 2000);
            assert_eq!(
                limiter(con, &with(&t, &["COST", "2"])),
                [0, 4, 500, 5, 1, 2000]
            );
            assert_eq!(
                limiter(con, &with(&t, &["COST", "6"])),
                [0, 4, -1, 5, 1, 2000]
            );

            // RESERVE: into debt, a token every 500 ms.
            let r = ["RL.TOKEN", "t:reserve", "2", "1s", "BURST", "5"];
            assert_eq!(
                limiter(con, &with(&r, &["COST", "3", "RESERVE", "10s"])),
                [1, 6, 500, 5, 0, 3000]
            );
            assert_eq!(pexpiretime(con, "t:reserve"), T + 3000);
            assert_eq!(
                limiter(con, &with(&r, &["RESERVE", "10s"])),
                [1, 7, 1000, 5, 0, 3500]
            );
            changes_nothing(con, "a denied reservation", |con| {
                assert_eq!(
                    limiter(con, &with(&r, &["RESERVE", "1s"])),
                    [0, 7, 500, 5, 0, 3500]
                );
                assert_eq!(
                    limiter(con, &with(&r, &["RESERVE", "0"])),
                    [0, 7, 1500, 5, 0, 3500]
                );
                assert_eq!(limiter(con, &r), [0, 7, 1500, 5, 0, 3500]);
            });
            // REFUND repays the debt first.
            assert_eq!(
                limiter(con, &with(&r, &["REFUND", "3"])),
                [1, 4, 0, 5, 1, 2000]
            );
            assert_eq!(pexpiretime(con, "t:reserve"), T + 2000);

            // REFUND on the old value: up to full, then the key goes.
            let f = ["RL.TOKEN", "t:refund", "2", "1s", "BURST", "5"];
            assert_eq!(
                limiter(con, &with(&f, &["REFUND", "2"])),
                [1, 1, 0, 5, 4, 500]
            );
            assert_eq!(pexpiretime(con, "t:refund"), T + 500);
            assert_eq!(
                limiter(con, &with(&f, &["REFUND", "5"])),
                [1, 0, 0, 5, 5, 0]
            );
            assert!(!exists(con, "t:refund"));

            // BLOCK: the denial starts a block; the bucket keeps its 3 used
            // tokens at least until it would be full again (T + 1500 ms).
            let b = ["RL.TOKEN", "t:block", "2", "1s", "BURST", "5"];
            let start = limiter(con, &with(&b, &["COST", "3", "BLOCK", "10s"]));
            assert_eq!(start, [0, 3, 10_000, 5, 2, 10_000]);
            assert!(
                pexpiretime(con, "t:block") >= TOKEN_EXPIRES,
                "the block shortened the bucket's life to {} (it is full at {TOKEN_EXPIRES})",
                pexpiretime(con, "t:block")
            );
            let blocked = limiter(con, &b);
            assert_eq!(blocked[..2], [0, 3], "{blocked:?}");
            assert_in("time left", blocked[2], 1, 10_000);
        },
    );
}

#[test]
fn overrides_of_version_1_keep_applying() {
    with_fixture(OVERRIDE, 0, &["o"], |con| {
        load(con, OVERRIDE_PLAIN, 0, &["o:plain"]);
        assert_eq!(
            cmd(con, &["RL.OVERRIDE.GET", "o"]).map(|v| ints(&v)),
            Ok(vec![20, HOUR, 30, -1])
        );
        assert_eq!(
            cmd(con, &["RL.OVERRIDE", "GET", "o:plain"]).map(|v| ints(&v)),
            Ok(vec![7, 90_000, 0, -1])
        );
        let listed = cmd(con, &["RL.OVERRIDE.LIST", "0", "COUNT", "100"]).unwrap();
        let words = strings(&listed);
        assert!(words.contains(&"o".to_string()) && words.contains(&"o:plain".to_string()));

        let f = ["RL.FIXED", "kf", "5", "1m", "OVERRIDE", "o"];
        assert_eq!(limiter(con, &f), [1, 1, 0, 20, 19, HOUR]);
        assert_eq!(
            limiter(con, &with(&f, &["REFUND", "1"])),
            [1, 0, 0, 20, 20, 0]
        );
        // 20 an hour, a bucket of 30: one token is 180 s.
        let t = ["RL.TOKEN", "kt", "1", "1m", "OVERRIDE", "o"];
        assert_eq!(limiter(con, &t), [1, 1, 0, 30, 29, 180_000]);
        let r = timed(con, &with(&t, &["COST", "30", "RESERVE", "1h"]));
        assert_eq!(r.reply[..2], [1, 31], "{r:?}");
        assert_in("the reserved token's wait", r.reply[2], 1, 180_000);
        assert_eq!(r.reply[3..5], [30, 0], "{r:?}");
        // BLOCK with the plain override's limit of 7.
        let b = ["RL.FIXED", "kb", "5", "1m", "OVERRIDE", "o:plain"];
        assert_eq!(
            limiter(con, &with(&b, &["COST", "7"])),
            [1, 7, 0, 7, 0, 90_000]
        );
        let start = limiter(con, &with(&b, &["BLOCK", "1h"]));
        assert_eq!(start, [0, 7, HOUR, 7, 0, HOUR]);
        assert_eq!(
            limiter(
                con,
                &[
                    "RL.SLIDING",
                    "ks",
                    "5",
                    "1m",
                    "OVERRIDE",
                    "o:plain",
                    "COST",
                    "7"
                ]
            ),
            [1, 7, 0, 7, 0, 90_000]
        );
        // Still the same bytes: reading an override never rewrites it.
        assert_eq!(get_bytes(con, "o").as_deref(), Some(OVERRIDE));
        assert_eq!(get_bytes(con, "o:plain").as_deref(), Some(OVERRIDE_PLAIN));
    });
}

/// A bucket of version 2: `T` in debt, `at_ms window_ms` u64s and
/// `missing debt` u128s.
fn token_v2(at_ms: u64, window_ms: u64, missing: u128, debt: u128) -> Vec<u8> {
    let mut out = token_v1(at_ms, window_ms, missing);
    out[3] = 2;
    out.extend(debt.to_le_bytes());
    out
}

/// Version 2's block wrapper: `B`, `until_ms` as a u64, the limiter's value.
fn block_v2(until_ms: u64, inner: &[u8]) -> Vec<u8> {
    [&b"\x00rl\x02B"[..], &until_ms.to_le_bytes(), inner].concat()
}

#[test]
fn values_of_version_2_keep_counting() {
    let t = T as u64;
    on_each_server(|_, con| {
        // 5 tokens short (the bucket of 5 is empty) and 2 owed, as of T.
        load(
            con,
            &token_v2(t, 1000, 5000, 2000),
            T + 3500,
            &["debt", "debt:r"],
        );
        let b = ["RL.TOKEN", "debt", "2", "1s", "BURST", "5"];
        changes_nothing(con, "COST 0", |con| {
            assert_eq!(
                limiter(con, &with(&b, &["COST", "0"])),
                [1, 7, 0, 5, 0, 3500]
            );
        });
        // Every call waits for the debt: 1 token must come back over 2 owed.
        assert_eq!(limiter(con, &b), [0, 7, 1500, 5, 0, 3500]);
        // REFUND repays the debt first and writes the current layout.
        let r = ["RL.TOKEN", "debt:r", "2", "1s", "BURST", "5", "REFUND", "3"];
        assert_eq!(limiter(con, &r), [1, 4, 0, 5, 1, 2000]);
        assert_eq!(
            get_bytes(con, "debt:r").as_deref(),
            Some(&b"\x00rl\x03T\x05\xd0\x0f\xa0\x1f"[..]),
            "window 1s, 2000 ms until full, 4000 units missing"
        );
        assert_eq!(pexpiretime(con, "debt:r"), T + 2000);

        // A block of version 2, an hour longer than the window of version
        // 1 it holds (3 used). reset_after shows the block's time left,
        // counted on the server's own clock.
        let until = T + 2 * HOUR;
        load(con, &block_v2(until as u64, FIXED), until, &["blocked"]);
        let f = ["RL.FIXED", "blocked", "5", "1h"];
        changes_nothing(con, "COST 0", |con| {
            let read = limiter(con, &with(&f, &["COST", "0"]));
            assert_eq!(read[..5], [1, 3, 0, 5, 2], "{read:?}");
        });
        // A refund keeps the block; the window inside it is rewritten in
        // the current layout with the time it counts from stored in it.
        let refunded = limiter(con, &with(&f, &["REFUND", "1"]));
        assert_eq!(refunded[..5], [1, 2, 0, 5, 3], "{refunded:?}");
        let mut want = b"\x00rl\x03B".to_vec();
        want.extend(varint(until as u64));
        want.extend(b"\x00rl\x03f");
        want.extend(varint(FIXED_EXPIRES as u64));
        want.extend(b"\x02\x07");
        assert_eq!(get_bytes(con, "blocked"), Some(want));
        assert_eq!(pexpiretime(con, "blocked"), until);
        assert_eq!(
            limiter(con, &with(&f, &["COST", "0"]))[..5],
            [1, 2, 0, 5, 3]
        );
    });
}

fn varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
    out
}

/// The first write of an old value stores the current layout, version 3:
/// the limiter's times counted from the key's expiry, small integers in
/// one byte, a round window in one (here `1h`, byte 0x07, and `1s`, 0x05).
#[test]
fn a_write_rewrites_an_old_value_in_version_3() {
    on_each_server(|_, con| {
        load(con, FIXED, FIXED_EXPIRES, &["f"]);
        load(con, SLIDING, SLIDING_EXPIRES, &["s"]);
        load(con, APPROX, APPROX_EXPIRES, &["a"]);
        load(con, TOKEN, TOKEN_EXPIRES, &["t"]);
        assert_eq!(
            limiter(con, &["RL.FIXED", "f", "5", "1h"]),
            [1, 4, 0, 5, 1, HOUR]
        );
        assert_eq!(
            limiter(con, &["RL.SLIDING", "s", "10", "1h"]),
            [1, 7, 0, 10, 3, HOUR]
        );
        assert_eq!(
            limiter(con, &["RL.SLIDING", "a", "10", "1h", "APPROX"]),
            [1, 7, 0, 10, 3, 2 * HOUR]
        );
        assert_eq!(
            limiter(con, &["RL.TOKEN", "t", "2", "1s", "BURST", "5"]),
            [1, 4, 0, 5, 1, 2000]
        );
        let rows: [(&str, &[u8], i64); 4] = [
            // Count 4; the window's length (its end is the key's expiry).
            ("f", b"\x00rl\x03F\x04\x07", FIXED_EXPIRES),
            // Newest entry an hour before the expiry; costs 2, then 1 and
            // 4 (the call joined the newest millisecond) 10 ms apart.
            ("s", b"\x00rl\x03S\x07\x02\x0a\x01\x0a\x04", SLIDING_EXPIRES),
            // The window starts 2 h before the expiry; 3 in it, 4 before.
            ("a", b"\x00rl\x03A\x0b\x03\x04", APPROX_EXPIRES),
            // Window 1 s; 2000 ms until full; 4000 units missing.
            ("t", b"\x00rl\x03T\x05\xd0\x0f\xa0\x1f", T + 2000),
        ];
        for (key, bytes, expires) in rows {
            assert_eq!(get_bytes(con, key).as_deref(), Some(bytes), "{key}");
            assert_eq!(pexpiretime(con, key), expires, "{key}");
        }
        // An override is written in version 3 by RL.OVERRIDE SET.
        cmd(con, &["RL.OVERRIDE", "SET", "o", "20", "1h", "BURST", "30"]).unwrap();
        assert_eq!(
            get_bytes(con, "o").as_deref(),
            Some(&b"\x00rl\x03O\x14\x07\x1e"[..])
        );
    });
}

/// Values of version 3, as the rows above show them, are read back: the
/// layout is fixed by these bytes.
#[test]
fn values_of_version_3_keep_counting() {
    on_each_server(|_, con| {
        put(con, "f", b"\x00rl\x03F\x04\x07", FIXED_EXPIRES);
        put(
            con,
            "s",
            b"\x00rl\x03S\x07\x02\x0a\x01\x0a\x04",
            SLIDING_EXPIRES,
        );
        put(con, "a", b"\x00rl\x03A\x0b\x03\x04", APPROX_EXPIRES);
        put(con, "t", b"\x00rl\x03T\x05\xd0\x0f\xa0\x1f", T + 2000);
        put(con, "o", b"\x00rl\x03O\x14\x07\x1e", 0);
        changes_nothing(con, "reads", |con| {
            assert_eq!(
                limiter(con, &["RL.FIXED", "f", "5", "1h", "COST", "0"]),
                [1, 4, 0, 5, 1, HOUR]
            );
            assert_eq!(
                limiter(con, &["RL.SLIDING", "s", "10", "1h", "COST", "0"]),
                [1, 7, 0, 10, 3, HOUR]
            );
            assert_eq!(
                limiter(con, &["RL.SLIDING", "a", "10", "1h", "APPROX", "COST", "0"]),
                [1, 7, 0, 10, 3, 2 * HOUR]
            );
            assert_eq!(
                limiter(
                    con,
                    &["RL.TOKEN", "t", "2", "1s", "BURST", "5", "COST", "0"]
                ),
                [1, 4, 0, 5, 1, 2000]
            );
            assert_eq!(
                cmd(con, &["RL.OVERRIDE.GET", "o"]).map(|v| ints(&v)),
                Ok(vec![20, HOUR, 30, -1])
            );
        });
        // A value whose times count from its key's expiry holds nothing to
        // count from once that expiry is gone (a PERSIST by hand): it reads
        // as empty, and the next admitted call writes it afresh.
        let _: i64 = redis::cmd("PERSIST").arg("f").query(con).unwrap();
        assert_eq!(
            limiter(con, &["RL.FIXED", "f", "5", "1h", "COST", "0"]),
            [1, 0, 0, 5, 5, 0]
        );
        assert_eq!(
            limiter(con, &["RL.FIXED", "f", "5", "1h"]),
            [1, 1, 0, 5, 4, HOUR]
        );
        assert!(pexpiretime(con, "f") > 0);
    });
}

/// A fixture with an encoding version no librl knows.
fn version(fixture: &[u8], v: u8) -> Vec<u8> {
    let mut out = fixture.to_vec();
    out[3] = v;
    out
}

#[test]
fn values_of_an_unknown_encoding_version_are_refused_and_kept() {
    let unknown = "ERR key holds a librl value of encoding version 4, \
                   which this librl does not know; upgrade the module";
    on_each_server(|_, con| {
        load(con, &version(FIXED, 4), FIXED_EXPIRES, &["v4:fixed"]);
        load(con, &version(SLIDING, 4), SLIDING_EXPIRES, &["v4:sliding"]);
        load(con, &version(APPROX, 4), APPROX_EXPIRES, &["v4:approx"]);
        load(con, &version(TOKEN, 4), TOKEN_EXPIRES, &["v4:token"]);
        load(con, &version(OVERRIDE, 4), 0, &["v4:override"]);
        let calls: &[&[&str]] = &[
            &["RL.FIXED", "v4:fixed", "5", "1h"],
            &["RL.FIXED", "v4:fixed", "5", "1h", "PEEK"],
            &["RL.FIXED", "v4:fixed", "5", "1h", "REFUND", "1"],
            &["RL.FIXED", "v4:fixed", "5", "1h", "BLOCK", "1h"],
            &[
                "RL.FIXED", "v4:fixed", "5", "1h", "COST", "9", "BLOCK", "1h",
            ],
            &[
                "RL.FIXED", "v4:fixed", "5", "1h", "ALIGNED", "REFUND", "1", "PEEK",
            ],
            &["RL.SLIDING", "v4:sliding", "10", "1h"],
            &["RL.SLIDING", "v4:sliding", "10", "1h", "REFUND", "2"],
            &["RL.SLIDING", "v4:sliding", "10", "1h", "BLOCK", "1h"],
            &["RL.SLIDING", "v4:approx", "10", "1h", "APPROX"],
            &[
                "RL.SLIDING",
                "v4:approx",
                "10",
                "1h",
                "APPROX",
                "REFUND",
                "1",
            ],
            &["RL.TOKEN", "v4:token", "2", "1s", "BURST", "5"],
            &["RL.TOKEN", "v4:token", "2", "1s", "REFUND", "1"],
            &["RL.TOKEN", "v4:token", "2", "1s", "RESERVE", "1m"],
            &["RL.TOKEN", "v4:token", "2", "1s", "WAIT", "1m"],
            &[
                "RL.TOKEN", "v4:token", "2", "1s", "WAIT", "1m", "BLOCK", "1h",
            ],
            &["RL.FIXED", "fresh", "5", "1h", "OVERRIDE", "v4:override"],
            &[
                "RL.FIXED",
                "fresh",
                "5",
                "1h",
                "OVERRIDE",
                "v4:override",
                "REFUND",
                "1",
            ],
            &[
                "RL.TOKEN",
                "fresh",
                "5",
                "1h",
                "OVERRIDE",
                "v4:override",
                "RESERVE",
                "1m",
            ],
            &["RL.OVERRIDE.GET", "v4:override"],
            &["RL.OVERRIDE.DEL", "v4:override"],
            &[
                "RL.ALL", "FIXED", "fresh", "5", "1h", "TOKEN", "v4:token", "2", "1s", "RESERVE",
                "1m",
            ],
            &[
                "RL.ALL", "FIXED", "v4:fixed", "5", "1h", "REFUND", "1", "TOKEN", "fresh", "2",
                "1s",
            ],
            &["RL.ALL", "SLIDING", "v4:sliding", "10", "1h", "BLOCK", "1h"],
        ];
        changes_nothing(con, "calls on values of version 4", |con| {
            let digest_before = digest(con);
            for args in calls {
                assert_eq!(cmd(con, args), Err(unknown.to_string()), "{args:?}");
                alive(con, &format!("{args:?}"));
            }
            assert_eq!(digest(con), digest_before);
        });
        assert!(!exists(con, "fresh"));
    });
}
