//! Overrides (RL.OVERRIDE.SET/GET/DEL/LIST and `OVERRIDE okey` on the
//! limiters) against real redis-server and valkey-server processes.

mod common;

use common::*;
use redis::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

const MAX: &str = "1125899906842624";
const WRONGTYPE_OVERRIDE: &str = "WRONGTYPE Operation against a key holding the wrong kind \
     of value (expected an RL.OVERRIDE value or no key)";

type Fields = [i64; 4];

/// `RL.OVERRIDE.GET` as `[limit, window_ms, burst, ttl_ms]`, None for nil.
fn get(con: &mut redis::Connection, okey: &str) -> Option<Fields> {
    match cmd(con, &["RL.OVERRIDE.GET", okey]) {
        Ok(Value::Nil) => None,
        Ok(Value::Array(items)) => Some(
            items
                .iter()
                .map(int)
                .collect::<Vec<_>>()
                .try_into()
                .expect("GET replies four integers"),
        ),
        other => panic!("RL.OVERRIDE.GET {okey}: {other:?}"),
    }
}

/// Asserts a GET reply up to its ttl, and that ttl is within `ttl_range`.
fn assert_override(
    con: &mut redis::Connection,
    okey: &str,
    want: [i64; 3],
    ttl_range: std::ops::RangeInclusive<i64>,
) {
    let got = get(con, okey).unwrap_or_else(|| panic!("{okey} is missing"));
    assert_eq!(got[..3], want, "{okey}: {got:?}");
    assert!(ttl_range.contains(&got[3]), "{okey} ttl: {got:?}");
}

/// The reply invariants every limiter reply keeps, whatever the override.
fn assert_sane(reply: [i64; 6], limit: i64) {
    let [allowed, count, retry_after, got_limit, remaining, reset_after] = reply;
    assert!(allowed == 0 || allowed == 1, "{reply:?}");
    assert_eq!(got_limit, limit, "{reply:?}");
    assert!(count >= 0 && remaining >= 0, "{reply:?}");
    assert_eq!(remaining, (limit - count).max(0), "{reply:?}");
    assert!(reset_after >= 0, "{reply:?}");
    if allowed == 1 {
        assert!(count <= limit && retry_after == 0, "{reply:?}");
    } else {
        assert!(retry_after == -1 || retry_after > 0, "{reply:?}");
    }
}

/// One `RL.OVERRIDE.LIST` step: the next cursor and the entries.
fn list_step(con: &mut redis::Connection, args: &[&str]) -> (u64, Vec<(String, Fields)>) {
    let reply = cmd(con, args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let Value::Array(parts) = reply else {
        panic!("{args:?}: not an array: {reply:?}");
    };
    let [Value::BulkString(cursor), Value::Array(entries)] = parts.as_slice() else {
        panic!("{args:?}: not [cursor, entries]: {parts:?}");
    };
    let cursor = std::str::from_utf8(cursor).unwrap().parse().unwrap();
    let entries = entries
        .iter()
        .map(|entry| match entry {
            Value::Array(fields) => match fields.as_slice() {
                [Value::BulkString(name), rest @ ..] => (
                    String::from_utf8_lossy(name).into_owned(),
                    rest.iter()
                        .map(int)
                        .collect::<Vec<_>>()
                        .try_into()
                        .expect("an entry has five fields"),
                ),
                _ => panic!("bad entry {entry:?}"),
            },
            _ => panic!("bad entry {entry:?}"),
        })
        .collect();
    (cursor, entries)
}

/// A full iteration from cursor 0 back to 0 with `options`: every entry
/// returned, duplicates included.
fn list_all(con: &mut redis::Connection, options: &[&str]) -> Vec<(String, Fields)> {
    let options: Vec<&[u8]> = options.iter().map(|o| o.as_bytes()).collect();
    list_overrides(con, &options)
        .into_iter()
        .map(|(name, fields)| {
            let fields: Fields = fields.try_into().unwrap();
            (String::from_utf8_lossy(&name).into_owned(), fields)
        })
        .collect()
}

/// Asserts `args` fails with exactly `want` and leaves the dataset as it was.
fn refused(con: &mut redis::Connection, args: &[&str], want: &str) {
    let before = snapshot(con);
    assert_eq!(cmd(con, args), Err(want.to_string()), "{args:?}");
    assert_eq!(snapshot(con), before, "{args:?} changed the dataset");
}

// ---------------------------------------------------------------------------
// Reply shapes

/// `RL.OVERRIDE HELP` (what the server's "Try RL.OVERRIDE HELP" points
/// to): every subcommand's synopsis and description, then HELP's own.
#[test]
fn help_lists_every_subcommand() {
    const HELP: [&str; 11] = [
        "RL.OVERRIDE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "SET <okey> <limit> <window> [BURST <capacity>] [TTL <duration>]",
        "    Store an override whose limit, window and burst replace those of limiter calls naming it.",
        "GET <okey>",
        "    Return [limit, window_ms, burst, ttl_ms], or nil.",
        "DEL <okey> [<okey> ...]",
        "    Delete overrides; return how many were deleted.",
        "LIST <cursor> [MATCH <pattern>] [COUNT <count>]",
        "    Iterate this node's overrides with SCAN's cursor contract.",
        "HELP",
        "    Print this help.",
    ];
    on_each_server(|_, con| {
        let want: Vec<Value> = HELP
            .iter()
            .map(|line| Value::SimpleString(line.to_string()))
            .collect();
        for form in ["RL.OVERRIDE", "rl.override"] {
            assert_eq!(
                cmd(con, &[form, "help"]),
                Ok(Value::Array(want.clone())),
                "{form}"
            );
        }
    });
}

#[test]
fn set_get_del_and_list_reply_shapes() {
    on_each_server(|_, con| {
        assert_eq!(cmd(con, &["RL.OVERRIDE.GET", "none"]), Ok(Value::Nil));
        assert_eq!(
            cmd(con, &["RL.OVERRIDE.LIST", "0"]),
            Ok(Value::Array(vec![
                Value::BulkString(b"0".to_vec()),
                Value::Array(vec![])
            ]))
        );

        ok(con, &["RL.OVERRIDE.SET", "a", "5", "60"]);
        assert_eq!(
            cmd(con, &["RL.OVERRIDE.GET", "a"]),
            Ok(Value::Array(
                [5, 60_000, 0, -1].into_iter().map(Value::Int).collect()
            ))
        );
        assert_eq!(pexpiretime(con, "a"), -1);

        ok(con, &["RL.OVERRIDE.SET", "b", "7", "1500ms", "BURST", "20"]);
        assert_eq!(get(con, "b"), Some([7, 1500, 20, -1]));

        ok(con, &["RL.OVERRIDE.SET", "c", "3", "2h", "TTL", "10m"]);
        assert_override(con, "c", [3, 7_200_000, 0], 599_000..=600_000);
        // Options in any order and case.
        ok(
            con,
            &["RL.OVERRIDE.SET", "d", "1", "1d", "ttl", "1h", "burst", "2"],
        );
        assert_override(con, "d", [1, 86_400_000, 2], 3_599_000..=3_600_000);
        let pttl = cmd_int(con, &["PTTL", "d"]);
        assert!((3_599_000..=3_600_000).contains(&pttl), "{pttl}");

        ok(
            con,
            &[
                "RL.OVERRIDE.SET",
                "m",
                MAX,
                "3650d",
                "BURST",
                MAX,
                "TTL",
                "3650d",
            ],
        );
        let ten_years = 3650 * 86_400_000;
        assert_override(
            con,
            "m",
            [1 << 50, ten_years, 1 << 50],
            ten_years - 1000..=ten_years,
        );
        ok(con, &["RL.OVERRIDE.SET", "one", "1", "1ms"]);
        assert_eq!(get(con, "one"), Some([1, 1, 0, -1]));

        // SET replaces an override entirely.
        ok(con, &["RL.OVERRIDE.SET", "b", "9", "1s"]);
        assert_eq!(get(con, "b"), Some([9, 1000, 0, -1]));
        ok(con, &["RL.OVERRIDE.SET", "a", "9", "1s", "BURST", "3"]);
        assert_eq!(get(con, "a"), Some([9, 1000, 3, -1]));

        // LIST: [cursor, [[okey, limit, window_ms, burst, ttl_ms], ...]].
        let (cursor, mut entries) = list_step(con, &["RL.OVERRIDE.LIST", "0", "COUNT", "1000"]);
        assert_eq!(cursor, 0);
        entries.sort();
        let names: Vec<&str> = entries.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["a", "b", "c", "d", "m", "one"]);
        for (name, fields) in &entries {
            let got = get(con, name).unwrap();
            assert_eq!(fields[..3], got[..3], "{name}");
            assert!(
                (fields[3] - got[3]).abs() <= 50,
                "{name}: {fields:?} {got:?}"
            );
        }
        let raw = cmd(
            con,
            &["RL.OVERRIDE.LIST", "0", "match", "o*", "count", "100"],
        )
        .unwrap();
        assert_eq!(
            raw,
            Value::Array(vec![
                Value::BulkString(b"0".to_vec()),
                Value::Array(vec![Value::Array(vec![
                    Value::BulkString(b"one".to_vec()),
                    Value::Int(1),
                    Value::Int(1),
                    Value::Int(0),
                    Value::Int(-1),
                ])])
            ])
        );
        assert_eq!(
            list_step(con, &["RL.OVERRIDE.LIST", "0", "MATCH", "zz*"]),
            (0, vec![])
        );

        // DEL: how many overrides it deleted.
        assert_eq!(cmd(con, &["RL.OVERRIDE.DEL", "a"]), Ok(Value::Int(1)));
        assert_eq!(cmd(con, &["RL.OVERRIDE.DEL", "a"]), Ok(Value::Int(0)));
        assert_eq!(
            cmd(con, &["RL.OVERRIDE.DEL", "b", "c", "missing"]),
            Ok(Value::Int(2))
        );
        assert_eq!(cmd(con, &["RL.OVERRIDE.DEL", "d", "d"]), Ok(Value::Int(1)));
        assert_eq!(get(con, "a"), None);
        assert_eq!(get(con, "d"), None);
        let left: Vec<String> = list_all(con, &[]).into_iter().map(|(n, _)| n).collect();
        assert_eq!(
            left.into_iter().collect::<BTreeSet<_>>(),
            ["m", "one"].map(String::from).into()
        );

        // Binary-safe okeys (NUL bytes: see the test after this one).
        let okey: &[u8] = b"\xff\xfeov key";
        set_and_get(con, okey, 4, "2s", 2000);
        let raw = cmd(con, &["RL.OVERRIDE.LIST", "0", "COUNT", "100"]).unwrap();
        let listed = match &raw {
            Value::Array(parts) => match parts.get(1) {
                Some(Value::Array(entries)) => entries.iter().any(|e| {
                    matches!(e, Value::Array(f) if f.first() == Some(&Value::BulkString(okey.to_vec())))
                }),
                _ => false,
            },
            _ => false,
        };
        assert!(listed, "{raw:?}");
        let reply = call(con, &[b"RL.FIXED", b"k", b"100", b"1", b"OVERRIDE", okey]).unwrap();
        assert_eq!(
            reply,
            Value::Array([1, 1, 0, 4, 3, 2000].into_iter().map(Value::Int).collect())
        );
    });
}

