//! argv to typed requests. Nothing here touches Redis: every argument rule
//! of docs/commands.md lives here and is unit-tested without a server.
//!
//! The parser reads any argument type that derefs to bytes (`W`), so the
//! module hands it the server's own argument objects and a request's keys
//! are references to them, with their argv positions for the getkeys API.

use librl_core::approx::ApproxParams;
use librl_core::concurrent::ConcurrentParams;
use librl_core::fixed::FixedParams;
use librl_core::limit::Limit;
use librl_core::sliding::SlidingParams;
use librl_core::token::TokenParams;

mod overrides;
mod words;

pub use overrides::*;
pub use words::*;
use words::{foreign_option, parse_plain_u64, printable, value, Seen, Upper};

/// A limiter command, as named by its command and by RL.ALL clauses. This
/// one identity drives names, docs, stats and registration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    Fixed,
    Sliding,
    Token,
    Concurrent,
}

impl Algorithm {
    pub const ALL: [Algorithm; 4] = [
        Algorithm::Fixed,
        Algorithm::Sliding,
        Algorithm::Token,
        Algorithm::Concurrent,
    ];

    /// The word that opens this algorithm's clause in RL.ALL.
    pub fn from_word(upper: &[u8]) -> Option<Algorithm> {
        match upper {
            b"FIXED" => Some(Algorithm::Fixed),
            b"SLIDING" => Some(Algorithm::Sliding),
            b"TOKEN" => Some(Algorithm::Token),
            b"CONCURRENT" => Some(Algorithm::Concurrent),
            _ => None,
        }
    }

    /// The command's name for the replication stream.
    pub fn command_cstr(self) -> &'static std::ffi::CStr {
        match self {
            Algorithm::Fixed => c"RL.FIXED",
            Algorithm::Sliding => c"RL.SLIDING",
            Algorithm::Token => c"RL.TOKEN",
            Algorithm::Concurrent => c"RL.CONCURRENT",
        }
    }

    /// How errors name a clause of RL.ALL.
    pub fn clause_name(self) -> &'static str {
        match self {
            Algorithm::Fixed => "RL.ALL FIXED",
            Algorithm::Sliding => "RL.ALL SLIDING",
            Algorithm::Token => "RL.ALL TOKEN",
            Algorithm::Concurrent => "RL.ALL CONCURRENT",
        }
    }

    pub fn command_name(self) -> &'static str {
        match self {
            Algorithm::Fixed => "RL.FIXED",
            Algorithm::Sliding => "RL.SLIDING",
            Algorithm::Token => "RL.TOKEN",
            Algorithm::Concurrent => "RL.CONCURRENT",
        }
    }

    /// What the first number is called in this algorithm's grammar.
    fn amount_name(self) -> &'static str {
        match self {
            Algorithm::Fixed | Algorithm::Sliding | Algorithm::Concurrent => "limit",
            Algorithm::Token => "rate",
        }
    }

    /// What the duration after it is called: a limit's window, or how long
    /// a concurrency limit's lease lasts.
    fn duration_name(self) -> &'static str {
        match self {
            Algorithm::Concurrent => "lease",
            _ => "window",
        }
    }

    /// Whether its calls may give units back (REFUND) or start a block
    /// (BLOCK): every rate limiter; a concurrency limit's slots come back
    /// by RELEASE.
    fn counts_units(self) -> bool {
        self != Algorithm::Concurrent
    }
}

/// A key argument: the server's argument object and its argv position
/// (which the getkeys API reports).
#[derive(Debug, PartialEq, Eq)]
pub struct KeyArg<'a, W> {
    pub word: &'a W,
    pub pos: usize,
}

impl<W> Clone for KeyArg<'_, W> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<W> Copy for KeyArg<'_, W> {}

impl<W: AsRef<[u8]>> KeyArg<'_, W> {
    pub fn bytes(&self) -> &[u8] {
        self.word.as_ref()
    }
}

/// What a clause does to its limiter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Consume `cost` units (COST, default 1), now or, with RESERVE/WAIT
    /// (TOKEN), from the future; on CONCURRENT, take `cost` slots as one
    /// lease.
    Take { cost: u64, reserve: Option<Reserve> },
    /// REFUND n: give back up to n units the limiter recorded.
    Refund(u64),
    /// RELEASE id (CONCURRENT): the lease's slots are free at once.
    Release(u64),
    /// RENEW id (CONCURRENT): the lease lasts its length from now.
    Renew(u64),
}

/// RESERVE or WAIT `max_wait` on a TOKEN clause; on RL.CONCURRENT, WAIT
/// (a refused call waits up to `max_wait` for a slot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reserve {
    pub max_wait_ms: u64,
    /// WAIT: the server holds the reply until the reserved time.
    pub wait: bool,
}

