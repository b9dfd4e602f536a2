//! RL.TOKEN's state: `at_ms window_ms` as little-endian u64s and `missing`
//! as a little-endian u128 after the prefix (tag `T`).

use super::layout::{DecodeError, Reader, Tag, Writer, HEADER_LEN};
use super::{load, replacing, Checked};
use crate::error::RlError;
use crate::server::Value;
use librl_core::token::{self as core, TokenParams, TokenState};

pub const TOKEN_LEN: usize = HEADER_LEN + 2 * 8 + 16;

pub fn encode_token(s: &TokenState) -> [u8; TOKEN_LEN] {
    let mut out = [0u8; TOKEN_LEN];
    let mut w = Writer::new(&mut out, Tag::Token);
    w.u64(s.at_ms);
    w.u64(s.window_ms);
    w.bytes(&s.missing.to_le_bytes());
    out
}

pub fn decode_token(bytes: &[u8]) -> Result<TokenState, DecodeError> {
    let mut r = Reader::new(bytes, Tag::Token)?;
    let s = TokenState {
        at_ms: r.u64()?,
        window_ms: r.u64()?,
        missing: r.u128()?,
    };
    r.finish()?;
    if s.is_consistent() {
        Ok(s)
    } else {
        Err(DecodeError::Corrupt)
    }
}

pub(super) fn check(
    p: &TokenParams,
    value: Value<'_>,
    now: u64,
    cost: u64,
) -> Result<Checked, RlError> {
    let state = load(value, decode_token, "an RL.TOKEN limiter")?;
    Ok(replacing(&core::decide(p, state, now, cost), encode_token))
}
