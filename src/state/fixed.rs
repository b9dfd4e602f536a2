//! RL.FIXED's state: `start_ms end_ms count` as little-endian u64s after the
//! prefix (tag `F`).

use super::layout::{DecodeError, Reader, Tag, Writer, HEADER_LEN};
use super::{SmallBytes, Stored, Write};
use crate::error::RlError;
use librl_core::fixed::{FixedParams, FixedState};

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

impl<'v> Stored<'v> for FixedParams {
    const EXPECTED: &'static str = "an RL.FIXED limiter";

    fn decode(bytes: &[u8]) -> Result<FixedState, DecodeError> {
        decode_fixed(bytes)
    }

    fn admitted(&self, _: Option<&[u8]>, admit: &FixedState) -> Result<Write, RlError> {
        Ok(Write::small(&SmallBytes::new(&encode_fixed(admit))))
    }

    fn refunded(&self, _: Option<&FixedState>, refund: &FixedState) -> Result<Vec<u8>, RlError> {
        let admit = refund;
        Ok(SmallBytes::new(&encode_fixed(admit)).as_slice().to_vec())
    }
}
