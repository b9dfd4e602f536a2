//! Builders for `RL.FIXED`, `RL.SLIDING`, `RL.TOKEN` and `RL.ALL`, mirroring
//! the command grammar:
//!
//! ```text
//! RL.FIXED   key limit window [ALIGNED] [COST n | REFUND n] [BLOCK duration]
//!            [OVERRIDE okey] [PEEK]
//! RL.SLIDING key limit window [APPROX]  [COST n | REFUND n] [BLOCK duration]
//!            [OVERRIDE okey] [PEEK]
//! RL.TOKEN   key rate  window [BURST capacity] [COST n | REFUND n]
//!            [RESERVE max_wait | WAIT max_wait] [BLOCK duration]
//!            [OVERRIDE okey] [PEEK]
//! RL.ALL     FIXED|SLIDING|TOKEN|CONCURRENT clause [clause ...] [PEEK]
//! ```
//!
//! `RL.CONCURRENT`'s builder is in `concurrent.rs`.

use crate::args::{amount, ms_word, ArgError, DurationArg};
use crate::concurrent::Concurrent;
use crate::reply::{AllDecision, Decision};
use crate::slot::{common_slot, Target};
use crate::{Command, Effect, Prepared};

/// What a call consumes or gives back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Amount {
    Cost(u64),
    Refund(u64),
}

/// The options every limiter takes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Options {
    amount: Amount,
    block: Option<DurationArg>,
    okey: Option<Vec<u8>>,
    peek: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            amount: Amount::Cost(1),
            block: None,
            okey: None,
            peek: false,
        }
    }
}

impl Options {
    fn words(&self, words: &mut Vec<Vec<u8>>) -> Result<(), ArgError> {
        match self.amount {
            Amount::Cost(1) => {}
            // A read: the limiter as it stands, nothing consumed.
            Amount::Cost(0) => push2(words, "COST", "0".to_string()),
            Amount::Cost(n) => push2(words, "COST", amount("COST", n)?.to_string()),
            Amount::Refund(n) => push2(words, "REFUND", amount("REFUND", n)?.to_string()),
        }
        if let Some(block) = &self.block {
            push2(words, "BLOCK", ms_word(block.millis("BLOCK", false)?));
        }
        if let Some(okey) = &self.okey {
            words.push(b"OVERRIDE".to_vec());
            words.push(okey.clone());
        }
        Ok(())
    }
}

fn push2(words: &mut Vec<Vec<u8>>, option: &str, value: String) {
    words.push(option.as_bytes().to_vec());
    words.push(value.into_bytes());
}

/// The builder methods every limiter has.
macro_rules! common_options {
    () => {
        /// Units this call consumes (default 1): a batch of 50 is `cost(50)`;
        /// `cost(0)` reads the limiter as it stands and changes nothing.
        /// Replaces an earlier `refund`.
        pub fn cost(mut self, n: u64) -> Self {
            self.options.amount = Amount::Cost(n);
            self
        }

        /// Gives back up to `n` units this limiter recorded (instead of
        /// consuming): the reply is the state after the refund, allowed.
        /// Replaces an earlier `cost`.
        pub fn refund(mut self, n: u64) -> Self {
            self.options.amount = Amount::Refund(n);
            self
        }

        /// A denial blocks every call on this key for `duration`.
        pub fn block(mut self, duration: impl Into<DurationArg>) -> Self {
            self.options.block = Some(duration.into());
            self
        }

        /// Reads the limit, window (and burst) of the override at `okey`, if
        /// one is there. In a cluster `okey` must share the key's slot.
        pub fn override_key(mut self, okey: impl AsRef<[u8]>) -> Self {
            self.options.okey = Some(okey.as_ref().to_vec());
            self
        }

        /// Answers as if the call were made, and changes nothing. In an
        /// [`All`], use [`All::peek`] instead.
        pub fn peek(mut self) -> Self {
            self.options.peek = true;
            self
        }
    };
}

/// `RL.FIXED key limit window`: a counter per window.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Fixed {
    key: Vec<u8>,
    limit: u64,
    window: DurationArg,
    aligned: bool,
    options: Options,
}