/// `RL.OVERRIDE.SET okey limit window` (`window_ms` in ms) takes a key name
/// of any bytes, and GET gives it back: no burst, no TTL.
fn set_and_get(con: &mut redis::Connection, okey: &[u8], limit: i64, window: &str, window_ms: i64) {
    let limit_word = limit.to_string();
    let set = [
        b"RL.OVERRIDE.SET",
        okey,
        limit_word.as_bytes(),
        window.as_bytes(),
    ];
    assert_eq!(call(con, &set), Ok(Value::Okay));
    assert_eq!(
        call(con, &[b"RL.OVERRIDE.GET", okey]),
        Ok(Value::Array(
            [limit, window_ms, 0, -1]
                .into_iter()
                .map(Value::Int)
                .collect()
        ))
    );
}

/// Key names are binary: a NUL byte is as good as any other. LIST must list
/// an override whose name holds one, and skip a plain string whose name
/// holds one, like every other key.
#[test]
fn list_handles_key_names_with_nul_bytes() {
    on_each_server(|_, con| {
        let okey: &[u8] = b"ov\x00nul";
        set_and_get(con, okey, 3, "1s", 1000);
        assert_eq!(
            call(con, &[b"RL.FIXED", b"k", b"100", b"1", b"OVERRIDE", okey]),
            Ok(Value::Array(
                [1, 1, 0, 3, 2, 1000].into_iter().map(Value::Int).collect()
            ))
        );
        let want = Value::Array(vec![
            Value::BulkString(b"0".to_vec()),
            Value::Array(vec![Value::Array(vec![
                Value::BulkString(okey.to_vec()),
                Value::Int(3),
                Value::Int(1000),
                Value::Int(0),
                Value::Int(-1),
            ])]),
        ]);
        assert_eq!(
            cmd(
                con,
                &["RL.OVERRIDE.LIST", "0", "MATCH", "ov*", "COUNT", "100"]
            ),
            Ok(want.clone()),
            "an override whose name holds a NUL byte"
        );
        // A plain string with a NUL in its name, in the same SCAN batch.
        call(con, &[b"SET", b"plain\x00string", b"x"]).unwrap();
        ok(con, &["RL.OVERRIDE.SET", "zz", "1", "1s"]);
        assert_eq!(
            cmd(
                con,
                &["RL.OVERRIDE.LIST", "0", "MATCH", "zz", "COUNT", "100"]
            )
            .map(|v| strings(&v)),
            Ok(vec!["0", "zz", "1", "1000", "0", "-1"]
                .into_iter()
                .map(String::from)
                .collect::<Vec<_>>()),
            "a plain string whose name holds a NUL byte"
        );
        assert_eq!(
            cmd(con, &["RL.OVERRIDE.LIST", "0", "COUNT", "100"]).map(|v| strings(&v).len()),
            Ok(11)
        );
    });
}

// ---------------------------------------------------------------------------
// TTL

#[test]
fn an_expired_override_falls_back_to_the_calls_own_values() {
    on_each_server(|_, con| {
        // One transaction, so that the 60 ms cannot run out in between.
        let (set, got, fixed, token): (Value, Vec<i64>, Vec<i64>, Vec<i64>) = redis::pipe()
            .atomic()
            .cmd("RL.OVERRIDE.SET")
            .arg(&["o", "2", "1h", "TTL", "60ms"])
            .cmd("RL.OVERRIDE.GET")
            .arg("o")
            .cmd("RL.FIXED")
            .arg(&["k", "10", "1s", "OVERRIDE", "o"])
            .cmd("RL.TOKEN")
            .arg(&["t", "10", "1s", "OVERRIDE", "o", "PEEK"])
            .query(con)
            .unwrap();
        assert_eq!(set, Value::Okay);
        assert_eq!(got[..3], [2, 3_600_000, 0]);
        // The server's command-time snapshot and the module's clock can each
        // be a millisecond ahead (Valkey 8 read 61 here once), as for PTTL.
        assert!((1..=61).contains(&got[3]), "{got:?}");
        assert_eq!(fixed, [1, 1, 0, 2, 1, 3_600_000]);
        assert_eq!(token[3], 2);
        wait_until("the override to expire", || get(con, "o").is_none());
        assert!(!exists(con, "o"));
        assert_eq!(
            list_all(con, &["COUNT", "100"]),
            vec![],
            "LIST must not show an expired override"
        );
        assert_replies(con, "RL.FIXED k2 10 1s OVERRIDE o", [1, 1, 0, 10, 9, 1000]);
        assert_replies(con, "RL.TOKEN t 4 1s OVERRIDE o PEEK", [1, 1, 0, 4, 3, 250]);
        // The limiter that used it now counts against the call's own limit,
        // in the window it opened.
        let r = limiter(con, &["RL.FIXED", "k", "10", "1s", "OVERRIDE", "o"]);
        assert_eq!(r[..5], [1, 2, 0, 10, 8]);
        assert!(r[5] > 3_500_000, "{r:?}");
        assert!(
            !exists(con, "o"),
            "a limiter call must not recreate the okey"
        );
    });
}

#[test]
fn set_without_ttl_clears_an_earlier_ttl() {
    on_each_server(|_, con| {
        ok(con, &["RL.OVERRIDE.SET", "o", "5", "60", "TTL", "1h"]);
        assert!(pexpiretime(con, "o") > 0);
        ok(con, &["RL.OVERRIDE.SET", "o", "6", "60"]);
        assert_eq!(get(con, "o"), Some([6, 60_000, 0, -1]));
        assert_eq!(pexpiretime(con, "o"), -1);

        // A short TTL replaced before it runs out never fires.
        ok(con, &["RL.OVERRIDE.SET", "s", "6", "60", "TTL", "80ms"]);
        ok(con, &["RL.OVERRIDE.SET", "s", "7", "60", "BURST", "8"]);
        std::thread::sleep(Duration::from_millis(120));
        assert_eq!(get(con, "s"), Some([7, 60_000, 8, -1]));

        // A TTL replaces another TTL, and one is added to an override that
        // had none.
        ok(con, &["RL.OVERRIDE.SET", "o", "7", "60", "TTL", "1h"]);
        ok(con, &["RL.OVERRIDE.SET", "o", "7", "60", "TTL", "2h"]);
        assert_override(con, "o", [7, 60_000, 0], 7_199_000..=7_200_000);
        ok(con, &["RL.OVERRIDE.SET", "o", "7", "60", "TTL", "1s"]);
        assert_override(con, "o", [7, 60_000, 0], 1..=1000);
    });
}

