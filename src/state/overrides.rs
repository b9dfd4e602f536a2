//! Override values: `limit window_ms burst` as little-endian u64s after the
//! prefix (tag `O`; burst 0 when unset). An override's TTL is its key's own
//! expiry.

use super::layout::{DecodeError, Reader, Tag, Writer, HEADER_LEN};
use super::load;
use crate::error::RlError;
use crate::server::Value;
use librl_core::overrides::Override;

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
    w.u64(o.limit);
    w.u64(o.window_ms);
    w.u64(o.burst.unwrap_or(0));
    out
}

pub fn decode_override(bytes: &[u8]) -> Result<Override, DecodeError> {
    let mut r = Reader::new(bytes, Tag::Override)?;
    let o = Override {
        limit: r.u64()?,
        window_ms: r.u64()?,
        burst: Some(r.u64()?).filter(|&b| b != 0),
    };
    r.finish()?;
    if o.is_consistent() {
        Ok(o)
    } else {
        Err(DecodeError::Corrupt)
    }
}
