//! The text forms a configuration writes time in (docs/http.md, Durations
//! and Rates): a duration is the module's own grammar (`250ms`, `1s`,
//! `15m`; bare digits are seconds), a rate the `limits` library's notation
//! (`100/minute`, `5 per 2 minutes`, `3/1500ms`). Bounds are the schema's
//! and are the walker's to apply; these only read.

use std::time::Duration;

use librl_core::units::duration_ms;
use serde_json::Value;

/// `250ms`, `1s`, `15m`, `24H`, `7d`, or bare digits of seconds, exactly as
/// the module's commands read them: no spaces, no sign, no fraction, no
/// leading zero. None for anything else (`1.5s`, ` 5s`, `05s`, `1w`).
pub fn parse_duration(text: &str) -> Option<Duration> {
    duration_ms(text.as_bytes()).map(Duration::from_millis)
}

/// A duration in a document: a string of the grammar, or a JSON number of
/// whole seconds (`60` and `60.0` alike), in ms; unbounded.
pub(crate) fn duration_value_ms(value: &Value) -> Option<u64> {
    match value {
        Value::String(text) => duration_ms(text.as_bytes()),
        Value::Number(_) => whole_number(value)?.checked_mul(1000),
        _ => None,
    }
}

/// A JSON number whose value is whole and not negative (JSON Schema's
/// integer: `5` and `5.0` alike; `true` is no number).
pub(crate) fn whole_number(value: &Value) -> Option<u64> {
    let Value::Number(n) = value else {
        return None;
    };
    if let Some(n) = n.as_u64() {
        return Some(n);
    }
    let f = n.as_f64()?;
    // Whole values up to 2^53 are exact in f64; every bound is below that.
    (f.fract() == 0.0 && (0.0..9_007_199_254_740_992.0).contains(&f)).then_some(f as u64)
}

/// `OWS count OWS ("/" | "per") OWS period OWS` (docs/http.md, Rates): the
/// count and the period in ms, unbounded. Letters in any ASCII case.
pub fn parse_rate(text: &str) -> Option<(u64, Duration)> {
    rate_ms(text).map(|(count, ms)| (count, Duration::from_millis(ms)))
}

pub(crate) fn rate_ms(text: &str) -> Option<(u64, u64)> {
    let text = trim_ows(text.as_bytes());
    let (count, rest) = digits(text)?;
    let rest = skip_ows(rest);
    let period = if let Some(after) = rest.strip_prefix(b"/") {
        skip_ows(after)
    } else {
        let after = strip_prefix_ignore_case(rest, b"per")?;
        let period = skip_ows(after);
        // `per` needs whitespace only where letters would touch.
        if period.len() == after.len() && period.first().is_some_and(u8::is_ascii_alphabetic) {
            return None;
        }
        period
    };
    Some((count, period_ms(period)?))
}

/// `[n OWS] unit` (n may have leading zeros; `5/2 minutes`), else a
/// duration of the module's grammar.
fn period_ms(period: &[u8]) -> Option<u64> {
    if period.is_empty() {
        return None;
    }
    let (n, unit) = match digits(period) {
        Some((n, rest)) => (n, skip_ows(rest)),
        None => (1, period),
    };
    match unit_ms(unit) {
        Some(ms) if n >= 1 => n.checked_mul(ms),
        Some(_) => None,
        None => duration_ms(period),
    }
}

/// A unit word or letter; `ms` is a duration's unit, not a rate's.
fn unit_ms(unit: &[u8]) -> Option<u64> {
    let lower = unit.to_ascii_lowercase();
    let word = lower.strip_suffix(b"s").filter(|w| w.len() > 1);
    match word.unwrap_or(&lower) {
        b"s" | b"second" => Some(1000),
        b"m" | b"minute" => Some(60_000),
        b"h" | b"hour" => Some(3_600_000),
        b"d" | b"day" => Some(86_400_000),
        _ => None,
    }
}

/// The decimal number `text` starts with (leading zeros allowed) and what
/// follows; None without a digit or past u64.
fn digits(text: &[u8]) -> Option<(u64, &[u8])> {
    let end = text.iter().take_while(|b| b.is_ascii_digit()).count();
    if end == 0 {
        return None;
    }
    let (number, rest) = text.split_at(end);
    let n = number.iter().try_fold(0u64, |n, d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })?;
    Some((n, rest))
}

fn is_ows(b: &u8) -> bool {
    matches!(b, b' ' | b'\t')
}

fn skip_ows(text: &[u8]) -> &[u8] {
    let start = text.iter().take_while(|b| is_ows(b)).count();
    text.get(start..).unwrap_or_default()
}

fn trim_ows(text: &[u8]) -> &[u8] {
    let text = skip_ows(text);
    let end = text.len() - text.iter().rev().take_while(|b| is_ows(b)).count();
    text.get(..end).unwrap_or_default()
}

fn strip_prefix_ignore_case<'t>(text: &'t [u8], prefix: &[u8]) -> Option<&'t [u8]> {
    let (head, rest) = text.split_at_checked(prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then_some(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    // The grammars' vectors are conformance/vectors/durations.json and
    // rates.json (vectors.rs); these check the public API's shape only.
    #[test]
    fn the_public_parsers_give_durations() {
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration(" 5s"), None);
        assert_eq!(
            parse_rate("5 per 2 minutes"),
            Some((5, Duration::from_secs(120)))
        );
        assert_eq!(parse_rate("5/sec"), None);
    }
}
