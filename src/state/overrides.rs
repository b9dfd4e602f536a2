//! Override values: `limit window_ms burst` as little-endian u64s after the
//! prefix (tag `O`; burst 0 when unset). An override's TTL is its key's own
//! expiry.

use super::layout::{DecodeError, Reader, Tag, Writer, HEADER_LEN};
use super::load;
use crate::error::RlError;
use crate::server::Value;
use librl_core::overrides::Override;
use librl_core::units::{Amount, Window};

/// What a command that reads an okey accepts, for WRONGTYPE messages.
pub const EXPECTED: &str = "an RL.OVERRIDE value";

/// The override an okey holds, if any.
pub fn load_override(value: Value<'_>) -> Result<Option<Override>, RlError> {
    load(value, decode_override, EXPECTED)
}

pub const OVERRIDE_LEN: usize = HEADER_LEN + 3 * 8;

/// An override's TTL is the key's own expiry, so it is not encoded here.
pub fn encode_override(o: &Override) -> [u8; OVERRIDE_LEN] {
    let mut out = [0u8; OVERRIDE_LEN];
    let mut w = Writer::new(&mut out, Tag::Override);
    w.u64(o.limit.get());
    w.u64(o.window_ms.ms());
    w.u64(o.burst.map_or(0, Amount::get));
    out
}

pub fn decode_override(bytes: &[u8]) -> Result<Override, DecodeError> {
    let mut r = Reader::new(bytes, Tag::Override)?;
    let (limit, window_ms, burst) = (r.u64()?, r.u64()?, r.u64()?);
    r.finish()?;
    // Values out of the types' range were not written by us.
    let o = (|| {
        Some(Override {
            limit: Amount::new(limit)?,
            window_ms: Window::new(window_ms)?,
            burst: match burst {
                0 => None,
                b => Some(Amount::new(b)?),
            },
        })
    })();
    o.ok_or(DecodeError::Corrupt)
}