#[test]
fn an_override_ttl_is_independent_of_limiter_windows() {
    on_each_server(|_, con| {
        // A long-lived override with a short window.
        ok(con, &["RL.OVERRIDE.SET", "long", "3", "50ms", "TTL", "1h"]);
        let long_at = pexpiretime(con, "long");
        assert_replies(con, "RL.FIXED k 100 1h OVERRIDE long", [1, 1, 0, 3, 2, 50]);
        assert_replies(con, "RL.TOKEN t 100 1h OVERRIDE long", [1, 1, 0, 3, 2, 17]);
        assert_eq!(
            pexpiretime(con, "long"),
            long_at,
            "a limiter call moved the okey's TTL"
        );
        assert!(pexpiretime(con, "k") < long_at - 3_000_000);
        wait_until("the limiters to expire", || {
            !exists(con, "k") && !exists(con, "t")
        });
        assert_eq!(pexpiretime(con, "long"), long_at);
        assert_override(con, "long", [3, 50, 0], 3_500_000..=3_600_000);

        // A short-lived override with a long window.
        let (set, fixed): (Value, Vec<i64>) = redis::pipe()
            .atomic()
            .cmd("RL.OVERRIDE.SET")
            .arg(&["short", "3", "1h", "TTL", "60ms"])
            .cmd("RL.FIXED")
            .arg(&["k2", "100", "1s", "OVERRIDE", "short"])
            .query(con)
            .unwrap();
        assert_eq!(set, Value::Okay);
        assert_eq!(fixed, [1, 1, 0, 3, 2, 3_600_000]);
        let k2_at = pexpiretime(con, "k2");
        let short_at = pexpiretime(con, "short");
        assert!(
            short_at == -2 || k2_at > short_at + 3_000_000,
            "{k2_at} {short_at}"
        );
        wait_until("the override to expire", || get(con, "short").is_none());
        assert!(exists(con, "k2"), "the limiter outlives its override");
        assert_eq!(pexpiretime(con, "k2"), k2_at);
        let r = limiter(con, &["RL.FIXED", "k2", "100", "1s", "OVERRIDE", "short"]);
        assert_eq!(r[..5], [1, 2, 0, 100, 98]);
        assert_eq!(
            pexpiretime(con, "k2"),
            k2_at,
            "the window's stored end is kept"
        );
    });
}

// ---------------------------------------------------------------------------
// OVERRIDE on the limiters

#[test]
fn override_values_replace_the_calls_own_on_fixed() {
    on_each_server(|_, con| {
        ok(con, &["RL.OVERRIDE.SET", "o", "3", "1m"]);
        assert_replies(con, "RL.FIXED f 100 1s OVERRIDE o", [1, 1, 0, 3, 2, 60_000]);
        let pttl = cmd_int(con, &["PTTL", "f"]);
        assert!((59_900..=60_000).contains(&pttl), "{pttl}");
        let r = limiter(
            con,
            &["RL.FIXED", "f", "100", "1s", "override", "o", "COST", "2"],
        );
        assert_eq!(r[..5], [1, 3, 0, 3, 0]);
        let denied = limiter(con, &["RL.FIXED", "f", "100", "1s", "OVERRIDE", "o"]);
        assert_eq!(denied[..2], [0, 3]);
        assert_eq!(denied[3..5], [3, 0]);
        assert!(denied[2] > 59_000 && denied[2] == denied[5], "{denied:?}");
        let never = limiter(
            con,
            &["RL.FIXED", "f", "100", "1s", "OVERRIDE", "o", "COST", "4"],
        );
        assert_eq!(never[..5], [0, 3, -1, 3, 0]);

        // FIXED has no burst: an override's BURST leaves its limit alone.
        ok(con, &["RL.OVERRIDE.SET", "ob", "4", "1m", "BURST", "50"]);
        assert_replies(
            con,
            "RL.FIXED fb 100 1s OVERRIDE ob COST 4",
            [1, 4, 0, 4, 0, 60_000],
        );

        // A missing okey: the call's own values, and no okey created.
        assert_replies(
            con,
            "RL.FIXED g 10 1s OVERRIDE nosuch",
            [1, 1, 0, 10, 9, 1000],
        );
        assert!(!exists(con, "nosuch"));

        // ALIGNED windows use the override's window.
        limiter(
            con,
            &["RL.FIXED", "al", "100", "1s", "ALIGNED", "OVERRIDE", "o"],
        );
        assert_eq!(pexpiretime(con, "al") % 60_000, 0);

        // PEEK reads the override too, and writes nothing.
        changes_nothing(con, "a FIXED PEEK with an override", |con| {
            assert_replies(
                con,
                "RL.FIXED p 100 1s OVERRIDE o PEEK",
                [1, 1, 0, 3, 2, 60_000],
            );
            let peek = limiter(
                con,
                &["RL.FIXED", "f", "100", "1s", "PEEK", "OVERRIDE", "o"],
            );
            assert_eq!(peek[..2], [0, 3]);
            assert_eq!(peek[3..5], [3, 0]);
            assert_replies(
                con,
                "RL.FIXED p 100 1s OVERRIDE nosuch PEEK",
                [1, 1, 0, 100, 99, 1000],
            );
        });
    });
}

#[test]
fn override_values_replace_the_calls_own_on_token() {
    on_each_server(|_, con| {
        // capacity = the override's BURST...
        ok(con, &["RL.OVERRIDE.SET", "tb", "5", "1s", "BURST", "20"]);
        assert_replies(
            con,
            "RL.TOKEN t 100 1m OVERRIDE tb COST 20",
            [1, 20, 0, 20, 0, 4000],
        );
        let denied = limiter(con, &["RL.TOKEN", "t", "100", "1m", "OVERRIDE", "tb"]);
        assert_eq!(denied[..2], [0, 20]);
        assert!(denied[2] > 0 && denied[2] <= 200, "{denied:?}");
        // ... or its limit when it has none, even if the call gives BURST.
        ok(con, &["RL.OVERRIDE.SET", "tn", "5", "1s"]);
        assert_replies(
            con,
            "RL.TOKEN t2 100 1m BURST 1000 OVERRIDE tn",
            [1, 1, 0, 5, 4, 200],
        );
        assert_replies(
            con,
            "RL.TOKEN t5 100 1m OVERRIDE tn COST 6",
            [0, 0, -1, 5, 5, 0],
        );
        // A missing okey: the call's own rate, window and burst.
        assert_replies(
            con,
            "RL.TOKEN t3 7 1s BURST 9 OVERRIDE nosuch",
            [1, 1, 0, 9, 8, 143],
        );
        assert!(!exists(con, "nosuch"));
        // PEEK reads the override and writes nothing.
        changes_nothing(con, "a TOKEN PEEK with an override", |con| {
            assert_replies(
                con,
                "RL.TOKEN t4 100 1m OVERRIDE tb PEEK COST 20",
                [1, 20, 0, 20, 0, 4000],
            );
            let peek = limiter(
                con,
                &["RL.TOKEN", "t", "100", "1m", "PEEK", "OVERRIDE", "tb"],
            );
            assert_eq!(peek[3], 20);
            assert_sane(peek, 20);
        });
    });
}

#[test]
fn changing_an_override_under_a_fixed_window_keeps_the_count_and_the_end() {
    on_each_server(|_, con| {
        let call = |con: &mut redis::Connection, extra: &[&str]| {
            let mut args = vec!["RL.FIXED", "f", "100", "1s", "OVERRIDE", "o"];
            args.extend(extra);
            limiter(con, &args)
        };
        ok(con, &["RL.OVERRIDE.SET", "o", "10", "1m"]);
        assert_eq!(call(con, &["COST", "8"]), [1, 8, 0, 10, 2, 60_000]);
        let end = pexpiretime(con, "f");

        // The limit drops below the count: denied, count kept, remaining 0.
        ok(con, &["RL.OVERRIDE.SET", "o", "5", "1m"]);
        let r = call(con, &[]);
        assert_eq!(r[..2], [0, 8]);
        assert_eq!(r[3..5], [5, 0]);
        assert!(r[2] > 59_000 && r[2] == r[5], "{r:?}");
        assert_sane(r, 5);
        let r = call(con, &["COST", "6"]);
        assert_eq!(r[..5], [0, 8, -1, 5, 0]);
        assert_eq!(pexpiretime(con, "f"), end);

        // The window grows: the open window keeps its stored end.
        ok(con, &["RL.OVERRIDE.SET", "o", "5", "1h"]);
        let r = call(con, &[]);
        assert_eq!(r[..2], [0, 8]);
        assert!(r[5] <= 60_000 && r[2] == r[5], "{r:?}");
        assert_sane(r, 5);
        assert_eq!(pexpiretime(con, "f"), end);

        // The window shrinks and the limit grows: admitted in the same window.
        ok(con, &["RL.OVERRIDE.SET", "o", "20", "1s"]);
        let r = call(con, &["COST", "2"]);
        assert_eq!(r[..5], [1, 10, 0, 20, 10]);
        assert!(r[5] > 50_000 && r[5] <= 60_000, "{r:?}");
        assert_eq!(pexpiretime(con, "f"), end);

        // The call's own values, after the override is deleted, too.
        assert_eq!(cmd(con, &["RL.OVERRIDE.DEL", "o"]), Ok(Value::Int(1)));
        let r = limiter(con, &["RL.FIXED", "f", "12", "1d", "OVERRIDE", "o"]);
        assert_eq!(r[..5], [1, 11, 0, 12, 1]);
        assert_eq!(pexpiretime(con, "f"), end);
        let r = limiter(con, &["RL.FIXED", "f", "11", "1s", "OVERRIDE", "o"]);
        assert_eq!(r[..5], [0, 11, r[5], 11, 0]);
        assert_eq!(pexpiretime(con, "f"), end);
    });
}

