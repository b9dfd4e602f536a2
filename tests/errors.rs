//! Bad input, catalogued (docs/commands.md, Errors): every malformed argument, option
//! and key that RL.FIXED, RL.SLIDING, RL.TOKEN, RL.CONCURRENT and
//! RL.OVERRIDE.SET, GET, DEL and LIST can be given is answered by its exact error, the server
//! keeps answering, and the dataset stays byte-for-byte the same (every
//! key's DUMP and absolute expiry, and DEBUG DIGEST), checked after each
//! case and over the whole catalogue.
//!
//! Most rows are generated from a short description of a command's grammar
//! (`Grammar`): a later command joins the catalogue as one more description
//! in `GRAMMARS`, plus rows of its own where its grammar is special (the
//! override commands GET, DEL and LIST have no `key positional... options`
//! shape and have rows of their own). Keys are given in every role: as a
//! limiter's key, as OVERRIDE's okey, and as the override commands' okey,
//! holding every Redis type, every other librl kind, and tampered librl
//! values. One server per flavor runs the whole catalogue.

mod common;

use common::*;
use redis::Value;

/// 2^50, the largest limit, rate, capacity and COST.
const MAX_AMOUNT: &str = "1125899906842624";

/// The option words of librl's commands: any of them on a command that
/// lacks it is "not an option of" it; every other word (NOW from a client,
/// TYPE, ...) is unknown to a command that lacks it, shown as spelled.
const LIMITER_OPTIONS: [&str; 15] = [
    "ALIGNED", "APPROX", "BURST", "COST", "OVERRIDE", "PEEK", "TTL", "MATCH", "COUNT", "REFUND",
    "BLOCK", "RESERVE", "WAIT", "RELEASE", "RENEW",
];

/// A RELEASE or RENEW id that is not a lease id.
fn lease_id_error(name: &str) -> String {
    format!("ERR {name} must be a lease id: an integer from 1 to 9007199254740991 (2^53 - 1)")
}

/// Not lease ids: every bad number that is not a valid id (2^50 + 1 is
/// one), and 2^53.
fn bad_lease_ids() -> Vec<&'static [u8]> {
    let mut out: Vec<&[u8]> = BAD_NUMBERS
        .iter()
        .copied()
        .filter(|b| *b != b"1125899906842625")
        .collect();
    out.push(b"9007199254740992");
    out
}

fn foreign_option(command: &str, spelled: &str) -> String {
    let upper = spelled.to_ascii_uppercase();
    if LIMITER_OPTIONS.contains(&upper.as_str()) {
        not_an_option(command, &upper)
    } else {
        unknown_option(command, spelled)
    }
}

/// Not cursors: RL.OVERRIDE.LIST takes an unsigned 64-bit decimal, as SCAN
/// returns it (2^63 and 2^64 - 1 are valid cursors).
const BAD_CURSORS: &[&[u8]] = &[
    b"",
    b"x",
    b"-1",
    b"-0",
    b"+0",
    b"+1",
    b" 0",
    b"0 ",
    b"00",
    b"01",
    b"1.5",
    b"0x10",
    b"1e3",
    b"0\x00",
    b"\xff",
    b"\xef\xbc\x90",
    // 2^64, 20 nines and 30 digits.
    b"18446744073709551616",
    b"99999999999999999999",
    b"123456789012345678901234567890",
];

/// Unknown words in option position and how they are echoed: printable,
/// on one line and at most 32 bytes.
fn unknown_words() -> Vec<(Vec<u8>, String)> {
    let rows: [(&[u8], &str); 11] = [
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
    ];
    let mut words: Vec<(Vec<u8>, String)> = rows
        .iter()
        .map(|(w, shown)| (w.to_vec(), shown.to_string()))
        .collect();
    words.push((vec![b'x'; 40], format!("{}...", "x".repeat(32))));
    words.push((vec![b'\n'; 33], format!("{}...", "?".repeat(32))));
    words
}