impl Fixed {
    pub fn new(key: impl AsRef<[u8]>, limit: u64, window: impl Into<DurationArg>) -> Fixed {
        Fixed {
            key: key.as_ref().to_vec(),
            limit,
            window: window.into(),
            aligned: false,
            options: Options::default(),
        }
    }

    /// Windows are `[k*window, (k+1)*window)` of Unix time: a per-minute
    /// limit resets on the minute.
    pub fn aligned(mut self) -> Fixed {
        self.aligned = true;
        self
    }

    common_options!();

    fn words(&self) -> Result<Vec<Vec<u8>>, ArgError> {
        let mut words = head(&self.key, "limit", self.limit, &self.window)?;
        if self.aligned {
            words.push(b"ALIGNED".to_vec());
        }
        self.options.words(&mut words)?;
        Ok(words)
    }
}

/// `RL.SLIDING key limit window`: an exact sliding log, or with `approx` the
/// two-window weighted counter.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Sliding {
    key: Vec<u8>,
    limit: u64,
    window: DurationArg,
    approx: bool,
    options: Options,
}

impl Sliding {
    pub fn new(key: impl AsRef<[u8]>, limit: u64, window: impl Into<DurationArg>) -> Sliding {
        Sliding {
            key: key.as_ref().to_vec(),
            limit,
            window: window.into(),
            approx: false,
            options: Options::default(),
        }
    }

    /// The constant-memory two-window counter instead of the exact log.
    pub fn approx(mut self) -> Sliding {
        self.approx = true;
        self
    }

    common_options!();

    fn words(&self) -> Result<Vec<Vec<u8>>, ArgError> {
        let mut words = head(&self.key, "limit", self.limit, &self.window)?;
        if self.approx {
            words.push(b"APPROX".to_vec());
        }
        self.options.words(&mut words)?;
        Ok(words)
    }
}

/// How a TOKEN call that lacks tokens now may take them from the future.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Queue {
    Reserve(DurationArg),
    Wait(DurationArg),
}

/// `RL.TOKEN key rate window`: a bucket refilled with `rate` tokens per
/// `window`, holding `rate` tokens unless `burst` says otherwise.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Token {
    key: Vec<u8>,
    rate: u64,
    window: DurationArg,
    burst: Option<u64>,
    queue: Option<Queue>,
    options: Options,
}

impl Token {
    pub fn new(key: impl AsRef<[u8]>, rate: u64, window: impl Into<DurationArg>) -> Token {
        Token {
            key: key.as_ref().to_vec(),
            rate,
            window: window.into(),
            burst: None,
            queue: None,
            options: Options::default(),
        }
    }

    /// The bucket's capacity (default: `rate`).
    pub fn burst(mut self, capacity: u64) -> Token {
        self.burst = Some(capacity);
        self
    }

    /// Admits now a call whose tokens will exist within `max_wait` (0 ms
    /// allowed), taking them from the future: the reply's `retry_after` is
    /// how long to wait before acting. Replaces an earlier `wait`.
    pub fn reserve(mut self, max_wait: impl Into<DurationArg>) -> Token {
        self.queue = Some(Queue::Reserve(max_wait.into()));
        self
    }

    /// As `reserve`, and the server holds the reply until the reserved
    /// time, so the call returns when the caller may act. The server holds
    /// the connection meanwhile: send it on a connection of its own whose
    /// response timeout exceeds `max_wait` ([`AsyncLimiter::with_wait_connections`](crate::AsyncLimiter::with_wait_connections)
    /// does). Replaces an earlier `reserve`.
    pub fn wait(mut self, max_wait: impl Into<DurationArg>) -> Token {
        self.queue = Some(Queue::Wait(max_wait.into()));
        self
    }

    common_options!();

    fn words(&self) -> Result<Vec<Vec<u8>>, ArgError> {
        let mut words = head(&self.key, "rate", self.rate, &self.window)?;
        if let Some(capacity) = self.burst {
            push2(&mut words, "BURST", amount("BURST", capacity)?.to_string());
        }
        self.options.words(&mut words)?;
        match &self.queue {
            None => {}
            Some(Queue::Reserve(d)) => {
                push2(&mut words, "RESERVE", ms_word(d.millis("RESERVE", true)?))
            }
            Some(Queue::Wait(d)) => push2(&mut words, "WAIT", ms_word(d.millis("WAIT", true)?)),
        }
        Ok(words)
    }
}

