//! Bad input for the options of a request's whole life (docs/commands.md,
//! Errors and "A request's whole life"), catalogued in the style of
//! tests/errors.rs: every failure path of REFUND, BLOCK, RESERVE and WAIT
//! (bad values, missing values, repeats, options that exclude each other,
//! options of other commands, in RL.ALL clauses too, keys of the wrong
//! kind, tampered values of the layouts these options write) is answered by
//! its exact error; the server keeps answering, no client is left blocked,
//! and the dataset stays byte for byte the same (every key's DUMP and
//! absolute expiry, and DEBUG DIGEST), checked after each row and over the
//! whole catalogue.

mod common;

use common::*;

/// Bad as a RESERVE/WAIT max_wait, which may be 0 (`0`, `0ms`, `0s`, ...):
/// every bad duration that is not a zero, and malformed zeros.
fn bad_waits() -> Vec<&'static [u8]> {
    let zeros: &[&[u8]] = &[b"0", b"0ms", b"0s", b"0m", b"0h", b"0d"];
    let mut out: Vec<&[u8]> = BAD_NUMBERS
        .iter()
        .chain(BAD_DURATIONS)
        .copied()
        .filter(|v| !zeros.contains(v))
        .collect();
    out.extend([
        &b"00"[..],
        b"00s",
        b"0x",
        b"0 ",
        b" 0",
        b"-0s",
        b"+0",
        b"0.0",
        b"0sms",
        b"0\x00",
    ]);
    out
}

/// Valid max_waits: each must be accepted (the control calls).
const GOOD_WAITS: &[&str] = &["0", "0ms", "0S", "0d", "1", "1ms", "3650d", "87600h"];

/// A limiter command's call shape: the words before the options, and the
/// command's name as its errors give it.
struct Shape {
    /// `RL.FIXED`, or `RL.ALL FIXED` for a clause.
    name: &'static str,
    /// The words up to the options (a clause: `RL.ALL FIXED ok 5 1h FIXED`).
    head: Vec<&'static [u8]>,
    /// Words after the key's positionals (APPROX).
    flags: Vec<&'static [u8]>,
    token: bool,
}

/// Every limiter shape, on `key`: the commands, and each as the second
/// clause of RL.ALL (after a valid first one).
fn shapes(key: &'static [u8]) -> Vec<Shape> {
    let mut out = Vec::new();
    for (command, clause, amount, approx, token) in [
        ("RL.FIXED", "RL.ALL FIXED", "5", false, false),
        ("RL.SLIDING", "RL.ALL SLIDING", "5", false, false),
        ("RL.SLIDING", "RL.ALL SLIDING", "5", true, false),
        ("RL.TOKEN", "RL.ALL TOKEN", "5", false, true),
    ] {
        let flags: Vec<&'static [u8]> = if approx { vec![b"APPROX"] } else { vec![] };
        out.push(Shape {
            name: command,
            head: vec![command.as_bytes(), key, amount.as_bytes(), b"1h"],
            flags: flags.clone(),
            token,
        });
        let word = &clause["RL.ALL ".len()..];
        out.push(Shape {
            name: clause,
            head: vec![
                b"RL.ALL",
                b"FIXED",
                b"all:first",
                b"5",
                b"1h",
                word.as_bytes(),
                key,
                amount.as_bytes(),
                b"1h",
            ],
            flags,
            token,
        });
    }
    out
}

