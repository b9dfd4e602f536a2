//! Argument values as the commands take them, validated before anything is
//! sent: amounts from 1 to 2^50, durations in whole milliseconds.

use librl_core::units::{self, Amount, Window};
use std::fmt;
use std::time::Duration;

/// The largest limit, rate, capacity, cost or refund the module accepts
/// (2^50): the module's own bound, from `librl-core`.
pub use librl_core::MAX_AMOUNT;

/// The longest window or duration the module accepts: 3650 days, in ms
/// (the module's own bound, from `librl-core`).
pub const MAX_DURATION_MS: u64 = librl_core::MAX_WINDOW_MS;

/// An argument the client refuses before sending anything: it names the
/// argument and what was expected. Converts into a [`redis::RedisError`] of
/// kind [`redis::ErrorKind::Client`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgError(String);

impl ArgError {
    pub(crate) fn new(message: impl Into<String>) -> ArgError {
        ArgError(message.into())
    }

    pub fn message(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ArgError {}

impl From<ArgError> for redis::RedisError {
    fn from(e: ArgError) -> redis::RedisError {
        redis::RedisError::from((redis::ErrorKind::Client, "librl", e.0))
    }
}

/// A window or duration: a [`Duration`] in whole milliseconds, or the
/// command's own text (`"60"` is seconds, `"1500ms"`, `"1m"`, `"24h"`,
/// `"7d"`). Checked when the command is built: a window or duration is from
/// 1 ms to 3650 days, a `max_wait` from 0 ms; sub-millisecond parts are
/// refused, never rounded.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum DurationArg {
    Duration(Duration),
    Text(String),
}

impl From<Duration> for DurationArg {
    fn from(d: Duration) -> DurationArg {
        DurationArg::Duration(d)
    }
}

impl From<&str> for DurationArg {
    fn from(s: &str) -> DurationArg {
        DurationArg::Text(s.to_string())
    }
}

impl From<String> for DurationArg {
    fn from(s: String) -> DurationArg {
        DurationArg::Text(s)
    }
}

impl DurationArg {
    /// The value in milliseconds, checked for `what`: at least 1 ms (0 ms
    /// too when `zero_ok`), at most 3650 days, whole milliseconds.
    pub(crate) fn millis(&self, what: &str, zero_ok: bool) -> Result<u64, ArgError> {
        let least = if zero_ok { "0ms" } else { "1ms" };
        let expected = || {
            ArgError::new(format!(
                "{what} must be a duration from {least} to 3650d in whole milliseconds, not {self}"
            ))
        };
        let ms = match self {
            DurationArg::Duration(d) => {
                if d.subsec_nanos() % 1_000_000 != 0 {
                    return Err(expected());
                }
                u64::try_from(d.as_millis()).map_err(|_| expected())?
            }
            // The module's grammar: digits with an optional unit `ms`,
            // `s`, `m`, `h` or `d` (any case); bare digits are seconds.
            DurationArg::Text(text) => units::duration_ms(text.as_bytes()).ok_or_else(expected)?,
        };
        match Window::new(ms) {
            Some(window) => Ok(window.ms()),
            None if ms == 0 && zero_ok => Ok(0),
            None => Err(expected()),
        }
    }
}

impl fmt::Display for DurationArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurationArg::Duration(d) => write!(f, "{d:?}"),
            DurationArg::Text(t) => write!(f, "{t:?}"),
        }
    }
}

/// An amount (`limit`, `rate`, `BURST`, `COST`, `REFUND`) checked for `what`.
pub(crate) fn amount(what: &str, n: u64) -> Result<u64, ArgError> {
    Amount::new(n)
        .map(Amount::get)
        .ok_or_else(|| ArgError::new(format!("{what} must be an integer from 1 to 2^50, not {n}")))
}

/// The wire form of a checked duration: exact milliseconds.
pub(crate) fn ms_word(ms: u64) -> String {
    format!("{ms}ms")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(d: impl Into<DurationArg>) -> Result<u64, ArgError> {
        d.into().millis("window", false)
    }

    #[test]
    fn durations_are_whole_milliseconds_from_one_to_3650_days() {
        assert_eq!(ms(Duration::from_secs(60)), Ok(60_000));
        assert_eq!(ms(Duration::from_millis(1)), Ok(1));
        assert_eq!(
            ms(Duration::from_millis(MAX_DURATION_MS)),
            Ok(MAX_DURATION_MS)
        );
        for bad in [
            Duration::ZERO,
            Duration::from_micros(1500),
            Duration::from_nanos(1),
            Duration::from_millis(MAX_DURATION_MS + 1),
            Duration::MAX,
        ] {
            let err = ms(bad).unwrap_err();
            assert!(err.message().starts_with("window must be"), "{err}");
        }
        assert_eq!(
            DurationArg::from(Duration::ZERO).millis("max_wait", true),
            Ok(0)
        );
        assert!(DurationArg::from(Duration::from_micros(10))
            .millis("max_wait", true)
            .is_err());
    }

    #[test]
    fn text_follows_the_command_grammar() {
        for (text, want) in [
            ("60", 60_000),
            ("1500ms", 1500),
            ("1500MS", 1500),
            ("1m", 60_000),
            ("24h", 86_400_000),
            ("3650d", MAX_DURATION_MS),
            ("2s", 2000),
        ] {
            assert_eq!(ms(text), Ok(want), "{text}");
        }
        for bad in [
            "",
            "0",
            "0ms",
            "-1",
            "+1",
            "1.5s",
            " 1",
            "1 s",
            "01",
            "1w",
            "ms",
            "3651d",
            "99999999999999999999",
        ] {
            assert!(ms(bad).is_err(), "{bad:?}");
        }
        assert_eq!(DurationArg::from("0").millis("max_wait", true), Ok(0));
    }

    #[test]
    fn amounts_are_from_one_to_two_to_the_fifty() {
        assert_eq!(amount("limit", 1), Ok(1));
        assert_eq!(amount("limit", MAX_AMOUNT), Ok(MAX_AMOUNT));
        let err = amount("COST", 0).unwrap_err();
        assert_eq!(
            err.message(),
            "COST must be an integer from 1 to 2^50, not 0"
        );
        assert!(amount("limit", MAX_AMOUNT + 1).is_err());
    }

    #[test]
    fn errors_become_client_errors() {
        let e: redis::RedisError = ArgError::new("limit must be").into();
        assert_eq!(e.kind(), redis::ErrorKind::Client);
        assert!(e.to_string().contains("limit must be"), "{e}");
    }
}