/// `key limit window` with the limit and window checked.
fn head(key: &[u8], what: &str, n: u64, window: &DurationArg) -> Result<Vec<Vec<u8>>, ArgError> {
    Ok(vec![
        key.to_vec(),
        amount(what, n)?.to_string().into_bytes(),
        ms_word(window.millis("window", false)?).into_bytes(),
    ])
}

impl Token {
    /// The `max_wait` of a call the server holds (`WAIT`), in ms.
    fn held_ms(&self) -> Result<Option<u64>, ArgError> {
        match &self.queue {
            Some(Queue::Wait(d)) if !self.options.peek => d.millis("WAIT", true).map(Some),
            _ => Ok(None),
        }
    }
}

/// One limit of an [`All`]: any of the four limiters. A `Concurrent`
/// clause takes `cost` and `override_key` (its lease is in the clause's
/// [`Decision::lease`]); `wait`, `release` and `renew` are
/// `RL.CONCURRENT`'s alone.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Clause {
    Fixed(Fixed),
    Sliding(Sliding),
    Token(Token),
    Concurrent(Concurrent),
}

impl From<Fixed> for Clause {
    fn from(c: Fixed) -> Clause {
        Clause::Fixed(c)
    }
}

impl From<Sliding> for Clause {
    fn from(c: Sliding) -> Clause {
        Clause::Sliding(c)
    }
}

impl From<Token> for Clause {
    fn from(c: Token) -> Clause {
        Clause::Token(c)
    }
}

impl From<Concurrent> for Clause {
    fn from(c: Concurrent) -> Clause {
        Clause::Concurrent(c)
    }
}

impl Clause {
    /// The command's name without `RL.`, which opens an `RL.ALL` clause.
    fn name(&self) -> &'static str {
        match self {
            Clause::Fixed(_) => "FIXED",
            Clause::Sliding(_) => "SLIDING",
            Clause::Token(_) => "TOKEN",
            Clause::Concurrent(_) => "CONCURRENT",
        }
    }

    /// The options of the three rate limiters; `None` for `Concurrent`.
    fn options(&self) -> Option<&Options> {
        match self {
            Clause::Fixed(c) => Some(&c.options),
            Clause::Sliding(c) => Some(&c.options),
            Clause::Token(c) => Some(&c.options),
            Clause::Concurrent(_) => None,
        }
    }

    fn key(&self) -> &[u8] {
        match self {
            Clause::Fixed(c) => &c.key,
            Clause::Sliding(c) => &c.key,
            Clause::Token(c) => &c.key,
            Clause::Concurrent(c) => c.key(),
        }
    }

    fn okey(&self) -> Option<&[u8]> {
        match self {
            Clause::Concurrent(c) => c.okey(),
            _ => self.options().and_then(|o| o.okey.as_deref()),
        }
    }

    fn peek(&self) -> bool {
        match self {
            Clause::Concurrent(c) => c.is_peek(),
            _ => self.options().is_some_and(|o| o.peek),
        }
    }

    fn refunds(&self) -> bool {
        self.options()
            .is_some_and(|o| matches!(o.amount, Amount::Refund(_)))
    }

    /// Key, limit, window and options, without PEEK; `in_all` refuses what
    /// an `RL.ALL` clause may not take.
    fn words(&self, in_all: bool) -> Result<Vec<Vec<u8>>, ArgError> {
        match self {
            Clause::Fixed(c) => c.words(),
            Clause::Sliding(c) => c.words(),
            Clause::Token(c) => c.words(),
            Clause::Concurrent(c) => c.words(in_all),
        }
    }

    /// The `max_wait` of a clause the server holds (TOKEN's `WAIT`).
    fn held_ms(&self) -> Result<Option<u64>, ArgError> {
        match self {
            Clause::Token(c) => c.held_ms(),
            _ => Ok(None),
        }
    }

    /// The single-limiter command, `RL.<name> ...`.
    fn prepare(&self) -> Result<Prepared, ArgError> {
        if let Clause::Concurrent(c) = self {
            return c.prepare();
        }
        let name = format!("RL.{}", self.name());
        let mut cmd = redis::cmd(&name);
        for word in self.words(false)? {
            cmd.arg(word);
        }
        if self.peek() {
            cmd.arg("PEEK");
        }
        let keys: Vec<&[u8]> = std::iter::once(self.key()).chain(self.okey()).collect();
        Ok(Prepared {
            cmd,
            target: common_slot(&name, &keys).map(Target::Slot),
            effect: effect(self.refunds()),
            keys: keys.iter().map(|k| k.to_vec()).collect(),
            held_ms: self.held_ms()?,
        })
    }
}