impl Shape {
    fn with<'a>(&'a self, options: &[&'a [u8]]) -> Vec<&'a [u8]> {
        let mut argv: Vec<&[u8]> = self.head.clone();
        argv.extend(&self.flags);
        argv.extend(options);
        argv
    }
}

/// The rows every option with a value has, through `add`: the option
/// with each of the `bad` values, and with one after its name in lower
/// case (names are case-insensitive), refused with the option's error;
/// the option without its value; and the option twice, with the values
/// `twice`.
fn value_option_rows(
    add: &mut impl FnMut(String, &[&[u8]], String),
    option: &str,
    bad: &[&[u8]],
    lower_case_bad: &[u8],
    twice: &[&[u8]; 2],
) {
    let invalid = match option {
        "REFUND" => amount_error(option),
        "BLOCK" => duration_error(option),
        _ => wait_error(option),
    };
    let o = option.as_bytes();
    let lower = option.to_ascii_lowercase();
    for value in bad {
        add(
            format!("{option} {}", value.escape_ascii()),
            &[o, value],
            invalid.clone(),
        );
    }
    add(
        format!("{lower} {}", lower_case_bad.escape_ascii()),
        &[lower.as_bytes(), lower_case_bad],
        invalid,
    );
    add(format!("{option} alone"), &[o], needs_value(option));
    add(
        format!("{option} twice"),
        &[o, twice[0], o, twice[1]],
        repeated(option),
    );
}

/// Rows of options that exclude each other (`pair`), through `add`: each
/// of `lists`, words separated by a space, is refused naming the pair.
fn exclusive_rows(
    add: &mut impl FnMut(String, &[&[u8]], String),
    pair: (&str, &str),
    lists: &[&str],
) {
    for options in lists {
        let words: Vec<&[u8]> = options.split(' ').map(str::as_bytes).collect();
        add(options.to_string(), &words, exclusive(pair.0, pair.1));
    }
}

/// The rows of one shape aimed at one key.
fn shape_rows(shape: &Shape, key: &str) -> Vec<Row> {
    let mut rows = Vec::new();
    let n = shape.name;
    let mut add = |what: String, options: &[&[u8]], want: String| {
        rows.push(row(
            format!("{n} {key}: {what}"),
            &shape.with(options),
            want,
        ));
    };
    // REFUND's amount.
    value_option_rows(&mut add, "REFUND", BAD_NUMBERS, b"x", &[b"1", b"2"]);
    add(
        "REFUND at the end".into(),
        &[b"PEEK", b"REFUND"],
        needs_value("REFUND"),
    );
    add(
        "REFUND and refund".into(),
        &[b"REFUND", b"1", b"refund", b"1"],
        repeated("REFUND"),
    );
    // REFUND with COST, in either order, whatever else.
    exclusive_rows(
        &mut add,
        ("COST", "REFUND"),
        &[
            "COST 1 REFUND 1",
            "REFUND 1 COST 1",
            "refund 5 PEEK cost 2",
            "COST 2 BLOCK 1h REFUND 1",
            "REFUND 3 OVERRIDE ovr:a COST 3",
        ],
    );
    // A bad value is found before the options are weighed together.
    add(
        "COST and REFUND with a bad BLOCK".into(),
        &[b"COST", b"2", b"REFUND", b"1", b"BLOCK", b"0"],
        duration_error("BLOCK"),
    );
    add(
        "COST and a bad REFUND".into(),
        &[b"COST", b"2", b"REFUND", b"x"],
        amount_error("REFUND"),
    );
    // COST 0 is a read, and still a COST: never with REFUND.
    add(
        "COST 0 and REFUND".into(),
        &[b"COST", b"0", b"REFUND", b"1"],
        exclusive("COST", "REFUND"),
    );
    add(
        "a bad COST and REFUND".into(),
        &[b"COST", b"-1", b"REFUND", b"1"],
        cost_error(),
    );
    // BLOCK's duration.
    let bad: Vec<&[u8]> = BAD_NUMBERS.iter().chain(BAD_DURATIONS).copied().collect();
    value_option_rows(&mut add, "BLOCK", &bad, b"0", &[b"1h", b"1h"]);
    add(
        "BLOCK twice with REFUND".into(),
        &[b"BLOCK", b"1h", b"REFUND", b"1", b"Block", b"2h"],
        repeated("BLOCK"),
    );
    if shape.token {
        for option in ["RESERVE", "WAIT"] {
            let o = option.as_bytes();
            value_option_rows(&mut add, option, &bad_waits(), b"-1", &[b"1s", b"1s"]);
            add(
                format!("{option} twice, once bad"),
                &[o, b"1s", o, b"x"],
                repeated(option),
            );
            // REFUND reserves nothing.
            add(
                format!("REFUND with {option}"),
                &[b"REFUND", b"1", o, b"1s"],
                exclusive("REFUND", option),
            );
            add(
                format!("{option} with REFUND"),
                &[o, b"0", b"PEEK", b"REFUND", b"1"],
                exclusive("REFUND", option),
            );
        }
        exclusive_rows(
            &mut add,
            ("RESERVE", "WAIT"),
            &[
                "RESERVE 1s WAIT 1s",
                "WAIT 1s RESERVE 1s",
                "wait 0 BLOCK 1h reserve 0",
            ],
        );
        add(
            "COST, REFUND and WAIT".into(),
            &[b"COST", b"1", b"REFUND", b"1", b"WAIT", b"1s"],
            exclusive("COST", "REFUND"),
        );
        add(
            "RESERVE, WAIT and a bad BLOCK".into(),
            &[b"RESERVE", b"1s", b"WAIT", b"1s", b"BLOCK", b"-1"],
            duration_error("BLOCK"),
        );
    } else {
        // RESERVE and WAIT are TOKEN's alone, with any value.
        for option in ["RESERVE", "WAIT"] {
            for value in [&b"1s"[..], b"0", b"x"] {
                add(
                    format!("{option} {}", value.escape_ascii()),
                    &[option.as_bytes(), value],
                    not_an_option(n, option),
                );
            }
            let lower = option.to_ascii_lowercase();
            add(
                format!("{lower} after REFUND"),
                &[b"REFUND", b"1", lower.as_bytes(), b"1s"],
                not_an_option(n, option),
            );
            add(
                format!("{option} alone"),
                &[option.as_bytes()],
                not_an_option(n, option),
            );
        }
    }
    rows
}

/// The new options on RL.OVERRIDE.SET and its container form: none is its.
fn override_rows() -> Vec<Row> {
    let mut rows = Vec::new();
    for (name, head) in [
        (
            "RL.OVERRIDE.SET",
            vec![&b"RL.OVERRIDE.SET"[..], b"ovr:new", b"5", b"1h"],
        ),
        (
            "RL.OVERRIDE SET",
            vec![&b"RL.OVERRIDE"[..], b"SET", b"ovr:new", b"5", b"1h"],
        ),
    ] {
        for (option, value) in [
            ("REFUND", &b"1"[..]),
            ("BLOCK", b"1h"),
            ("RESERVE", b"1s"),
            ("WAIT", b"0"),
        ] {
            let mut argv = head.clone();
            argv.extend([option.as_bytes(), value]);
            rows.push(row(
                format!("{name} {option}"),
                &argv,
                not_an_option(name, option),
            ));
        }
    }
    rows
}

/// Keys of one kind used with the options of another: WRONGTYPE, before
/// anything is decided, the option's own checks having passed.
fn wrongtype_rows() -> Vec<Row> {
    let fixed = wrongtype("an RL.FIXED limiter");
    let sliding = wrongtype("an RL.SLIDING limiter");
    let approx = wrongtype("an RL.SLIDING APPROX limiter");
    let token = wrongtype("an RL.TOKEN limiter");
    let rows: Vec<(&str, &String)> = vec![
        ("RL.FIXED tok:debt 5 1h REFUND 1", &fixed),
        ("RL.FIXED tok:debt 5 1h BLOCK 1h", &fixed),
        ("RL.FIXED sl:blocked 5 1h REFUND 1", &fixed),
        ("RL.FIXED list 5 1h BLOCK 1h PEEK", &fixed),
        ("RL.FIXED string 5 1h REFUND 1", &fixed),
        ("RL.FIXED ovr:a 5 1h REFUND 1", &fixed),
        ("RL.SLIDING fix:blocked 5 1h REFUND 1", &sliding),
        ("RL.SLIDING ap:a 5 1h BLOCK 1h", &sliding),
        ("RL.SLIDING sl:blocked 5 1h APPROX REFUND 1", &approx),
        ("RL.SLIDING hash 5 1h APPROX BLOCK 1h", &approx),
        ("RL.TOKEN fix:blocked 5 1h RESERVE 1m", &token),
        ("RL.TOKEN fix:a 5 1h WAIT 1m", &token),
        ("RL.TOKEN sl:blocked 5 1h REFUND 1", &token),
        ("RL.TOKEN list 5 1h WAIT 1m PEEK", &token),
        ("RL.TOKEN zset 5 1h RESERVE 0 BLOCK 1h", &token),
        (
            "RL.ALL FIXED all:first 5 1h TOKEN fix:blocked 5 1h WAIT 1m",
            &token,
        ),
        (
            "RL.ALL TOKEN tok:debt 5 1h REFUND 1 FIXED tok:a 5 1h",
            &fixed,
        ),
    ];
    rows.into_iter()
        .map(|(call, want)| {
            let argv: Vec<&[u8]> = call.split(' ').map(str::as_bytes).collect();
            row(call, &argv, want.clone())
        })
        .collect()
}

/// Tampered values of the layouts these options write: the block wrapper
/// (version 2, tag `B`, the block's end, then the limiter's own value), a
/// version byte no librl knows (4), and the current block wrapper (version
/// 3: the end as a varint) cut short or around a value that counts from a
/// key's expiry, which a value inside a block never does.
fn tampered_values() -> Vec<(&'static str, Vec<u8>)> {
    let until = (FAR as u64).to_le_bytes();
    let fixed = fixed_v1(FAR as u64, FAR as u64 + 1000, 2);
    vec![
        ("bad:block-short", b"\x00rl\x02B\x01\x02\x03".to_vec()),
        ("bad:block-header", b"\x00rl\x02B".to_vec()),
        (
            "bad:block-inner-short",
            [&b"\x00rl\x02B"[..], &until, &fixed[..20]].concat(),
        ),
        (
            "bad:block-v4",
            [&b"\x00rl\x04B"[..], &until, &fixed].concat(),
        ),
        (
            "bad:block-inner-v4",
            [
                &b"\x00rl\x02B"[..],
                &until,
                &[0, b'r', b'l', 4],
                &fixed[4..],
            ]
            .concat(),
        ),
        ("bad:token-v4", {
            let mut t = token_v1(FAR as u64, 1000, 5);
            t[3] = 4;
            t
        }),
        ("bad:block3-short", b"\x00rl\x03B\x80".to_vec()),
        (
            "bad:block3-anchored",
            [
                &b"\x00rl\x03B\x80\x80\x80\x80\x80\x80\x01"[..],
                b"\x00rl\x03F\x02\x07",
            ]
            .concat(),
        ),
        (
            "bad:token-short-debt",
            [&token_v1(FAR as u64, 1000, 5)[..], &[1, 2, 3]].concat(),
        ),
    ]
}

fn tampered_rows() -> Vec<Row> {
    let mut rows = Vec::new();
    for (key, value) in tampered_values() {
        let want = if value[3] == 4 || value.get(13..17) == Some(&[0, b'r', b'l', 4][..]) {
            newer_version(4)
        } else {
            CORRUPT.to_string()
        };
        let command: &[u8] = if key.starts_with("bad:token") {
            b"RL.TOKEN"
        } else {
            b"RL.FIXED"
        };
        for options in [
            &[&b"REFUND"[..], b"1"][..],
            &[b"BLOCK", b"1h"],
            &[b"BLOCK", b"1h", b"PEEK"],
            &[],
        ] {
            let mut argv: Vec<&[u8]> = vec![command, key.as_bytes(), b"5", b"1h"];
            argv.extend(options);
            rows.push(row(
                format!(
                    "{} {key} {}",
                    command.escape_ascii(),
                    options.join(&b' ').escape_ascii()
                ),
                &argv,
                want.clone(),
            ));
        }
        if command == b"RL.TOKEN" {
            for options in [&[&b"RESERVE"[..], b"1m"][..], &[b"WAIT", b"1m"]] {
                let mut argv: Vec<&[u8]> = vec![command, key.as_bytes(), b"5", b"1h"];
                argv.extend(options);
                rows.push(row(
                    format!("RL.TOKEN {key} {}", options.join(&b' ').escape_ascii()),
                    &argv,
                    want.clone(),
                ));
            }
        }
    }
    rows
}

/// Live keys of every kind for the rows to aim at: limiters of each
/// algorithm (a TOKEN bucket in debt, keys under a block), an override,
/// other Redis types, and tampered values. Every key has an expiry but the
/// override and the tampered values, as a user's would.
fn seed(con: &mut redis::Connection) {
    let calls: &[&[&str]] = &[
        &["RL.FIXED", "fix:a", "5", "1h", "COST", "2"],
        &["RL.FIXED", "fix:blocked", "1", "1h"],
        &["RL.FIXED", "fix:blocked", "1", "1h", "BLOCK", "2h"],
        &["RL.SLIDING", "sl:a", "5", "1h", "COST", "2"],
        &["RL.SLIDING", "sl:blocked", "1", "1h"],
        &["RL.SLIDING", "sl:blocked", "1", "1h", "BLOCK", "2h"],
        &["RL.SLIDING", "ap:a", "5", "1h", "APPROX", "COST", "2"],
        &["RL.TOKEN", "tok:a", "5", "1h", "COST", "2"],
        &["RL.TOKEN", "tok:debt", "1", "1h", "BURST", "1"],
        &[
            "RL.TOKEN", "tok:debt", "1", "1h", "BURST", "1", "RESERVE", "1d",
        ],
        &["RL.FIXED", "all:first", "100000", "1h"],
    ];
    for args in calls {
        limiter(con, args);
    }
    ok(
        con,
        &["RL.OVERRIDE.SET", "ovr:a", "100", "1m", "BURST", "200"],
    );
    ok(con, &["SET", "string", "hello", "PX", "3600000"]);
    cmd(con, &["RPUSH", "list", "a"]).unwrap();
    cmd(con, &["HSET", "hash", "f", "v"]).unwrap();
    cmd(con, &["ZADD", "zset", "1", "m"]).unwrap();
    for (key, value) in tampered_values() {
        put(con, key, &value, 0);
    }
}

fn catalogue() -> Vec<Row> {
    let mut rows = Vec::new();
    // Arguments are checked before the key is read: the same error on a
    // live key of the right kind, a missing key, a blocked key and a key of
    // another type.
    for key in ["fix:a", "absent", "fix:blocked", "list"] {
        let k: &'static [u8] = Box::leak(key.as_bytes().to_vec().into_boxed_slice());
        for shape in shapes(k) {
            // Aim each shape at its own kind's live key, not FIXED's.
            let k = own_key(&shape, key);
            let shape = Shape {
                head: shape
                    .head
                    .iter()
                    .map(|w| if *w == key.as_bytes() { k } else { *w })
                    .collect(),
                ..shape
            };
            rows.extend(shape_rows(&shape, std::str::from_utf8(k).unwrap()));
        }
    }
    rows.extend(override_rows());
    rows.extend(wrongtype_rows());
    rows.extend(tampered_rows());
    rows
}

/// The live key of `shape`'s own kind standing for `key` (`fix:a` and
/// `fix:blocked` are FIXED's; the other kinds have their own).
fn own_key(shape: &Shape, key: &str) -> &'static [u8] {
    let approx = !shape.flags.is_empty();
    let kind = if shape.token {
        "tok"
    } else if approx {
        "ap"
    } else if shape.name.ends_with("SLIDING") {
        "sl"
    } else {
        "fix"
    };
    match (key, kind) {
        ("fix:a", "tok") => b"tok:a",
        ("fix:a", "ap") => b"ap:a",
        ("fix:a", "sl") => b"sl:a",
        ("fix:blocked", "tok") => b"tok:debt",
        ("fix:blocked", "sl") => b"sl:blocked",
        ("fix:blocked", "ap") => b"ap:a",
        _ => Box::leak(key.as_bytes().to_vec().into_boxed_slice()),
    }
}

