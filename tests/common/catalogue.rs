//! The error catalogues' machinery (tests/errors.rs, tests/lifecycle_errors.rs):
//! the expected messages, spelled out here rather than imported from the
//! module so that a changed message shows up as a contract change; the
//! bad numbers every amount refuses; and the runner that sends each row,
//! checks its exact error, that the server still answers at once, and
//! that the dataset did not change.

use super::{
    blocked_clients, call, cmd, digest, log_is_clean, on_each_server, snapshot, Flavor, Snapshot,
};
use redis::Value;

/// The error a row must get.
#[derive(Clone, Debug)]
pub enum Want {
    Exact(String),
    /// For replies with a variable tail (a script's name, say).
    Prefix(String),
}

impl Want {
    fn accepts(&self, line: &str) -> bool {
        match self {
            Want::Exact(w) => line == w,
            Want::Prefix(w) => line.starts_with(w.as_str()),
        }
    }

    fn text(&self) -> &String {
        match self {
            Want::Exact(w) | Want::Prefix(w) => w,
        }
    }
}

/// One row of a catalogue: what it checks, the words sent, the error.
#[derive(Clone)]
pub struct Row {
    pub what: String,
    pub argv: Vec<Vec<u8>>,
    pub want: Want,
}

/// A row that must get exactly `want`.
pub fn row(what: impl Into<String>, argv: &[&[u8]], want: impl Into<String>) -> Row {
    Row {
        what: what.into(),
        argv: argv.iter().map(|a| a.to_vec()).collect(),
        want: Want::Exact(want.into()),
    }
}

/// Bytes as a row's name shows them.
pub fn show(bytes: &[u8]) -> String {
    format!("{:?}", bytes.escape_ascii().to_string())
}

pub fn amount_error(name: &str) -> String {
    format!("ERR {name} must be an integer from 1 to 1125899906842624 (2^50)")
}

/// COST alone takes 0 (a read), so its message names 0 as the least.
pub fn cost_error() -> String {
    "ERR COST must be an integer from 0 to 1125899906842624 (2^50)".into()
}

pub fn duration_error(name: &str) -> String {
    format!(
        "ERR {name} must be a duration from 1ms to 3650d: a positive integer \
         with an optional unit ms, s, m, h or d (bare integers are seconds)"
    )
}

pub fn wait_error(name: &str) -> String {
    format!(
        "ERR {name} must be 0 or a duration up to 3650d: a non-negative integer \
         with an optional unit ms, s, m, h or d (bare integers are seconds)"
    )
}

pub fn arity_error(command: &str) -> String {
    format!("ERR wrong number of arguments for '{command}' command")
}

pub fn unknown_option(command: &str, shown: &str) -> String {
    format!("ERR unknown option '{shown}' for {command}")
}

pub fn not_an_option(command: &str, option: &str) -> String {
    format!("ERR {option} is not an option of {command}")
}

pub fn exclusive(a: &str, b: &str) -> String {
    format!("ERR options {a} and {b} cannot be given together")
}

pub fn repeated(option: &str) -> String {
    format!("ERR option {option} is given more than once")
}

pub fn needs_value(option: &str) -> String {
    format!("ERR option {option} needs a value")
}

pub fn wrongtype(owner: &str) -> String {
    format!(
        "WRONGTYPE Operation against a key holding the wrong kind of value \
         (expected {owner} or no key)"
    )
}

pub fn newer_version(version: u8) -> String {
    format!(
        "ERR key holds a librl value of encoding version {version}, \
         which this librl does not know; upgrade the module"
    )
}

pub const CORRUPT: &str = "ERR key holds a corrupt librl value";

pub const INVALID_CURSOR: &str = "ERR invalid cursor";

/// Bad as durations (a window, BLOCK): zero in every unit, signs,
/// fractions, spacing, unknown units, and just past 3650d in every unit.
pub const BAD_DURATIONS: &[&[u8]] = &[
    b"10x",
    b"ms",
    b"s",
    b"d",
    b"-5s",
    b"+5s",
    b"1.5s",
    b"0.5s",
    b"0ms",
    b"0s",
    b"0d",
    b"05s",
    b"0x10s",
    b"5 s",
    b"5 ms",
    b" 5s",
    b"5s ",
    b"5sec",
    b"5msms",
    b"5us",
    b"5\xc2\xb5s",
    b"1w",
    b"1y",
    b"1h30m",
    b"1d1",
    b"3651d",
    b"87601h",
    b"5256001m",
    b"315360001",
    b"315360001s",
    b"315360000001ms",
    b"99999999999999999999d",
    b"0m",
    b"0h",
    b"-1h",
];