/// One limit to check: its key, the limit with only its algorithm's
/// parameters, what the call does to it, its BLOCK penalty and the key of
/// its override, if any.
#[derive(Debug, PartialEq, Eq)]
pub struct Clause<'a, W> {
    pub algorithm: Algorithm,
    pub key: KeyArg<'a, W>,
    pub limit: Limit,
    pub action: Action,
    /// BLOCK duration: a denial starts a block this long.
    pub block_ms: Option<u64>,
    pub okey: Option<KeyArg<'a, W>>,
}

impl<W> Clone for Clause<'_, W> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<W> Copy for Clause<'_, W> {}

/// A single limiter command: its clause plus call-wide options.
#[derive(Debug, PartialEq, Eq)]
pub struct LimiterCall<'a, W> {
    pub clause: Clause<'a, W>,
    pub peek: bool,
    /// The primary's decision time, present only on calls replayed from the
    /// replication stream or the AOF.
    pub replayed_now_ms: Option<u64>,
}

/// Whether a call may carry the internal `NOW ms` option, which only the
/// replication link and AOF loading may use: asked only when the word NOW
/// appears, so a client's call never costs the question.
pub trait Trust {
    fn trusted(&mut self) -> bool;
}

impl Trust for bool {
    fn trusted(&mut self) -> bool {
        *self
    }
}

/// Parses `key amount window [options...]` where `argv[0]` is the command
/// name; `trust` says whether `NOW ms` is allowed.
#[inline(always)]
pub fn parse_limiter<'a, W: AsRef<[u8]>>(
    algorithm: Algorithm,
    argv: &'a [W],
    trust: impl Trust,
) -> Result<LimiterCall<'a, W>, ArgError> {
    let mut flags = CallFlags::new(trust);
    let (clause, _) = parse_clause(algorithm, argv, 1, false, &mut flags)?;
    Ok(LimiterCall {
        clause,
        peek: flags.peek,
        replayed_now_ms: flags.replayed_now_ms,
    })
}

/// `RL.ALL clause [clause ...] [PEEK]`: every clause opened by its
/// algorithm's name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllCall<'a, W> {
    pub clauses: Vec<Clause<'a, W>>,
    pub peek: bool,
    pub replayed_now_ms: Option<u64>,
}

pub fn parse_all<W: AsRef<[u8]>>(
    argv: &[W],
    trust: impl Trust,
) -> Result<AllCall<'_, W>, ArgError> {
    let mut flags = CallFlags::new(trust);
    let mut clauses: Vec<Clause<'_, W>> = Vec::new();
    let mut i = 1;
    while let Some(word) = argv.get(i).map(AsRef::as_ref) {
        let upper = Upper::of(word);
        if let Some(algorithm) = Algorithm::from_word(upper.as_slice()) {
            let (clause, next) = parse_clause(algorithm, argv, i + 1, true, &mut flags)?;
            clauses.push(clause);
            i = next;
        } else if flags.call_option(upper.as_slice(), argv, &mut i)? {
            continue;
        } else {
            return Err(ArgError::UnknownClause(printable(word)));
        }
    }
    if clauses.is_empty() {
        return Err(ArgError::NoClause);
    }
    for (n, clause) in clauses.iter().enumerate() {
        let key = clause.key.bytes();
        if clauses.iter().take(n).any(|c| c.key.bytes() == key) {
            return Err(ArgError::DuplicateKey(printable(key)));
        }
    }
    Ok(AllCall {
        clauses,
        peek: flags.peek,
        replayed_now_ms: flags.replayed_now_ms,
    })
}

/// Options that apply to a whole call rather than to one clause.
struct CallFlags<T> {
    trust: T,
    peek: bool,
    replayed_now_ms: Option<u64>,
    seen: Seen,
}

impl<T: Trust> CallFlags<T> {
    fn new(trust: T) -> Self {
        CallFlags {
            trust,
            peek: false,
            replayed_now_ms: None,
            seen: Seen::default(),
        }
    }

