//! The words of every command: amounts, durations, waits, option words
//! and the errors they give. Every argument rule of docs/commands.md
//! lives here.

use librl_core::concurrent::MAX_LEASE_ID;
use librl_core::units::{self, Amount, Window};
use librl_core::MAX_AMOUNT;
use std::fmt;

use super::Algorithm;

/// Every way argv can be wrong. `Display` is the user-facing reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArgError {
    WrongArity(&'static str),
    /// An integer argument that is not a plain decimal from 1 to 2^50.
    BadAmount(&'static str),
    /// A COST that is not a plain decimal from 0 to 2^50 (0 is a read).
    BadCost,
    /// A window or duration that is not `<integer>[ms|s|m|h|d]` within range.
    BadDuration(&'static str),
    /// A RESERVE/WAIT max_wait that is neither 0 nor a duration.
    BadWait(&'static str),
    /// A RELEASE/RENEW id that is not a lease id (1 to 2^53 - 1).
    BadLeaseId(&'static str),
    UnknownOption {
        command: &'static str,
        option: String,
    },
    /// An option of another limiter command, such as BURST on RL.FIXED.
    OptionNotFor {
        command: &'static str,
        option: &'static str,
    },
    RepeatedOption(&'static str),
    /// Two options that cannot be given together, such as COST and REFUND.
    Exclusive(&'static str, &'static str),
    MissingValue(&'static str),
    /// A SCAN-style cursor that is not an unsigned 64-bit decimal.
    BadCursor,
    /// RL.ALL without any clause.
    NoClause,
    /// An RL.ALL word where a clause should start.
    UnknownClause(String),
    /// An RL.ALL clause without its key, amount and window.
    ClauseArity(Algorithm),
    /// The same key in two RL.ALL clauses.
    DuplicateKey(String),
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgError::WrongArity(command) => {
                write!(f, "ERR wrong number of arguments for '{command}' command")
            }
            ArgError::BadAmount(name) => write!(
                f,
                "ERR {name} must be an integer from 1 to {MAX_AMOUNT} (2^50)"
            ),
            ArgError::BadCost => write!(
                f,
                "ERR COST must be an integer from 0 to {MAX_AMOUNT} (2^50)"
            ),
            ArgError::BadDuration(name) => write!(
                f,
                "ERR {name} must be a duration from 1ms to 3650d: a positive integer \
                 with an optional unit ms, s, m, h or d (bare integers are seconds)"
            ),
            ArgError::BadWait(name) => write!(
                f,
                "ERR {name} must be 0 or a duration up to 3650d: a non-negative integer \
                 with an optional unit ms, s, m, h or d (bare integers are seconds)"
            ),
            ArgError::BadLeaseId(name) => write!(
                f,
                "ERR {name} must be a lease id: an integer from 1 to {MAX_LEASE_ID} (2^53 - 1)"
            ),
            ArgError::UnknownOption { command, option } => {
                write!(f, "ERR unknown option '{option}' for {command}")
            }
            ArgError::OptionNotFor { command, option } => {
                write!(f, "ERR {option} is not an option of {command}")
            }
            ArgError::RepeatedOption(option) => {
                write!(f, "ERR option {option} is given more than once")
            }
            ArgError::Exclusive(a, b) => {
                write!(f, "ERR options {a} and {b} cannot be given together")
            }
            ArgError::MissingValue(option) => write!(f, "ERR option {option} needs a value"),
            ArgError::BadCursor => write!(f, "ERR invalid cursor"),
            ArgError::NoClause => write!(
                f,
                "ERR RL.ALL needs at least one clause: FIXED, SLIDING, TOKEN or CONCURRENT \
                 followed by its arguments"
            ),
            ArgError::UnknownClause(word) => write!(
                f,
                "ERR unknown clause '{word}' for RL.ALL: expected FIXED, SLIDING, TOKEN or CONCURRENT"
            ),
            ArgError::ClauseArity(algorithm) => write!(
                f,
                "ERR {} clause needs key, {} and {}",
                algorithm.clause_name(),
                algorithm.amount_name(),
                algorithm.duration_name()
            ),
            ArgError::DuplicateKey(key) => {
                write!(f, "ERR key '{key}' appears in more than one RL.ALL clause")
            }
        }
    }
}

// The amounts' bounds and the duration grammar are librl-core's
// (`units`), which the Rust client checks its arguments with too; here
// each refusal becomes its argument's error.

/// Parses a strictly decimal integer in `1..=2^50`: no sign, no spaces, no
/// leading zeros, no fractions (the same strictness as Redis's own integers).
pub fn parse_amount(arg: &[u8], name: &'static str) -> Result<Amount, ArgError> {
    Amount::parse(arg).ok_or(ArgError::BadAmount(name))
}

/// Parses COST: an amount, or 0 for a call that only reads the limiter.
pub fn parse_cost(arg: &[u8]) -> Result<u64, ArgError> {
    match parse_plain_u64(arg) {
        Some(0) => Ok(0),
        _ => Amount::parse(arg).map(Amount::get).ok_or(ArgError::BadCost),
    }
}

pub(super) use units::plain_u64 as parse_plain_u64;

/// Parses `<integer>[ms|s|m|h|d]` (units case-insensitive, bare means
/// seconds) into a window of `1ms..=3650d`.
pub fn parse_window(arg: &[u8], name: &'static str) -> Result<Window, ArgError> {
    Window::parse(arg).ok_or(ArgError::BadDuration(name))
}

/// A RESERVE or WAIT `max_wait`: a duration as `parse_window` takes
/// it, or 0 (admit only if no wait is needed).
pub fn parse_wait_ms(arg: &[u8], name: &'static str) -> Result<u64, ArgError> {
    units::wait_ms(arg).ok_or(ArgError::BadWait(name))
}

/// A lease id (RELEASE, RENEW): a strictly decimal integer from 1 to
/// 2^53 - 1, as a concurrency limiter gives them.
pub fn parse_lease_id(arg: &[u8], name: &'static str) -> Result<u64, ArgError> {
    parse_plain_u64(arg)
        .filter(|id| (1..=MAX_LEASE_ID).contains(id))
        .ok_or(ArgError::BadLeaseId(name))
}

/// The value after an option, advancing past it.
pub(super) fn value<'a, W: AsRef<[u8]>>(
    argv: &'a [W],
    i: &mut usize,
    option: &'static str,
) -> Result<&'a [u8], ArgError> {
    let v = argv.get(*i).ok_or(ArgError::MissingValue(option))?;
    *i += 1;
    Ok(v.as_ref())
}

/// Options that belong to some librl command, to tell "wrong command"
/// apart from "unknown".
pub(super) const KNOWN_OPTIONS: [&str; 15] = [
    "ALIGNED", "APPROX", "BURST", "COST", "OVERRIDE", "PEEK", "TTL", "MATCH", "COUNT", "REFUND",
    "BLOCK", "RESERVE", "WAIT", "RELEASE", "RENEW",
];

pub(super) fn foreign_option(command: &'static str, upper: &[u8], original: &[u8]) -> ArgError {
    match KNOWN_OPTIONS.iter().find(|o| o.as_bytes() == upper) {
        Some(option) => ArgError::OptionNotFor { command, option },
        None => ArgError::UnknownOption {
            command,
            option: printable(original),
        },
    }
}

/// A short, single-line, printable rendering of user bytes for an error
/// message (a reply error may not contain CR or LF).
pub(super) fn printable(bytes: &[u8]) -> String {
    const MAX: usize = 32;
    let mut out: String = bytes
        .iter()
        .take(MAX)
        .map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                char::from(b)
            } else {
                '?'
            }
        })
        .collect();
    if bytes.len() > MAX {
        out.push_str("...");
    }
    out
}