#[test]
fn changing_an_override_under_a_token_bucket_keeps_counts_sane() {
    on_each_server(|_, con| {
        let call = |con: &mut redis::Connection, extra: &[&str]| {
            let mut args = vec!["RL.TOKEN", "t", "1", "1s", "OVERRIDE", "o"];
            args.extend(extra);
            limiter(con, &args)
        };
        let assert_ttl = |con: &mut redis::Connection, r: [i64; 6]| {
            let pttl = cmd_int(con, &["PTTL", "t"]);
            assert!(
                pttl > 0 && pttl <= r[5] && r[5] - pttl <= 50,
                "{pttl} {r:?}"
            );
        };
        // 10 per hour: one token every 6 minutes.
        ok(con, &["RL.OVERRIDE.SET", "o", "10", "1h"]);
        let r = call(con, &["COST", "8"]);
        assert_eq!(r, [1, 8, 0, 10, 2, 2_880_000]);
        assert_ttl(con, r);

        // The capacity drops below the count: the bucket is capped at empty.
        ok(con, &["RL.OVERRIDE.SET", "o", "10", "1h", "BURST", "4"]);
        let r = call(con, &[]);
        assert_eq!(r[..5], [0, 4, 360_000, 4, 0]);
        assert_sane(r, 4);
        let r = call(con, &["COST", "5"]);
        assert_eq!(r[..5], [0, 4, -1, 4, 0]);

        // It grows again: the stored shortfall is still there.
        ok(con, &["RL.OVERRIDE.SET", "o", "10", "1h", "BURST", "20"]);
        let r = call(con, &["COST", "2"]);
        assert_eq!(r[..5], [1, 10, 0, 20, 10]);
        assert!(r[5] > 3_590_000 && r[5] <= 3_600_000, "{r:?}");
        assert_ttl(con, r);

        // The window shrinks (10 per minute) and grows (10 per day): the
        // shortfall is rescaled, the count stays.
        ok(con, &["RL.OVERRIDE.SET", "o", "10", "1m"]);
        let r = call(con, &[]);
        assert_eq!(r[..2], [0, 10]);
        assert!(r[2] > 0 && r[2] <= 6000, "{r:?}");
        assert_sane(r, 10);
        ok(con, &["RL.OVERRIDE.SET", "o", "10", "1d"]);
        let r = call(con, &[]);
        assert_eq!(r[..2], [0, 10]);
        assert_sane(r, 10);

        // A fast refill with a small bucket: full again within milliseconds.
        ok(con, &["RL.OVERRIDE.SET", "o", "1000", "1s", "BURST", "5"]);
        let r = call(con, &["PEEK"]);
        assert_sane(r, 5);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(call(con, &["PEEK"]), [1, 1, 0, 5, 4, 1]);
        assert_eq!(call(con, &["COST", "5"]), [1, 5, 0, 5, 0, 5]);
    });
}

// ---------------------------------------------------------------------------
// Atomicity

#[test]
fn multi_exec_and_lua_read_the_override_in_the_same_step() {
    on_each_server(|_, con| {
        let (set, fixed): (Value, Vec<i64>) = redis::pipe()
            .atomic()
            .cmd("RL.OVERRIDE.SET")
            .arg("o")
            .arg(2)
            .arg("1m")
            .cmd("RL.FIXED")
            .arg("k")
            .arg(100)
            .arg("1s")
            .arg("OVERRIDE")
            .arg("o")
            .query(con)
            .unwrap();
        assert_eq!(set, Value::Okay);
        assert_eq!(fixed, [1, 1, 0, 2, 1, 60_000]);

        let (del, fallback, set, same_key, token): (i64, Vec<i64>, Value, Vec<i64>, Vec<i64>) =
            redis::pipe()
                .atomic()
                .cmd("RL.OVERRIDE.DEL")
                .arg("o")
                .cmd("RL.FIXED")
                .arg("k2")
                .arg(100)
                .arg("1s")
                .arg("OVERRIDE")
                .arg("o")
                .cmd("RL.OVERRIDE.SET")
                .arg("o")
                .arg(3)
                .arg("1s")
                .arg("BURST")
                .arg(6)
                .cmd("RL.FIXED")
                .arg("k")
                .arg(100)
                .arg("1s")
                .arg("OVERRIDE")
                .arg("o")
                .cmd("RL.TOKEN")
                .arg("t")
                .arg(100)
                .arg("1s")
                .arg("OVERRIDE")
                .arg("o")
                .arg("COST")
                .arg(6)
                .query(con)
                .unwrap();
        assert_eq!(del, 1);
        assert_eq!(fallback, [1, 1, 0, 100, 99, 1000]);
        assert_eq!(set, Value::Okay);
        assert_eq!(same_key[..5], [1, 2, 0, 3, 1]);
        assert_eq!(token, [1, 6, 0, 6, 0, 2000]);

        let lua: Vec<i64> = redis::cmd("EVAL")
            .arg(
                "redis.call('RL.OVERRIDE.SET', KEYS[2], 1, '1m') \
                 return redis.call('RL.FIXED', KEYS[1], 100, 1, 'OVERRIDE', KEYS[2])",
            )
            .arg(2)
            .arg("lk")
            .arg("lo")
            .query(con)
            .unwrap();
        assert_eq!(lua, [1, 1, 0, 1, 0, 60_000]);
    });
}

// ---------------------------------------------------------------------------
// LIST at scale

#[test]
fn list_iterates_every_override_and_nothing_else() {
    on_each_server(|_, con| {
        let mut expected: BTreeMap<String, Fields> = BTreeMap::new();
        let mut pipe = redis::pipe();
        for i in 0..1000i64 {
            let half = if i % 2 == 0 { "a" } else { "b" };
            let name = format!("ov:{half}:{i}");
            let window_s = i % 50 + 1;
            let burst = if i % 3 == 0 { 0 } else { i + 10 };
            let c = pipe
                .cmd("RL.OVERRIDE.SET")
                .arg(&name)
                .arg(i + 1)
                .arg(window_s);
            if burst != 0 {
                c.arg("BURST").arg(burst);
            }
            let ttl = if i % 4 == 0 {
                c.arg("TTL").arg("1h");
                3_600_000
            } else {
                -1
            };
            c.ignore();
            expected.insert(name, [i + 1, window_s * 1000, burst, ttl]);
        }
        // Limiters and plain strings under the same prefixes, and a few
        // other types: LIST must skip them all.
        for i in 0..250 {
            pipe.cmd("RL.FIXED")
                .arg(format!("ov:a:fixed:{i}"))
                .arg(10)
                .arg("1h")
                .ignore();
            pipe.cmd("RL.TOKEN")
                .arg(format!("ov:b:token:{i}"))
                .arg(10)
                .arg("1h")
                .ignore();
            pipe.cmd("SET")
                .arg(format!("ov:a:str:{i}"))
                .arg("hello")
                .ignore();
            pipe.cmd("SET").arg(format!("str:{i}")).arg(i).ignore();
        }
        pipe.cmd("RPUSH").arg("ov:a:list").arg("x").ignore();
        pipe.cmd("HSET").arg("ov:b:hash").arg("f").arg("v").ignore();
        pipe.query::<()>(con).unwrap();
        assert_eq!(cmd_int(con, &["DBSIZE"]), 2002);

        let check = |entries: Vec<(String, Fields)>, want: &BTreeMap<String, Fields>| {
            let mut seen = BTreeSet::new();
            for (name, fields) in entries {
                let expect = want
                    .get(&name)
                    .unwrap_or_else(|| panic!("LIST returned {name}, which it should not"));
                assert_eq!(fields[..3], expect[..3], "{name}");
                if expect[3] == -1 {
                    assert_eq!(fields[3], -1, "{name}");
                } else {
                    assert!(
                        fields[3] > 3_500_000 && fields[3] <= expect[3],
                        "{name}: {fields:?}"
                    );
                }
                seen.insert(name);
            }
            let missing: Vec<_> = want.keys().filter(|k| !seen.contains(*k)).collect();
            assert!(missing.is_empty(), "never returned: {missing:?}");
        };

        check(list_all(con, &["COUNT", "7"]), &expected);
        check(list_all(con, &[]), &expected);
        let a_half: BTreeMap<String, Fields> = expected
            .iter()
            .filter(|(k, _)| k.starts_with("ov:a:"))
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        assert_eq!(a_half.len(), 500);
        check(list_all(con, &["MATCH", "ov:a:*", "COUNT", "7"]), &a_half);
        let few: BTreeMap<String, Fields> = expected
            .iter()
            .filter(|(k, _)| k.len() == 7 && k.starts_with("ov:b:1"))
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        assert_eq!(few.len(), 5);
        check(list_all(con, &["COUNT", "50", "MATCH", "ov:b:1?"]), &few);
        // A COUNT beyond the keyspace answers in one step.
        let (cursor, entries) = list_step(con, &["RL.OVERRIDE.LIST", "0", "COUNT", "100000"]);
        assert_eq!(cursor, 0);
        assert_eq!(entries.len(), 1000);
        check(entries, &expected);
    });
}

