//! RL.SLIDING APPROX's state: `start_ms current previous` as little-endian
//! u64s after the prefix (tag `A`).

use super::layout::{DecodeError, Reader, Tag, Writer, HEADER_LEN};
use super::{SmallBytes, Stored, Write};
use crate::error::RlError;
use librl_core::approx::{ApproxParams, ApproxState};

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

impl<'v> Stored<'v> for ApproxParams {
    const EXPECTED: &'static str = "an RL.SLIDING APPROX limiter";

    fn decode(bytes: &[u8]) -> Result<ApproxState, DecodeError> {
        decode_approx(bytes)
    }

    fn admitted(&self, _: Option<&[u8]>, admit: &ApproxState) -> Result<Write, RlError> {
        Ok(Write::small(&SmallBytes::new(&encode_approx(admit))))
    }

    fn refunded(&self, _: Option<&ApproxState>, refund: &ApproxState) -> Result<Vec<u8>, RlError> {
        let admit = refund;
        Ok(SmallBytes::new(&encode_approx(admit)).as_slice().to_vec())
    }
}