/// Which options a call has given, to refuse repeats and options that
/// exclude each other (a bit per name in `OPTION_NAMES`; no allocation on
/// the hot path).
#[derive(Default)]
pub(super) struct Seen(u32);

pub(super) const OPTION_NAMES: [&str; 17] = [
    "ALIGNED", "APPROX", "BURST", "COST", "OVERRIDE", "PEEK", "TTL", "MATCH", "COUNT", "REFUND",
    "BLOCK", "RESERVE", "WAIT", "RELEASE", "RENEW", "NOW", "?",
];

impl Seen {
    #[inline(always)]
    pub(super) fn once(&mut self, option: &'static str) -> Result<(), ArgError> {
        // Inlined with its literal, the bit folds to a constant.
        let bit = bit(option);
        if self.0 & bit != 0 {
            return Err(ArgError::RepeatedOption(option));
        }
        self.0 |= bit;
        Ok(())
    }

    pub(super) fn any(&self) -> bool {
        self.0 != 0
    }

    /// The first pair of options given together that exclude each other.
    pub(super) fn exclusive(&self) -> Option<(&'static str, &'static str)> {
        EXCLUSIVE
            .iter()
            .find(|(_, _, both)| self.0 & both == *both)
            .map(|&(a, b, _)| (a, b))
    }
}

/// The bit of an option's name in [`Seen`] (the last, `?`, for a name not
/// listed), computed at compile time.
const fn bit(option: &str) -> u32 {
    let mut i = 0;
    while i < OPTION_NAMES.len() - 1 {
        let name = OPTION_NAMES[i].as_bytes();
        let want = option.as_bytes();
        if name.len() == want.len() {
            let mut j = 0;
            while j < name.len() && name[j] == want[j] {
                j += 1;
            }
            if j == name.len() {
                return 1 << i;
            }
        }
        i += 1;
    }
    1 << (OPTION_NAMES.len() - 1)
}

const fn pair(a: &'static str, b: &'static str) -> (&'static str, &'static str, u32) {
    (a, b, bit(a) | bit(b))
}

/// Options that cannot be given together, named in the order of the
/// synopsis, with both their bits.
const EXCLUSIVE: [(&str, &str, u32); 9] = [
    pair("COST", "REFUND"),
    pair("RESERVE", "WAIT"),
    pair("REFUND", "RESERVE"),
    pair("REFUND", "WAIT"),
    pair("COST", "RELEASE"),
    pair("COST", "RENEW"),
    pair("WAIT", "RELEASE"),
    pair("WAIT", "RENEW"),
    pair("RELEASE", "RENEW"),
];

/// A word upper-cased on the stack: every option and clause name fits in
/// 10 bytes (CONCURRENT); a longer word is no keyword (its upper-cased form
/// is empty).
pub(super) struct Upper {
    buf: [u8; 10],
    len: usize,
}

impl Upper {
    pub(super) fn of(word: &[u8]) -> Upper {
        let mut buf = [0u8; 10];
        let len = if word.len() <= buf.len() {
            word.len()
        } else {
            0
        };
        for (dst, src) in buf.iter_mut().zip(word.iter().take(len)) {
            *dst = src.to_ascii_uppercase();
        }
        Upper { buf, len }
    }

    pub(super) fn as_slice(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or_default()
    }
}