// ---------------------------------------------------------------------------
// WRONGTYPE

#[test]
fn foreign_values_are_wrongtype_and_untouched() {
    on_each_server(|_, con| {
        cmd(con, &["SET", "string", "hello"]).unwrap();
        cmd(con, &["RPUSH", "list", "a"]).unwrap();
        cmd(con, &["HSET", "hash", "f", "v"]).unwrap();
        cmd(con, &["SADD", "set", "m"]).unwrap();
        limiter(con, &["RL.FIXED", "fixed", "5", "60"]);
        limiter(con, &["RL.TOKEN", "token", "5", "60"]);
        ok(con, &["RL.OVERRIDE.SET", "good", "5", "60", "TTL", "1h"]);
        for key in ["string", "list", "hash", "set", "fixed", "token"] {
            let cases: Vec<Vec<&str>> = vec![
                vec!["RL.OVERRIDE.SET", key, "5", "60"],
                vec!["RL.OVERRIDE.SET", key, "5", "60", "BURST", "2", "TTL", "1h"],
                vec!["RL.OVERRIDE.GET", key],
                vec!["RL.OVERRIDE.DEL", key],
                vec!["RL.OVERRIDE.DEL", "good", key],
                vec!["RL.OVERRIDE.DEL", key, "good", "missing"],
                vec!["RL.FIXED", "lim", "10", "60", "OVERRIDE", key],
                vec!["RL.FIXED", "lim", "10", "60", "OVERRIDE", key, "PEEK"],
                vec!["RL.TOKEN", "lim", "10", "60", "OVERRIDE", key],
                vec!["RL.TOKEN", "lim", "10", "60", "PEEK", "OVERRIDE", key],
                // The okey is checked even when the limiter key holds state.
                vec!["RL.FIXED", "fixed", "10", "60", "OVERRIDE", key],
                vec!["RL.TOKEN", "token", "10", "60", "OVERRIDE", key],
            ];
            for args in cases {
                refused(con, &args, WRONGTYPE_OVERRIDE);
            }
        }
        assert!(get(con, "good").is_some());
        // An override is no limiter either.
        refused(
            con,
            &["RL.FIXED", "good", "10", "60"],
            "WRONGTYPE Operation against a key holding the wrong kind of value \
             (expected an RL.FIXED limiter or no key)",
        );
        refused(
            con,
            &["RL.TOKEN", "good", "10", "60", "PEEK"],
            "WRONGTYPE Operation against a key holding the wrong kind of value \
             (expected an RL.TOKEN limiter or no key)",
        );
        let listed: Vec<String> = list_all(con, &["COUNT", "3"])
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(listed, ["good"]);
        assert_eq!(cmd(con, &["RL.OVERRIDE.DEL", "good"]), Ok(Value::Int(1)));
    });
}

// ---------------------------------------------------------------------------
// Errors

#[test]
fn every_error_of_the_override_commands_is_exact_and_writes_nothing() {
    on_each_server(|_, con| {
        ok(con, &["RL.OVERRIDE.SET", "o", "5", "60", "TTL", "1h"]);
        limiter(con, &["RL.FIXED", "k", "5", "60", "OVERRIDE", "o"]);
        cmd(con, &["SET", "s", "x"]).unwrap();

        let arity = |c: &str| format!("ERR wrong number of arguments for '{c}' command");
        let amount = |n: &str| format!("ERR {n} must be an integer from 1 to {MAX} (2^50)");
        let duration = |n: &str| {
            format!(
                "ERR {n} must be a duration from 1ms to 3650d: a positive integer with an \
                 optional unit ms, s, m, h or d (bare integers are seconds)"
            )
        };
        let needs = |o: &str| format!("ERR option {o} needs a value");
        let twice = |o: &str| format!("ERR option {o} is given more than once");
        let not_for = |o: &str, c: &str| format!("ERR {o} is not an option of {c}");
        let unknown = |o: &str, c: &str| format!("ERR unknown option '{o}' for {c}");
        const SET: &str = "RL.OVERRIDE.SET";
        const LIST: &str = "RL.OVERRIDE.LIST";

        let mut cases: Vec<(Vec<&str>, String)> = vec![
            (vec![SET], arity(SET)),
            (vec![SET, "o"], arity(SET)),
            (vec![SET, "o", "5"], arity(SET)),
            (vec!["RL.OVERRIDE.GET"], arity("RL.OVERRIDE.GET")),
            (vec!["RL.OVERRIDE.GET", "o", "x"], arity("RL.OVERRIDE.GET")),
            (vec!["RL.OVERRIDE.DEL"], arity("RL.OVERRIDE.DEL")),
            (vec![LIST], arity(LIST)),
            // The limit is checked before the window.
            (vec![SET, "o", "0", "0"], amount("limit")),
            (vec![SET, "o", "5", "60", "BURST"], needs("BURST")),
            (vec![SET, "o", "5", "60", "TTL"], needs("TTL")),
            (
                vec![SET, "o", "5", "60", "BURST", "1", "burst", "2"],
                twice("BURST"),
            ),
            (
                vec![SET, "o", "5", "60", "TTL", "1s", "ttl", "2s"],
                twice("TTL"),
            ),
            (vec![SET, "o", "5", "60", "FOO"], unknown("FOO", SET)),
            (vec![SET, "o", "5", "60", "foo", "1"], unknown("foo", SET)),
            (
                vec![SET, "o", "5", "60", "BURST", "2", "bar"],
                unknown("bar", SET),
            ),
            (vec![SET, "o", "5", "60", "COST", "1"], not_for("COST", SET)),
            (vec![SET, "o", "5", "60", "cost", "1"], not_for("COST", SET)),
            (vec![SET, "o", "5", "60", "PEEK"], not_for("PEEK", SET)),
            (
                vec![SET, "o", "5", "60", "ALIGNED"],
                not_for("ALIGNED", SET),
            ),
            (vec![SET, "o", "5", "60", "APPROX"], not_for("APPROX", SET)),
            (
                vec![SET, "o", "5", "60", "OVERRIDE", "x"],
                not_for("OVERRIDE", SET),
            ),
            // NOW is for the replication link and the AOF only.
            (vec![SET, "o", "5", "60", "NOW", "1"], unknown("NOW", SET)),
            (
                vec![SET, "o", "6", "60", "TTL", "1h", "NOW", "1"],
                unknown("NOW", SET),
            ),
            (
                vec![SET, "new", "6", "60", "TTL", "1h", "BURST", "0"],
                amount("BURST"),
            ),
            (vec![LIST, "0", "COUNT"], needs("COUNT")),
            (vec![LIST, "0", "MATCH"], needs("MATCH")),
            (vec![LIST, "0", "COUNT", "5", "MATCH"], needs("MATCH")),
            (vec![LIST, "0", "MATCH", "a", "match", "b"], twice("MATCH")),
            (vec![LIST, "0", "COUNT", "1", "count", "2"], twice("COUNT")),
            (vec![LIST, "0", "TYPE", "string"], unknown("TYPE", LIST)),
            (vec![LIST, "0", "NOW", "1"], unknown("NOW", LIST)),
            (vec![LIST, "0", "COST", "1"], not_for("COST", LIST)),
            (vec![LIST, "0", "PEEK"], not_for("PEEK", LIST)),
            // OVERRIDE's own errors on the limiters.
            (
                vec!["RL.FIXED", "k", "5", "60", "OVERRIDE"],
                needs("OVERRIDE"),
            ),
            (
                vec!["RL.TOKEN", "t", "5", "60", "OVERRIDE"],
                needs("OVERRIDE"),
            ),
            (
                vec!["RL.FIXED", "k", "5", "60", "OVERRIDE", "o", "override", "p"],
                twice("OVERRIDE"),
            ),
            (
                vec!["RL.TOKEN", "t", "5", "60", "OVERRIDE", "o", "OVERRIDE", "o"],
                twice("OVERRIDE"),
            ),
        ];
        for bad in [
            "0",
            "-1",
            "+1",
            "x",
            "01",
            "1.5",
            " 1",
            "",
            "1125899906842625",
            "99999999999999999999",
        ] {
            cases.push((vec![SET, "o", bad, "60"], amount("limit")));
            cases.push((vec![SET, "o", "5", "60", "BURST", bad], amount("BURST")));
            cases.push((vec![LIST, "0", "COUNT", bad], amount("COUNT")));
        }
        for bad in [
            "0",
            "0ms",
            "-1",
            "-1s",
            "1x",
            "1.5s",
            "ms",
            "",
            "3651d",
            "315360000001ms",
            "5 s",
        ] {
            cases.push((vec![SET, "o", "5", bad], duration("window")));
            cases.push((vec![SET, "o", "5", "60", "TTL", bad], duration("TTL")));
        }
        for bad in ["-1", "x", "", "1.5", "+1", "18446744073709551616"] {
            cases.push((vec![LIST, bad], "ERR invalid cursor".to_string()));
            cases.push((
                vec![LIST, bad, "COUNT", "10"],
                "ERR invalid cursor".to_string(),
            ));
        }
        for (args, want) in &cases {
            refused(con, args, want);
        }
        assert_override(con, "o", [5, 60_000, 0], 3_500_000..=3_600_000);
        assert!(!exists(con, "new"));
        // Still answering.
        assert_eq!(cmd(con, &["PING"]), Ok(Value::SimpleString("PONG".into())));
    });
}

