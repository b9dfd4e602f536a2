//! RL.SLIDING APPROX's state. Version 3 (tag `A`, anchored to the key's
//! expiry, the end of the window after the current one, or of the current
//! one once its counter is 0): `duration(anchor - start_ms) varint(current)
//! varint(previous)`. Version 1: `start_ms current previous` as
//! little-endian u64s.

use super::layout::{self, DecodeError, Reader, Tag, VERSION_1, VERSION_3};
use super::{SmallBytes, Stored, Write};
use crate::error::RlError;
use librl_core::approx::{ApproxParams, ApproxState};

/// The state as version 3, anchored to `anchor` (the key's expiry).
#[inline(always)]
pub fn encode_approx(s: &ApproxState, anchor: u64) -> SmallBytes {
    SmallBytes::fields(Tag::Approx, |w| {
        w.duration(anchor.saturating_sub(s.start_ms));
        w.varint(s.current);
        w.varint(s.previous);
    })
}

/// Either version; `key_expiry` is asked only for an anchored value.
pub fn decode_approx(
    bytes: &[u8],
    key_expiry: impl FnOnce() -> Option<u64>,
) -> Result<ApproxState, DecodeError> {
    let p = layout::read_prefix(bytes)?;
    if p.tag != Tag::Approx {
        return Err(DecodeError::OtherTag);
    }
    let mut r;
    let start_ms = match p.version {
        VERSION_1 => {
            r = Reader::over(p.rest);
            r.u64()?
        }
        VERSION_3 => {
            let anchor;
            (anchor, r) = layout::anchored(p, key_expiry)?;
            let since = r.duration()?;
            anchor.checked_sub(since).ok_or(DecodeError::Corrupt)?
        }
        v => return Err(DecodeError::UnsupportedVersion(v)),
    };
    let s = if p.version == VERSION_1 {
        ApproxState {
            start_ms,
            current: r.u64()?,
            previous: r.u64()?,
        }
    } else {
        ApproxState {
            start_ms,
            current: r.varint()?,
            previous: r.varint()?,
        }
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

    fn decode(
        bytes: &'v [u8],
        key_expiry: &dyn Fn() -> Option<u64>,
    ) -> Result<ApproxState, DecodeError> {
        decode_approx(bytes, key_expiry)
    }

    fn admitted(
        &self,
        _: Option<&ApproxState>,
        admit: &ApproxState,
        anchor: u64,
    ) -> Result<Write, RlError> {
        Ok(Write::Small(encode_approx(admit, anchor)))
    }

    fn refunded(
        &self,
        _: Option<&ApproxState>,
        refund: &ApproxState,
        anchor: u64,
    ) -> Result<Write, RlError> {
        Ok(Write::Small(encode_approx(refund, anchor)))
    }
}
