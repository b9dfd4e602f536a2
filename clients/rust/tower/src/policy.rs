//! One named limit (docs/http.md, Policies): its algorithm, limit and
//! window, whose counter it uses, what a request costs, and which
//! responses it counts. Also the text forms a configuration file writes:
//! durations (`1500ms`) and rates (`100/minute`).

use std::fmt;
use std::time::Duration;

use http::HeaderName;

/// 2^50: the largest limit, rate, burst and cost the module accepts.
pub const MAX_UNITS: u64 = librl_core::MAX_AMOUNT;

/// The module's largest window, 3650 days, in ms.
pub const MAX_WINDOW_MS: u64 = librl_core::MAX_WINDOW_MS;

/// Which RL.* command a policy calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// `RL.FIXED`; `aligned` windows start on multiples of the window in
    /// Unix time (per-minute limits that reset on the minute).
    Fixed { aligned: bool },
    /// `RL.SLIDING`: the exact log.
    Sliding,
    /// `RL.SLIDING ... APPROX`: the constant-memory two-window counter.
    Approx,
    /// `RL.TOKEN`: `limit` tokens per window into a bucket of `burst` tokens
    /// (default `limit`).
    Token { burst: Option<u64> },
}

/// Whose counter a policy uses (docs/http.md, Identity).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// The client's address (proxy headers believed only from trusted proxies).
    Ip,
    /// The API key's SHA-256 prefix; no key: the address.
    ApiKey,
    /// The authenticated user; else the API key; else the address.
    User,
    /// This header's value; absent: the address.
    Header(HeaderName),
    /// One counter for everyone.
    Global,
}

/// What one request costs against a policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cost {
    /// The same units for every request (1 by default).
    Units(u64),
    /// The request body's size in bytes (at least 1).
    BodyBytes,
    /// The integer in this request header, 1 when absent.
    Header(HeaderName),
}

/// Which requests stay counted once the response is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Count {
    All,
    /// Refunded when the response status is below 400.
    Failed,
    /// Refunded when the response status is 400 or above.
    Succeeded,
}

/// One named limit. The name is part of the key, so policies with the same
/// name share each subject's counter on every route that uses them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    pub name: String,
    pub algorithm: Algorithm,
    /// Units per window (for `Token`, the rate: tokens added per window).
    pub limit: u64,
    pub window: Duration,
    pub key: KeyKind,
    pub cost: Cost,
    pub count: Count,
    /// Sends `OVERRIDE <prefix>{subject}:override:<name>`, so that an
    /// operator's `RL.OVERRIDE SET` on that key gives one subject its own plan.
    pub overridable: bool,
}

impl Policy {
    /// `limit` requests per fixed `window`, counted per client address.
    pub fn fixed(name: &str, limit: u64, window: Duration) -> Policy {
        Policy::new(name, Algorithm::Fixed { aligned: false }, limit, window)
    }

    /// At most `limit` requests in any `window` (the exact log).
    pub fn sliding(name: &str, limit: u64, window: Duration) -> Policy {
        Policy::new(name, Algorithm::Sliding, limit, window)
    }

    /// The sliding window's constant-memory approximation.
    pub fn approx(name: &str, limit: u64, window: Duration) -> Policy {
        Policy::new(name, Algorithm::Approx, limit, window)
    }

    /// A bucket refilled with `rate` tokens per `window`.
    pub fn token(name: &str, rate: u64, window: Duration) -> Policy {
        Policy::new(name, Algorithm::Token { burst: None }, rate, window)
    }

    /// Values are checked by [`Policy::validate`] when a layer is built,
    /// so a bad policy stops the program at start-up.
    pub fn new(name: &str, algorithm: Algorithm, limit: u64, window: Duration) -> Policy {
        Policy {
            name: name.to_string(),
            algorithm,
            limit,
            window,
            key: KeyKind::Ip,
            cost: Cost::Units(1),
            count: Count::All,
            overridable: false,
        }
    }

    /// Fixed windows aligned to Unix time. Panics on another algorithm:
    /// a policy table is code, and a typo in it stops the program at start.
    pub fn aligned(mut self) -> Policy {
        match &mut self.algorithm {
            Algorithm::Fixed { aligned } => *aligned = true,
            other => panic!("policy {}: aligned is for fixed, not {other}", self.name),
        }
        self
    }

    /// The bucket's capacity. Panics on another algorithm than token.
    pub fn burst(mut self, capacity: u64) -> Policy {
        match &mut self.algorithm {
            Algorithm::Token { burst } => *burst = Some(capacity),
            other => panic!("policy {}: burst is for token, not {other}", self.name),
        }
        self
    }

    pub fn key(mut self, key: KeyKind) -> Policy {
        self.key = key;
        self
    }

    pub fn cost(mut self, cost: Cost) -> Policy {
        self.cost = cost;
        self
    }

    pub fn count(mut self, count: Count) -> Policy {
        self.count = count;
        self
    }

    pub fn overridable(mut self) -> Policy {
        self.overridable = true;
        self
    }