// ---------------------------------------------------------------------------
// Durability

/// Overrides with and without TTL, replaced, deleted, and used by limiters.
/// How the override commands are spelled: by their dotted names, or as
/// the container command (`RL.OVERRIDE set ...`, in lower case: subcommand
/// names are case-insensitive).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    Dotted,
    Container,
}

impl Form {
    fn spell<'a>(self, args: &[&'a str]) -> Vec<&'a str> {
        let sub = match (self, args[0]) {
            (Form::Container, "RL.OVERRIDE.SET") => "set",
            (Form::Container, "RL.OVERRIDE.GET") => "get",
            (Form::Container, "RL.OVERRIDE.DEL") => "del",
            (Form::Container, "RL.OVERRIDE.LIST") => "list",
            _ => return args.to_vec(),
        };
        [&["RL.OVERRIDE", sub][..], &args[1..]].concat()
    }
}

fn populate(con: &mut redis::Connection) {
    populate_as(con, Form::Dotted);
}

/// `populate` with the override commands spelled in `form`.
fn populate_as(con: &mut redis::Connection, form: Form) {
    // Set, set again over an older one (`cleared`, `retimed`), and set to
    // be deleted (`gone`, `gone2`).
    let sets: [&[&str]; 10] = [
        &["plain", "5", "60"],
        &["burst", "7", "1m", "BURST", "9"],
        &["ttl", "3", "10s", "TTL", "1h"],
        &["both", "2", "1s", "BURST", "4", "TTL", "2h"],
        &["cleared", "1", "1s", "TTL", "1h"],
        &["cleared", "8", "8s"],
        &["retimed", "1", "1s", "TTL", "1h"],
        &["retimed", "1", "1s", "TTL", "3h"],
        &["gone", "1", "1s", "TTL", "1h"],
        &["gone2", "1", "1s"],
    ];
    for args in sets {
        ok(con, &form.spell(&[&["RL.OVERRIDE.SET"][..], args].concat()));
    }
    assert_eq!(
        cmd(
            con,
            &form.spell(&["RL.OVERRIDE.DEL", "gone", "gone2", "never"])
        ),
        Ok(Value::Int(2))
    );
    limiter(
        con,
        &["RL.FIXED", "f", "100", "1s", "OVERRIDE", "ttl", "COST", "2"],
    );
    limiter(con, &["RL.FIXED", "f2", "100", "1s", "OVERRIDE", "plain"]);
    limiter(
        con,
        &[
            "RL.TOKEN", "t", "100", "1s", "OVERRIDE", "both", "COST", "3",
        ],
    );
    limiter(con, &["RL.TOKEN", "t2", "100", "1s", "OVERRIDE", "burst"]);
    limiter(con, &["RL.TOKEN", "t3", "100", "1s", "OVERRIDE", "plain"]);
    limiter(con, &["RL.FIXED", "f3", "100", "1s", "OVERRIDE", "never"]);
}

fn assert_populated(con: &mut redis::Connection) {
    assert_eq!(get(con, "plain"), Some([5, 60_000, 0, -1]));
    assert_eq!(get(con, "burst"), Some([7, 60_000, 9, -1]));
    assert_override(con, "ttl", [3, 10_000, 0], 1..=3_600_000);
    assert_override(con, "both", [2, 1000, 4], 1..=7_200_000);
    assert_eq!(get(con, "cleared"), Some([8, 8000, 0, -1]));
    assert_override(con, "retimed", [1, 1000, 0], 3_600_001..=10_800_000);
    assert_eq!(get(con, "gone"), None);
    assert_eq!(get(con, "gone2"), None);
    // A limiter still uses them.
    assert_replies(
        con,
        "RL.FIXED after 100 1s OVERRIDE burst PEEK",
        [1, 1, 0, 7, 6, 60_000],
    );
    let r = limiter(con, &["RL.FIXED", "f", "100", "1s", "OVERRIDE", "ttl"]);
    assert_eq!(r[..5], [1, 3, 0, 3, 0]);
}

#[test]
fn overrides_survive_an_rdb_restart() {
    for_each_flavor(|flavor| {
        let mut server = Server::start(flavor);
        let mut con = server.conn();
        populate(&mut con);
        let before = snapshot(&mut con);
        ok(&mut con, &["SAVE"]);
        server.restart();
        let mut con = server.conn();
        // (populate's limiters with 1 s windows may expire meanwhile.)
        let after = snapshot(&mut con);
        let now = server_ms(&mut con);
        assert_eq!(alive_at(&after, now), alive_at(&before, now), "{flavor:?}");
        assert_populated(&mut con);
        let names: BTreeSet<String> = list_all(&mut con, &[])
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(
            names,
            ["plain", "burst", "ttl", "both", "cleared", "retimed"]
                .map(String::from)
                .into(),
            "{flavor:?}"
        );
    });
}

#[test]
fn overrides_survive_an_aof_restart() {
    for_each_flavor(|flavor| {
        let mut server = Server::builder(flavor).args(&AOF).start();
        let mut con = server.conn();
        populate(&mut con);
        ok(
            &mut con,
            &["RL.OVERRIDE.SET", "short", "1", "1s", "TTL", "300ms"],
        );
        let short_at = pexpiretime(&mut con, "short");
        let mut before = snapshot(&mut con);
        before.retain(|(k, _, _)| k != b"short");
        server.restart();
        let mut con = server.conn();
        let mut after = snapshot(&mut con);
        after.retain(|(k, _, _)| k != b"short");
        // (populate's limiters with 1 s windows may expire meanwhile.)
        let now = server_ms(&mut con);
        assert_eq!(alive_at(&after, now), alive_at(&before, now), "{flavor:?}");
        // Downtime never extends a TTL: same absolute expiry, or gone.
        let at = pexpiretime(&mut con, "short");
        assert!(at == short_at || at == -2, "{flavor:?}: {at} vs {short_at}");
        wait_until("the short override to expire", || {
            get(&mut con, "short").is_none()
        });
        assert_populated(&mut con);
    });
}

