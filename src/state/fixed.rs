//! RL.FIXED's state: `start_ms end_ms count` as little-endian u64s after the
//! prefix (tag `F`).

use super::layout::{DecodeError, Reader, Tag, Writer, HEADER_LEN};
use super::{load, replacing, Checked};
use crate::error::RlError;
use crate::server::Value;
use librl_core::fixed::{self as core, FixedParams, FixedState};

pub const FIXED_LEN: usize = HEADER_LEN + 3 * 8;

pub fn encode_fixed(s: &FixedState) -> [u8; FIXED_LEN] {
    let mut out = [0u8; FIXED_LEN];
    let mut w = Writer::new(&mut out, Tag::Fixed);
    w.u64(s.start_ms);
    w.u64(s.end_ms);
    w.u64(s.count);
    out
}

pub fn decode_fixed(bytes: &[u8]) -> Result<FixedState, DecodeError> {
    let mut r = Reader::new(bytes, Tag::Fixed)?;
    let s = FixedState {
        start_ms: r.u64()?,
        end_ms: r.u64()?,
        count: r.u64()?,
    };
    r.finish()?;
    if s.is_consistent() {
        Ok(s)
    } else {
        Err(DecodeError::Corrupt)
    }
}

pub(super) fn check(
    p: &FixedParams,
    value: Value<'_>,
    now: u64,
    cost: u64,
) -> Result<Checked, RlError> {
    let state = load(value, decode_fixed, "an RL.FIXED limiter")?;
    Ok(replacing(&core::decide(p, state, now, cost), encode_fixed))
}