fn effect(refunds: bool) -> Effect {
    if refunds {
        Effect::Refund
    } else {
        Effect::Cacheable
    }
}

impl Command for Fixed {
    type Output = Decision;

    fn prepare(&self) -> Result<Prepared, ArgError> {
        Clause::Fixed(self.clone()).prepare()
    }
}

impl Command for Sliding {
    type Output = Decision;

    fn prepare(&self) -> Result<Prepared, ArgError> {
        Clause::Sliding(self.clone()).prepare()
    }
}

impl Command for Token {
    type Output = Decision;

    fn prepare(&self) -> Result<Prepared, ArgError> {
        Clause::Token(self.clone()).prepare()
    }
}

/// `RL.ALL`: several limits checked in one atomic step, all-or-nothing: the
/// call is recorded by every clause if all admit it, by none otherwise.
///
/// ```
/// use std::time::Duration;
/// use librl_client::{All, Fixed, Token};
///
/// let all = All::new()
///     .clause(Fixed::new("{ip:203.0.113.7}:second", 5, Duration::from_secs(1)).aligned())
///     .clause(Token::new("{ip:203.0.113.7}:bytes", 1 << 20, "1m").cost(4096));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct All {
    clauses: Vec<Clause>,
    peek: bool,
}

impl All {
    pub fn new() -> All {
        All::default()
    }

    /// Adds a limit; clauses are checked and replied in this order.
    pub fn clause(mut self, clause: impl Into<Clause>) -> All {
        self.clauses.push(clause.into());
        self
    }

    /// Answers as if the call were made, and changes nothing.
    pub fn peek(mut self) -> All {
        self.peek = true;
        self
    }

    pub fn clauses(&self) -> &[Clause] {
        &self.clauses
    }
}

impl FromIterator<Clause> for All {
    fn from_iter<I: IntoIterator<Item = Clause>>(clauses: I) -> All {
        All {
            clauses: clauses.into_iter().collect(),
            peek: false,
        }
    }
}

impl Command for All {
    type Output = AllDecision;