#[test]
fn a_replica_ends_with_the_same_overrides_and_serves_get_and_list() {
    for_each_flavor(|flavor| {
        let master = start_primary(flavor, &[]);
        let mut mc = master.conn();
        // Some state goes over in the initial sync, the rest in the stream.
        ok(
            &mut mc,
            &["RL.OVERRIDE.SET", "early", "4", "4s", "TTL", "1h"],
        );
        ok(
            &mut mc,
            &["RL.OVERRIDE.SET", "early2", "4", "4s", "BURST", "5"],
        );
        let replica = start_replica(&master);
        let mut rc = replica.conn();
        populate(&mut mc);
        ok(
            &mut mc,
            &["RL.OVERRIDE.SET", "early2", "6", "6s", "TTL", "30m"],
        );
        ok(
            &mut mc,
            &["RL.OVERRIDE.SET", "blip", "1", "1s", "TTL", "60ms"],
        );
        wait_until("blip to expire on the master", || {
            get(&mut mc, "blip").is_none()
        });
        wait_in_sync(&mut mc, &mut rc);
        let on_master = snapshot(&mut mc);
        let on_replica = snapshot(&mut rc);
        // populate's limiters have 1 s windows: on a slow machine one can
        // expire between the two reads (a replica hides it at once, a
        // primary until it deletes it), so compare what both still hold.
        let now = server_ms(&mut mc);
        assert_eq!(
            alive_at(&on_replica, now),
            alive_at(&on_master, now),
            "{flavor:?}"
        );
        // The primary's deletions reach the replica, so the digests meet.
        wait_until("the replica's digest to match the primary's", || {
            digest(&mut rc) == digest(&mut mc)
        });

        // GET and LIST are read-only: a read-only replica answers them.
        assert_eq!(
            info_field(&mut rc, "replication", "role"),
            "slave",
            "{flavor:?}"
        );
        assert_eq!(get(&mut rc, "plain"), Some([5, 60_000, 0, -1]));
        assert_override(&mut rc, "early2", [6, 6000, 0], 1_700_000..=1_800_000);
        assert_eq!(get(&mut rc, "blip"), None);
        let mut on_replica = list_all(&mut rc, &["COUNT", "2"]);
        let mut on_primary = list_all(&mut mc, &["COUNT", "2"]);
        on_replica.sort();
        on_primary.sort();
        on_replica.dedup_by(|a, b| a.0 == b.0);
        on_primary.dedup_by(|a, b| a.0 == b.0);
        let names = |v: &[(String, Fields)]| v.iter().map(|e| e.0.clone()).collect::<Vec<_>>();
        assert_eq!(names(&on_replica), names(&on_primary), "{flavor:?}");
        assert_eq!(on_replica.len(), 8, "{on_replica:?}");
        let (_, matched) = list_step(
            &mut rc,
            &["RL.OVERRIDE.LIST", "0", "MATCH", "early*", "COUNT", "100"],
        );
        assert_eq!(matched.len(), 2, "{matched:?}");
        // SET and DEL are writes, refused there.
        for args in [
            &["RL.OVERRIDE.SET", "x", "1", "1"][..],
            &["RL.OVERRIDE.DEL", "plain"][..],
        ] {
            let err = cmd(&mut rc, args).unwrap_err();
            assert!(err.starts_with("READONLY "), "{flavor:?} {args:?}: {err}");
        }
        // Nothing written there (populate's limiters with 1 s windows may
        // have expired meanwhile).
        let after = snapshot(&mut rc);
        let now = server_ms(&mut rc);
        assert_eq!(
            alive_at(&after, now),
            alive_at(&on_master, now),
            "{flavor:?}"
        );
    });
}

/// RL.FIXED has no BURST, but an override may carry one (for TOKEN). A
/// FIXED call using such an override must still replay the same on a
/// replica and from the AOF.
#[test]
fn fixed_using_an_override_with_burst_replays_the_same() {
    for_each_flavor(|flavor| {
        let mut master = start_primary(flavor, &AOF);
        let replica = start_replica(&master);
        let mut mc = master.conn();
        let mut rc = replica.conn();
        ok(&mut mc, &["RL.OVERRIDE.SET", "o", "4", "1m", "BURST", "50"]);
        assert_eq!(
            limiter(
                &mut mc,
                &["RL.FIXED", "k", "100", "1s", "OVERRIDE", "o", "COST", "3"]
            ),
            [1, 3, 0, 4, 1, 60_000]
        );
        let on_master = snapshot(&mut mc);
        wait_in_sync(&mut mc, &mut rc);
        let on_replica = snapshot(&mut rc);
        master.restart();
        let mut mc = master.conn();
        let after_aof = snapshot(&mut mc);
        let keys = |s: &[(Vec<u8>, Vec<u8>, i64)]| {
            s.iter()
                .map(|(k, _, _)| String::from_utf8_lossy(k).into_owned())
                .collect::<Vec<_>>()
        };
        assert!(
            on_replica == on_master && after_aof == on_master,
            "{flavor:?}: master has {:?}; replica has {:?}; AOF restart has {:?}\nmaster log:\n{}",
            keys(&on_master),
            keys(&on_replica),
            keys(&after_aof),
            master
                .log()
                .lines()
                .filter(|l| l.contains("RL.") || l.contains("rror"))
                .collect::<Vec<_>>()
                .join("\n"),
        );
    });
}

#[test]
fn dump_restore_copy_and_rename_give_working_overrides() {
    on_each_server(|_, con| {
        ok(
            con,
            &["RL.OVERRIDE.SET", "o", "7", "1m", "BURST", "9", "TTL", "1h"],
        );
        let o_at = pexpiretime(con, "o");
        let payload: Vec<u8> = redis::cmd("DUMP").arg("o").query(con).unwrap();
        assert_eq!(
            call(con, &[b"RESTORE", b"r", b"0", &payload]),
            Ok(Value::Okay)
        );
        assert_eq!(get(con, "r"), Some([7, 60_000, 9, -1]));
        assert_eq!(
            call(con, &[b"RESTORE", b"rt", b"5000", &payload]),
            Ok(Value::Okay)
        );
        assert_override(con, "rt", [7, 60_000, 9], 4000..=5000);

        assert_eq!(cmd(con, &["COPY", "o", "c"]), Ok(Value::Int(1)));
        assert_override(con, "c", [7, 60_000, 9], 3_500_000..=3_600_000);
        assert_eq!(pexpiretime(con, "c"), o_at);
        assert_eq!(cmd(con, &["RENAME", "c", "rn"]), Ok(Value::Okay));
        assert_eq!(pexpiretime(con, "rn"), o_at);
        assert_override(con, "rn", [7, 60_000, 9], 3_500_000..=3_600_000);

        assert_replies(con, "RL.FIXED k 100 1s OVERRIDE r", [1, 1, 0, 7, 6, 60_000]);
        assert_replies(
            con,
            "RL.TOKEN t 100 1s OVERRIDE rn COST 9",
            [1, 9, 0, 9, 0, 77_143],
        );
        assert_eq!(
            limiter(
                con,
                &["RL.TOKEN", "t2", "100", "1s", "OVERRIDE", "rt", "PEEK"]
            )[3],
            9
        );
        let names: BTreeSet<String> = list_all(con, &[]).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["o", "r", "rt", "rn"].map(String::from).into());
        assert_eq!(
            cmd(con, &["RL.OVERRIDE.DEL", "o", "r", "rt", "rn"]),
            Ok(Value::Int(4))
        );
    });
}

// ---------------------------------------------------------------------------
// Command metadata

#[test]
fn override_commands_declare_keys_and_flags() {
    on_each_server(|_, con| {
        let getkeys = |con: &mut redis::Connection, args: &[&str]| {
            let mut full = vec!["COMMAND", "GETKEYS"];
            full.extend(args);
            strings(&cmd(con, &full).unwrap_or_else(|e| panic!("{args:?}: {e}")))
        };
        assert_eq!(
            getkeys(con, &["RL.OVERRIDE.DEL", "a", "b", "c"]),
            ["a", "b", "c"]
        );
        assert_eq!(getkeys(con, &["RL.OVERRIDE.DEL", "a"]), ["a"]);
        assert_eq!(
            getkeys(
                con,
                &["RL.OVERRIDE.SET", "o", "5", "60", "BURST", "2", "TTL", "1h"]
            ),
            ["o"]
        );
        assert_eq!(getkeys(con, &["RL.OVERRIDE.GET", "o"]), ["o"]);

        let flags = |con: &mut redis::Connection, command: &str| {
            strings(&cmd(con, &["COMMAND", "INFO", command]).unwrap())
        };
        for command in ["RL.OVERRIDE.GET", "RL.OVERRIDE.LIST"] {
            let info = flags(con, command);
            assert!(info.iter().any(|f| f == "readonly"), "{command}: {info:?}");
            assert!(!info.iter().any(|f| f == "write"), "{command}: {info:?}");
        }
        for command in ["RL.OVERRIDE.SET", "RL.OVERRIDE.DEL"] {
            let info = flags(con, command);
            assert!(info.iter().any(|f| f == "write"), "{command}: {info:?}");
            assert!(!info.iter().any(|f| f == "readonly"), "{command}: {info:?}");
        }
        let set = flags(con, "RL.OVERRIDE.SET");
        assert!(set.iter().any(|f| f == "denyoom"), "{set:?}");
        for (command, arity) in [
            ("RL.OVERRIDE.SET", "-4"),
            ("RL.OVERRIDE.GET", "2"),
            ("RL.OVERRIDE.DEL", "-2"),
            ("RL.OVERRIDE.LIST", "-2"),
        ] {
            let info = flags(con, command);
            assert_eq!(
                info.get(1).map(String::as_str),
                Some(arity),
                "{command}: {info:?}"
            );
        }
    });
}