    /// The field (relative to the policy) and the reason, for the first
    /// value the module would refuse.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if !valid_name(&self.name) {
            return Err((
                "name",
                format!("{:?}: use 1 to 64 of A-Z a-z 0-9 - _ .", self.name),
            ));
        }
        if !(1..=MAX_UNITS).contains(&self.limit) {
            return Err(("limit", format!("{} is not from 1 to 2^50", self.limit)));
        }
        let window_ms = self.window.as_millis();
        if !self.window.subsec_nanos().is_multiple_of(1_000_000)
            || window_ms == 0
            || window_ms > u128::from(MAX_WINDOW_MS)
        {
            return Err((
                "window",
                format!(
                    "{:?} is not whole milliseconds from 1 ms to 3650 days",
                    self.window
                ),
            ));
        }
        if let Algorithm::Token { burst: Some(b) } = self.algorithm {
            if !(1..=MAX_UNITS).contains(&b) {
                return Err(("burst", format!("{b} is not from 1 to 2^50")));
            }
        }
        if let Cost::Units(n) = self.cost {
            if !(1..=MAX_UNITS).contains(&n) {
                return Err(("cost", format!("{n} is not from 1 to 2^50")));
            }
        }
        Ok(())
    }

    pub fn window_ms(&self) -> u64 {
        u64::try_from(self.window.as_millis()).unwrap_or(u64::MAX)
    }

    /// The window in whole seconds, rounded up, as the headers give it.
    pub fn window_secs(&self) -> u64 {
        self.window_ms().div_ceil(1000)
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Algorithm::Fixed { .. } => "fixed",
            Algorithm::Sliding => "sliding",
            Algorithm::Approx => "approx",
            Algorithm::Token { .. } => "token",
        })
    }
}

impl fmt::Display for Policy {
    /// `3 per 60s`, `1000 per 1500ms`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.window_ms();
        if ms.is_multiple_of(1000) {
            write!(f, "{} per {}s", self.limit, ms / 1000)
        } else {
            write!(f, "{} per {}ms", self.limit, ms)
        }
    }
}

/// 1 to 64 of `A-Z a-z 0-9 - _ .`: safe in a key and in a header's quoted
/// string.
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

/// `250ms`, `1s`, `15m`, `24h`, `7d`, or a bare integer of seconds, as the
/// module's commands read them. None for anything else (`1.5s`, `0x10`).
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let n: u64 = text[..digits].parse().ok()?;
    let unit_ms: u64 = match &text[digits..] {
        "ms" => 1,
        "" | "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    n.checked_mul(unit_ms).map(Duration::from_millis)
}

/// `100/minute`, `5/10s`, `3/1500ms`: a limit and its window, as the
/// `limits` library writes rates.
pub fn parse_rate(text: &str) -> Option<(u64, Duration)> {
    let (count, per) = text.trim().split_once('/')?;
    if count.is_empty() || !count.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let limit: u64 = count.parse().ok()?;
    let window = match per.trim() {
        "s" | "sec" | "second" => Duration::from_secs(1),
        "m" | "min" | "minute" => Duration::from_secs(60),
        "h" | "hour" => Duration::from_secs(3600),
        "d" | "day" => Duration::from_secs(86_400),
        other => parse_duration(other)?,
    };
    Some((limit, window))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_the_commands_read_them() {
        let ms = Duration::from_millis;
        assert_eq!(parse_duration("250ms"), Some(ms(250)));
        assert_eq!(parse_duration("60"), Some(ms(60_000)));
        assert_eq!(parse_duration("15m"), Some(ms(900_000)));
        assert_eq!(parse_duration("2d"), Some(ms(172_800_000)));
        for bad in ["", "1.5s", "ms", "10 parsecs", "-1s", "1w"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn rates_read_as_the_limits_library_writes_them() {
        let s = Duration::from_secs;
        assert_eq!(parse_rate("100/minute"), Some((100, s(60))));
        assert_eq!(parse_rate("5/10s"), Some((5, s(10))));
        assert_eq!(
            parse_rate("3/1500ms"),
            Some((3, Duration::from_millis(1500)))
        );
        assert_eq!(parse_rate("1/day"), Some((1, s(86_400))));
        for bad in ["100/fortnight", "/s", "x/s", "100", "1.5/s"] {
            assert_eq!(parse_rate(bad), None, "{bad}");
        }
    }

    #[test]
    fn validate_names_the_field_it_refuses() {
        let s = Duration::from_secs;
        assert_eq!(
            Policy::fixed("a", 0, s(1)).validate().unwrap_err().0,
            "limit"
        );
        assert_eq!(
            Policy::fixed("a b", 1, s(1)).validate().unwrap_err().0,
            "name"
        );
        assert_eq!(
            Policy::fixed("a", 1, Duration::from_micros(1500))
                .validate()
                .unwrap_err()
                .0,
            "window"
        );
        assert_eq!(
            Policy::token("a", 1, s(1))
                .burst(0)
                .validate()
                .unwrap_err()
                .0,
            "burst"
        );
        assert!(Policy::token("a", 1, s(1)).burst(5).validate().is_ok());
    }
}
