//! RL.FIXED's state. Version 3 (tag `F`, anchored to the window's end,
//! which is when the key expires): `varint(count) duration(end_ms -
//! start_ms)`. Version 1: `start_ms end_ms count` as little-endian u64s.

use super::layout::{self, DecodeError, Reader, Tag, VERSION_1, VERSION_3};
use super::{SmallBytes, Stored, Write};
use crate::error::RlError;
use librl_core::fixed::{FixedParams, FixedState};

/// The state as version 3, anchored to its end (the key's expiry).
#[inline(always)]
pub fn encode_fixed(s: &FixedState) -> SmallBytes {
    SmallBytes::fields(Tag::Fixed, |w| {
        w.varint(s.count);
        w.duration(s.end_ms.saturating_sub(s.start_ms));
    })
}

/// Either version; `key_expiry` is asked only for an anchored value.
pub fn decode_fixed(
    bytes: &[u8],
    key_expiry: impl FnOnce() -> Option<u64>,
) -> Result<FixedState, DecodeError> {
    let p = layout::read_prefix(bytes)?;
    if p.tag != Tag::Fixed {
        return Err(DecodeError::OtherTag);
    }
    let s = match p.version {
        VERSION_1 => {
            let mut r = Reader::over(p.rest);
            let s = FixedState {
                start_ms: r.u64()?,
                end_ms: r.u64()?,
                count: r.u64()?,
            };
            r.finish()?;
            s
        }
        VERSION_3 => {
            let (end_ms, mut r) = layout::anchored(p, key_expiry)?;
            let count = r.varint()?;
            let len = r.duration()?;
            r.finish()?;
            FixedState {
                start_ms: end_ms.checked_sub(len).ok_or(DecodeError::Corrupt)?,
                end_ms,
                count,
            }
        }
        v => return Err(DecodeError::UnsupportedVersion(v)),
    };
    if s.is_consistent() {
        Ok(s)
    } else {
        Err(DecodeError::Corrupt)
    }
}

impl<'v> Stored<'v> for FixedParams {
    const EXPECTED: &'static str = "an RL.FIXED limiter";

    fn decode(
        bytes: &'v [u8],
        key_expiry: &dyn Fn() -> Option<u64>,
    ) -> Result<FixedState, DecodeError> {
        decode_fixed(bytes, key_expiry)
    }

    fn admitted(
        &self,
        _: Option<&FixedState>,
        admit: &FixedState,
        _: u64,
    ) -> Result<Write, RlError> {
        Ok(Write::Small(encode_fixed(admit)))
    }

    fn refunded(
        &self,
        _: Option<&FixedState>,
        refund: &FixedState,
        _: u64,
    ) -> Result<Write, RlError> {
        Ok(Write::Small(encode_fixed(refund)))
    }
}