// ---------------------------------------------------------------------------
// The container form: RL.OVERRIDE SET|GET|DEL|LIST

/// Replies with the command names of the container form spelled as the
/// dotted ones, `prefix` taken off every string, and a TTL told only by
/// its sign (the two runs are moments apart). A LIST reply's entries
/// (`ttl_at` 5) are sorted: their order is the keyspace's.
fn comparable(reply: Result<Value, String>, prefix: &str, ttl_at: Option<usize>) -> Vec<String> {
    match reply {
        Err(e) => {
            let mut e = e;
            for sub in ["SET", "GET", "DEL", "LIST"] {
                e = e.replace(&format!("RL.OVERRIDE {sub}"), &format!("RL.OVERRIDE.{sub}"));
            }
            vec![format!("error: {}", e.replace(prefix, ""))]
        }
        Ok(v) => {
            let mut words: Vec<String> = strings(&v)
                .into_iter()
                .map(|w| w.strip_prefix(prefix).map(str::to_string).unwrap_or(w))
                .collect();
            if let Some(at) = ttl_at {
                for w in words.iter_mut().skip(at).step_by(5) {
                    if w.parse::<i64>().is_ok_and(|ttl| ttl > 0) {
                        *w = "ttl>0".into();
                    }
                }
            }
            if ttl_at == Some(5) {
                let cursor = words.remove(0);
                let mut entries: Vec<Vec<String>> =
                    words.chunks(5).map(<[String]>::to_vec).collect();
                entries.sort();
                words = [vec![cursor], entries.concat()].concat();
            }
            words
        }
    }
}

/// docs/overrides.md: the dotted names stay as aliases with identical
/// behaviour. The same calls, once by the dotted names on `d:` keys and
/// once by the container form (subcommands in every case) on `c:` keys,
/// get the same replies and leave the same values.
#[test]
fn container_form_answers_exactly_as_the_dotted_names() {
    on_each_server(|server, con| {
        let flavor = server.flavor;
        // (subcommand, arguments with {p} for the prefix, where GET's or
        // LIST's TTLs stand)
        let steps: &[(&str, &[&str], Option<usize>)] = &[
            ("GET", &["{p}none"], None),
            ("LIST", &["0", "MATCH", "{p}*"], None),
            ("SET", &["{p}a", "5", "60"], None),
            ("GET", &["{p}a"], Some(3)),
            ("SET", &["{p}b", "7", "1500ms", "BURST", "20"], None),
            ("SET", &["{p}c", "3", "2h", "TTL", "10m"], None),
            ("GET", &["{p}c"], Some(3)),
            ("SET", &["{p}d", "1", "1d", "ttl", "1h", "burst", "2"], None),
            ("SET", &["{p}b", "9", "1s"], None),
            ("GET", &["{p}b"], Some(3)),
            ("LIST", &["0", "COUNT", "1000", "MATCH", "{p}*"], Some(5)),
            ("DEL", &["{p}a"], None),
            ("DEL", &["{p}a"], None),
            ("DEL", &["{p}b", "{p}c", "{p}missing"], None),
            ("GET", &["{p}a"], None),
            ("SET", &["{p}l", "5", "60"], None),
            ("SET", &["{p}l", "0", "60"], None),
            ("SET", &["{p}l", "5", "60", "COST", "1"], None),
            ("SET", &["{p}l", "5", "60", "FOO"], None),
            ("SET", &["{p}l", "5"], None),
            ("GET", &["{p}l", "extra"], None),
            ("DEL", &[], None),
            ("LIST", &["x"], None),
            ("LIST", &["0", "COUNT", "0"], None),
            ("GET", &["{p}limiter"], None),
            ("SET", &["{p}limiter", "5", "60"], None),
            ("DEL", &["{p}d", "{p}limiter"], None),
            ("LIST", &["0", "MATCH", "{p}*", "COUNT", "1000"], Some(5)),
        ];
        let mut runs = Vec::new();
        for (prefix, form) in [("d:", Form::Dotted), ("c:", Form::Container)] {
            limiter(con, &["RL.FIXED", &format!("{prefix}limiter"), "5", "60"]);
            let mut replies = Vec::new();
            for (n, (sub, args, ttl_at)) in steps.iter().enumerate() {
                let args: Vec<String> = args.iter().map(|a| a.replace("{p}", prefix)).collect();
                let mut argv: Vec<String> = match form {
                    Form::Dotted => vec![format!("RL.OVERRIDE.{sub}")],
                    Form::Container => {
                        // The subcommand in upper, lower and mixed case.
                        let spelled: String = match n % 4 {
                            0 => sub.to_string(),
                            1 => sub.to_lowercase(),
                            2 => format!("{}{}", &sub[..1], sub[1..].to_lowercase()),
                            _ => sub
                                .chars()
                                .enumerate()
                                .map(|(i, c)| {
                                    if i % 2 == 0 {
                                        c.to_ascii_lowercase()
                                    } else {
                                        c
                                    }
                                })
                                .collect(),
                        };
                        vec!["RL.OVERRIDE".into(), spelled]
                    }
                };
                argv.extend(args);
                let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
                replies.push((argv.join(" "), comparable(cmd(con, &argv), prefix, *ttl_at)));
                // A limiter reads the override the same way.
                let okey = format!("{prefix}a");
                replies.push((
                    "RL.FIXED ... OVERRIDE a".into(),
                    comparable(
                        cmd(
                            con,
                            &[
                                "RL.FIXED",
                                &format!("{prefix}f{n}"),
                                "9",
                                "1h",
                                "OVERRIDE",
                                &okey,
                                "PEEK",
                            ],
                        ),
                        prefix,
                        None,
                    ),
                ));
            }
            runs.push(replies);
        }
        for ((dotted_call, dotted), (container_call, container)) in runs[0].iter().zip(&runs[1]) {
            assert_eq!(
                container, dotted,
                "{flavor:?}: {container_call:?} answered otherwise than {dotted_call:?}"
            );
        }
        // The same overrides, expiring or not alike (the limiter each run
        // made as a WRONGTYPE target holds its own time).
        let snap = snapshot(con);
        let values = |prefix: &str| -> Vec<(Vec<u8>, Vec<u8>, bool)> {
            snap.iter()
                .filter_map(|(k, v, at)| {
                    k.strip_prefix(prefix.as_bytes())
                        .filter(|k| *k != b"limiter")
                        .map(|k| (k.to_vec(), v.clone(), *at > 0))
                })
                .collect()
        };
        assert!(values("d:").len() >= 2, "{flavor:?}: {snap:?}");
        assert_eq!(values("c:"), values("d:"), "{flavor:?}");
    });
}

/// The container form goes through a replica and an AOF replay as the
/// dotted names do; a read-only replica serves GET and LIST, and refuses
/// SET and DEL, in the container form too.
#[test]
fn container_form_replicates_and_replays_like_the_dotted_names() {
    for_each_flavor(|flavor| {
        let mut primary = start_primary(flavor, &AOF);
        let replica = start_replica(&primary);
        let (mut pc, mut rc) = (primary.conn(), replica.conn());
        populate_as(&mut pc, Form::Container);
        wait_in_sync(&mut pc, &mut rc);
        // (populate's limiters with 1 s windows may expire between the two
        // snapshots, or before the restart below.)
        let on_primary = snapshot(&mut pc);
        let on_replica = snapshot(&mut rc);
        let now = server_ms(&mut rc);
        assert_same_snapshot(
            &alive_at(&on_replica, now),
            &alive_at(&on_primary, now),
            &format!("{flavor:?} replica"),
        );
        let mut pc = crash_and_restart(&mut primary);
        let replayed = snapshot(&mut pc);
        let now = server_ms(&mut pc);
        assert_same_snapshot(
            &alive_at(&replayed, now),
            &alive_at(&on_primary, now),
            &format!("{flavor:?}: AOF replay"),
        );

        // A read-only replica serves GET and LIST, and refuses SET and DEL.
        assert_eq!(
            cmd(&mut rc, &["RL.OVERRIDE", "GET", "plain"]).map(|v| strings(&v)),
            Ok(["5", "60000", "0", "-1"].map(String::from).to_vec()),
            "{flavor:?}"
        );
        let listed = cmd(&mut rc, &["RL.OVERRIDE", "LIST", "0", "COUNT", "1000"]).unwrap();
        assert!(
            strings(&listed).iter().any(|w| w == "burst"),
            "{flavor:?}: {listed:?}"
        );
        for args in [
            &["RL.OVERRIDE", "SET", "x", "1", "1"][..],
            &["RL.OVERRIDE", "del", "plain"],
        ] {
            let err = cmd(&mut rc, args).unwrap_err();
            assert!(err.starts_with("READONLY "), "{flavor:?} {args:?}: {err}");
        }
        assert_populated(&mut pc);
    });
}