    /// Takes PEEK or (trusted) `NOW ms` at `argv[*i]`, whose upper-cased
    /// form is `upper`; false if the word is neither.
    fn call_option<W: AsRef<[u8]>>(
        &mut self,
        upper: &[u8],
        argv: &[W],
        i: &mut usize,
    ) -> Result<bool, ArgError> {
        match upper {
            b"PEEK" => {
                self.seen.once("PEEK")?;
                self.peek = true;
                *i += 1;
            }
            b"NOW" if self.trust.trusted() => {
                self.seen.once("NOW")?;
                *i += 1;
                let now = parse_plain_u64(value(argv, i, "NOW")?);
                self.replayed_now_ms = Some(now.ok_or(ArgError::BadAmount("NOW"))?);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// Parses one clause, `key amount window [options...]` with the key at
/// `argv[start]`; returns it and the index after it. Inside RL.ALL a clause
/// ends at the next algorithm word.
#[inline(always)]
fn parse_clause<'a, W: AsRef<[u8]>>(
    algorithm: Algorithm,
    argv: &'a [W],
    start: usize,
    in_all: bool,
    flags: &mut CallFlags<impl Trust>,
) -> Result<(Clause<'a, W>, usize), ArgError> {
    let name = if in_all {
        algorithm.clause_name()
    } else {
        algorithm.command_name()
    };
    let (Some(key), Some(amount), Some(window)) =
        (argv.get(start), argv.get(start + 1), argv.get(start + 2))
    else {
        return Err(if in_all {
            ArgError::ClauseArity(algorithm)
        } else {
            ArgError::WrongArity(name)
        });
    };
    let amount = parse_amount(amount.as_ref(), algorithm.amount_name())?;
    let window_ms = parse_window(window.as_ref(), algorithm.duration_name())?;
    let (mut aligned, mut approx, mut burst, mut okey) = (false, false, None, None);
    let (mut cost, mut refund, mut block_ms, mut reserve) = (None, None, None, None);
    let mut by_lease = None;
    let mut seen = Seen::default();
    let mut i = start + 3;
    while let Some(word) = argv.get(i).map(AsRef::as_ref) {
        let upper = Upper::of(word);
        let option = upper.as_slice();
        if in_all && Algorithm::from_word(option).is_some() {
            break;
        }
        if flags.call_option(option, argv, &mut i)? {
            continue;
        }
        i += 1;
        match option {
            b"ALIGNED" if algorithm == Algorithm::Fixed => {
                seen.once("ALIGNED")?;
                aligned = true;
            }
            b"APPROX" if algorithm == Algorithm::Sliding => {
                seen.once("APPROX")?;
                approx = true;
            }
            b"BURST" if algorithm == Algorithm::Token => {
                seen.once("BURST")?;
                burst = Some(parse_amount(value(argv, &mut i, "BURST")?, "BURST")?);
            }
            b"COST" => {
                seen.once("COST")?;
                cost = Some(parse_cost(value(argv, &mut i, "COST")?)?);
            }
            b"REFUND" if algorithm.counts_units() => {
                seen.once("REFUND")?;
                refund = Some(parse_amount(value(argv, &mut i, "REFUND")?, "REFUND")?.get());
            }
            b"RELEASE" | b"RENEW" if algorithm == Algorithm::Concurrent && !in_all => {
                let (option, action): (_, fn(u64) -> Action) = if option == b"RELEASE" {
                    ("RELEASE", Action::Release)
                } else {
                    ("RENEW", Action::Renew)
                };
                seen.once(option)?;
                let id = parse_lease_id(value(argv, &mut i, option)?, option)?;
                by_lease = Some(action(id));
            }
            b"BLOCK" if algorithm.counts_units() => {
                seen.once("BLOCK")?;
                block_ms = Some(parse_window(value(argv, &mut i, "BLOCK")?, "BLOCK")?.ms());
            }
            // WAIT on RL.CONCURRENT: a refused call waits for a slot.
            b"RESERVE" | b"WAIT"
                if algorithm == Algorithm::Token
                    || (option == b"WAIT" && algorithm == Algorithm::Concurrent && !in_all) =>
            {
                let (option, wait) = if option == b"WAIT" {
                    ("WAIT", true)
                } else {
                    ("RESERVE", false)
                };
                seen.once(option)?;
                let max_wait_ms = parse_wait_ms(value(argv, &mut i, option)?, option)?;
                reserve = Some(Reserve { max_wait_ms, wait });
            }
            b"OVERRIDE" => {
                seen.once("OVERRIDE")?;
                let pos = i;
                let word = argv.get(pos).ok_or(ArgError::MissingValue("OVERRIDE"))?;
                i += 1;
                okey = Some(KeyArg { word, pos });
            }
            other => return Err(foreign_option(name, other, word)),
        }
    }
    let limit = match algorithm {
        Algorithm::Fixed => Limit::Fixed(FixedParams {
            limit: amount,
            window_ms,
            aligned,
        }),
        Algorithm::Sliding if approx => Limit::Approx(ApproxParams {
            limit: amount,
            window_ms,
        }),
        Algorithm::Sliding => Limit::Sliding(SlidingParams {
            limit: amount,
            window_ms,
        }),
        Algorithm::Token => Limit::Token(TokenParams {
            rate: amount,
            window_ms,
            capacity: burst.unwrap_or(amount),
        }),
        Algorithm::Concurrent => Limit::Concurrent(ConcurrentParams {
            limit: amount,
            lease_ms: window_ms,
        }),
    };
    // Only calls that give options can combine them wrongly.
    if seen.any() {
        if let Some((a, b)) = seen.exclusive() {
            return Err(ArgError::Exclusive(a, b));
        }
    }
    let action = match (by_lease, refund, reserve) {
        (Some(action), _, _) => action,
        (None, Some(units), _) => Action::Refund(units),
        (None, None, reserve) => Action::Take {
            cost: cost.unwrap_or(1),
            reserve,
        },
    };
    let key = KeyArg {
        word: key,
        pos: start,
    };
    let clause = Clause {
        algorithm,
        key,
        limit,
        action,
        block_ms,
        okey,
    };
    Ok((clause, i))
}

/// The keys a limiter call that may not parse names, as far as they can be
/// found (getkeys must still route a malformed call so its node can reply
/// librl's own error): `(position, written)` for the word after each clause
/// name (RL.ALL) or at argv 1 (single limiters), and after each OVERRIDE.
pub fn find_keys<W: AsRef<[u8]>>(argv: &[W], all: bool) -> Vec<(usize, bool)> {
    let mut keys = Vec::new();
    if !all && argv.len() > 1 {
        keys.push((1, true));
    }
    let mut i = 1;
    while let Some(word) = argv.get(i).map(AsRef::as_ref) {
        let upper = Upper::of(word);
        let written = if all && Algorithm::from_word(upper.as_slice()).is_some() {
            Some(true)
        } else if upper.as_slice() == b"OVERRIDE" {
            Some(false)
        } else {
            None
        };
        match written {
            Some(written) if i + 1 < argv.len() => {
                keys.push((i + 1, written));
                i += 2;
            }
            _ => i += 1,
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;
    use librl_core::concurrent::ConcurrentParams;
    use librl_core::overrides::Override;
    use librl_core::units::{Amount, Window};
    use librl_core::{MAX_AMOUNT, MAX_WINDOW_MS};
    use proptest::prelude::*;

    /// A parsed limiter call, its keys as owned (position, bytes).
    #[derive(Debug, PartialEq, Eq)]
    struct Parsed {
        limit: Limit,
        action: Action,
        block_ms: Option<u64>,
        key: (usize, Vec<u8>),
        okey: Option<(usize, Vec<u8>)>,
        peek: bool,
        replayed_now_ms: Option<u64>,
    }

    fn parse(algorithm: Algorithm, args: &[&str]) -> Result<Parsed, ArgError> {
        let mut argv: Vec<&[u8]> = vec![algorithm.command_name().as_bytes()];
        argv.extend(args.iter().map(|a| a.as_bytes()));
        parse_limiter(algorithm, &argv, false).map(|c| Parsed {
            limit: c.clause.limit,
            action: c.clause.action,
            block_ms: c.clause.block_ms,
            key: (c.clause.key.pos, c.clause.key.bytes().to_vec()),
            okey: c.clause.okey.map(|o| (o.pos, o.bytes().to_vec())),
            peek: c.peek,
            replayed_now_ms: c.replayed_now_ms,
        })
    }

    fn fixed(args: &[&str]) -> Result<Parsed, ArgError> {
        parse(Algorithm::Fixed, args)
    }

    #[test]
    fn sliding_with_approx() {
        let call = parse(Algorithm::Sliding, &["k", "10", "1s", "approx"]).unwrap();
        assert_eq!(
            call.limit,
            Limit::Approx(ApproxParams::new(10, 1000).unwrap())
        );
        let cases: &[(&[&str], ArgError)] = &[
            (
                &["k", "1", "1s", "APPROX", "APPROX"],
                ArgError::RepeatedOption("APPROX"),
            ),
            (
                &["k", "1", "1s", "ALIGNED"],
                ArgError::OptionNotFor {
                    command: "RL.SLIDING",
                    option: "ALIGNED",
                },
            ),
            (
                &["k", "1", "1s", "BURST", "2"],
                ArgError::OptionNotFor {
                    command: "RL.SLIDING",
                    option: "BURST",
                },
            ),
        ];
        for (args, want) in cases {
            assert_eq!(
                parse(Algorithm::Sliding, args).as_ref().err(),
                Some(want),
                "{args:?}"
            );
        }
    }

    #[test]
    fn token_with_burst() {
        let call = parse(
            Algorithm::Token,
            &["k", "10", "1s", "BURST", "50", "COST", "2"],
        )
        .unwrap();
        assert_eq!(
            (call.limit, call.action),
            (
                Limit::Token(TokenParams::new(10, 1000, 50).unwrap()),
                Action::Take {
                    cost: 2,
                    reserve: None
                }
            )
        );
        let cases: &[(&[&str], ArgError)] = &[
            (&["k", "0", "1s"], ArgError::BadAmount("rate")),
            (&["k", "1", "1s", "BURST"], ArgError::MissingValue("BURST")),
            (
                &["k", "1", "1s", "BURST", "0"],
                ArgError::BadAmount("BURST"),
            ),
            (
                &["k", "1", "1s", "BURST", "1", "burst", "2"],
                ArgError::RepeatedOption("BURST"),
            ),
            (
                &["k", "1", "1s", "ALIGNED"],
                ArgError::OptionNotFor {
                    command: "RL.TOKEN",
                    option: "ALIGNED",
                },
            ),
            (
                &["k", "1", "1s", "APPROX"],
                ArgError::OptionNotFor {
                    command: "RL.TOKEN",
                    option: "APPROX",
                },
            ),
        ];
        for (args, want) in cases {
            assert_eq!(
                parse(Algorithm::Token, args).as_ref().err(),
                Some(want),
                "{args:?}"
            );
        }
    }

    #[test]
    fn amounts() {
        assert_eq!(parse_amount(b"1", "limit"), Ok(Amount::ONE));
        assert_eq!(
            parse_amount(b"1125899906842624", "limit").map(Amount::get),
            Ok(MAX_AMOUNT)
        );
        for bad in [
            "",
            "0",
            "-1",
            "+1",
            " 1",
            "1 ",
            "1.5",
            "0x10",
            "01",
            "1e3",
            "abc",
            "1125899906842625",
            "9223372036854775808",
            "18446744073709551616",
            "123456789012345678901234567890",
        ] {
            assert_eq!(
                parse_amount(bad.as_bytes(), "limit"),
                Err(ArgError::BadAmount("limit")),
                "{bad:?}"
            );
            if bad != "0" {
                assert_eq!(
                    parse_cost(bad.as_bytes()),
                    Err(ArgError::BadCost),
                    "{bad:?}"
                );
            }
        }
        // COST alone takes 0: a call that only reads the limiter.
        assert_eq!(parse_cost(b"0"), Ok(0));
        assert_eq!(parse_cost(b"1125899906842624"), Ok(MAX_AMOUNT));
    }

    #[test]
    fn durations() {
        for (text, ms) in [
            ("60", 60_000),
            ("1500ms", 1500),
            ("1ms", 1),
            ("1m", 60_000),
            ("24h", 86_400_000),
            ("3650d", MAX_WINDOW_MS),
            ("2S", 2000),
            ("5MS", 5),
        ] {
            assert_eq!(
                parse_window(text.as_bytes(), "window").map(Window::ms),
                Ok(ms),
                "{text}"
            );
        }
        for bad in [
            "",
            "0",
            "0ms",
            "ms",
            "10x",
            "-5s",
            "1.5s",
            "3651d",
            "+5s",
            " 5s",
            "5s ",
            "5 s",
            "0x10",
            "5sec",
            "99999999999999999999d",
            "315360000001ms",
        ] {
            assert_eq!(
                parse_window(bad.as_bytes(), "window"),
                Err(ArgError::BadDuration("window")),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn fixed_with_every_option() {
        let call = fixed(&[
            "k", "10", "1m", "aligned", "COST", "3", "Override", "o", "peek",
        ])
        .unwrap();
        assert_eq!(
            call.limit,
            Limit::Fixed(FixedParams::new(10, 60_000, true).unwrap())
        );
        assert_eq!(
            call.action,
            Action::Take {
                cost: 3,
                reserve: None
            }
        );
        assert!(call.peek);
        assert_eq!(call.key, (1, b"k".to_vec()));
        assert_eq!(call.okey, Some((8, b"o".to_vec())));
        assert_eq!(call.replayed_now_ms, None);
    }

    #[test]
    fn option_errors() {
        let cases: &[(&[&str], ArgError)] = &[
            (&["k", "10"], ArgError::WrongArity("RL.FIXED")),
            (&["k", "10", "60", "COST"], ArgError::MissingValue("COST")),
            (
                &["k", "10", "60", "OVERRIDE"],
                ArgError::MissingValue("OVERRIDE"),
            ),
            (&["k", "10", "60", "COST", "-1"], ArgError::BadCost),
            (
                &["k", "10", "60", "PEEK", "peek"],
                ArgError::RepeatedOption("PEEK"),
            ),
            (
                &["k", "10", "60", "COST", "1", "COST", "1"],
                ArgError::RepeatedOption("COST"),
            ),
            (
                &["k", "10", "60", "ALIGNED", "ALIGNED"],
                ArgError::RepeatedOption("ALIGNED"),
            ),
            (
                &["k", "10", "60", "OVERRIDE", "a", "OVERRIDE", "b"],
                ArgError::RepeatedOption("OVERRIDE"),
            ),
            (
                &["k", "10", "60", "BURST", "5"],
                ArgError::OptionNotFor {
                    command: "RL.FIXED",
                    option: "BURST",
                },
            ),
            (
                &["k", "10", "60", "APPROX"],
                ArgError::OptionNotFor {
                    command: "RL.FIXED",
                    option: "APPROX",
                },
            ),
            (
                &["k", "10", "60", "FOO"],
                ArgError::UnknownOption {
                    command: "RL.FIXED",
                    option: "FOO".into(),
                },
            ),
            // The replication-only option is unknown to ordinary clients.
            (
                &["k", "10", "60", "NOW", "5"],
                ArgError::UnknownOption {
                    command: "RL.FIXED",
                    option: "NOW".into(),
                },
            ),
        ];
        for (args, want) in cases {
            assert_eq!(fixed(args).as_ref().err(), Some(want), "{args:?}");
        }
    }

    #[test]
    fn error_messages_name_the_argument_and_stay_on_one_line() {
        let e = fixed(&["k", "10", "60", "bad\r\nword"])
            .unwrap_err()
            .to_string();
        assert_eq!(e, "ERR unknown option 'bad??word' for RL.FIXED");
        assert!(ArgError::BadAmount("BURST")
            .to_string()
            .starts_with("ERR BURST must be an integer from 1"));
        assert!(ArgError::BadCost
            .to_string()
            .starts_with("ERR COST must be an integer from 0"));
    }

    #[test]
    fn trusted_now_is_parsed() {
        let argv: Vec<&[u8]> = vec![b"RL.FIXED", b"k", b"1", b"1", b"NOW", b"1234"];
        let call = parse_limiter(Algorithm::Fixed, &argv, true).unwrap();
        assert_eq!(call.replayed_now_ms, Some(1234));
    }

    fn args<'a>(command: &'a str, rest: &[&'a str]) -> Vec<&'a [u8]> {
        std::iter::once(command)
            .chain(rest.iter().copied())
            .map(str::as_bytes)
            .collect()
    }

    #[test]
    fn override_set() {
        let argv = args(
            "RL.OVERRIDE.SET",
            &["o", "5", "1h", "burst", "9", "TTL", "1d"],
        );
        let set = parse_override_set(&argv, false, "RL.OVERRIDE.SET").unwrap();
        assert_eq!(
            set.value,
            Override {
                limit: Amount::new(5).unwrap(),
                window_ms: Window::new(3_600_000).unwrap(),
                burst: Amount::new(9)
            }
        );
        assert_eq!(set.ttl_ms, Some(86_400_000));
        let cases: &[(&[&str], ArgError)] = &[
            (&["o", "5"], ArgError::WrongArity("RL.OVERRIDE.SET")),
            (&["o", "x", "1s"], ArgError::BadAmount("limit")),
            (&["o", "5", "1x"], ArgError::BadDuration("window")),
            (&["o", "5", "1s", "TTL"], ArgError::MissingValue("TTL")),
            (&["o", "5", "1s", "TTL", "0"], ArgError::BadDuration("TTL")),
            (
                &["o", "5", "1s", "TTL", "1s", "TTL", "1s"],
                ArgError::RepeatedOption("TTL"),
            ),
            (
                &["o", "5", "1s", "BURST", "0"],
                ArgError::BadAmount("BURST"),
            ),
            (
                &["o", "5", "1s", "COST", "1"],
                ArgError::OptionNotFor {
                    command: "RL.OVERRIDE.SET",
                    option: "COST",
                },
            ),
            (
                &["o", "5", "1s", "NOW", "1"],
                ArgError::UnknownOption {
                    command: "RL.OVERRIDE.SET",
                    option: "NOW".into(),
                },
            ),
        ];
        for (rest, want) in cases {
            assert_eq!(
                parse_override_set(&args("RL.OVERRIDE.SET", rest), false, "RL.OVERRIDE.SET")
                    .as_ref()
                    .err(),
                Some(want),
                "{rest:?}"
            );
        }
    }

    #[test]
    fn override_list() {
        let argv = args("RL.OVERRIDE.LIST", &["0", "MATCH", "rl:*", "count", "10"]);
        let req = parse_override_list(&argv, "RL.OVERRIDE.LIST").unwrap();
        assert_eq!(
            (req.cursor, req.pattern, req.count),
            (0, Some(&b"rl:*"[..]), Some(10))
        );
        assert_eq!(
            parse_override_list(
                &args("RL.OVERRIDE.LIST", &["18446744073709551615"]),
                "RL.OVERRIDE.LIST"
            )
            .map(|r| r.cursor),
            Ok(u64::MAX)
        );
        let cases: &[(&[&str], ArgError)] = &[
            (&[], ArgError::WrongArity("RL.OVERRIDE.LIST")),
            (&["-1"], ArgError::BadCursor),
            (&["x"], ArgError::BadCursor),
            (&["18446744073709551616"], ArgError::BadCursor),
            (&["0", "COUNT", "0"], ArgError::BadAmount("COUNT")),
            (&["0", "MATCH"], ArgError::MissingValue("MATCH")),
            (
                &["0", "MATCH", "a", "MATCH", "b"],
                ArgError::RepeatedOption("MATCH"),
            ),
            (
                &["0", "TYPE", "string"],
                ArgError::UnknownOption {
                    command: "RL.OVERRIDE.LIST",
                    option: "TYPE".into(),
                },
            ),
        ];
        for (rest, want) in cases {
            assert_eq!(
                parse_override_list(&args("RL.OVERRIDE.LIST", rest), "RL.OVERRIDE.LIST")
                    .as_ref()
                    .err(),
                Some(want),
                "{rest:?}"
            );
        }
        assert_eq!(
            parse_override_get(&args("RL.OVERRIDE.GET", &[]), "RL.OVERRIDE.GET").map(|_| ()),
            Err(ArgError::WrongArity("RL.OVERRIDE.GET"))
        );
        assert_eq!(
            parse_override_get(&args("RL.OVERRIDE.GET", &["a", "b"]), "RL.OVERRIDE.GET")
                .map(|_| ()),
            Err(ArgError::WrongArity("RL.OVERRIDE.GET"))
        );
        assert_eq!(
            parse_override_del(&args("RL.OVERRIDE.DEL", &[]), "RL.OVERRIDE.DEL").map(|_| ()),
            Err(ArgError::WrongArity("RL.OVERRIDE.DEL"))
        );
    }

    #[test]
    fn all_clauses() {
        let argv = args(
            "RL.ALL",
            &[
                "FIXED", "ip:s", "10", "1s", "ALIGNED", "sliding", "ip:m", "100", "1m", "APPROX",
                "COST", "2", "TOKEN", "key", "5", "1s", "BURST", "9", "OVERRIDE", "FIXED", "PEEK",
            ],
        );
        let call = parse_all(&argv, false).unwrap();
        assert!(call.peek);
        let algorithms: Vec<_> = call.clauses.iter().map(|c| c.algorithm).collect();
        assert_eq!(
            algorithms,
            [Algorithm::Fixed, Algorithm::Sliding, Algorithm::Token]
        );
        assert_eq!(
            call.clauses.iter().map(|c| c.key.pos).collect::<Vec<_>>(),
            [2, 7, 14]
        );
        // An option's value may be a clause word: it is taken as the value.
        let okey = call.clauses[2].okey.map(|o| (o.pos, o.bytes().to_vec()));
        assert_eq!(okey, Some((20, b"FIXED".to_vec())));
        assert!(matches!(
            call.clauses[0].limit,
            Limit::Fixed(FixedParams { aligned: true, .. })
        ));
        assert!(matches!(call.clauses[1].limit, Limit::Approx(_)));
        assert!(matches!(
            call.clauses[2].limit,
            Limit::Token(TokenParams { capacity, .. }) if capacity.get() == 9
        ));
        assert_eq!(
            call.clauses[1].action,
            Action::Take {
                cost: 2,
                reserve: None
            }
        );

        let cases: &[(&[&str], ArgError)] = &[
            (&[], ArgError::NoClause),
            (&["PEEK"], ArgError::NoClause),
            (
                &["LEAKY", "k", "1", "1"],
                ArgError::UnknownClause("LEAKY".into()),
            ),
            (
                &["FIXED", "k", "1"],
                ArgError::ClauseArity(Algorithm::Fixed),
            ),
            (
                &["FIXED", "a", "1", "1", "TOKEN", "b", "1"],
                ArgError::ClauseArity(Algorithm::Token),
            ),
            (
                &["FIXED", "k", "1", "1", "SLIDING", "k", "1", "1"],
                ArgError::DuplicateKey("k".into()),
            ),
            (
                &["FIXED", "k", "1", "1", "BURST", "2"],
                ArgError::OptionNotFor {
                    command: "RL.ALL FIXED",
                    option: "BURST",
                },
            ),
            (
                &[
                    "FIXED", "k", "1", "1", "PEEK", "TOKEN", "t", "1", "1", "PEEK",
                ],
                ArgError::RepeatedOption("PEEK"),
            ),
            (
                &["FIXED", "k", "1", "1", "COST", "1", "COST", "2"],
                ArgError::RepeatedOption("COST"),
            ),
            (&["FIXED", "k", "0", "1"], ArgError::BadAmount("limit")),
        ];
        for (rest, want) in cases {
            assert_eq!(
                parse_all(&args("RL.ALL", rest), false).as_ref().err(),
                Some(want),
                "{rest:?}"
            );
        }
        // A CONCURRENT clause takes a lease: no WAIT, RELEASE or RENEW.
        let argv = args(
            "RL.ALL",
            &[
                "FIXED",
                "a",
                "1",
                "1",
                "concurrent",
                "c",
                "2",
                "30s",
                "COST",
                "2",
            ],
        );
        let concurrent = parse_all(&argv, false).unwrap();
        assert_eq!(concurrent.clauses[1].algorithm, Algorithm::Concurrent);
        assert_eq!(
            concurrent.clauses[1].limit,
            Limit::Concurrent(ConcurrentParams::new(2, 30_000).unwrap())
        );
        for option in ["WAIT", "RELEASE", "RENEW"] {
            assert_eq!(
                parse_all(
                    &args("RL.ALL", &["CONCURRENT", "c", "2", "30s", option, "1"]),
                    false
                )
                .err(),
                Some(ArgError::OptionNotFor {
                    command: "RL.ALL CONCURRENT",
                    option,
                }),
            );
        }
        assert_eq!(
            ArgError::ClauseArity(Algorithm::Concurrent).to_string(),
            "ERR RL.ALL CONCURRENT clause needs key, limit and lease"
        );
        // COST may repeat across clauses: each clause has its own.
        assert!(parse_all(
            &args(
                "RL.ALL",
                &["FIXED", "a", "1", "1", "COST", "1", "FIXED", "b", "1", "1", "COST", "1"]
            ),
            false
        )
        .is_ok());
        assert_eq!(
            ArgError::ClauseArity(Algorithm::Token).to_string(),
            "ERR RL.ALL TOKEN clause needs key, rate and window"
        );
    }

    #[test]
    fn concurrent_takes_releases_and_renews() {
        let parse = |args: &[&str]| parse(Algorithm::Concurrent, args);
        let take = parse(&["k", "5", "30s", "COST", "2", "OVERRIDE", "o"]).unwrap();
        assert_eq!(
            take.limit,
            Limit::Concurrent(ConcurrentParams::new(5, 30_000).unwrap())
        );
        assert_eq!(
            take.action,
            Action::Take {
                cost: 2,
                reserve: None
            }
        );
        let release = parse(&["k", "5", "30s", "release", "9007199254740991", "PEEK"]).unwrap();
        assert_eq!(release.action, Action::Release((1 << 53) - 1));
        assert!(release.peek);
        assert_eq!(
            parse(&["k", "5", "30s", "RENEW", "7"]).unwrap().action,
            Action::Renew(7)
        );
        let cases: &[(&[&str], ArgError)] = &[
            (&["k", "5", "0"], ArgError::BadDuration("lease")),
            (
                &["k", "5", "1s", "RELEASE"],
                ArgError::MissingValue("RELEASE"),
            ),
            (
                &["k", "5", "1s", "RELEASE", "0"],
                ArgError::BadLeaseId("RELEASE"),
            ),
            (
                &["k", "5", "1s", "RENEW", "9007199254740992"],
                ArgError::BadLeaseId("RENEW"),
            ),
            (
                &["k", "5", "1s", "RELEASE", "1", "COST", "1"],
                ArgError::Exclusive("COST", "RELEASE"),
            ),
            (
                &["k", "5", "1s", "RENEW", "1", "RELEASE", "1"],
                ArgError::Exclusive("RELEASE", "RENEW"),
            ),
            (
                &["k", "5", "1s", "REFUND", "1"],
                ArgError::OptionNotFor {
                    command: "RL.CONCURRENT",
                    option: "REFUND",
                },
            ),
            (
                &["k", "5", "1s", "BLOCK", "1s"],
                ArgError::OptionNotFor {
                    command: "RL.CONCURRENT",
                    option: "BLOCK",
                },
            ),
        ];
        for (args, want) in cases {
            assert_eq!(parse(args).as_ref().err(), Some(want), "{args:?}");
        }
        // The lease ids are the concurrency limiter's alone.
        assert_eq!(
            fixed(&["k", "5", "1s", "RELEASE", "1"]).err(),
            Some(ArgError::OptionNotFor {
                command: "RL.FIXED",
                option: "RELEASE",
            })
        );
    }

    #[test]
    fn malformed_calls_still_name_the_keys_they_can_find() {
        let all = args(
            "RL.ALL",
            &["FIXED", "k1", "x", "y", "OVERRIDE", "o", "token", "k2"],
        );
        assert_eq!(find_keys(&all, true), [(2, true), (6, false), (8, true)]);
        let single = args("RL.FIXED", &["k", "x"]);
        assert_eq!(find_keys(&single, false), [(1, true)]);
        assert_eq!(find_keys(&args("RL.ALL", &["FIXED"]), true), []);
    }

    proptest! {
        #[test]
        fn arbitrary_argv_never_panics(argv in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..12), 0..10), trusted in any::<bool>()) {
            let slices: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
            let _ = parse_limiter(Algorithm::Fixed, &slices, trusted);
            let _ = parse_limiter(Algorithm::Token, &slices, trusted);
            let _ = parse_limiter(Algorithm::Sliding, &slices, trusted);
            let _ = parse_all(&slices, trusted);
            let _ = parse_override_set(&slices, trusted, "RL.OVERRIDE.SET");
            let _ = parse_override_list(&slices, "RL.OVERRIDE.LIST");
        }
    }
}
