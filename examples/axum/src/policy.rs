//! Per-route policies, the RL.* clause each one sends, and the six-integer
//! limiter reply it gets back.

use std::fmt;
use std::time::Duration;

use axum::http::HeaderName;
use redis::{FromRedisValue, RedisResult, Value};

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
            window >= Duration::from_millis(1) && window <= MAX_WINDOW,
            "policy {name}: window {window:?} is not from 1 ms to 3650 days"
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
    /// options. The single-policy command is `RL.` + the same words.
    pub fn clause(&self) -> Vec<String> {
        let p = self.policy;
        let (name, flag) = match p.algorithm {
            Algorithm::Fixed { aligned } => ("FIXED", aligned.then_some("ALIGNED")),
            Algorithm::Sliding { approx } => ("SLIDING", approx.then_some("APPROX")),
            Algorithm::Token { .. } => ("TOKEN", None),
        };
        let mut words = vec![
            name.to_string(),
            self.key.clone(),
            p.limit.to_string(),
            format!("{}ms", p.window.as_millis()),
        ];
        words.extend(flag.map(String::from));
        if let Algorithm::Token { burst: Some(b) } = p.algorithm {
            words.extend(["BURST".to_string(), b.to_string()]);
        }
        if self.cost != 1 {
            words.extend(["COST".to_string(), self.cost.to_string()]);
        }
        if let Some(okey) = &self.override_key {
            words.extend(["OVERRIDE".to_string(), okey.clone()]);
        }
        words
    }

    /// The one RL.* command that checks this policy alone.
    pub fn command(&self) -> redis::Cmd {
        let words = self.clause();
        let mut cmd = redis::cmd(&format!("RL.{}", words[0]));
        cmd.arg(&words[1..]);
        cmd
    }
}

/// How long until a call with the same cost would be admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum RetryAfter {
    /// Milliseconds; 0 when the call was admitted.
    Ms(u64),
    /// The cost exceeds the limit: no wait helps (the module's -1).
    Never,
}

/// The module's six-integer limiter reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reply {
    pub allowed: bool,
    pub count: u64,
    pub retry_after: RetryAfter,
    /// The effective limit (after any override); for TOKEN the capacity.
    pub limit: u64,
    pub remaining: u64,
    /// Until the limiter is back to empty (TOKEN: full).
    pub reset_after_ms: u64,
}

impl Reply {
    pub fn from_integers(v: &[i64]) -> Result<Reply, String> {
        let [allowed, count, retry, limit, remaining, reset] = v else {
            return Err(format!("a limiter reply has six integers, not {v:?}"));
        };
        let unsigned = |x: i64| u64::try_from(x).map_err(|_| format!("negative field in {v:?}"));
        Ok(Reply {
            allowed: *allowed == 1,
            count: unsigned(*count)?,
            retry_after: if *retry == -1 {
                RetryAfter::Never
            } else {
                RetryAfter::Ms(unsigned(*retry)?)
            },
            limit: unsigned(*limit)?,
            remaining: unsigned(*remaining)?,
            reset_after_ms: unsigned(*reset)?,
        })
    }

    pub fn reset_after_secs(&self) -> u64 {
        ceil_secs(self.reset_after_ms)
    }

    /// Whole seconds for `Retry-After`, at least 1; None when no wait helps.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self.retry_after {
            RetryAfter::Ms(ms) => Some(ceil_secs(ms).max(1)),
            RetryAfter::Never => None,
        }
    }
}

impl FromRedisValue for Reply {
    fn from_redis_value(v: &Value) -> RedisResult<Reply> {
        let ints: Vec<i64> = FromRedisValue::from_redis_value(v)?;
        Reply::from_integers(&ints).map_err(|e| {
            redis::RedisError::from((redis::ErrorKind::TypeError, "bad limiter reply", e))
        })
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
        Check {
            policy,
            key: "k".into(),
            override_key: okey.map(String::from),
            cost,
        }
        .clause()
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

    #[test]
    fn reply_maps_minus_one_to_never() {
        let r = Reply::from_integers(&[0, 3, -1, 3, 0, 1200]).unwrap();
        assert_eq!(r.retry_after, RetryAfter::Never);
        assert_eq!(r.retry_after_secs(), None);
        assert_eq!(r.reset_after_secs(), 2);
        let r = Reply::from_integers(&[0, 3, 1, 3, 0, 1]).unwrap();
        assert_eq!(r.retry_after_secs(), Some(1));
        assert!(Reply::from_integers(&[1, 2, 3]).is_err());
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