/// What an argument is, for the errors it can earn.
#[derive(Clone, Copy)]
enum Kind {
    /// An integer from 1 to 2^50, named so in its error.
    Amount(&'static str),
    /// COST: an integer from 0 to 2^50.
    Cost,
    /// A duration from 1ms to 3650d, named so in its error.
    Duration(&'static str),
    /// A key name: any bytes are fine.
    Key,
}

impl Kind {
    fn error(self) -> Option<String> {
        match self {
            Kind::Amount(name) => Some(amount_error(name)),
            Kind::Cost => Some(cost_error()),
            Kind::Duration(name) => Some(duration_error(name)),
            Kind::Key => None,
        }
    }

    fn bad_values(self) -> Vec<&'static [u8]> {
        match self {
            Kind::Amount(_) => BAD_NUMBERS.to_vec(),
            // 0 is a valid COST: a read that changes nothing.
            Kind::Cost => BAD_NUMBERS.iter().copied().filter(|b| *b != b"0").collect(),
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

/// Whose a librl value is: each kind is owned by one command (or, for
/// APPROX, one way of calling it) and is WRONGTYPE to every other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    Fixed,
    Sliding,
    Approx,
    Token,
    Concurrent,
    Override,
}

impl Owner {
    /// The tag byte after `00 'r' 'l' version`.
    fn tag(self) -> u8 {
        match self {
            Owner::Fixed => b'F',
            Owner::Sliding => b'S',
            Owner::Approx => b'A',
            Owner::Token => b'T',
            Owner::Concurrent => b'C',
            Owner::Override => b'O',
        }
    }

    /// How WRONGTYPE names what the owner's commands accept.
    fn wrongtype(self) -> String {
        wrongtype(match self {
            Owner::Fixed => "an RL.FIXED limiter",
            Owner::Sliding => "an RL.SLIDING limiter",
            Owner::Approx => "an RL.SLIDING APPROX limiter",
            Owner::Token => "an RL.TOKEN limiter",
            Owner::Concurrent => "an RL.CONCURRENT limiter",
            Owner::Override => "an RL.OVERRIDE value",
        })
    }

    /// The error the owner's commands give for a tampered librl value (our
    /// marker, then version and tag): a version this librl does not write
    /// that tag in first (version 1 has every tag of the first release; 2
    /// a bucket in debt and a block; 3 every kind), then an unknown tag
    /// (corrupt), then another kind's value (WRONGTYPE, however broken its
    /// fields), else its own impossible value (corrupt). Version 3 has two
    /// more kinds: the exact log's large layout (`L`) and the anchored
    /// kinds in lower case (a value that stores its anchor), each its
    /// owner's.
    fn tampered_error(self, value: &[u8]) -> String {
        let (version, kind) = (value[3], value[4]);
        let tag = match (version, kind) {
            (3, b'L') => b'S',
            (3, b'f' | b's' | b'a' | b't') => kind.to_ascii_uppercase(),
            _ => kind,
        };
        let known = version == 1 || version == 3 || (version == 2 && b"TB".contains(&kind));
        if !known {
            newer_version(version)
        } else if !b"FSATOC".contains(&tag) {
            CORRUPT.into()
        } else if tag != self.tag() {
            self.wrongtype()
        } else {
            CORRUPT.into()
        }
    }
}

/// `command key positional... [options...]`, as far as errors go.
struct Grammar {
    command: &'static str,
    /// The positional arguments after the key, each with a valid sample.
    positional: &'static [(Kind, &'static str)],
    options: &'static [Opt],
    /// Options of other commands (with a value where they take one): each
    /// is "not an option of" this command, or unknown to it when no
    /// limiter has it (TTL).
    foreign: &'static [&'static [&'static str]],
    /// Whose values the command reads and writes.
    owner: Owner,
    /// A flag that makes the call another owner's (APPROX on RL.SLIDING).
    variant: Option<(&'static str, Owner)>,
    /// A live key of the owner's, seeded by `seed`, with an expiry.
    own_key: &'static [u8],
}

const RL_FIXED: Grammar = Grammar {
    command: "RL.FIXED",
    positional: &[
        (Kind::Amount("limit"), "10"),
        (Kind::Duration("window"), "60"),
    ],
    options: &[
        flag("ALIGNED"),
        valued("COST", Kind::Cost, "2"),
        valued("OVERRIDE", Kind::Key, "ovr:none"),
        flag("PEEK"),
    ],
    foreign: &[&["BURST", "5"], &["APPROX"], &["TTL", "1h"]],
    owner: Owner::Fixed,
    variant: None,
    own_key: b"lim:a",
};

const RL_SLIDING: Grammar = Grammar {
    command: "RL.SLIDING",
    positional: &[
        (Kind::Amount("limit"), "10"),
        (Kind::Duration("window"), "60"),
    ],
    options: &[
        flag("APPROX"),
        valued("COST", Kind::Cost, "2"),
        valued("OVERRIDE", Kind::Key, "ovr:none"),
        flag("PEEK"),
    ],
    foreign: &[&["BURST", "5"], &["ALIGNED"], &["TTL", "1h"]],
    owner: Owner::Sliding,
    variant: Some(("APPROX", Owner::Approx)),
    own_key: b"sl:exact",
};

const RL_TOKEN: Grammar = Grammar {
    command: "RL.TOKEN",
    positional: &[
        (Kind::Amount("rate"), "10"),
        (Kind::Duration("window"), "60"),
    ],
    options: &[
        valued("BURST", Kind::Amount("BURST"), "20"),
        valued("COST", Kind::Cost, "2"),
        valued("OVERRIDE", Kind::Key, "ovr:none"),
        flag("PEEK"),
    ],
    foreign: &[&["ALIGNED"], &["APPROX"], &["TTL", "1h"]],
    owner: Owner::Token,
    variant: None,
    own_key: b"tok:a",
};

const RL_OVERRIDE_SET: Grammar = Grammar {
    command: "RL.OVERRIDE.SET",
    positional: &[
        (Kind::Amount("limit"), "10"),
        (Kind::Duration("window"), "60"),
    ],
    options: &[
        valued("BURST", Kind::Amount("BURST"), "20"),
        valued("TTL", Kind::Duration("TTL"), "1h"),
    ],
    foreign: &[
        &["COST", "2"],
        &["PEEK"],
        &["ALIGNED"],
        &["APPROX"],
        &["OVERRIDE", "ovr:forever"],
    ],
    owner: Owner::Override,
    variant: None,
    own_key: b"ovr:a",
};

/// RELEASE and RENEW exclude COST, so they are not among `options` (whose
/// every one a control call gives at once): their rows are in
/// `order_cases`.
const RL_CONCURRENT: Grammar = Grammar {
    command: "RL.CONCURRENT",
    positional: &[
        (Kind::Amount("limit"), "10"),
        (Kind::Duration("lease"), "60"),
    ],
    options: &[
        valued("COST", Kind::Cost, "2"),
        valued("OVERRIDE", Kind::Key, "ovr:none"),
        flag("PEEK"),
    ],
    foreign: &[
        &["BURST", "5"],
        &["ALIGNED"],
        &["APPROX"],
        &["REFUND", "1"],
        &["BLOCK", "1h"],
        &["RESERVE", "1s"],
        &["TTL", "1h"],
    ],
    owner: Owner::Concurrent,
    variant: None,
    own_key: b"con:a",
};

const GRAMMARS: [&Grammar; 5] = [
    &RL_FIXED,
    &RL_SLIDING,
    &RL_TOKEN,
    &RL_CONCURRENT,
    &RL_OVERRIDE_SET,
];

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

    fn has_option(&self, name: &str) -> bool {
        self.options.iter().any(|o| o.name == name)
    }

    fn has_flag(&self, name: &str) -> bool {
        self.options
            .iter()
            .any(|o| o.name == name && o.value.is_none())
    }

    /// Whose value a call with these words after the positionals reads.
    fn owner_for(&self, extra: &[Vec<u8>]) -> Owner {
        match self.variant {
            Some((flag, owner))
                if extra
                    .iter()
                    .any(|w| w.eq_ignore_ascii_case(flag.as_bytes())) =>
            {
                owner
            }
            _ => self.owner,
        }
    }

    /// The ways a key is given to the command in the key rows: bare, with
    /// PEEK, with the variant flag alone and with PEEK, and (`every`) with
    /// every option.
    fn key_variants(&self, every: bool) -> Vec<(&'static str, Vec<Vec<u8>>)> {
        let mut variants = vec![("bare", Vec::new())];
        if every {
            variants.push(("all options", self.all_options()));
        }
        if self.has_flag("PEEK") {
            variants.push(("PEEK", vec![b"PEEK".to_vec()]));
        }
        if let Some((flag, _)) = self.variant {
            variants.push((flag, vec![flag.as_bytes().to_vec()]));
            if self.has_flag("PEEK") {
                variants.push(("with PEEK", vec![flag.into(), b"PEEK".to_vec()]));
            }
        }
        variants
    }

    /// Keys the arguments' rows are aimed at: a live key of the owner's
    /// with a TTL, a missing key, and a key of another type (argument
    /// errors come first, as with Redis's own commands such as INCRBY).
    fn arg_targets(&self) -> [&'static [u8]; 3] {
        [self.own_key, b"absent", b"list"]
    }
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

#[derive(Clone)]
struct Case {
    what: String,
    /// The command (`words` of them: 2 for `RL.OVERRIDE SET`) and its
    /// arguments; the first argument after the command is the key.
    argv: Vec<Vec<u8>>,
    want: Want,
    via: Via,
    words: usize,
}

impl Case {
    fn new(what: impl Into<String>, argv: Vec<Vec<u8>>, want: String) -> Case {
        Case {
            what: what.into(),
            argv,
            want: Want::Exact(want),
            via: Via::Direct,
            words: 1,
        }
    }

    fn sent(&self) -> Vec<Vec<u8>> {
        let script: &[u8] = match (self.via, self.words) {
            (Via::Direct, _) => return self.argv.clone(),
            (Via::LuaPcall, 1) => b"return redis.pcall(ARGV[1], KEYS[1], unpack(ARGV, 2))",
            (Via::LuaCall, 1) => b"return redis.call(ARGV[1], KEYS[1], unpack(ARGV, 2))",
            (Via::LuaPcall, _) => b"return redis.pcall(ARGV[1], ARGV[2], KEYS[1], unpack(ARGV, 3))",
            (Via::LuaCall, _) => b"return redis.call(ARGV[1], ARGV[2], KEYS[1], unpack(ARGV, 3))",
        };
        let w = self.words;
        let mut argv = vec![
            b"EVAL".to_vec(),
            script.to_vec(),
            b"1".to_vec(),
            self.argv[w].clone(),
        ];
        argv.extend(self.argv[..w].iter().cloned());
        argv.extend(self.argv[w + 1..].iter().cloned());
        argv
    }

    /// The catalogue's row: the words as sent.
    fn row(&self) -> Row {
        Row {
            what: self.what.clone(),
            argv: self.sent(),
            want: self.want.clone(),
        }
    }

    /// The command as sent: `RL.FIXED`, `RL.OVERRIDE set`.
    fn command(&self) -> String {
        let words: Vec<String> = self.argv[..self.words.min(self.argv.len())]
            .iter()
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .collect();
        words.join(" ")
    }
}

fn with(mut argv: Vec<Vec<u8>>, more: &[&[u8]]) -> Vec<Vec<u8>> {
    argv.extend(more.iter().map(|w| w.to_vec()));
    argv
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
        // A word that may stand where the value was left out: the first
        // flag, or another option's name where there is no flag.
        let thief = first_flag.or_else(|| {
            g.options
                .iter()
                .map(|o| o.name)
                .find(|&other| other != opt.name)
        });
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
        // The value left out with an option word behind it: the word is
        // the value.
        if let Some(word) = thief {
            cases.push(Case::new(
                format!("{cmd} {at}: {name} {word}"),
                with(base.clone(), &[name.as_bytes(), word.as_bytes()]),
                err.clone(),
            ));
        }
    }

    // Options of other commands, in either case, with all of ours valid.
    for words in g.foreign {
        let lower: Vec<String> = words.iter().map(|w| w.to_ascii_lowercase()).collect();
        for spelled in [words.to_vec(), lower.iter().map(String::as_str).collect()] {
            let bytes: Vec<&[u8]> = spelled.iter().map(|w| w.as_bytes()).collect();
            let want = foreign_option(cmd, spelled[0]);
            cases.push(Case::new(
                format!("{cmd} {at}: {}", spelled.join(" ")),
                with(base.clone(), &bytes),
                want.clone(),
            ));
            cases.push(Case::new(
                format!("{cmd} {at}: all options then {}", spelled.join(" ")),
                with([base.clone(), g.all_options()].concat(), &bytes),
                want,
            ));
        }
    }

    for (word, shown) in unknown_words() {
        cases.push(Case::new(
            format!("{cmd} {at}: unknown option {}", show(&word)),
            with(base.clone(), &[&word]),
            unknown_option(cmd, &shown),
        ));
    }

    // The replication-only NOW is unknown to every client, scripts included.
    let words =
        |ws: &[&str]| -> Vec<Vec<u8>> { ws.iter().map(|w| w.as_bytes().to_vec()).collect() };
    let now_rows = [
        (words(&["NOW", "5"]), "NOW"),
        (words(&["now", "1"]), "now"),
        (words(&["NOW"]), "NOW"),
        (words(&["NOW", "0", "PEEK"]), "NOW"),
        ([g.all_options(), words(&["NOW", "0"])].concat(), "NOW"),
    ];
    for (words, shown) in now_rows {
        let argv = [base.clone(), words.clone()].concat();
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

/// A key given to `g` that holds no value of the call's owner (`held`: the
/// librl kind it holds, None for any other value): WRONGTYPE in every way
/// of calling that does not own it.
fn key_cases(g: &Grammar, key: &[u8], held: Option<Owner>) -> Vec<Case> {
    g.key_variants(true)
        .into_iter()
        .filter(|(_, extra)| Some(g.owner_for(extra)) != held)
        .map(|(how, extra)| {
            let want = g.owner_for(&extra).wrongtype();
            Case::new(
                format!("{} on {} ({how})", g.command, show(key)),
                [g.base(key), extra].concat(),
                want,
            )
        })
        .collect()
}

/// A tampered librl value given to `g`, with and without PEEK and the
/// variant flag: a newer version, corrupt, or another kind's (WRONGTYPE).
fn tampered_cases(g: &Grammar, key: &[u8], value: &[u8]) -> Vec<Case> {
    g.key_variants(false)
        .into_iter()
        .map(|(how, extra)| {
            let want = g.owner_for(&extra).tampered_error(value);
            Case::new(
                format!("{} on tampered {} ({how})", g.command, show(key)),
                [g.base(key), extra].concat(),
                want,
            )
        })
        .collect()
}

/// A key that holds no override, given as a limiter's OVERRIDE okey, with
/// the limiter's own key live and absent, with and without PEEK (and the
/// variant flag): the okey's error, and the live key untouched.
fn okey_cases(g: &Grammar, okey: &[u8], want: &str) -> Vec<Case> {
    if !g.has_option("OVERRIDE") {
        return Vec::new();
    }
    let over = |before: &[&str]| -> Vec<Vec<u8>> {
        let mut words: Vec<Vec<u8>> = before.iter().map(|w| w.as_bytes().to_vec()).collect();
        words.extend([b"OVERRIDE".to_vec(), okey.to_vec()]);
        words
    };
    let mut rows = Vec::new();
    for key in [g.own_key, b"absent"] {
        rows.push((key, over(&[])));
        rows.push((key, [over(&[]), vec![b"PEEK".to_vec()]].concat()));
    }
    if let Some((flag, _)) = g.variant {
        rows.push((b"absent", over(&[flag])));
        rows.push((b"absent", over(&[flag, "PEEK"])));
    }
    rows.into_iter()
        .map(|(key, extra)| {
            Case::new(
                format!(
                    "{} {} {}: okey holds no valid override",
                    g.command,
                    show(key),
                    show(&extra.join(&b' '))
                ),
                [g.base(key), extra].concat(),
                want.to_string(),
            )
        })
        .collect()
}

fn words_argv(command: &str, key: &[u8], rest: &[&str]) -> Vec<Vec<u8>> {
    let mut argv = vec![command.as_bytes().to_vec(), key.to_vec()];
    argv.extend(rest.iter().map(|w| w.as_bytes().to_vec()));
    argv
}

/// Rows beyond a grammar: which of several errors is reported. Arguments
/// are read left to right and the first wrong one is named.
fn order_cases(g: &Grammar, key: &[u8]) -> Vec<Case> {
    let cmd = g.command;
    let rows: Vec<(&[&str], String)> = match g.owner {
        Owner::Fixed => vec![
            (&["0", "0"], amount_error("limit")),
            (&["10", "0", "FOO"], duration_error("window")),
            (&["ALIGNED", "10", "60"], amount_error("limit")),
            (&["10", "ALIGNED", "60"], duration_error("window")),
            (
                &["10", "60", "FOO", "COST", "-1"],
                unknown_option(cmd, "FOO"),
            ),
            (&["10", "60", "COST", "-1", "FOO"], cost_error()),
            (
                &["10", "60", "COST", "0", "FOO"],
                unknown_option(cmd, "FOO"),
            ),
            (&["10", "60", "COST", "COST", "5"], cost_error()),
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
        ],
        Owner::Sliding | Owner::Approx => vec![
            (&["0", "0", "APPROX"], amount_error("limit")),
            (&["APPROX", "10", "60"], amount_error("limit")),
            (&["10", "APPROX", "60"], duration_error("window")),
            (
                &["10", "60", "APPROX", "ALIGNED"],
                not_an_option(cmd, "ALIGNED"),
            ),
            (
                &["10", "60", "ALIGNED", "APPROX", "APPROX"],
                not_an_option(cmd, "ALIGNED"),
            ),
            (
                &["10", "60", "APPROX", "COST", "-1", "approx"],
                cost_error(),
            ),
            (
                &["10", "60", "APPROX", "PEEK", "approx"],
                repeated("APPROX"),
            ),
            (
                &["10", "60", "approx", "BURST", "5", "APPROX"],
                not_an_option(cmd, "BURST"),
            ),
        ],
        Owner::Token => vec![
            (&["0", "0", "BURST", "0"], amount_error("rate")),
            (&["BURST", "5", "60"], amount_error("rate")),
            (&["10", "BURST", "5"], duration_error("window")),
            (
                &["10", "60", "BURST", "0", "COST", "-1"],
                amount_error("BURST"),
            ),
            (&["10", "60", "COST", "-1", "BURST", "0"], cost_error()),
            (
                &["10", "60", "COST", "0", "BURST", "0"],
                amount_error("BURST"),
            ),
            (&["10", "60", "BURST", "COST", "5"], amount_error("BURST")),
            (
                &["10", "60", "APPROX", "BURST", "0"],
                not_an_option(cmd, "APPROX"),
            ),
            (
                &["10", "60", "BURST", "5", "FOO"],
                unknown_option(cmd, "FOO"),
            ),
            (
                &["10", "60", "BURST", "5", "PEEK", "burst", "5"],
                repeated("BURST"),
            ),
        ],
        Owner::Concurrent => vec![
            (&["0", "0"], amount_error("limit")),
            (&["10", "0", "FOO"], duration_error("lease")),
            (&["RELEASE", "1", "60"], amount_error("limit")),
            (&["10", "RELEASE", "1"], duration_error("lease")),
            (&["10", "60", "COST", "-1", "RELEASE", "x"], cost_error()),
            (
                &["10", "60", "RELEASE", "x", "COST", "-1"],
                lease_id_error("RELEASE"),
            ),
            (&["10", "60", "RELEASE", "PEEK"], lease_id_error("RELEASE")),
            (&["10", "60", "RENEW", "COST", "1"], lease_id_error("RENEW")),
            (
                &["10", "60", "release", "1", "RELEASE", "2"],
                repeated("RELEASE"),
            ),
            (&["10", "60", "RENEW", "1", "renew", "1"], repeated("RENEW")),
            (
                &["10", "60", "COST", "1", "RELEASE", "2"],
                exclusive("COST", "RELEASE"),
            ),
            (
                &["10", "60", "RELEASE", "2", "COST", "0"],
                exclusive("COST", "RELEASE"),
            ),
            (
                &["10", "60", "RENEW", "2", "COST", "1"],
                exclusive("COST", "RENEW"),
            ),
            (
                &["10", "60", "RENEW", "2", "RELEASE", "1"],
                exclusive("RELEASE", "RENEW"),
            ),
            (
                &[
                    "10", "60", "RELEASE", "2", "PEEK", "OVERRIDE", "o", "RENEW", "3",
                ],
                exclusive("RELEASE", "RENEW"),
            ),
            (
                &["10", "60", "RELEASE", "2", "BURST", "1"],
                not_an_option(cmd, "BURST"),
            ),
            (
                &["10", "60", "RENEW", "2", "REFUND", "1"],
                not_an_option(cmd, "REFUND"),
            ),
            (
                &["10", "60", "RELEASE", "2", "FOO"],
                unknown_option(cmd, "FOO"),
            ),
            (&["10", "60", "WAIT"], needs_value("WAIT")),
            (&["10", "60", "wait"], needs_value("WAIT")),
            (&["10", "60", "WAIT", "x"], wait_error("WAIT")),
            (&["10", "60", "WAIT", "-1"], wait_error("WAIT")),
            (&["10", "60", "WAIT", "1.5s"], wait_error("WAIT")),
            (&["10", "60", "WAIT", "3651d"], wait_error("WAIT")),
            (&["10", "60", "WAIT", "00"], wait_error("WAIT")),
            (&["10", "60", "WAIT", "PEEK"], wait_error("WAIT")),
            (&["10", "60", "WAIT", "1s", "wait", "1s"], repeated("WAIT")),
            (
                &["10", "60", "WAIT", "1s", "RELEASE", "1"],
                exclusive("WAIT", "RELEASE"),
            ),
            (
                &["10", "60", "RENEW", "1", "WAIT", "0"],
                exclusive("WAIT", "RENEW"),
            ),
            (
                &["10", "60", "WAIT", "1s", "RESERVE", "1s"],
                not_an_option(cmd, "RESERVE"),
            ),
        ],
        Owner::Override => vec![
            (&["0", "0", "TTL", "0"], amount_error("limit")),
            (&["5", "0", "TTL", "0"], duration_error("window")),
            (&["TTL", "1h", "5"], amount_error("limit")),
            (&["5", "TTL", "1h"], duration_error("window")),
            (
                &["5", "1s", "TTL", "0", "BURST", "0"],
                duration_error("TTL"),
            ),
            (
                &["5", "1s", "BURST", "0", "TTL", "0"],
                amount_error("BURST"),
            ),
            (&["5", "1s", "PEEK", "TTL", "0"], not_an_option(cmd, "PEEK")),
            (&["5", "1s", "TTL", "0", "PEEK"], duration_error("TTL")),
            (
                &["5", "1s", "BURST", "5", "TTL", "1h", "ttl", "1h"],
                repeated("TTL"),
            ),
            (
                &["5", "1s", "TTL", "1h", "COST", "1"],
                not_an_option(cmd, "COST"),
            ),
        ],
    };
    rows.into_iter()
        .map(|(rest, want)| {
            Case::new(
                format!("{cmd} {}: {}", show(key), rest.join(" ")),
                words_argv(cmd, key, rest),
                want,
            )
        })
        .collect()
}

/// RELEASE and RENEW (any case) without their id, and with every bad id.
fn lease_id_cases(g: &Grammar, key: &[u8]) -> Vec<Case> {
    let mut cases = Vec::new();
    for option in ["RELEASE", "RENEW", "release", "Renew"] {
        let name = option.to_ascii_uppercase();
        let base = g.base(key);
        cases.push(Case::new(
            format!("{} {}: {option} without its id", g.command, show(key)),
            with(base.clone(), &[option.as_bytes()]),
            needs_value(&name),
        ));
        for bad in bad_lease_ids() {
            cases.push(Case::new(
                format!("{} {}: {option} {}", g.command, show(key), show(bad)),
                with(base.clone(), &[option.as_bytes(), bad]),
                lease_id_error(&name),
            ));
        }
    }
    cases
}

const OVERRIDE_GET: &str = "RL.OVERRIDE.GET";
const OVERRIDE_DEL: &str = "RL.OVERRIDE.DEL";
const OVERRIDE_LIST: &str = "RL.OVERRIDE.LIST";

/// A key that holds no override given to RL.OVERRIDE.GET and DEL (alone,
/// after and before a live override, which must survive): `want`.
fn override_key_cases(key: &[u8], want: &str) -> Vec<Case> {
    let argvs: [(&str, Vec<&[u8]>); 4] = [
        ("GET", vec![OVERRIDE_GET.as_bytes(), key]),
        ("DEL", vec![OVERRIDE_DEL.as_bytes(), key]),
        ("DEL after", vec![OVERRIDE_DEL.as_bytes(), b"ovr:a", key]),
        (
            "DEL before",
            vec![OVERRIDE_DEL.as_bytes(), key, b"ovr:forever"],
        ),
    ];
    argvs
        .into_iter()
        .map(|(how, argv)| {
            Case::new(
                format!("RL.OVERRIDE.{how} {}", show(key)),
                argv.iter().map(|w| w.to_vec()).collect(),
                want.to_string(),
            )
        })
        .collect()
}

/// RL.OVERRIDE.GET and DEL rows beyond the keys: arity, and DEL deleting
/// nothing when any of its keys is wrong.
fn get_del_cases() -> Vec<Case> {
    let rows: Vec<(&[&[u8]], String)> = vec![
        (&[b"RL.OVERRIDE.GET"], arity_error(OVERRIDE_GET)),
        (
            &[b"RL.OVERRIDE.GET", b"ovr:a", b"ovr:forever"],
            arity_error(OVERRIDE_GET),
        ),
        (
            &[b"RL.OVERRIDE.GET", b"absent", b"x", b"y"],
            arity_error(OVERRIDE_GET),
        ),
        (
            &[b"RL.OVERRIDE.GET", b"ovr:a", b"PEEK"],
            arity_error(OVERRIDE_GET),
        ),
        (
            &[b"RL.OVERRIDE.GET", b"ovr:a", b"NOW", b"5"],
            arity_error(OVERRIDE_GET),
        ),
        (
            &[b"RL.OVERRIDE.GET", b"list", b"list"],
            arity_error(OVERRIDE_GET),
        ),
        (&[b"RL.OVERRIDE.DEL"], arity_error(OVERRIDE_DEL)),
        (
            &[b"RL.OVERRIDE.DEL", b"ovr:a", b"absent", b"tok:a"],
            Owner::Override.wrongtype(),
        ),
        (
            &[b"RL.OVERRIDE.DEL", b"ovr:a", b"ovr:a", b"str"],
            Owner::Override.wrongtype(),
        ),
        (
            &[
                b"RL.OVERRIDE.DEL",
                b"ovr:a",
                b"ovr:forever",
                b"ovr:\xc3\x28",
                b"lim:a",
            ],
            Owner::Override.wrongtype(),
        ),
        (
            &[b"RL.OVERRIDE.DEL", b"sl:approx", b"ovr:a", b"ovr:forever"],
            Owner::Override.wrongtype(),
        ),
        (
            &[b"RL.OVERRIDE.DEL", b"ovr:a", b"list", b"ovr:forever"],
            Owner::Override.wrongtype(),
        ),
        (
            &[b"RL.OVERRIDE.DEL", b"ovr:a", b"override:limit0"],
            CORRUPT.into(),
        ),
        (
            &[b"RL.OVERRIDE.DEL", b"ovr:forever", b"override:v9"],
            newer_version(9),
        ),
    ];
    rows.into_iter()
        .map(|(argv, want)| {
            let argv: Vec<Vec<u8>> = argv.iter().map(|w| w.to_vec()).collect();
            Case::new(show(&argv.join(&b' ')), argv, want)
        })
        .collect()
}

/// RL.OVERRIDE.LIST: cursor, MATCH, COUNT and everything else.
fn list_cases() -> Vec<Case> {
    let cmd = OVERRIDE_LIST;
    let argv = |rest: &[&[u8]]| -> Vec<Vec<u8>> {
        let mut argv = vec![cmd.as_bytes().to_vec()];
        argv.extend(rest.iter().map(|w| w.to_vec()));
        argv
    };
    let mut rows: Vec<(Vec<Vec<u8>>, String)> = vec![(argv(&[]), arity_error(cmd))];
    for bad in BAD_CURSORS {
        rows.push((argv(&[bad]), INVALID_CURSOR.into()));
        // The cursor is read first.
        rows.push((argv(&[bad, b"COUNT", b"0", b"FOO"]), INVALID_CURSOR.into()));
    }
    for bad in BAD_NUMBERS {
        rows.push((argv(&[b"0", b"COUNT", bad]), amount_error("COUNT")));
        rows.push((
            argv(&[b"0", b"MATCH", b"*", b"count", bad]),
            amount_error("COUNT"),
        ));
    }
    let fixed_rows: Vec<(&[&[u8]], String)> = vec![
        (&[b"0", b"MATCH"], needs_value("MATCH")),
        (&[b"0", b"match"], needs_value("MATCH")),
        (&[b"0", b"COUNT"], needs_value("COUNT")),
        (&[b"0", b"count"], needs_value("COUNT")),
        (&[b"0", b"COUNT", b"5", b"MATCH"], needs_value("MATCH")),
        (&[b"0", b"MATCH", b"*", b"COUNT"], needs_value("COUNT")),
        (&[b"0", b"COUNT", b"MATCH", b"*"], amount_error("COUNT")),
        // MATCH takes any bytes, an option word too; what follows is read
        // as an option.
        (&[b"0", b"MATCH", b"COUNT", b"5"], unknown_option(cmd, "5")),
        (&[b"0", b"MATCH", b"a", b"MATCH", b"b"], repeated("MATCH")),
        (&[b"0", b"MATCH", b"a", b"match", b"a"], repeated("MATCH")),
        (&[b"0", b"COUNT", b"5", b"COUNT", b"5"], repeated("COUNT")),
        (
            &[b"0", b"count", b"5", b"MATCH", b"*", b"Count", b"6"],
            repeated("COUNT"),
        ),
        (&[b"0", b"TYPE", b"string"], unknown_option(cmd, "TYPE")),
        (&[b"0", b"NOVALUES"], unknown_option(cmd, "NOVALUES")),
        (&[b"0", b"NOW", b"5"], unknown_option(cmd, "NOW")),
        (&[b"0", b"now"], unknown_option(cmd, "now")),
        (&[b"0", b"TTL", b"1s"], not_an_option(cmd, "TTL")),
        (&[b"0", b"ttl", b"1s"], not_an_option(cmd, "TTL")),
        (&[b"0", b"BURST", b"5"], not_an_option(cmd, "BURST")),
        (&[b"0", b"burst", b"5"], not_an_option(cmd, "BURST")),
        (
            &[b"0", b"MATCH", b"*", b"COUNT", b"10", b"BURST", b"5"],
            not_an_option(cmd, "BURST"),
        ),
        (
            &[b"0", b"MATCH", b"*", b"COUNT", b"10", b"TTL", b"1h"],
            not_an_option(cmd, "TTL"),
        ),
        (&[b"0", b"PEEK"], not_an_option(cmd, "PEEK")),
        (&[b"0", b"COST", b"1"], not_an_option(cmd, "COST")),
        (&[b"0", b"ALIGNED"], not_an_option(cmd, "ALIGNED")),
        (&[b"0", b"APPROX"], not_an_option(cmd, "APPROX")),
        (&[b"0", b"OVERRIDE", b"o"], not_an_option(cmd, "OVERRIDE")),
    ];
    rows.extend(
        fixed_rows
            .into_iter()
            .map(|(rest, want)| (argv(rest), want)),
    );
    for (word, shown) in unknown_words() {
        rows.push((argv(&[b"0", &word]), unknown_option(cmd, &shown)));
    }
    rows.into_iter()
        .map(|(argv, want)| Case::new(show(&argv.join(&b' ')), argv, want))
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

/// An exact sliding log: `head tail last` (u32), `total first_ms last_ms`
/// (u64), then the data area.
fn sliding_value(offsets: [u32; 3], fields: [u64; 3], data: &[u8]) -> Vec<u8> {
    let mut v = librl_value(1, b'S', &[]);
    for o in offsets {
        v.extend(o.to_le_bytes());
    }
    for f in fields {
        v.extend(f.to_le_bytes());
    }
    v.extend(data);
    v
}

/// A live FIXED window far in the future: start, end, count.
const GOOD_FIELDS: [u64; 3] = [4_000_000_000_000, 4_000_000_060_000, 3];

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

/// Live librl values of every kind, seeded by `seed`.
const LIBRL_KEYS: [(&[u8], Owner); 13] = [
    (b"lim:a", Owner::Fixed),
    (b"lim:aligned", Owner::Fixed),
    (b"lim:\xff\xfe", Owner::Fixed),
    (b"sl:exact", Owner::Sliding),
    (b"sl:one", Owner::Sliding),
    (b"sl:approx", Owner::Approx),
    (b"tok:a", Owner::Token),
    (b"tok:burst", Owner::Token),
    (b"con:a", Owner::Concurrent),
    (b"con:\x00", Owner::Concurrent),
    (b"ovr:a", Owner::Override),
    (b"ovr:forever", Owner::Override),
    (b"ovr:\xc3\x28", Owner::Override),
];

/// Tampered librl values of every kind; what each earns depends on who
/// reads it (`Owner::tampered_error`).
fn tampered_values() -> Vec<(&'static str, Vec<u8>)> {
    let [start, end, count] = GOOD_FIELDS;
    let max = 1u64 << 50;
    let year10 = 315_360_000_000;
    let good_log = sliding_value([0, 2, 0], [3, start, start], &[0, 3]);
    vec![
        // RL.FIXED's.
        ("bad:v9", librl_value(9, b'F', &GOOD_FIELDS)),
        ("bad:v0", librl_value(0, b'F', &GOOD_FIELDS)),
        ("bad:v255", librl_value(255, b'F', &[])),
        ("bad:short", b"\x00rl\x01F01234".to_vec()),
        ("bad:header", librl_value(1, b'F', &[])),
        ("bad:two-fields", librl_value(1, b'F', &[start, end])),
        (
            "bad:long",
            [librl_value(1, b'F', &GOOD_FIELDS), vec![0]].concat(),
        ),
        ("bad:tag", librl_value(1, b'?', &GOOD_FIELDS)),
        ("bad:tag-lower", librl_value(1, b'f', &GOOD_FIELDS)),
        (
            "bad:empty-window",
            librl_value(1, b'F', &[start, start, count]),
        ),
        ("bad:backwards", librl_value(1, b'F', &[end, start, count])),
        ("bad:zero-count", librl_value(1, b'F', &[start, end, 0])),
        (
            "bad:over-count",
            librl_value(1, b'F', &[start, end, max + 1]),
        ),
        // RL.SLIDING's exact log.
        ("sliding:v2", [&[0, b'r', b'l', 2], &good_log[4..]].concat()),
        ("sliding:header", librl_value(1, b'S', &[])),
        ("sliding:short", good_log[..20].to_vec()),
        (
            "sliding:no-data",
            sliding_value([0, 2, 0], [3, start, start], &[]),
        ),
        (
            "sliding:tail-before-last",
            sliding_value([0, 0, 1], [3, start, start], &[0, 3]),
        ),
        (
            "sliding:head-after-last",
            sliding_value([1, 2, 0], [3, start, start], &[0, 3]),
        ),
        (
            "sliding:zero-total",
            sliding_value([0, 2, 0], [0, start, start], &[0, 3]),
        ),
        (
            "sliding:backwards",
            sliding_value([0, 2, 0], [3, end, start], &[0, 3]),
        ),
        // RL.SLIDING APPROX's.
        ("approx:v9", librl_value(9, b'A', &[start, 1, 1])),
        ("approx:header", librl_value(1, b'A', &[])),
        ("approx:two-fields", librl_value(1, b'A', &[start, 1])),
        ("approx:over", librl_value(1, b'A', &[start, max + 1, 0])),
        (
            "approx:over-previous",
            librl_value(1, b'A', &[start, 0, max + 1]),
        ),
        // RL.TOKEN's: at_ms, window_ms, then missing as a u128.
        ("token:v9", librl_value(9, b'T', &[start, 1000, 5, 0])),
        ("token:header", librl_value(1, b'T', &[])),
        ("token:short", librl_value(1, b'T', &[start, 1000, 5])),
        ("token:zero-window", librl_value(1, b'T', &[start, 0, 5, 0])),
        (
            "token:long-window",
            librl_value(1, b'T', &[start, year10 + 1, 5, 0]),
        ),
        (
            "token:zero-missing",
            librl_value(1, b'T', &[start, 1000, 0, 0]),
        ),
        (
            "token:over-missing",
            librl_value(1, b'T', &[start, 1000, 0, 1]),
        ),
        // RL.CONCURRENT's leases: next_id, at_ms, then varints (version 3).
        ("con:v9", librl_value(9, b'C', &[10, start])),
        ("con:v1", librl_value(1, b'C', &[10, start])),
        ("con:v2", librl_value(2, b'C', &[10, start])),
        ("con:header", librl_value(3, b'C', &[])),
        ("con:short", librl_value(3, b'C', &[10])),
        ("con:next0", librl_value(3, b'C', &[0, start])),
        ("con:next-over", librl_value(3, b'C', &[1 << 53 | 1, start])),
        (
            "con:gap0",
            [librl_value(3, b'C', &[10, start]), vec![0, 1]].concat(),
        ),
        (
            "con:gap-past-1",
            [librl_value(3, b'C', &[10, start]), vec![20, 1]].concat(),
        ),
        (
            "con:one-slot-flagged",
            [librl_value(3, b'C', &[10, start]), vec![3, 1, 1]].concat(),
        ),
        (
            "con:end0",
            [librl_value(3, b'C', &[10, start]), vec![2, 0]].concat(),
        ),
        (
            "con:cut",
            [librl_value(3, b'C', &[10, start]), vec![2, 0x80]].concat(),
        ),
        // Version 3: each kind's fields cut short or not the shortest
        // varint, a count of 0, a pinned value whose anchor is cut short,
        // a large log without its fields, a lower-case override.
        ("v3:fixed-cut", b"\x00rl\x03F\x04".to_vec()),
        ("v3:fixed-long-varint", b"\x00rl\x03F\x84\x00\x07".to_vec()),
        ("v3:fixed-zero", b"\x00rl\x03F\x00\x07".to_vec()),
        ("v3:fixed-pinned-cut", b"\x00rl\x03f\x80\x80".to_vec()),
        ("v3:sliding-zero-cost", b"\x00rl\x03S\x07\x00".to_vec()),
        ("v3:sliding-large-cut", b"\x00rl\x03L\x00\x00".to_vec()),
        ("v3:approx-cut", b"\x00rl\x03A\x0b\x03".to_vec()),
        ("v3:token-cut", b"\x00rl\x03T\x05\xd0\x0f".to_vec()),
        (
            "v3:token-zero-debt",
            b"\x00rl\x03T\x05\xd0\x0f\xa0\x1f\x00".to_vec(),
        ),
        ("v3:override-lower", b"\x00rl\x03o\x14\x07\x1e".to_vec()),
        ("v3:override-window0", b"\x00rl\x03O\x14\x00\x1e".to_vec()),
        // Overrides: limit, window_ms, burst (0: none).
        ("override:v9", librl_value(9, b'O', &[5, 1000, 0])),
        ("override:header", librl_value(1, b'O', &[])),
        ("override:limit0", librl_value(1, b'O', &[0, 1000, 0])),
        (
            "override:limit-over",
            librl_value(1, b'O', &[max + 1, 1000, 0]),
        ),
        ("override:window0", librl_value(1, b'O', &[5, 0, 0])),
        (
            "override:window-over",
            librl_value(1, b'O', &[5, year10 + 1, 0]),
        ),
        (
            "override:burst-over",
            librl_value(1, b'O', &[5, 1000, max + 1]),
        ),
        (
            "override:long",
            [librl_value(1, b'O', &[5, 1000, 0]), vec![0]].concat(),
        ),
    ]
}

/// Limiters and overrides of every kind, keys of every other type, strings
/// that look like ours, and tampered values; several with a TTL, so that a
/// touched expiry shows.
fn seed(con: &mut redis::Connection) {
    let ok = |con: &mut redis::Connection, args: &[&[u8]]| {
        call(con, args).unwrap_or_else(|e| panic!("seeding {args:?}: {e}"));
    };
    limiter(con, &["RL.FIXED", "lim:a", "10", "3650d", "COST", "3"]);
    limiter(con, &["RL.FIXED", "lim:full", "2", "1d", "COST", "2"]);
    // An aligned window ends on a multiple of its length since the epoch:
    // at 1h the key expired at the top of the hour, under a run that
    // crossed it; 3650d ends next in December 2029.
    limiter(con, &["RL.FIXED", "lim:aligned", "5", "3650d", "ALIGNED"]);
    ok(con, &[b"RL.FIXED", b"lim:\xff\xfe", b"3", b"1h"]);
    limiter(con, &["RL.SLIDING", "sl:exact", "10", "3650d", "COST", "3"]);
    std::thread::sleep(std::time::Duration::from_millis(2));
    limiter(con, &["RL.SLIDING", "sl:exact", "10", "3650d"]);
    limiter(con, &["RL.SLIDING", "sl:one", "1", "1h"]);
    limiter(
        con,
        &["RL.SLIDING", "sl:approx", "10", "1h", "APPROX", "COST", "3"],
    );
    limiter(con, &["RL.TOKEN", "tok:a", "10", "3650d", "COST", "3"]);
    lease(con, &["RL.CONCURRENT", "con:a", "10", "3650d", "COST", "3"]);
    lease(con, &["RL.CONCURRENT", "con:a", "10", "1d"]);
    ok(con, &[b"RL.CONCURRENT", b"con:\x00", b"1", b"1h"]);
    limiter(
        con,
        &[
            "RL.TOKEN",
            "tok:burst",
            "1",
            "1h",
            "BURST",
            "5",
            "COST",
            "5",
        ],
    );
    ok(
        con,
        &[
            b"RL.OVERRIDE.SET",
            b"ovr:a",
            b"100",
            b"1m",
            b"BURST",
            b"200",
            b"TTL",
            b"1h",
        ],
    );
    ok(con, &[b"RL.OVERRIDE.SET", b"ovr:forever", b"5", b"1s"]);
    ok(
        con,
        &[
            b"RL.OVERRIDE.SET",
            b"ovr:\xc3\x28",
            b"7",
            b"1d",
            b"TTL",
            b"1d",
        ],
    );
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
    for (key, value) in tampered_values() {
        ok(con, &[b"SET", key.as_bytes(), &value, b"PX", b"3600000"]);
    }
    let encoding: String = redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg("int")
        .query(con)
        .unwrap();
    assert_eq!(encoding, "int", "the int key must be int-encoded");
    for (key, _) in LIBRL_KEYS {
        let ttl: i64 = redis::cmd("PTTL").arg(key).query(con).unwrap();
        let forever = key == b"ovr:forever";
        assert!(
            if forever { ttl == -1 } else { ttl > 0 },
            "{}: {ttl}",
            show(key)
        );
    }
}

fn catalogue() -> Vec<Case> {
    let no_override = Owner::Override.wrongtype();
    let mut cases = Vec::new();
    for g in GRAMMARS {
        for key in g.arg_targets() {
            cases.extend(grammar_cases(g, key));
            cases.extend(order_cases(g, key));
            if g.owner == Owner::Concurrent {
                cases.extend(lease_id_cases(g, key));
            }
        }
        for key in OTHER_TYPES {
            cases.extend(key_cases(g, key, None));
            cases.extend(okey_cases(g, key, &no_override));
        }
        for (key, held) in LIBRL_KEYS {
            cases.extend(key_cases(g, key, Some(held)));
            if held != Owner::Override {
                cases.extend(okey_cases(g, key, &no_override));
            }
        }
        for (key, value) in tampered_values() {
            cases.extend(tampered_cases(g, key.as_bytes(), &value));
            let want = Owner::Override.tampered_error(&value);
            cases.extend(okey_cases(g, key.as_bytes(), &want));
        }
    }
    for key in OTHER_TYPES {
        cases.extend(override_key_cases(key, &no_override));
    }
    for (key, held) in LIBRL_KEYS {
        if held != Owner::Override {
            cases.extend(override_key_cases(key, &no_override));
        }
    }
    for (key, value) in tampered_values() {
        let want = Owner::Override.tampered_error(&value);
        cases.extend(override_key_cases(key.as_bytes(), &want));
    }
    cases.extend(get_del_cases());
    cases.extend(list_cases());
    cases
}

/// How many cases each command has, for the log.
fn per_command(cases: &[Case]) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for case in cases {
        let name = case.command().to_ascii_uppercase();
        match counts.iter_mut().find(|(n, _)| *n == name) {
            Some((_, count)) => *count += 1,
            None => counts.push((name, 1)),
        }
    }
    counts
        .iter()
        .map(|(name, count)| format!("{name} {count}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[test]
fn bad_input_is_refused_with_its_exact_error_and_changes_nothing() {
    let cases = catalogue();
    let prepare = |con: &mut redis::Connection| {
        seed(con);
        // Control: the rows differ from these valid calls in one respect.
        for g in GRAMMARS {
            for key in g.arg_targets().into_iter().take(2) {
                let mut options = g.all_options();
                if let Some((flag, _)) = g.variant.filter(|_| key == g.own_key) {
                    options.retain(|w| w != flag.as_bytes());
                }
                let argv = [g.base(key), options].concat();
                let args: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
                call(con, &args).unwrap_or_else(|e| panic!("control call {args:?}: {e}"));
            }
        }
        // RL.OVERRIDE.SET wrote its targets: put them back.
        cmd(con, &["DEL", "absent"]).unwrap();
        cmd(
            con,
            &[
                "RL.OVERRIDE.SET",
                "ovr:a",
                "100",
                "1m",
                "BURST",
                "200",
                "TTL",
                "1h",
            ],
        )
        .unwrap();
        for control in [
            &["RL.OVERRIDE.GET", "ovr:a"][..],
            &["RL.OVERRIDE.DEL", "absent"],
            &["RL.OVERRIDE.LIST", "0", "MATCH", "*", "COUNT", "10"],
            &["RL.OVERRIDE.LIST", "18446744073709551615"],
        ] {
            cmd(con, control).unwrap_or_else(|e| panic!("control call {control:?}: {e}"));
        }
        assert_eq!(cmd(con, &["EXISTS", "absent"]).unwrap(), Value::Int(0));
    };
    refuse_on_each_server(4000, prepare, |_| {
        let rows = cases.iter().map(Case::row).collect();
        (
            rows,
            format!("bad-input cases refused ({})", per_command(&cases)),
        )
    });
}

// ---------------------------------------------------------------------------
// RL.OVERRIDE SET|GET|DEL|LIST: the container form
// ---------------------------------------------------------------------------

/// The container form of a dotted override row: `RL.OVERRIDE SUB` in place
/// of `RL.OVERRIDE.SUB`, the subcommand spelled in upper, lower or mixed
/// case by turns (subcommand names are case-insensitive), and the module's
/// own messages naming the command as the client wrote it: where the
/// dotted form says `RL.OVERRIDE.SET`, the container form says
/// `RL.OVERRIDE SET`. Rows of other commands have no twin.
fn container_twin(case: &Case, turn: usize) -> Option<Case> {
    let name = std::str::from_utf8(&case.argv[0]).ok()?;
    let sub = name.strip_prefix("RL.OVERRIDE.")?;
    let spelled = match turn % 3 {
        0 => sub.to_string(),
        1 => sub.to_ascii_lowercase(),
        _ => format!("{}{}", &sub[..1], sub[1..].to_ascii_lowercase()),
    };
    let (dotted, container) = (format!("RL.OVERRIDE.{sub}"), format!("RL.OVERRIDE {sub}"));
    let rename = |w: &String| w.replace(&dotted, &container);
    let want = match &case.want {
        Want::Exact(w) => Want::Exact(rename(w)),
        Want::Prefix(w) => Want::Prefix(rename(w)),
    };
    let mut argv = vec![b"RL.OVERRIDE".to_vec(), spelled.clone().into_bytes()];
    argv.extend(case.argv[1..].iter().cloned());
    Some(Case {
        what: format!("{} (as RL.OVERRIDE {spelled})", case.what),
        argv,
        want,
        via: case.via,
        words: 2,
    })
}

/// `RL.OVERRIDE` without a subcommand: the server's own arity error for a
/// container command, naming it as registered (in lower case, as the
/// server's own containers are). All four servers say the same (checked on
/// each).
fn container_without_subcommand(flavor: Flavor) -> String {
    match flavor {
        Flavor::Redis7 | Flavor::Redis8 | Flavor::Valkey8 | Flavor::Valkey9 => {
            "ERR wrong number of arguments for 'rl.override' command".to_string()
        }
    }
}

/// An unknown subcommand: the server's own error, echoing the word as
/// written, cut at 128 bytes, line breaks as spaces. All four servers say
/// the same (checked on each).
fn unknown_subcommand(flavor: Flavor, shown: &str) -> String {
    match flavor {
        Flavor::Redis7 | Flavor::Redis8 | Flavor::Valkey8 | Flavor::Valkey9 => {
            format!("ERR unknown subcommand '{shown}'. Try RL.OVERRIDE HELP.")
        }
    }
}

/// Rows only the container form has: no subcommand, and subcommands that
/// do not exist (other commands' names, near misses, the dotted suffix).
fn container_cases(flavor: Flavor) -> Vec<Case> {
    let long = "x".repeat(200);
    let mut rows: Vec<(Vec<&[u8]>, String)> = vec![
        (vec![b"RL.OVERRIDE"], container_without_subcommand(flavor)),
        (vec![b"rl.override"], container_without_subcommand(flavor)),
    ];
    let unknown: [(&[u8], &str); 13] = [
        (b"FOO", "FOO"),
        (b"foo", "foo"),
        (b"", ""),
        (b"HELPS", "HELPS"),
        (b"SETX", "SETX"),
        (b"SET.", "SET."),
        (b".SET", ".SET"),
        (b"GETS", "GETS"),
        (b"FIXED", "FIXED"),
        (b"OVERRIDE", "OVERRIDE"),
        (b"SET GET", "SET GET"),
        (b"a\r\nb", "a  b"),
        (long.as_bytes(), &long[..128]),
    ];
    for (word, shown) in unknown {
        let want = unknown_subcommand(flavor, shown);
        rows.push((vec![b"RL.OVERRIDE", word], want.clone()));
        rows.push((vec![b"RL.OVERRIDE", word, b"ovr:a"], want.clone()));
        rows.push((vec![b"rl.override", word, b"ovr:a", b"5", b"60"], want));
    }
    rows.into_iter()
        .map(|(argv, want)| {
            let argv: Vec<Vec<u8>> = argv.iter().map(|w| w.to_vec()).collect();
            Case {
                words: 2,
                ..Case::new(show(&argv.join(&b' ')), argv, want)
            }
        })
        .collect()
}

/// Bad input on `RL.OVERRIDE SET|GET|DEL|LIST` gets the same catalogue as
/// the dotted names (every row of RL.OVERRIDE.SET, GET, DEL and LIST, as a
/// container call), plus the container's own: clear `ERR`, nothing
/// written, the server answering.
#[test]
fn container_override_bad_input_is_refused_like_the_dotted_names() {
    let twins: Vec<Case> = catalogue()
        .iter()
        .filter_map({
            let mut turn = 0;
            move |case| {
                let twin = container_twin(case, turn);
                turn += usize::from(twin.is_some());
                twin
            }
        })
        .collect();
    assert!(
        twins.len() > 1000,
        "the container rows shrank: {}",
        twins.len()
    );
    let prepare = |con: &mut redis::Connection| {
        seed(con);
        // Control: valid container calls, in every case of the subcommand.
        for control in [
            &[
                "RL.OVERRIDE",
                "SET",
                "absent",
                "10",
                "60",
                "BURST",
                "20",
                "TTL",
                "1h",
            ][..],
            &["RL.OVERRIDE", "set", "absent", "10", "60"],
            &["RL.OVERRIDE", "Get", "absent"],
            &["RL.OVERRIDE", "dEl", "absent"],
            &["RL.OVERRIDE", "GET", "ovr:a"],
            &["RL.OVERRIDE", "DEL", "absent"],
            &["RL.OVERRIDE", "LIST", "0", "MATCH", "*", "COUNT", "10"],
            &["rl.override", "list", "18446744073709551615"],
        ] {
            cmd(con, control).unwrap_or_else(|e| panic!("control call {control:?}: {e}"));
        }
        assert_eq!(cmd(con, &["EXISTS", "absent"]).unwrap(), Value::Int(0));
    };
    refuse_on_each_server(twins.len(), prepare, |flavor| {
        let mut cases = container_cases(flavor);
        cases.extend(twins.iter().cloned());
        let rows = cases.iter().map(Case::row).collect();
        let what = format!(
            "container bad-input cases refused ({})",
            per_command(&cases)
        );
        (rows, what)
    });
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
            let reply =
                ints(&call(con, &[b"RL.FIXED", key, b"2", b"60", b"OVERRIDE", okey]).unwrap());
            assert_eq!(reply[..5], [1, count, 0, 2, 2 - count]);
            // The second call may come a millisecond into the window.
            assert!((59_000..=60_000).contains(&reply[5]), "{reply:?}");
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

/// `[limit, window_ms, burst]` and the TTL of RL.OVERRIDE.GET's reply.
fn get_override(con: &mut redis::Connection, okey: &[u8]) -> ([i64; 3], i64) {
    let reply = ints(&call(con, &[b"RL.OVERRIDE.GET", okey]).unwrap());
    ([reply[0], reply[1], reply[2]], reply[3])
}

#[test]
fn valid_edges_of_sliding_token_and_overrides_are_accepted() {
    on_each_server(|_, con| {
        let max = 1i64 << 50;
        let year10: i64 = 315_360_000_000;
        let set_ok = |con: &mut redis::Connection, args: &[&[u8]]| {
            let mut argv: Vec<&[u8]> = vec![b"RL.OVERRIDE.SET"];
            argv.extend(args);
            assert_eq!(call(con, &argv), Ok(Value::Okay), "{argv:?}");
        };

        // RL.SLIDING, exact: limit and COST up to 2^50; a fresh key's
        // reset_after is exactly the window, at both ends of the range.
        assert_eq!(
            limiter(con, &["RL.SLIDING", "s:limit", MAX_AMOUNT, "60"]),
            [1, 1, 0, max, max - 1, 60_000]
        );
        assert_eq!(
            limiter(
                con,
                &["RL.SLIDING", "s:cost", MAX_AMOUNT, "60", "COST", MAX_AMOUNT]
            ),
            [1, max, 0, max, 0, 60_000]
        );
        assert_eq!(
            limiter(
                con,
                &["RL.SLIDING", "s:over", "10", "60", "COST", MAX_AMOUNT]
            ),
            [0, 0, -1, 10, 10, 0]
        );
        let windows = [
            ("1ms", 1),
            ("3650d", year10),
            ("315360000000ms", year10),
            ("315360000", year10),
            ("5256000m", year10),
            ("87600h", year10),
            ("2S", 2000),
            ("5Ms", 5),
            ("1H", 3_600_000),
            ("2D", 172_800_000),
        ];
        for (window, ms) in windows {
            let key = format!("s:window:{window}");
            assert_eq!(
                limiter(con, &["RL.SLIDING", &key, "3", window]),
                [1, 1, 0, 3, 2, ms],
                "window {window}"
            );
        }

        // APPROX: the counters live until the window after this one ends.
        for (window, ms) in [("1ms", 1), ("3650d", year10)] {
            let key = format!("a:window:{window}");
            let reply = limiter(
                con,
                &[
                    "RL.SLIDING",
                    &key,
                    MAX_AMOUNT,
                    window,
                    "APPROX",
                    "COST",
                    MAX_AMOUNT,
                ],
            );
            assert_eq!(reply[..5], [1, max, 0, max, 0], "{window}");
            assert!(reply[5] > ms && reply[5] <= 2 * ms, "{window}: {reply:?}");
        }
        assert_eq!(
            limiter(
                con,
                &[
                    "RL.SLIDING",
                    "a:over",
                    "10",
                    "60",
                    "APPROX",
                    "COST",
                    MAX_AMOUNT
                ]
            ),
            [0, 0, -1, 10, 10, 0]
        );

        // RL.TOKEN: rate, BURST and COST up to 2^50, windows at both ends.
        assert_eq!(
            limiter(con, &["RL.TOKEN", "t:rate", MAX_AMOUNT, "60"]),
            [1, 1, 0, max, max - 1, 1]
        );
        assert_eq!(
            limiter(
                con,
                &["RL.TOKEN", "t:fast", MAX_AMOUNT, "1ms", "COST", MAX_AMOUNT]
            ),
            [1, max, 0, max, 0, 1]
        );
        assert_eq!(
            limiter(
                con,
                &["RL.TOKEN", "t:burst", "1", "1ms", "BURST", MAX_AMOUNT, "COST", MAX_AMOUNT]
            ),
            [1, max, 0, max, 0, max]
        );
        assert_eq!(
            limiter(
                con,
                &["RL.TOKEN", "t:over", "10", "60", "BURST", "20", "COST", MAX_AMOUNT]
            ),
            [0, 0, -1, 20, 20, 0]
        );
        for (window, ms) in windows {
            let key = format!("t:window:{window}");
            assert_eq!(
                limiter(con, &["RL.TOKEN", &key, "1", window]),
                [1, 1, 0, 1, 0, ms],
                "window {window}"
            );
        }

        // RL.OVERRIDE.SET and GET at the ends of every range.
        set_ok(
            con,
            &[
                b"o:max",
                MAX_AMOUNT.as_bytes(),
                b"3650d",
                b"BURST",
                MAX_AMOUNT.as_bytes(),
                b"TTL",
                b"3650d",
            ],
        );
        let (values, ttl) = get_override(con, b"o:max");
        assert_eq!(values, [max, year10, max]);
        assert!(ttl > year10 - 60_000 && ttl <= year10, "{ttl}");
        set_ok(con, &[b"o:min", b"1", b"1ms"]);
        assert_eq!(get_override(con, b"o:min"), ([1, 1, 0], -1));
        set_ok(con, &[b"o:ttl-min", b"1", b"1ms", b"TTL", b"1ms"]);
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert_eq!(
            call(con, &[b"RL.OVERRIDE.GET", b"o:ttl-min"]),
            Ok(Value::Nil)
        );
        set_ok(
            con,
            &[b"o:units", b"5", b"315360000000ms", b"TTL", b"87600h"],
        );
        let (values, ttl) = get_override(con, b"o:units");
        assert_eq!(values, [5, year10, 0]);
        assert!(ttl > year10 - 60_000 && ttl <= year10, "{ttl}");
        // Its values replace the call's, for every limiter.
        assert_eq!(
            limiter(con, &["RL.FIXED", "f:o", "1", "1s", "OVERRIDE", "o:max"]),
            [1, 1, 0, max, max - 1, year10]
        );
        assert_eq!(
            limiter(con, &["RL.SLIDING", "s:o", "1", "1s", "OVERRIDE", "o:max"]),
            [1, 1, 0, max, max - 1, year10]
        );
        assert_eq!(
            limiter(con, &["RL.TOKEN", "t:o", "1", "1s", "OVERRIDE", "o:max"]),
            [1, 1, 0, max, max - 1, 1]
        );
        assert_eq!(
            limiter(
                con,
                &[
                    "RL.SLIDING",
                    "a:o",
                    "9",
                    "1h",
                    "APPROX",
                    "OVERRIDE",
                    "o:min"
                ]
            ),
            [1, 1, 0, 1, 0, 2]
        );

        // RL.OVERRIDE.LIST: any unsigned 64-bit cursor, COUNT up to 2^50.
        for cursor in ["0", "9223372036854775808", "18446744073709551615"] {
            let reply = cmd(con, &["RL.OVERRIDE.LIST", cursor, "COUNT", MAX_AMOUNT]);
            assert!(matches!(reply, Ok(Value::Array(_))), "{cursor}: {reply:?}");
        }
        let all = list_overrides(con, &[b"COUNT", b"1"]);
        let mut names: Vec<&[u8]> = all.iter().map(|(n, _)| n.as_slice()).collect();
        names.sort();
        assert_eq!(names, [&b"o:max"[..], b"o:min", b"o:units"]);

        // Key and okey names are bytes, not text.
        // (A NUL byte in an okey is pinned by its own test below.)
        let okey: &[u8] = b"\xc3\x28ovr\xff\x01";
        set_ok(con, &[okey, b"3", b"1m"]);
        assert_eq!(get_override(con, okey), ([3, 60_000, 0], -1));
        let with_okey = |command: &str, key: &[u8], extra: &[&[u8]]| -> Vec<Vec<u8>> {
            let mut argv = vec![command.as_bytes().to_vec(), key.to_vec(), b"100".to_vec()];
            argv.extend([b"1s".to_vec(), b"OVERRIDE".to_vec(), okey.to_vec()]);
            argv.extend(extra.iter().map(|w| w.to_vec()));
            argv
        };
        for (argv, reset) in [
            (with_okey("RL.SLIDING", b"\xff\xfes\x00", &[]), Some(60_000)),
            (
                with_okey("RL.SLIDING", b"\xff\xfea\x00", &[b"APPROX"]),
                None,
            ),
            (with_okey("RL.TOKEN", b"\xff\xfet\x00", &[]), Some(20_000)),
        ] {
            let args: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
            let reply = ints(&call(con, &args).unwrap());
            assert_eq!(reply[..5], [1, 1, 0, 3, 2], "{args:?}");
            if let Some(reset) = reset {
                assert_eq!(reply[5], reset, "{args:?}");
            }
            assert_eq!(call(con, &[b"EXISTS", args[1]]), Ok(Value::Int(1)));
        }
        assert_eq!(
            list_overrides(con, &[b"MATCH", b"\xc3\x28ovr*", b"COUNT", b"1000"]),
            [(okey.to_vec(), vec![3, 60_000, 0, -1])]
        );
        assert_eq!(call(con, &[b"RL.OVERRIDE.DEL", okey]), Ok(Value::Int(1)));
        assert_eq!(call(con, &[b"RL.OVERRIDE.GET", okey]), Ok(Value::Nil));
        assert_eq!(call(con, &[b"RL.OVERRIDE.DEL", okey]), Ok(Value::Int(0)));

        // 512 KB names, once per command.
        let big = |c: u8| vec![c; 512 * 1024];
        for (command, c, reset) in [
            ("RL.FIXED", b'f', 60_000),
            ("RL.SLIDING", b's', 60_000),
            ("RL.TOKEN", b't', 12_000),
        ] {
            let key = big(c);
            let reply = ints(&call(con, &[command.as_bytes(), &key, b"5", b"60"]).unwrap());
            assert_eq!(reply, [1, 1, 0, 5, 4, reset], "{command}");
            assert_eq!(call(con, &[b"EXISTS", &key]), Ok(Value::Int(1)));
        }
        let okey = big(b'o');
        set_ok(con, &[&okey, b"7", b"1m", b"TTL", b"1h"]);
        let (values, ttl) = get_override(con, &okey);
        assert_eq!(values, [7, 60_000, 0]);
        assert!(ttl > 3_500_000 && ttl <= 3_600_000, "{ttl}");
        let reply = call(
            con,
            &[b"RL.FIXED", b"f:big-okey", b"1", b"1s", b"OVERRIDE", &okey],
        );
        assert_eq!(ints(&reply.unwrap()), [1, 1, 0, 7, 6, 60_000]);
        let listed = list_overrides(con, &[b"MATCH", b"ooo*", b"COUNT", b"1000"]);
        assert_eq!(listed.len(), 1);
        assert!(listed[0].0 == okey, "the 512 KB okey is listed whole");
        assert_eq!(listed[0].1[..3], [7, 60_000, 0]);
        assert_eq!(
            call(con, &[b"RL.OVERRIDE.DEL", &okey, &okey]),
            Ok(Value::Int(1))
        );

        // Option words in any case.
        assert_eq!(
            limiter(con, &["RL.SLIDING", "m:approx", "5", "1m", "aPpRoX"])[..5],
            [1, 1, 0, 5, 4]
        );
        assert_eq!(
            cmd(con, &["RL.SLIDING", "m:approx", "5", "1m", "PEEK"]),
            Err(Owner::Sliding.wrongtype()),
            "aPpRoX made an APPROX limiter"
        );
        assert_eq!(
            limiter(
                con,
                &[
                    "RL.SLIDING",
                    "m:approx",
                    "5",
                    "1m",
                    "Approx",
                    "pEeK",
                    "cOsT",
                    "2"
                ]
            )[..5],
            [1, 3, 0, 5, 2]
        );
        assert_eq!(
            limiter(
                con,
                &[
                    "RL.SLIDING",
                    "m:exact",
                    "5",
                    "1m",
                    "CoSt",
                    "2",
                    "OvErRiDe",
                    "o:none"
                ]
            ),
            [1, 2, 0, 5, 3, 60_000]
        );
        assert_eq!(
            limiter(
                con,
                &[
                    "RL.TOKEN", "m:token", "10", "1s", "bUrSt", "30", "cOsT", "4", "oVeRrIdE",
                    "o:none", "PeEk"
                ]
            ),
            [1, 4, 0, 30, 26, 400]
        );
        assert_eq!(cmd(con, &["EXISTS", "m:token"]), Ok(Value::Int(0)));
        set_ok(con, &[b"m:o", b"5", b"1s", b"bUrSt", b"9", b"tTl", b"1h"]);
        let (values, ttl) = get_override(con, b"m:o");
        assert_eq!(values, [5, 1000, 9]);
        assert!(ttl > 3_500_000, "{ttl}");
        let listed = list_overrides(con, &[b"mAtCh", b"m:*", b"cOuNt", b"1000"]);
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].0, b"m:o");
        assert_eq!(
            cmd(con, &["RL.OVERRIDE.DEL", "m:o", "m:o", "absent"]),
            Ok(Value::Int(1))
        );
    });
}

/// Regression: RL.OVERRIDE.LIST used to turn every string key name SCAN
/// visits into a module string through `Context::create_string`, whose
/// `CString::new(..).unwrap()` panics on a NUL byte. The guard turned the
/// panic into "ERR internal error", so one key named with a NUL, an
/// override's or any other string's, made every LIST batch that met it
/// fail, and a full iteration impossible. LIST now builds names from their
/// bytes, as the other commands (the limiters, SET, GET and DEL) take them.
#[test]
fn override_list_takes_key_names_with_nul_bytes() {
    let failures = std::sync::Mutex::new(Vec::new());
    on_each_server(|server, con| {
        let readable = |listed: &Listed| -> Vec<(String, Vec<i64>)> {
            listed.iter().map(|(k, v)| (show(k), v.clone())).collect()
        };
        let check = |what: &str, got: Result<Listed, String>, want: Listed| {
            if got.as_ref() != Ok(&want) {
                failures.lock().unwrap().push(format!(
                    "{:?}: {what}: got {:?}, want {:?}",
                    server.flavor,
                    got.as_ref().map(readable),
                    readable(&want)
                ));
            }
        };
        let okey: &[u8] = b"ovr\x00nul";
        let set = call(con, &[b"RL.OVERRIDE.SET", okey, b"3", b"1m"]);
        assert_eq!(set, Ok(Value::Okay));
        assert_eq!(get_override(con, okey), ([3, 60_000, 0], -1));
        check(
            "an override named with a NUL byte",
            try_list_overrides(con, &[b"COUNT", b"1000"]),
            vec![(okey.to_vec(), vec![3, 60_000, 0, -1])],
        );
        assert_eq!(call(con, &[b"RL.OVERRIDE.DEL", okey]), Ok(Value::Int(1)));

        // A plain string named with a NUL byte must not hide the overrides.
        call(con, &[b"SET", b"plain\x00string", b"v"]).unwrap();
        call(con, &[b"RL.OVERRIDE.SET", b"ovr:plain", b"4", b"1s"]).unwrap();
        check(
            "an override next to a plain string named with a NUL byte",
            try_list_overrides(con, &[b"COUNT", b"1000"]),
            vec![(b"ovr:plain".to_vec(), vec![4, 1000, 0, -1])],
        );
        assert_eq!(cmd(con, &["PING"]), Ok(Value::SimpleString("PONG".into())));
    });
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
