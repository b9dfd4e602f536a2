//! Per-route policies, and the `RL.ALL` clause each one becomes for one
//! request. Replies are the client's six-integer [`Decision`].

use std::fmt;
use std::time::Duration;

use axum::http::HeaderName;
use librl_client::{Clause, Fixed, Sliding, Token};

pub use librl_client::{Decision, RetryAfter};

/// 2^50: the largest limit, rate, burst and cost the module accepts.
pub const MAX_UNITS: u64 = 1 << 50;

/// The module's largest window, 3650 days.
const MAX_WINDOW: Duration = Duration::from_secs(3650 * 86_400);

/// Which RL.* command a policy calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// `RL.FIXED`; `aligned` windows start on multiples of the window in
    /// Unix time (per-minute limits that reset on the minute).
    Fixed { aligned: bool },
    /// `RL.SLIDING`; `approx` is the constant-memory two-window counter.
    Sliding { approx: bool },
    /// `RL.TOKEN`: `limit` tokens per window into a bucket of `burst` tokens
    /// (default `limit`).
    Token { burst: Option<u64> },
}

/// Whom a policy counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The client's IP address, whatever credentials it sends.
    Ip,
    /// The most specific identity the request has: its API key, else its
    /// authenticated user, else its IP address.
    Client,
}

/// What one request costs against a policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cost {
    /// One unit per request.
    One,
    /// The request body's size in bytes (at least 1): the policy's limit is
    /// then a byte budget.
    BodyBytes,
    /// An integer from this request header, 1 by default (a batch of 50
    /// items sends `X-Batch-Size: 50`).
    Header(HeaderName),
}

/// One named limit. The name is part of the key, so policies with the same
/// name share each client's counter on every route that uses them.
#[derive(Clone, Debug)]
pub struct Policy {
    pub name: String,
    pub algorithm: Algorithm,
    pub limit: u64,
    pub window: Duration,
    pub scope: Scope,
    pub cost: Cost,
    /// Sends `OVERRIDE <prefix>{subject}:override:<name>`, so that an
    /// operator's `RL.OVERRIDE.SET` on that key gives one client its own plan.
    pub overridable: bool,
}

impl Policy {
    /// `limit` requests per fixed `window`, counted per client.
    pub fn fixed(name: &str, limit: u64, window: Duration) -> Policy {
        Policy::new(name, Algorithm::Fixed { aligned: false }, limit, window)
    }

    /// At most `limit` requests in any `window`, counted per client.
    pub fn sliding(name: &str, limit: u64, window: Duration) -> Policy {
        Policy::new(name, Algorithm::Sliding { approx: false }, limit, window)
    }

    /// A bucket refilled with `rate` tokens per `window`, counted per client.
    pub fn token(name: &str, rate: u64, window: Duration) -> Policy {
        Policy::new(name, Algorithm::Token { burst: None }, rate, window)
    }

    /// Panics on values the module would refuse: a policy table is code, and
    /// a typo in it should stop the program at start, not fail each request.
    fn new(name: &str, algorithm: Algorithm, limit: u64, window: Duration) -> Policy {
        assert!(
            !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)),
            "policy name {name:?}: use letters, digits, '-', '_' and '.'"
        );
        assert!(
            (1..=MAX_UNITS).contains(&limit),
            "policy {name}: limit {limit} is not from 1 to 2^50"
        );
        assert!(
            window >= Duration::from_millis(1)
                && window <= MAX_WINDOW
                && window.subsec_nanos().is_multiple_of(1_000_000),
            "policy {name}: window {window:?} is not whole milliseconds from 1 ms to 3650 days"
        );
        Policy {
            name: name.to_string(),
            algorithm,
            limit,
            window,
            scope: Scope::Client,
            cost: Cost::One,
            overridable: false,
        }
    }

    /// FIXED only: windows aligned to Unix time.
    pub fn aligned(mut self) -> Policy {
        match &mut self.algorithm {
            Algorithm::Fixed { aligned } => *aligned = true,
            other => panic!("policy {}: ALIGNED is for FIXED, not {other:?}", self.name),
        }
        self
    }

    /// SLIDING only: the approximate, constant-memory counter.
    pub fn approx(mut self) -> Policy {
        match &mut self.algorithm {
            Algorithm::Sliding { approx } => *approx = true,
            other => panic!("policy {}: APPROX is for SLIDING, not {other:?}", self.name),
        }
        self
    }

    /// TOKEN only: the bucket's capacity.
    pub fn burst(mut self, capacity: u64) -> Policy {
        assert!(
            (1..=MAX_UNITS).contains(&capacity),
            "policy {}: burst {capacity} is not from 1 to 2^50",
            self.name
        );
        match &mut self.algorithm {
            Algorithm::Token { burst } => *burst = Some(capacity),
            other => panic!("policy {}: BURST is for TOKEN, not {other:?}", self.name),
        }
        self
    }

    pub fn scope(mut self, scope: Scope) -> Policy {
        self.scope = scope;
        self
    }

    pub fn cost(mut self, cost: Cost) -> Policy {
        self.cost = cost;
        self
    }

    pub fn overridable(mut self) -> Policy {
        self.overridable = true;
        self
    }

    /// The window in whole seconds, rounded up, as the headers give it.
    pub fn window_secs(&self) -> u64 {
        ceil_secs(self.window.as_millis() as u64)
    }
}

