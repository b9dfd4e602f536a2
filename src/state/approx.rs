//! RL.SLIDING APPROX's state: `start_ms current previous` as little-endian
//! u64s after the prefix (tag `A`).

use super::layout::{DecodeError, Reader, Tag, Writer, HEADER_LEN};
use super::{FixedSize, SmallBytes};
use librl_core::approx::{self as core, ApproxParams, ApproxState};
use librl_core::decision::{Decision, Refunded, Status};

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

impl FixedSize for ApproxParams {
    type S = ApproxState;
    const EXPECTED: &'static str = "an RL.SLIDING APPROX limiter";

    fn decode(bytes: &[u8]) -> Result<ApproxState, DecodeError> {
        decode_approx(bytes)
    }

    fn encode(s: &ApproxState) -> SmallBytes {
        SmallBytes::new(&encode_approx(s))
    }

    fn decide(
        &self,
        s: Option<ApproxState>,
        now: u64,
        cost: u64,
        _: Option<u64>,
    ) -> Decision<ApproxState> {
        core::decide(self, s, now, cost)
    }

    fn status(&self, s: Option<ApproxState>, now: u64) -> Status {
        core::status(self, s, now)
    }

    fn refund(&self, s: Option<ApproxState>, now: u64, units: u64) -> Refunded<ApproxState> {
        core::refund(self, s, now, units)
    }
}
