//! Upgrades (docs/request-life.md: stored values written before
//! these options existed keep working unchanged): byte fixtures
//! of values written by librl before REFUND, BLOCK, RESERVE and WAIT
//! (encoding version 1), stored into a fresh server and used by every
//! command and every new option; and a value of an encoding version no
//! librl knows, refused cleanly.
//!
//! How the fixtures were made: by the module built from commit d9f66f5
//! (the last before those options), replaying an AOF of the calls
//! named on each fixture with the internal `NOW` argument the primary
//! propagates, so that they were decided at known times, then `GET` and
//! `PEXPIRETIME` of each key. The times are in 2100: a stored value whose
//! times lie ahead of the server's clock is decided with the clock standing
//! still at them (docs/commands.md, The limiter reply: a clock that steps back stands still at the newest
//! time the limiter has seen), so every reply on these values is exact.

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

/// A fixture with an encoding version no librl knows.
fn version(fixture: &[u8], v: u8) -> Vec<u8> {
    let mut out = fixture.to_vec();
    out[3] = v;
    out
}

#[test]
fn values_of_an_unknown_encoding_version_are_refused_and_kept() {
    let unknown = "ERR key holds a librl value of encoding version 3, \
                   which this librl does not know; upgrade the module";
    on_each_server(|_, con| {
        load(con, &version(FIXED, 3), FIXED_EXPIRES, &["v3:fixed"]);
        load(con, &version(SLIDING, 3), SLIDING_EXPIRES, &["v3:sliding"]);
        load(con, &version(APPROX, 3), APPROX_EXPIRES, &["v3:approx"]);
        load(con, &version(TOKEN, 3), TOKEN_EXPIRES, &["v3:token"]);
        load(con, &version(OVERRIDE, 3), 0, &["v3:override"]);
        let calls: &[&[&str]] = &[
            &["RL.FIXED", "v3:fixed", "5", "1h"],
            &["RL.FIXED", "v3:fixed", "5", "1h", "PEEK"],
            &["RL.FIXED", "v3:fixed", "5", "1h", "REFUND", "1"],
            &["RL.FIXED", "v3:fixed", "5", "1h", "BLOCK", "1h"],
            &[
                "RL.FIXED", "v3:fixed", "5", "1h", "COST", "9", "BLOCK", "1h",
            ],
            &[
                "RL.FIXED", "v3:fixed", "5", "1h", "ALIGNED", "REFUND", "1", "PEEK",
            ],
            &["RL.SLIDING", "v3:sliding", "10", "1h"],
            &["RL.SLIDING", "v3:sliding", "10", "1h", "REFUND", "2"],
            &["RL.SLIDING", "v3:sliding", "10", "1h", "BLOCK", "1h"],
            &["RL.SLIDING", "v3:approx", "10", "1h", "APPROX"],
            &[
                "RL.SLIDING",
                "v3:approx",
                "10",
                "1h",
                "APPROX",
                "REFUND",
                "1",
            ],
            &["RL.TOKEN", "v3:token", "2", "1s", "BURST", "5"],
            &["RL.TOKEN", "v3:token", "2", "1s", "REFUND", "1"],
            &["RL.TOKEN", "v3:token", "2", "1s", "RESERVE", "1m"],
            &["RL.TOKEN", "v3:token", "2", "1s", "WAIT", "1m"],
            &[
                "RL.TOKEN", "v3:token", "2", "1s", "WAIT", "1m", "BLOCK", "1h",
            ],
            &["RL.FIXED", "fresh", "5", "1h", "OVERRIDE", "v3:override"],
            &[
                "RL.FIXED",
                "fresh",
                "5",
                "1h",
                "OVERRIDE",
                "v3:override",
                "REFUND",
                "1",
            ],
            &[
                "RL.TOKEN",
                "fresh",
                "5",
                "1h",
                "OVERRIDE",
                "v3:override",
                "RESERVE",
                "1m",
            ],
            &["RL.OVERRIDE.GET", "v3:override"],
            &["RL.OVERRIDE.DEL", "v3:override"],
            &[
                "RL.ALL", "FIXED", "fresh", "5", "1h", "TOKEN", "v3:token", "2", "1s", "RESERVE",
                "1m",
            ],
            &[
                "RL.ALL", "FIXED", "v3:fixed", "5", "1h", "REFUND", "1", "TOKEN", "fresh", "2",
                "1s",
            ],
            &["RL.ALL", "SLIDING", "v3:sliding", "10", "1h", "BLOCK", "1h"],
        ];
        changes_nothing(con, "calls on values of version 3", |con| {
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