/// A policy applied to one request: whose counter, at what cost.
#[derive(Clone, Debug)]
pub struct Check<'p> {
    pub policy: &'p Policy,
    pub key: String,
    pub override_key: Option<String>,
    pub cost: u64,
}

impl Check<'_> {
    /// The policy as an `RL.ALL` clause: algorithm, key, limit, window and
    /// options. A route's checks are one `RL.ALL` of their clauses.
    pub fn clause(&self) -> Clause {
        let p = self.policy;
        let (key, window) = (self.key.as_str(), p.window);
        let mut clause: Clause = match p.algorithm {
            Algorithm::Fixed { aligned } => {
                let fixed = Fixed::new(key, p.limit, window).cost(self.cost);
                (if aligned { fixed.aligned() } else { fixed }).into()
            }
            Algorithm::Sliding { approx } => {
                let sliding = Sliding::new(key, p.limit, window).cost(self.cost);
                (if approx { sliding.approx() } else { sliding }).into()
            }
            Algorithm::Token { burst } => {
                let token = Token::new(key, p.limit, window).cost(self.cost);
                match burst {
                    Some(capacity) => token.burst(capacity).into(),
                    None => token.into(),
                }
            }
        };
        if let Some(okey) = &self.override_key {
            clause = match clause {
                Clause::Fixed(c) => c.override_key(okey).into(),
                Clause::Sliding(c) => c.override_key(okey).into(),
                Clause::Token(c) => c.override_key(okey).into(),
            };
        }
        clause
    }
}

/// The reply's `reset_after` in whole seconds, rounded up.
pub fn reset_after_secs(d: &Decision) -> u64 {
    ceil_secs(d.reset_after_ms)
}

/// Whole seconds for `Retry-After`, at least 1; None when no wait helps.
pub fn retry_after_secs(d: &Decision) -> Option<u64> {
    match d.retry_after {
        RetryAfter::Ms(ms) => Some(ceil_secs(ms).max(1)),
        RetryAfter::Never => None,
    }
}

impl fmt::Display for Policy {
    /// `3 per 60s`, `1000 per 1500ms`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.window.as_millis();
        if ms.is_multiple_of(1000) {
            write!(f, "{} per {}s", self.limit, ms / 1000)
        } else {
            write!(f, "{} per {}ms", self.limit, ms)
        }
    }
}

fn ceil_secs(ms: u64) -> u64 {
    ms.div_ceil(1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(policy: &Policy, cost: u64, okey: Option<&str>) -> Vec<String> {
        let clause = Check {
            policy,
            key: "k".into(),
            override_key: okey.map(String::from),
            cost,
        }
        .clause();
        let all = librl_client::All::new().clause(clause);
        let prepared = librl_client::Command::prepare(&all).unwrap();
        prepared.argv()[1..]
            .iter()
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .collect()
    }

    #[test]
    fn clauses_carry_each_option_once() {
        let secs = Duration::from_secs;
        let fixed = Policy::fixed("a", 10, secs(60)).aligned();
        assert_eq!(
            check(&fixed, 1, None),
            ["FIXED", "k", "10", "60000ms", "ALIGNED"]
        );
        let sliding = Policy::sliding("b", 5, Duration::from_millis(1500)).approx();
        assert_eq!(
            check(&sliding, 3, None),
            ["SLIDING", "k", "5", "1500ms", "APPROX", "COST", "3"]
        );
        let token = Policy::token("c", 100, secs(1)).burst(200);
        assert_eq!(
            check(&token, 1, Some("o")),
            ["TOKEN", "k", "100", "1000ms", "BURST", "200", "OVERRIDE", "o"]
        );
    }

    fn decision(retry: RetryAfter, reset_after_ms: u64) -> Decision {
        Decision {
            allowed: false,
            count: 3,
            retry_after: retry,
            limit: 3,
            remaining: 0,
            reset_after_ms,
        }
    }

    #[test]
    fn seconds_round_up_and_never_has_none() {
        let never = decision(RetryAfter::Never, 1200);
        assert_eq!(retry_after_secs(&never), None);
        assert_eq!(reset_after_secs(&never), 2);
        let soon = decision(RetryAfter::Ms(1), 1);
        assert_eq!(retry_after_secs(&soon), Some(1));
        assert_eq!(reset_after_secs(&soon), 1);
    }

    #[test]
    #[should_panic(expected = "whole milliseconds")]
    fn refuses_a_sub_millisecond_window() {
        Policy::fixed("a", 1, Duration::from_micros(1500));
    }

    #[test]
    #[should_panic(expected = "not from 1 to 2^50")]
    fn refuses_a_zero_limit() {
        Policy::fixed("a", 0, Duration::from_secs(1));
    }

    #[test]
    fn displays_whole_seconds_or_milliseconds() {
        assert_eq!(
            Policy::fixed("a", 3, Duration::from_secs(60)).to_string(),
            "3 per 60s"
        );
        assert_eq!(
            Policy::fixed("a", 3, Duration::from_millis(1500)).to_string(),
            "3 per 1500ms"
        );
    }
}
