//! Bad input, catalogued (SPEC, Errors): every malformed argument, option
//! and key a limiter command can be given is answered by its exact error,
//! the server keeps answering, and the dataset stays byte-for-byte the same
//! (every key's DUMP and absolute expiry, and DEBUG DIGEST), checked after
//! each case and over the whole catalogue.
//!
//! Most rows are generated from a short description of a command's grammar
//! (`Grammar`): a later command joins the catalogue as one more description
//! in `GRAMMARS`, plus rows of its own where its grammar is special. One
//! server per flavor runs the whole catalogue.

mod common;

use common::*;
use redis::Value;

/// 2^50, the largest limit, rate, capacity and COST.
const MAX_AMOUNT: &str = "1125899906842624";

// The expected replies are spelled out here rather than imported from the
// module, so that a changed message shows up as a contract change.

fn amount_error(name: &str) -> String {
    format!("ERR {name} must be an integer from 1 to 1125899906842624 (2^50)")
}

fn duration_error(name: &str) -> String {
    format!(
        "ERR {name} must be a duration from 1ms to 3650d: a positive integer \
         with an optional unit ms, s, m, h or d (bare integers are seconds)"
    )
}

fn arity_error(command: &str) -> String {
    format!("ERR wrong number of arguments for '{command}' command")
}

fn unknown_option(command: &str, shown: &str) -> String {
    format!("ERR unknown option '{shown}' for {command}")
}

fn not_an_option(command: &str, option: &str) -> String {
    format!("ERR {option} is not an option of {command}")
}

fn repeated(option: &str) -> String {
    format!("ERR option {option} is given more than once")
}

fn needs_value(option: &str) -> String {
    format!("ERR option {option} needs a value")
}

fn wrongtype(owner: &str) -> String {
    format!(
        "WRONGTYPE Operation against a key holding the wrong kind of value \
         (expected {owner} or no key)"
    )
}

fn newer_version(version: u8) -> String {
    format!(
        "ERR key holds a librl value of encoding version {version}, \
         which this librl does not know; upgrade the module"
    )
}

const CORRUPT: &str = "ERR key holds a corrupt librl value";

