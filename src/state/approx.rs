//! RL.SLIDING APPROX's state: `start_ms current previous` as little-endian
//! u64s after the prefix (tag `A`).

use super::layout::{DecodeError, Reader, Tag, Writer, HEADER_LEN};
use super::{load, replacing, Checked};
use crate::error::RlError;
use crate::server::Value;
use librl_core::approx::{self as core, ApproxParams, ApproxState};

pub const APPROX_LEN: usize = HEADER_LEN + 3 * 8;

pub fn encode_approx(s: &ApproxState) -> [u8; APPROX_LEN] {
    let mut out = [0u8; APPROX_LEN];
    let mut w = Writer::new(&mut out, Tag::Approx);
    w.u64(s.start_ms);
    w.u64(s.current);
    w.u64(s.previous);
    out
}

pub fn decode_approx(bytes: &[u8]) -> Result<ApproxState, DecodeError> {
    let mut r = Reader::new(bytes, Tag::Approx)?;
    let s = ApproxState {
        start_ms: r.u64()?,
        current: r.u64()?,
        previous: r.u64()?,
    };
    r.finish()?;
    if s.is_consistent() {
        Ok(s)
    } else {
        Err(DecodeError::Corrupt)
    }
}

pub(super) fn check(
    p: &ApproxParams,
    value: Value<'_>,
    now: u64,
    cost: u64,
) -> Result<Checked, RlError> {
    let state = load(value, decode_approx, "an RL.SLIDING APPROX limiter")?;
    Ok(replacing(&core::decide(p, state, now, cost), encode_approx))
}
