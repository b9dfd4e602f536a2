//! RL.FIXED's state: `start_ms end_ms count` as little-endian u64s after the
//! prefix (tag `F`).

use super::layout::{DecodeError, Reader, Tag, Writer, HEADER_LEN};
use super::{FixedSize, SmallBytes};
use librl_core::decision::{Decision, Refunded, Status};
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

impl FixedSize for FixedParams {
    type S = FixedState;
    const EXPECTED: &'static str = "an RL.FIXED limiter";

    fn decode(bytes: &[u8]) -> Result<FixedState, DecodeError> {
        decode_fixed(bytes)
    }

    fn encode(s: &FixedState) -> SmallBytes {
        SmallBytes::new(&encode_fixed(s))
    }

    fn decide(
        &self,
        s: Option<FixedState>,
        now: u64,
        cost: u64,
        _: Option<u64>,
    ) -> Decision<FixedState> {
        core::decide(self, s, now, cost)
    }

    fn status(&self, s: Option<FixedState>, now: u64) -> Status {
        core::status(self, s, now)
    }

    fn refund(&self, s: Option<FixedState>, now: u64, units: u64) -> Refunded<FixedState> {
        core::refund(self, s, now, units)
    }
}
