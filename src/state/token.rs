//! RL.TOKEN's state. Version 3 (tag `T`, anchored to the key's expiry, the
//! time the bucket is full again): `duration(window_ms) varint(anchor -
//! at_ms) varint(missing)`, then `varint(debt)` only for a bucket in debt
//! (RESERVE). Version 1: `at_ms window_ms` as little-endian u64s and
//! `missing` as a little-endian u128; version 2 (a bucket in debt): one
//! more u128, `debt`.

use super::layout::{self, DecodeError, Reader, Tag, VERSION_1, VERSION_2, VERSION_3};
use super::{SmallBytes, Stored, Write};
use crate::error::RlError;
use librl_core::token::{Bucket, TokenParams, TokenState};
use librl_core::units::Window;

// The longest version-3 value, 63 bytes, fits `SmallBytes`: the prefix, a
// window and an offset (at most 10 bytes each) and two u128 amounts (19).

/// The bucket as version 3, anchored to `anchor` (the key's expiry).
#[inline(always)]
pub fn encode_bucket(b: &Bucket, anchor: u64) -> SmallBytes {
    SmallBytes::fields(Tag::Token, |w| {
        w.duration(b.state.window_ms.ms());
        w.varint(anchor.saturating_sub(b.state.at_ms));
        w.varint128(b.state.missing);
        if b.debt > 0 {
            w.varint128(b.debt);
        }
    })
}

/// Any version: a version-1 value, or a version-3 value without the debt
/// field, is a bucket without debt. `key_expiry` is asked only for an
/// anchored value.
pub fn decode_bucket(
    bytes: &[u8],
    key_expiry: impl FnOnce() -> Option<u64>,
) -> Result<Bucket, DecodeError> {
    let p = layout::read_prefix(bytes)?;
    if p.tag != Tag::Token {
        return Err(DecodeError::OtherTag);
    }
    let (at_ms, window_ms, missing, debt, in_debt) = match p.version {
        VERSION_1 | VERSION_2 => {
            let mut r = Reader::over(p.rest);
            let (at_ms, window_ms, missing) = (r.u64()?, r.u64()?, r.u128()?);
            let in_debt = p.version == VERSION_2;
            let debt = if in_debt { r.u128()? } else { 0 };
            r.finish()?;
            (at_ms, window_ms, missing, debt, in_debt)
        }
        VERSION_3 => {
            let (anchor, mut r) = layout::anchored(p, key_expiry)?;
            let window_ms = r.duration()?;
            let since = r.varint()?;
            let missing = r.varint128()?;
            let in_debt = !r.is_empty();
            let debt = if in_debt { r.varint128()? } else { 0 };
            r.finish()?;
            let at_ms = anchor.checked_sub(since).ok_or(DecodeError::Corrupt)?;
            (at_ms, window_ms, missing, debt, in_debt)
        }
        v => return Err(DecodeError::UnsupportedVersion(v)),
    };
    // A window out of range was not written by us.
    let window_ms = Window::new(window_ms).ok_or(DecodeError::Corrupt)?;
    let state = TokenState {
        at_ms,
        window_ms,
        missing,
    };
    let bucket = Bucket { state, debt };
    // The debt field exists only for debt.
    if bucket.is_consistent() && in_debt == (debt > 0) {
        Ok(bucket)
    } else {
        Err(DecodeError::Corrupt)
    }
}

impl<'v> Stored<'v> for TokenParams {
    const EXPECTED: &'static str = "an RL.TOKEN limiter";

    fn decode(
        bytes: &'v [u8],
        key_expiry: &dyn Fn() -> Option<u64>,
    ) -> Result<Bucket, DecodeError> {
        decode_bucket(bytes, key_expiry)
    }

    #[inline(always)]
    fn admitted(&self, _: Option<&Bucket>, admit: &Bucket, anchor: u64) -> Result<Write, RlError> {
        Ok(Write::Small(encode_bucket(admit, anchor)))
    }

    #[inline]
    fn refunded(&self, _: Option<&Bucket>, refund: &Bucket, anchor: u64) -> Result<Write, RlError> {
        Ok(Write::Small(encode_bucket(refund, anchor)))
    }
}
