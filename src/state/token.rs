//! RL.TOKEN's state: `at_ms window_ms` as little-endian u64s and `missing`
//! as a little-endian u128 after the prefix (tag `T`, version 1); a bucket
//! in debt (RESERVE) is version 2, with `debt` as one more u128. A bucket
//! without debt is always written as version 1.

use super::layout::VERSION_2;
use super::layout::{DecodeError, Reader, Tag, Writer, HEADER_LEN};
use super::{SmallBytes, Stored, Write};
use crate::error::RlError;
use librl_core::token::{Bucket, TokenParams, TokenState};
use librl_core::units::Window;

pub const TOKEN_LEN: usize = HEADER_LEN + 2 * 8 + 16;
/// A bucket in debt: version 2, one more u128.
pub const TOKEN_DEBT_LEN: usize = TOKEN_LEN + 16;

pub fn encode_token(s: &TokenState) -> [u8; TOKEN_LEN] {
    let mut out = [0u8; TOKEN_LEN];
    let mut w = Writer::new(&mut out, Tag::Token);
    w.u64(s.at_ms);
    w.u64(s.window_ms.ms());
    w.bytes(&s.missing.to_le_bytes());
    out
}

/// A version-1 bucket only (tests of the first layout).
#[cfg(test)]
pub fn decode_token(bytes: &[u8]) -> Result<TokenState, DecodeError> {
    let bucket = decode_bucket(bytes)?;
    if bucket.debt == 0 {
        Ok(bucket.state)
    } else {
        Err(DecodeError::Corrupt)
    }
}

/// Either version: a version-1 value is a bucket without debt.
pub fn decode_bucket(bytes: &[u8]) -> Result<Bucket, DecodeError> {
    let (mut r, version) = Reader::versioned(bytes, Tag::Token, VERSION_2)?;
    let (at_ms, window_ms, missing) = (r.u64()?, r.u64()?, r.u128()?);
    let debt = if version == VERSION_2 { r.u128()? } else { 0 };
    r.finish()?;
    // A window out of range was not written by us.
    let window_ms = Window::new(window_ms).ok_or(DecodeError::Corrupt)?;
    let state = TokenState {
        at_ms,
        window_ms,
        missing,
    };
    let bucket = Bucket { state, debt };
    // Version 2 exists only for debt.
    if bucket.is_consistent() && (version != VERSION_2 || debt > 0) {
        Ok(bucket)
    } else {
        Err(DecodeError::Corrupt)
    }
}

/// Version 1 unless the bucket is in debt.
pub fn encode_bucket(b: &Bucket) -> SmallBytes {
    if b.debt == 0 {
        return SmallBytes::new(&encode_token(&b.state));
    }
    let mut out = [0u8; TOKEN_DEBT_LEN];
    let mut w = Writer::versioned(&mut out, VERSION_2, Tag::Token);
    w.u64(b.state.at_ms);
    w.u64(b.state.window_ms.ms());
    w.bytes(&b.state.missing.to_le_bytes());
    w.bytes(&b.debt.to_le_bytes());
    SmallBytes::new(&out)
}

impl<'v> Stored<'v> for TokenParams {
    const EXPECTED: &'static str = "an RL.TOKEN limiter";

    fn decode(bytes: &[u8]) -> Result<Bucket, DecodeError> {
        decode_bucket(bytes)
    }

    fn admitted(&self, _: Option<&[u8]>, admit: &Bucket) -> Result<Write, RlError> {
        Ok(Write::small(&encode_bucket(admit)))
    }

    fn refunded(&self, _: Option<&Bucket>, refund: &Bucket) -> Result<Vec<u8>, RlError> {
        let admit = refund;
        Ok(encode_bucket(admit).as_slice().to_vec())
    }
}