    fn prepare(&self) -> Result<Prepared, ArgError> {
        if self.clauses.is_empty() {
            return Err(ArgError::new("RL.ALL needs at least one clause"));
        }
        let mut cmd = redis::cmd("RL.ALL");
        let mut keys: Vec<&[u8]> = Vec::new();
        let (mut refunds, mut leases) = (false, false);
        let mut held_ms: Option<u64> = None;
        for clause in &self.clauses {
            if clause.peek() {
                return Err(ArgError::new(
                    "PEEK applies to a whole RL.ALL: use All::peek, not a clause's peek",
                ));
            }
            cmd.arg(clause.name());
            for word in clause.words(true)? {
                cmd.arg(word);
            }
            keys.push(clause.key());
            keys.extend(clause.okey());
            refunds |= clause.refunds();
            leases |= matches!(clause, Clause::Concurrent(_));
            held_ms = held_ms.max(clause.held_ms()?);
        }
        if self.peek {
            cmd.arg("PEEK");
        }
        Ok(Prepared {
            cmd,
            target: common_slot("RL.ALL", &keys).map(Target::Slot),
            effect: match (refunds, leases) {
                (true, _) => Effect::Refund,
                // A lease frees up on a release the cache cannot see.
                (false, true) => Effect::Uncached,
                (false, false) => Effect::Cacheable,
            },
            keys: keys.iter().map(|k| k.to_vec()).collect(),
            held_ms: if self.peek { None } else { held_ms },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use crate::argv_text as argv;

    fn error(command: &impl Command) -> String {
        command.prepare().unwrap_err().message().to_string()
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn fixed_argv() {
        assert_eq!(
            argv(&Fixed::new("k", 10, secs(60))),
            ["RL.FIXED", "k", "10", "60000ms"]
        );
        assert_eq!(
            argv(
                &Fixed::new("k", 10, "1m")
                    .aligned()
                    .cost(3)
                    .block("1h")
                    .override_key("o")
                    .peek()
            ),
            [
                "RL.FIXED",
                "k",
                "10",
                "60000ms",
                "ALIGNED",
                "COST",
                "3",
                "BLOCK",
                "3600000ms",
                "OVERRIDE",
                "o",
                "PEEK"
            ]
        );
        assert_eq!(
            argv(&Fixed::new("k", 1, Duration::from_millis(1500)).cost(1)),
            ["RL.FIXED", "k", "1", "1500ms"],
            "COST 1 is the default and not sent"
        );
        assert_eq!(
            argv(&Fixed::new("k", 5, "15m").cost(2).refund(4)),
            ["RL.FIXED", "k", "5", "900000ms", "REFUND", "4"],
            "refund replaces cost"
        );
    }

    #[test]
    fn sliding_argv() {
        assert_eq!(
            argv(
                &Sliding::new(b"k\x00\xff".as_slice(), 30, "60")
                    .approx()
                    .refund(2)
            ),
            [
                "RL.SLIDING",
                "k\0\u{fffd}",
                "30",
                "60000ms",
                "APPROX",
                "REFUND",
                "2"
            ]
        );
        assert_eq!(
            argv(&Sliding::new("k", 30, secs(1)).block(secs(5)).peek()),
            ["RL.SLIDING", "k", "30", "1000ms", "BLOCK", "5000ms", "PEEK"]
        );
    }

    #[test]
    fn token_argv() {
        assert_eq!(
            argv(&Token::new("k", 10, secs(1)).burst(20)),
            ["RL.TOKEN", "k", "10", "1000ms", "BURST", "20"]
        );
        assert_eq!(
            argv(
                &Token::new("k", 10, secs(1))
                    .reserve(Duration::from_millis(250))
                    .cost(5)
            ),
            ["RL.TOKEN", "k", "10", "1000ms", "COST", "5", "RESERVE", "250ms"]
        );
        assert_eq!(
            argv(
                &Token::new("k", 10, secs(1))
                    .reserve("2s")
                    .wait(Duration::ZERO)
            ),
            ["RL.TOKEN", "k", "10", "1000ms", "WAIT", "0ms"],
            "wait replaces reserve, and 0 ms is a valid max_wait"
        );
        assert_eq!(
            argv(
                &Token::new("k", 10, secs(1))
                    .refund(3)
                    .block(secs(2))
                    .override_key("o")
                    .peek()
            ),
            [
                "RL.TOKEN", "k", "10", "1000ms", "REFUND", "3", "BLOCK", "2000ms", "OVERRIDE", "o",
                "PEEK"
            ]
        );
    }

    #[test]
    fn all_argv() {
        let all = All::new()
            .clause(
                Fixed::new("{u}:s", 5, secs(1))
                    .aligned()
                    .override_key("{u}:o"),
            )
            .clause(Sliding::new("{u}:m", 30, secs(60)).approx())
            .clause(
                Token::new("{u}:b", 100, secs(1))
                    .burst(200)
                    .cost(7)
                    .reserve("100ms"),
            );
        assert_eq!(
            argv(&all),
            [
                "RL.ALL", "FIXED", "{u}:s", "5", "1000ms", "ALIGNED", "OVERRIDE", "{u}:o",
                "SLIDING", "{u}:m", "30", "60000ms", "APPROX", "TOKEN", "{u}:b", "100", "1000ms",
                "BURST", "200", "COST", "7", "RESERVE", "100ms"
            ]
        );
        assert_eq!(
            argv(&all.clone().peek()).last().map(String::as_str),
            Some("PEEK")
        );
        let refund = All::new().clause(Fixed::new("k", 5, secs(1)).refund(1).block(secs(9)));
        assert_eq!(
            argv(&refund),
            ["RL.ALL", "FIXED", "k", "5", "1000ms", "REFUND", "1", "BLOCK", "9000ms"]
        );
        let collected: All = [Clause::from(Fixed::new("k", 1, secs(1)))]
            .into_iter()
            .collect();
        assert_eq!(argv(&collected), ["RL.ALL", "FIXED", "k", "1", "1000ms"]);
    }

    #[test]
    fn refuses_bad_arguments_before_sending() {
        assert_eq!(
            error(&Fixed::new("k", 0, secs(1))),
            "limit must be an integer from 1 to 2^50, not 0"
        );
        assert!(error(&Token::new("k", 1 << 51, secs(1))).starts_with("rate must be"));
        assert!(error(&Token::new("k", 1, secs(1)).burst(0)).starts_with("BURST must be"));
        assert!(error(&Fixed::new("k", 1, secs(1)).cost(1 << 51)).starts_with("COST must be"));
        assert_eq!(
            argv(&Fixed::new("k", 1, secs(1)).cost(0)),
            ["RL.FIXED", "k", "1", "1000ms", "COST", "0"]
        );
        assert!(error(&Fixed::new("k", 1, secs(1)).refund(0)).starts_with("REFUND must be"));
        assert!(error(&Fixed::new("k", 1, Duration::ZERO)).starts_with("window must be"));
        assert!(
            error(&Fixed::new("k", 1, Duration::from_micros(1500))).starts_with("window must be")
        );
        assert!(error(&Sliding::new("k", 1, "1.5s")).starts_with("window must be"));
        assert!(error(&Fixed::new("k", 1, "1s").block(Duration::ZERO)).starts_with("BLOCK must be"));
        assert!(
            error(&Token::new("k", 1, "1s").reserve(Duration::from_nanos(5)))
                .starts_with("RESERVE must be")
        );
        assert!(error(&Token::new("k", 1, "1s").wait("3651d")).starts_with("WAIT must be"));
        assert_eq!(error(&All::new()), "RL.ALL needs at least one clause");
        assert!(error(&All::new().clause(Fixed::new("k", 1, "1s").peek())).contains("All::peek"));
        assert!(error(&All::new().clause(Fixed::new("k", 0, "1s"))).starts_with("limit"));
    }

    #[test]
    fn routes_to_the_key_slot_and_checks_every_key_shares_it() {
        let target = |c: &dyn Fn() -> Result<Prepared, ArgError>| c().unwrap().target;
        let slot = crate::slot::slot;
        assert_eq!(
            target(&|| Fixed::new("{a}x", 1, "1s").override_key("{a}o").prepare()),
            Ok(Target::Slot(slot(b"a")))
        );
        assert_eq!(
            target(&|| All::new().clause(Token::new("{a}x", 1, "1s")).prepare()),
            Ok(Target::Slot(slot(b"a"))),
            "RL.ALL goes by its first key, not by the word FIXED"
        );
        let split = All::new()
            .clause(Fixed::new("{a}x", 1, "1s"))
            .clause(Sliding::new("{b}y", 1, "1s"));
        let err = split.prepare().unwrap().target.unwrap_err();
        assert!(err.message().contains("hash tag"), "{err}");
        let split_okey = All::new().clause(Fixed::new("{a}x", 1, "1s").override_key("o"));
        assert!(split_okey.prepare().unwrap().target.is_err());
        assert!(Fixed::new("k", 1, "1s")
            .override_key("o")
            .prepare()
            .unwrap()
            .target
            .is_err());
    }

    #[test]
    fn refunds_and_plain_calls_affect_the_cache_differently() {
        fn effect(c: impl Command) -> Effect {
            c.prepare().unwrap().effect
        }
        assert_eq!(effect(Fixed::new("k", 1, "1s")), Effect::Cacheable);
        assert_eq!(effect(Fixed::new("k", 1, "1s").refund(1)), Effect::Refund);
        let all = All::new()
            .clause(Fixed::new("a", 1, "1s"))
            .clause(Token::new("b", 1, "1s").refund(1));
        let prepared = all.prepare().unwrap();
        assert_eq!(prepared.effect, Effect::Refund);
        assert_eq!(prepared.keys, [b"a".to_vec(), b"b".to_vec()]);
    }
}