#[test]
fn bad_lifecycle_input_is_refused_with_its_exact_error_and_changes_nothing() {
    let rows = catalogue();
    let prepare = |con: &mut redis::Connection| {
        seed(con);
        // Control: valid calls with every new option and every valid
        // max_wait (on keys the catalogue does not use).
        for wait in GOOD_WAITS {
            for option in ["RESERVE", "WAIT"] {
                let args = ["RL.TOKEN", "control:t", "1000", "1s", option, wait];
                cmd(con, &args).unwrap_or_else(|e| panic!("control call {args:?}: {e}"));
            }
        }
        for args in [
            &[
                "RL.FIXED",
                "control:f",
                "5",
                "1h",
                "REFUND",
                "1",
                "BLOCK",
                "1h",
            ][..],
            &["RL.SLIDING", "control:s", "5", "1h", "BLOCK", "1ms", "PEEK"],
            &[
                "RL.SLIDING",
                "control:a",
                "5",
                "1h",
                "APPROX",
                "REFUND",
                "2",
            ],
            &[
                "RL.TOKEN",
                "control:t",
                "5",
                "1h",
                "REFUND",
                "3",
                "BLOCK",
                "3650d",
            ],
            &[
                "RL.TOKEN",
                "control:t",
                "5",
                "1h",
                "COST",
                "2",
                "RESERVE",
                "1m",
                "BLOCK",
                "1h",
            ],
            &[
                "RL.ALL",
                "FIXED",
                "control:f",
                "5",
                "1h",
                "REFUND",
                "1",
                "TOKEN",
                "control:t",
                "5",
                "1h",
                "WAIT",
                "0",
                "BLOCK",
                "1h",
            ],
        ] {
            cmd(con, args).unwrap_or_else(|e| panic!("control call {args:?}: {e}"));
        }
        cmd(
            con,
            &["DEL", "control:t", "control:f", "control:s", "control:a"],
        )
        .unwrap();
    };
    refuse_on_each_server(1500, prepare, |_| {
        (rows.clone(), "bad lifecycle inputs refused".into())
    });
}
