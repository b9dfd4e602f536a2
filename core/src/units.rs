//! The two kinds of number a caller gives, written once for the module's
//! parser and the Rust client: amounts (a limit, rate, capacity, cost or
//! refund) and durations (a window, BLOCK, RESERVE's and WAIT's
//! max_wait), with their bounds and their grammar.

use crate::{MAX_AMOUNT, MAX_WINDOW_MS};
use std::num::NonZeroU64;

/// A limit, rate, capacity, cost or refund: an integer from 1 to
/// [`MAX_AMOUNT`] (2^50).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Amount(NonZeroU64);

impl Amount {
    pub const ONE: Amount = Amount(NonZeroU64::MIN);

    /// `n` when it is from 1 to 2^50.
    #[inline]
    pub const fn new(n: u64) -> Option<Amount> {
        match NonZeroU64::new(n) {
            Some(n) if n.get() <= MAX_AMOUNT => Some(Amount(n)),
            _ => None,
        }
    }

    /// A strictly decimal amount: no sign, no spaces, no leading zeros, no
    /// fractions (the same strictness as Redis's own integers).
    #[inline]
    pub fn parse(arg: &[u8]) -> Option<Amount> {
        plain_u64(arg).and_then(Amount::new)
    }

    #[inline]
    pub const fn get(self) -> u64 {
        self.0.get()
    }

    /// The amount as a divisor the compiler knows is not 0.
    #[inline]
    pub const fn nonzero(self) -> NonZeroU64 {
        self.0
    }
}

/// A window or duration: whole milliseconds from 1 to [`MAX_WINDOW_MS`]
/// (3650 days).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Window(NonZeroU64);

impl Window {
    /// `ms` when it is from 1 ms to 3650 days.
    #[inline]
    pub const fn new(ms: u64) -> Option<Window> {
        match NonZeroU64::new(ms) {
            Some(ms) if ms.get() <= MAX_WINDOW_MS => Some(Window(ms)),
            _ => None,
        }
    }

    /// `<integer>[ms|s|m|h|d]` (see [`duration_ms`]) within 1 ms to 3650 days.
    #[inline]
    pub fn parse(arg: &[u8]) -> Option<Window> {
        duration_ms(arg).and_then(Window::new)
    }

    #[inline]
    pub const fn ms(self) -> u64 {
        self.0.get()
    }

    /// The milliseconds as a divisor the compiler knows is not 0.
    #[inline]
    pub const fn nonzero_ms(self) -> NonZeroU64 {
        self.0
    }
}

/// A strictly decimal u64: digits only, no leading zero (but "0" itself).
#[inline]
pub fn plain_u64(arg: &[u8]) -> Option<u64> {
    match leading_decimal(arg)? {
        (n, []) => Some(n),
        _ => None,
    }
}

/// The strictly decimal number `arg` starts with and the bytes after it,
/// in one pass (this parses every call's numbers): None when it starts
/// with no digit, with a leading zero, or past u64.
#[inline]
fn leading_decimal(arg: &[u8]) -> Option<(u64, &[u8])> {
    let mut value = 0u64;
    let mut digits = 0usize;
    for &b in arg {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        value = value.checked_mul(10)?.checked_add(u64::from(d))?;
        digits += 1;
    }
    let (number, rest) = arg.split_at_checked(digits)?;
    match number {
        [] | [b'0', _, ..] => None,
        _ => Some((value, rest)),
    }
}

/// The duration grammar: a strictly decimal integer with an optional unit
/// `ms`, `s`, `m`, `h` or `d` (any case; bare digits are seconds), in
/// milliseconds. No bounds: None only for a malformed text or one past
/// u64 milliseconds.
#[inline]
pub fn duration_ms(arg: &[u8]) -> Option<u64> {
    let (number, unit) = leading_decimal(arg)?;
    let scale: u64 = match unit {
        [] | [b's' | b'S'] => 1000,
        [b'm' | b'M', b's' | b'S'] => 1,
        [b'm' | b'M'] => 60 * 1000,
        [b'h' | b'H'] => 60 * 60 * 1000,
        [b'd' | b'D'] => 24 * 60 * 60 * 1000,
        _ => return None,
    };
    number.checked_mul(scale)
}

/// A RESERVE or WAIT `max_wait` in ms: 0 (with or without a unit: no wait
/// at all) or a [`Window`].
#[inline]
pub fn wait_ms(arg: &[u8]) -> Option<u64> {
    match duration_ms(arg) {
        Some(0) => Some(0),
        _ => Window::parse(arg).map(Window::ms),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_are_plain_decimals_from_one_to_two_to_the_fifty() {
        assert_eq!(Amount::parse(b"1"), Amount::new(1));
        assert_eq!(
            Amount::parse(b"1125899906842624").map(Amount::get),
            Some(MAX_AMOUNT)
        );
        for bad in [
            &b""[..],
            b"0",
            b"00",
            b"05",
            b"-1",
            b"+1",
            b" 1",
            b"1.0",
            b"1125899906842625",
            b"18446744073709551616",
        ] {
            assert_eq!(Amount::parse(bad), None, "{bad:?}");
        }
        assert_eq!(Amount::new(0), None);
        assert_eq!(Amount::ONE.get(), 1);
    }

    #[test]
    fn durations_take_a_unit_in_any_case_and_bare_seconds() {
        for (text, ms) in [
            (&b"1"[..], 1000),
            (b"1ms", 1),
            (b"1MS", 1),
            (b"1mS", 1),
            (b"2s", 2000),
            (b"2m", 120_000),
            (b"2H", 7_200_000),
            (b"1d", 86_400_000),
            (b"3650d", MAX_WINDOW_MS),
            (b"87600h", MAX_WINDOW_MS),
        ] {
            assert_eq!(Window::parse(text).map(Window::ms), Some(ms), "{text:?}");
        }
        for bad in [
            &b""[..],
            b"0",
            b"0ms",
            b"ms",
            b"05s",
            b"5sec",
            b"5msms",
            b"1.5s",
            b"-5s",
            b" 5s",
            b"3651d",
            b"315360000001ms",
            b"99999999999999999999d",
        ] {
            assert_eq!(Window::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn waits_are_zero_or_a_window() {
        for zero in [&b"0"[..], b"0ms", b"0S", b"0d"] {
            assert_eq!(wait_ms(zero), Some(0), "{zero:?}");
        }
        assert_eq!(wait_ms(b"1"), Some(1000));
        assert_eq!(wait_ms(b"3650d"), Some(MAX_WINDOW_MS));
        for bad in [&b""[..], b"00", b"0x", b"-0", b"3651d", b"0.5s"] {
            assert_eq!(wait_ms(bad), None, "{bad:?}");
        }
    }
}