/// Not integers from 1 to 2^50, whatever the argument: bad for every
/// amount and, as they carry no valid unit either, for every duration.
pub const BAD_NUMBERS: &[&[u8]] = &[
    b"",
    b"abc",
    b"-5",
    b"-0",
    b"0",
    b"00",
    b"1.5",
    b"5.0",
    b"0x10",
    b" 5",
    b"5 ",
    b"+5",
    b"05",
    b"1e3",
    b"5\x00",
    b"\xff",
    // Fullwidth digit five: a digit to Unicode, not to Redis.
    b"\xef\xbc\x95",
    // 2^50 + 1, 2^63, 2^64 and 30 digits.
    b"1125899906842625",
    b"9223372036854775808",
    b"18446744073709551616",
    b"123456789012345678901234567890",
];

/// Which keys differ between two snapshots, and how.
pub fn changes(before: &Snapshot, after: &Snapshot) -> String {
    let mut out = Vec::new();
    for (key, dump, at) in after {
        match before.iter().find(|(k, _, _)| k == key) {
            None => out.push(format!("created {}", show(key))),
            Some((_, d, _)) if d != dump => out.push(format!("rewrote {}", show(key))),
            Some((_, _, a)) if a != at => {
                out.push(format!("expiry of {} moved {a} -> {at}", show(key)))
            }
            Some(_) => {}
        }
    }
    for (key, _, _) in before {
        if !after.iter().any(|(k, _, _)| k == key) {
            out.push(format!("deleted {}", show(key)));
        }
    }
    out.join(", ")
}

/// Runs every row; returns one line per failure: a reply other than the
/// row's error, a server that no longer answers at once (nothing may hold
/// the connection, a WAIT say; the run stops there), a dataset changed
/// (every key's DUMP and absolute expiry, and DEBUG DIGEST).
pub fn run_catalogue(con: &mut redis::Connection, rows: &[Row]) -> Vec<String> {
    let mut failures = Vec::new();
    let mut before = snapshot(con);
    let mut digest_before = digest(con);
    for r in rows {
        let args: Vec<&[u8]> = r.argv.iter().map(Vec::as_slice).collect();
        let reply = call(con, &args);
        let ok = matches!(&reply, Err(line) if r.want.accepts(line));
        if !ok {
            failures.push(format!(
                "{}\n      sent {:?}\n      got  {reply:?}\n      want {:?}",
                r.what,
                args.iter()
                    .map(|a| a.escape_ascii().to_string())
                    .collect::<Vec<_>>(),
                r.want.text()
            ));
        }
        match cmd(con, &["PING"]) {
            Ok(Value::SimpleString(s)) if s == "PONG" => {}
            other => {
                failures.push(format!(
                    "{}: the server stopped answering: {other:?}",
                    r.what
                ));
                break;
            }
        }
        let after = snapshot(con);
        let digest_after = digest(con);
        if after != before || digest_after != digest_before {
            failures.push(format!(
                "{}: the dataset changed: {} (digest {digest_before} -> {digest_after})",
                r.what,
                changes(&before, &after)
            ));
            before = after;
            digest_before = digest_after;
        }
    }
    failures
}

/// Runs the whole catalogue on `server`'s connection and fails listing
/// every row that failed; the dataset must end as it began (every key's
/// DUMP and absolute expiry, and DEBUG DIGEST).
pub fn assert_catalogue(con: &mut redis::Connection, flavor: Flavor, rows: &[Row]) {
    let start = snapshot(con);
    let digest_start = digest(con);
    let failures = run_catalogue(con, rows);
    assert!(
        failures.is_empty(),
        "{flavor:?}: {} failure(s) among {} rows:\n  {}",
        failures.len(),
        rows.len(),
        failures.join("\n  ")
    );
    assert_eq!(snapshot(con), start, "{flavor:?}");
    assert_eq!(digest(con), digest_start, "{flavor:?}");
}

/// A catalogue test, on a fresh server of each flavor: `prepare` writes
/// the keys the rows aim at and makes the control calls (valid calls that
/// differ from the rows in one respect, so that each row's error is its
/// own); then each row of `catalogue(flavor)`, more than `at_least` of
/// them, must be refused with its exact error, changing nothing, blocking
/// no client and logging no crash. The catalogue's text (what the rows
/// are) ends the summary line.
pub fn refuse_on_each_server(
    at_least: usize,
    prepare: impl Fn(&mut redis::Connection) + Sync,
    catalogue: impl Fn(Flavor) -> (Vec<Row>, String) + Sync,
) {
    on_each_server(|server, con| {
        let flavor = server.flavor;
        let (rows, what) = catalogue(flavor);
        assert!(
            rows.len() > at_least,
            "the catalogue shrank: {}",
            rows.len()
        );
        prepare(con);
        assert_eq!(blocked_clients(con), 0, "{flavor:?}");
        assert_catalogue(con, flavor, &rows);
        assert_eq!(blocked_clients(con), 0, "{flavor:?}");
        log_is_clean(&server.log(), &format!("{flavor:?}"));
        eprintln!("{flavor:?}: {} {what}", rows.len());
    });
}