/// Not integers from 1 to 2^50, whatever the argument: bad for every
/// amount and, as they carry no valid unit either, for every duration.
const BAD_NUMBERS: &[&[u8]] = &[
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

/// Bad as durations only: units, signs and spacing, and just past 3650d in
/// every unit.
const BAD_DURATIONS: &[&[u8]] = &[
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
];

/// What an argument is, for the errors it can earn.
#[derive(Clone, Copy)]
enum Kind {
    /// An integer from 1 to 2^50, named so in its error.
    Amount(&'static str),
    /// A duration from 1ms to 3650d, named so in its error.
    Duration(&'static str),
    /// A key name: any bytes are fine.
    Key,
}

impl Kind {
    fn error(self) -> Option<String> {
        match self {
            Kind::Amount(name) => Some(amount_error(name)),
            Kind::Duration(name) => Some(duration_error(name)),
            Kind::Key => None,
        }
    }

    fn bad_values(self) -> Vec<&'static [u8]> {
        match self {
            Kind::Amount(_) => BAD_NUMBERS.to_vec(),
            Kind::Duration(_) => [BAD_NUMBERS, BAD_DURATIONS].concat(),
            Kind::Key => Vec::new(),
        }
    }
}

/// An option word, with its value's kind and a valid sample if it takes one.
struct Opt {
    name: &'static str,
    value: Option<(Kind, &'static str)>,
}

const fn flag(name: &'static str) -> Opt {
    Opt { name, value: None }
}

const fn valued(name: &'static str, kind: Kind, sample: &'static str) -> Opt {
    Opt {
        name,
        value: Some((kind, sample)),
    }
}

/// `command key positional... [options...]`, as far as errors go.
struct Grammar {
    command: &'static str,
    /// The positional arguments after the key, each with a valid sample.
    positional: &'static [(Kind, &'static str)],
    options: &'static [Opt],
    /// Options of other commands (with a value where they take one): each
    /// is "not an option of" this command.
    foreign: &'static [&'static [&'static str]],
    /// How its WRONGTYPE error names what the key may hold.
    owner: &'static str,
}

const RL_FIXED: Grammar = Grammar {
    command: "RL.FIXED",
    positional: &[
        (Kind::Amount("limit"), "10"),
        (Kind::Duration("window"), "60"),
    ],
    options: &[
        flag("ALIGNED"),
        valued("COST", Kind::Amount("COST"), "2"),
        valued("OVERRIDE", Kind::Key, "ovr:none"),
        flag("PEEK"),
    ],
    foreign: &[&["BURST", "5"], &["APPROX"]],
    owner: "an RL.FIXED limiter",
};

const GRAMMARS: [&Grammar; 1] = [&RL_FIXED];

impl Grammar {
    /// `command key` and the valid positional samples.
    fn base(&self, key: &[u8]) -> Vec<Vec<u8>> {
        let mut argv = vec![self.command.as_bytes().to_vec(), key.to_vec()];
        argv.extend(self.positional.iter().map(|(_, s)| s.as_bytes().to_vec()));
        argv
    }

    /// Every option once, with its sample value: a valid call.
    fn all_options(&self) -> Vec<Vec<u8>> {
        let mut words = Vec::new();
        for opt in self.options {
            words.push(opt.name.as_bytes().to_vec());
            if let Some((_, sample)) = opt.value {
                words.push(sample.as_bytes().to_vec());
            }
        }
        words
    }

    fn has_flag(&self, name: &str) -> bool {
        self.options
            .iter()
            .any(|o| o.name == name && o.value.is_none())
    }
}

enum Want {
    Exact(String),
    /// For replies with a variable tail (a script's name, say).
    Prefix(String),
}

/// How a case reaches the server.
#[derive(Clone, Copy)]
enum Via {
    Direct,
    /// From a script through `redis.pcall`, which returns the error as is.
    LuaPcall,
    /// From a script through `redis.call`, which raises it; the server
    /// appends the script's identity.
    LuaCall,
}

struct Case {
    what: String,
    /// The command and its arguments; argv[1] is the key.
    argv: Vec<Vec<u8>>,
    want: Want,
    via: Via,
}

impl Case {
    fn new(what: impl Into<String>, argv: Vec<Vec<u8>>, want: String) -> Case {
        Case {
            what: what.into(),
            argv,
            want: Want::Exact(want),
            via: Via::Direct,
        }
    }

    fn sent(&self) -> Vec<Vec<u8>> {
        let script: &[u8] = match self.via {
            Via::Direct => return self.argv.clone(),
            Via::LuaPcall => b"return redis.pcall(ARGV[1], KEYS[1], unpack(ARGV, 2))",
            Via::LuaCall => b"return redis.call(ARGV[1], KEYS[1], unpack(ARGV, 2))",
        };
        let mut argv = vec![
            b"EVAL".to_vec(),
            script.to_vec(),
            b"1".to_vec(),
            self.argv[1].clone(),
            self.argv[0].clone(),
        ];
        argv.extend(self.argv[2..].iter().cloned());
        argv
    }
}

fn with(mut argv: Vec<Vec<u8>>, more: &[&[u8]]) -> Vec<Vec<u8>> {
    argv.extend(more.iter().map(|w| w.to_vec()));
    argv
}

fn show(bytes: &[u8]) -> String {
    format!("{:?}", bytes.escape_ascii().to_string())
}

/// Rows from the grammar alone: arity, every bad value in every position,
/// and every misuse of options. `key` is where they are aimed.
fn grammar_cases(g: &Grammar, key: &[u8]) -> Vec<Case> {
    let cmd = g.command;
    let at = show(key);
    let mut cases = Vec::new();
    let base = g.base(key);

    // Too few arguments, down to the bare command name.
    for n in 1..base.len() {
        cases.push(Case::new(
            format!("{cmd} with {} arguments", n - 1),
            base[..n].to_vec(),
            arity_error(cmd),
        ));
    }

    // A positional argument left out with an option behind it: the option
    // word is read in its place (options only come after positionals).
    let filler = g
        .options
        .iter()
        .find_map(|o| o.value.map(|v| (o.name, v.1)));
    for (i, (kind, _)) in g.positional.iter().enumerate() {
        let (Some(err), Some((name, sample))) = (kind.error(), filler) else {
            continue;
        };
        let argv = with(
            base[..2 + i].to_vec(),
            &[name.as_bytes(), sample.as_bytes()],
        );
        let want = if argv.len() < base.len() {
            arity_error(cmd)
        } else {
            err
        };
        cases.push(Case::new(
            format!("{cmd} {at}: positional {} missing before {name}", i + 1),
            argv,
            want,
        ));
    }

    // Every bad value in every positional argument.
    for (i, (kind, _)) in g.positional.iter().enumerate() {
        let Some(err) = kind.error() else { continue };
        for bad in kind.bad_values() {
            let mut argv = base.clone();
            argv[2 + i] = bad.to_vec();
            cases.push(Case::new(
                format!("{cmd} {at}: positional {} = {}", i + 1, show(bad)),
                argv,
                err.clone(),
            ));
        }
    }

    let first_flag = g.options.iter().find(|o| o.value.is_none()).map(|o| o.name);
    for opt in g.options {
        let name = opt.name;
        let lower = name.to_ascii_lowercase();
        let once: Vec<&[u8]> = match opt.value {
            Some((_, sample)) => vec![name.as_bytes(), sample.as_bytes()],
            None => vec![name.as_bytes()],
        };
        let once_lower: Vec<&[u8]> = match opt.value {
            Some((_, sample)) => vec![lower.as_bytes(), sample.as_bytes()],
            None => vec![lower.as_bytes()],
        };
        // Twice, in the same and in another case.
        cases.push(Case::new(
            format!("{cmd} {at}: {name} twice"),
            with(with(base.clone(), &once), &once),
            repeated(name),
        ));
        cases.push(Case::new(
            format!("{cmd} {at}: {name} then {lower}"),
            with(with(base.clone(), &once), &once_lower),
            repeated(name),
        ));
        let Some((kind, _)) = opt.value else { continue };
        // The value missing at the end, in either case.
        for word in [name, lower.as_str()] {
            cases.push(Case::new(
                format!("{cmd} {at}: {word} without its value"),
                with(base.clone(), &[word.as_bytes()]),
                needs_value(name),
            ));
        }
        let Some(err) = kind.error() else { continue };
        for bad in kind.bad_values() {
            cases.push(Case::new(
                format!("{cmd} {at}: {name} {}", show(bad)),
                with(base.clone(), &[name.as_bytes(), bad]),
                err.clone(),
            ));
        }
        // The value left out with a flag behind it: the flag is the value.
        if let Some(flag) = first_flag {
            cases.push(Case::new(
                format!("{cmd} {at}: {name} {flag}"),
                with(base.clone(), &[name.as_bytes(), flag.as_bytes()]),
                err.clone(),
            ));
        }
    }

    // Options of other commands, in either case, with all of ours valid.
    for words in g.foreign {
        let upper = words[0].to_ascii_uppercase();
        let lower: Vec<String> = words.iter().map(|w| w.to_ascii_lowercase()).collect();
        for spelled in [words.to_vec(), lower.iter().map(String::as_str).collect()] {
            let bytes: Vec<&[u8]> = spelled.iter().map(|w| w.as_bytes()).collect();
            cases.push(Case::new(
                format!("{cmd} {at}: {}", spelled.join(" ")),
                with(base.clone(), &bytes),
                not_an_option(cmd, &upper),
            ));
            cases.push(Case::new(
                format!("{cmd} {at}: all options then {}", spelled.join(" ")),
                with([base.clone(), g.all_options()].concat(), &bytes),
                not_an_option(cmd, &upper),
            ));
        }
    }

    // Unknown words in option position, echoed printable, on one line and
    // at most 32 bytes.
    let long = "x".repeat(40);
    let shown_long = format!("{}...", "x".repeat(32));
    let unknown: &[(&[u8], &str)] = &[
        (b"FOO", "FOO"),
        (b"foo", "foo"),
        (b"", ""),
        (b"70", "70"),
        (b"COST=5", "COST=5"),
        (b"-PEEK", "-PEEK"),
        (b"PEEK ", "PEEK "),
        (b"ALIGNED\x00", "ALIGNED?"),
        (b"bad\r\nword", "bad??word"),
        (b"\xff\xfe", "??"),
        (b"\xc3\xa9t\xc3\xa9", "??t??"),
        (long.as_bytes(), &shown_long),
        (&[b'\n'; 33], "????????????????????????????????..."),
    ];
    for (word, shown) in unknown {
        cases.push(Case::new(
            format!("{cmd} {at}: unknown option {}", show(word)),
            with(base.clone(), &[word]),
            unknown_option(cmd, shown),
        ));
    }

    // The replication-only NOW is unknown to every client, scripts included.
    let now_rows: [(&[&[u8]], &str); 4] = [
        (&[b"NOW", b"5"], "NOW"),
        (&[b"now", b"1"], "now"),
        (&[b"NOW"], "NOW"),
        (&[b"PEEK", b"NOW", b"0"], "NOW"),
    ];
    for (words, shown) in now_rows {
        let argv = with(base.clone(), words);
        let want = unknown_option(cmd, shown);
        let what = format!("{cmd} {at}: {}", show(&words.join(&b' ')));
        cases.push(Case {
            via: Via::LuaPcall,
            ..Case::new(format!("{what} from a script"), argv.clone(), want.clone())
        });
        cases.push(Case::new(what, argv, want));
    }
    cases.push(Case {
        want: Want::Prefix(format!("{} script: ", unknown_option(cmd, "NOW"))),
        via: Via::LuaCall,
        ..Case::new(
            format!("{cmd} {at}: NOW raised in a script"),
            with(base.clone(), &[b"NOW", b"5"]),
            String::new(),
        )
    });
    cases
}

/// A key that is no limiter of `g`'s: WRONGTYPE however it is called.
fn wrongtype_cases(g: &Grammar, key: &[u8]) -> Vec<Case> {
    let mut variants = vec![("bare", Vec::new()), ("all options", g.all_options())];
    if g.has_flag("PEEK") {
        variants.push(("PEEK", vec![b"PEEK".to_vec()]));
    }
    variants
        .into_iter()
        .map(|(how, extra)| {
            Case::new(
                format!("{} on {} ({how})", g.command, show(key)),
                [g.base(key), extra].concat(),
                wrongtype(g.owner),
            )
        })
        .collect()
}

/// RL.FIXED's own state, tampered with: ERR, with and without PEEK.
fn bad_state_cases(g: &Grammar, key: &[u8], want: &str) -> Vec<Case> {
    [Vec::new(), vec![b"PEEK".to_vec()]]
        .into_iter()
        .map(|extra| {
            Case::new(
                format!("{} on {} {}", g.command, show(key), show(&extra.concat())),
                [g.base(key), extra].concat(),
                want.to_string(),
            )
        })
        .collect()
}

/// RL.FIXED rows beyond its grammar: which of several errors is reported.
fn fixed_order_cases(key: &[u8]) -> Vec<Case> {
    let cmd = "RL.FIXED";
    let argv = |rest: &[&str]| {
        let mut argv = vec![cmd.as_bytes().to_vec(), key.to_vec()];
        argv.extend(rest.iter().map(|w| w.as_bytes().to_vec()));
        argv
    };
    let rows: [(&[&str], String); 11] = [
        (&["0", "0"], amount_error("limit")),
        (&["10", "0", "FOO"], duration_error("window")),
        (&["ALIGNED", "10", "60"], amount_error("limit")),
        (&["10", "ALIGNED", "60"], duration_error("window")),
        (
            &["10", "60", "FOO", "COST", "0"],
            unknown_option(cmd, "FOO"),
        ),
        (&["10", "60", "COST", "0", "FOO"], amount_error("COST")),
        (&["10", "60", "COST", "COST", "5"], amount_error("COST")),
        (
            &["10", "60", "BURST", "5", "COST"],
            not_an_option(cmd, "BURST"),
        ),
        (&["10", "60", "PEEK", "PEEK", "COST"], repeated("PEEK")),
        (
            &["10", "60", "COST", "5", "OVERRIDE"],
            needs_value("OVERRIDE"),
        ),
        (
            &["10", "60", "ALIGNED", "COST", "1", "aligned"],
            repeated("ALIGNED"),
        ),
    ];
    rows.into_iter()
        .map(|(rest, want)| {
            Case::new(
                format!("{cmd} {}: {}", show(key), rest.join(" ")),
                argv(rest),
                want,
            )
        })
        .collect()
}

/// `00 'r' 'l' version tag` then the given fields, little-endian.
fn librl_value(version: u8, tag: u8, fields: &[u64]) -> Vec<u8> {
    let mut v = vec![0, b'r', b'l', version, tag];
    for f in fields {
        v.extend(f.to_le_bytes());
    }
    v
}

/// A live FIXED window far in the future: start, end, count.
const GOOD_FIELDS: [u64; 3] = [4_000_000_000_000, 4_000_000_060_000, 3];

/// Keys the arguments' rows are aimed at: a limiter with a TTL, a missing
/// key, and a key of another type (argument errors come first, as with
/// Redis's own commands such as INCRBY).
const ARG_TARGETS: [&[u8]; 3] = [b"lim:a", b"absent", b"list"];

/// Keys of other types (and strings that are not ours), seeded by `seed`.
const OTHER_TYPES: [&[u8]; 12] = [
    b"str",
    b"int",
    b"empty",
    b"list",
    b"hash",
    b"set",
    b"zset",
    b"stream",
    b"like:3",
    b"like:4",
    b"like:case",
    b"like:text",
];

/// Tampered librl values and the error each earns from RL.FIXED.
fn bad_states() -> Vec<(&'static str, Vec<u8>, String)> {
    let [start, end, count] = GOOD_FIELDS;
    vec![
        (
            "bad:v9",
            librl_value(9, b'F', &GOOD_FIELDS),
            newer_version(9),
        ),
        (
            "bad:v0",
            librl_value(0, b'F', &GOOD_FIELDS),
            newer_version(0),
        ),
        ("bad:v255", librl_value(255, b'F', &[]), newer_version(255)),
        ("bad:short", b"\x00rl\x01F01234".to_vec(), CORRUPT.into()),
        ("bad:header", librl_value(1, b'F', &[]), CORRUPT.into()),
        (
            "bad:two-fields",
            librl_value(1, b'F', &[start, end]),
            CORRUPT.into(),
        ),
        (
            "bad:long",
            [librl_value(1, b'F', &GOOD_FIELDS), vec![0]].concat(),
            CORRUPT.into(),
        ),
        (
            "bad:tag",
            librl_value(1, b'?', &GOOD_FIELDS),
            CORRUPT.into(),
        ),
        (
            "bad:empty-window",
            librl_value(1, b'F', &[start, start, count]),
            CORRUPT.into(),
        ),
        (
            "bad:backwards",
            librl_value(1, b'F', &[end, start, count]),
            CORRUPT.into(),
        ),
        (
            "bad:zero-count",
            librl_value(1, b'F', &[start, end, 0]),
            CORRUPT.into(),
        ),
        (
            "bad:over-count",
            librl_value(1, b'F', &[start, end, (1 << 50) + 1]),
            CORRUPT.into(),
        ),
    ]
}

/// Limiters, keys of every other type, strings that look like ours, and
/// tampered values; several with a TTL, so that a touched expiry shows.
fn seed(con: &mut redis::Connection) {
    let ok = |con: &mut redis::Connection, args: &[&[u8]]| {
        call(con, args).unwrap_or_else(|e| panic!("seeding {args:?}: {e}"));
    };
    limiter(con, &["RL.FIXED", "lim:a", "10", "3650d", "COST", "3"]);
    limiter(con, &["RL.FIXED", "lim:full", "2", "1d", "COST", "2"]);
    limiter(con, &["RL.FIXED", "lim:aligned", "5", "1h", "ALIGNED"]);
    ok(con, &[b"RL.FIXED", b"lim:\xff\xfe", b"3", b"1h"]);
    ok(con, &[b"SET", b"str", b"hello", b"PX", b"3600000"]);
    ok(con, &[b"SET", b"int", b"12"]);
    ok(con, &[b"SET", b"empty", b""]);
    ok(con, &[b"RPUSH", b"list", b"a", b"b"]);
    ok(con, &[b"PEXPIRE", b"list", b"3600000"]);
    ok(con, &[b"HSET", b"hash", b"f", b"v"]);
    ok(con, &[b"SADD", b"set", b"m"]);
    ok(con, &[b"ZADD", b"zset", b"1", b"m"]);
    ok(con, &[b"XADD", b"stream", b"*", b"f", b"v"]);
    // Too short to hold our header, or not quite our marker.
    ok(con, &[b"SET", b"like:3", b"\x00rl"]);
    ok(con, &[b"SET", b"like:4", b"\x00rl\x01"]);
    let upper = [&b"\x00RL"[..], &librl_value(1, b'F', &GOOD_FIELDS)[3..]].concat();
    ok(con, &[b"SET", b"like:case", &upper]);
    ok(con, &[b"SET", b"like:text", b"rl\x01F"]);
    for (key, value, _) in bad_states() {
        ok(con, &[b"SET", key.as_bytes(), &value, b"PX", b"3600000"]);
    }
    let encoding: String = redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg("int")
        .query(con)
        .unwrap();
    assert_eq!(encoding, "int", "the int key must be int-encoded");
    let ttl: i64 = redis::cmd("PTTL").arg("lim:a").query(con).unwrap();
    assert!(ttl > 0, "lim:a must expire: {ttl}");
}

fn catalogue() -> Vec<Case> {
    let mut cases = Vec::new();
    for g in GRAMMARS {
        for key in ARG_TARGETS {
            cases.extend(grammar_cases(g, key));
        }
        for key in OTHER_TYPES {
            cases.extend(wrongtype_cases(g, key));
        }
    }
    for (key, _, want) in bad_states() {
        cases.extend(bad_state_cases(&RL_FIXED, key.as_bytes(), &want));
    }
    for key in ARG_TARGETS {
        cases.extend(fixed_order_cases(key));
    }
    cases
}

type Snapshot = Vec<(Vec<u8>, Vec<u8>, i64)>;

/// Which keys differ between two snapshots, and how.
fn changes(before: &Snapshot, after: &Snapshot) -> String {
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

/// Runs every case; returns one line per failure. Stops if the server
/// stops answering.
fn run_catalogue(con: &mut redis::Connection, cases: &[Case]) -> Vec<String> {
    let mut failures = Vec::new();
    let mut before = snapshot(con);
    let mut digest_before = digest(con);
    for case in cases {
        let sent = case.sent();
        let args: Vec<&[u8]> = sent.iter().map(Vec::as_slice).collect();
        let reply = call(con, &args);
        let (ok, want) = match (&reply, &case.want) {
            (Err(line), Want::Exact(w)) => (line == w, w),
            (Err(line), Want::Prefix(w)) => (line.starts_with(w.as_str()), w),
            (Ok(_), Want::Exact(w) | Want::Prefix(w)) => (false, w),
        };
        if !ok {
            failures.push(format!(
                "{}\n      sent {:?}\n      got  {reply:?}\n      want {want:?}",
                case.what,
                args.iter()
                    .map(|a| a.escape_ascii().to_string())
                    .collect::<Vec<_>>()
            ));
        }
        match cmd(con, &["PING"]) {
            Ok(Value::SimpleString(s)) if s == "PONG" => {}
            other => {
                failures.push(format!(
                    "{}: the server stopped answering: {other:?}",
                    case.what
                ));
                break;
            }
        }
        let after = snapshot(con);
        let digest_after = digest(con);
        if after != before || digest_after != digest_before {
            failures.push(format!(
                "{}: the dataset changed: {} (digest {digest_before} -> {digest_after})",
                case.what,
                changes(&before, &after)
            ));
            before = after;
            digest_before = digest_after;
        }
    }
    failures
}

#[test]
fn bad_input_is_refused_with_its_exact_error_and_changes_nothing() {
    let cases = catalogue();
    assert!(cases.len() > 400, "the catalogue shrank: {}", cases.len());
    on_each_server(|server, con| {
        seed(con);
        // Control: the rows differ from this valid call in one respect.
        for g in GRAMMARS {
            let argv = [g.base(b"absent"), g.all_options()].concat();
            let args: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
            call(con, &args).unwrap_or_else(|e| panic!("control call {args:?}: {e}"));
        }
        let start = snapshot(con);
        let digest_start = digest(con);
        let failures = run_catalogue(con, &cases);
        assert!(
            failures.is_empty(),
            "{:?}: {} failure(s) among {} cases:\n  {}",
            server.flavor,
            failures.len(),
            cases.len(),
            failures.join("\n  ")
        );
        assert_eq!(snapshot(con), start, "{:?}", server.flavor);
        assert_eq!(digest(con), digest_start, "{:?}", server.flavor);
        eprintln!(
            "{:?}: {} bad-input cases refused",
            server.flavor,
            cases.len()
        );
    });
}

fn ints(v: Value) -> Vec<i64> {
    redis::from_redis_value(&v).unwrap_or_else(|e| panic!("{v:?}: {e}"))
}

#[test]
fn valid_edges_are_accepted() {
    on_each_server(|_, con| {
        let max = 1i64 << 50;
        assert_eq!(
            limiter(con, &["RL.FIXED", "e:limit", MAX_AMOUNT, "60"]),
            [1, 1, 0, max, max - 1, 60_000]
        );
        assert_eq!(
            limiter(
                con,
                &["RL.FIXED", "e:cost", MAX_AMOUNT, "60", "COST", MAX_AMOUNT]
            ),
            [1, max, 0, max, 0, 60_000]
        );
        // A valid COST above the limit: refused by the limiter, not the parser.
        assert_eq!(
            limiter(con, &["RL.FIXED", "e:over", "10", "60", "COST", MAX_AMOUNT]),
            [0, 0, -1, 10, 10, 0]
        );

        // Windows at both ends of the range and in every unit and case; a
        // fresh key's reset_after is exactly the window.
        for (window, ms) in [
            ("1ms", 1),
            ("1", 1000),
            ("3650d", 315_360_000_000),
            ("315360000000ms", 315_360_000_000),
            ("315360000", 315_360_000_000),
            ("5256000m", 315_360_000_000),
            ("87600h", 315_360_000_000),
            ("1500ms", 1500),
            ("2S", 2000),
            ("5MS", 5),
            ("5Ms", 5),
            ("24h", 86_400_000),
            ("1H", 3_600_000),
            ("1m", 60_000),
            ("2D", 172_800_000),
            ("60", 60_000),
        ] {
            let key = format!("e:window:{window}");
            assert_eq!(
                limiter(con, &["RL.FIXED", &key, "3", window]),
                [1, 1, 0, 3, 2, ms],
                "window {window}"
            );
        }

        // Key and override key names are bytes, not text.
        let key: &[u8] = b"\xff\xfe\x80 key\x00";
        let okey: &[u8] = b"\xc3\x28";
        for count in 1..=2 {
            let reply = call(con, &[b"RL.FIXED", key, b"2", b"60", b"OVERRIDE", okey]);
            assert_eq!(ints(reply.unwrap()), [1, count, 0, 2, 2 - count, 60_000]);
        }
        assert_eq!(call(con, &[b"EXISTS", key]).unwrap(), Value::Int(1));

        // Option words in any case and order.
        for (i, peek) in ["peek", "Peek", "pEeK"].into_iter().enumerate() {
            let key = format!("e:peek:{i}");
            assert_eq!(
                limiter(con, &["RL.FIXED", &key, "5", "60", peek]),
                [1, 1, 0, 5, 4, 60_000]
            );
            assert_eq!(
                cmd(con, &["EXISTS", &key]).unwrap(),
                Value::Int(0),
                "{peek}"
            );
        }
        assert_eq!(
            limiter(con, &["RL.FIXED", "e:cost-case", "10", "60", "cost", "3"])[..2],
            [1, 3]
        );
        assert_eq!(
            limiter(con, &["RL.FIXED", "e:cost-case", "10", "60", "CoSt", "2"])[..2],
            [1, 5]
        );
        for (i, aligned) in ["aligned", "Aligned", "aLiGnEd"].into_iter().enumerate() {
            let key = format!("e:aligned:{i}");
            limiter(con, &["RL.FIXED", &key, "5", "7s", aligned]);
            let at: i64 = redis::cmd("PEXPIRETIME").arg(&key).query(con).unwrap();
            assert_eq!(at % 7000, 0, "{aligned}: window ends at {at}");
        }
        for over in ["override", "Override", "oVeRrIdE"] {
            assert_eq!(
                limiter(con, &["RL.FIXED", "e:override", "10", "60", over, "o"])[0],
                1
            );
        }
        let reply = limiter(
            con,
            &[
                "RL.FIXED", "e:all", "10", "7s", "pEEk", "Override", "o", "cost", "2", "aLIGNED",
            ],
        );
        assert_eq!(reply[..5], [1, 2, 0, 10, 8]);
        assert_eq!(cmd(con, &["EXISTS", "e:all"]).unwrap(), Value::Int(0));
        // Options in any order.
        let orders: [&[&str]; 3] = [
            &["COST", "2", "ALIGNED", "OVERRIDE", "o"],
            &["ALIGNED", "OVERRIDE", "o", "COST", "2"],
            &["OVERRIDE", "o", "COST", "2", "ALIGNED"],
        ];
        let mut ends = Vec::new();
        for (i, options) in orders.into_iter().enumerate() {
            let key = format!("e:order:{i}");
            let mut args = vec!["RL.FIXED", &key, "10", "3650d"];
            args.extend(options);
            assert_eq!(limiter(con, &args)[..5], [1, 2, 0, 10, 8], "{options:?}");
            let at: i64 = redis::cmd("PEXPIRETIME").arg(&key).query(con).unwrap();
            ends.push(at);
        }
        assert!(ends.iter().all(|&at| at == ends[0]), "{ends:?}");
    });
}
