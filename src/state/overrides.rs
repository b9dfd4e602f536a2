//! Override values (tag `O`; an override's TTL is its key's own expiry).
//! Version 3: `varint(limit) duration(window_ms) varint(burst)`. Version
//! 1: `limit window_ms burst` as little-endian u64s. Burst 0 when unset.

use super::layout::{self, DecodeError, Reader, Tag, Writer, VERSION_1, VERSION_3};
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

/// The longest version-3 value: the prefix, two amounts of at most 2^50
/// (8 bytes each) and a window (at most 10).
const OVERRIDE_MAX: usize = layout::HEADER_LEN + 2 * 8 + 10;

/// The override as version 3 (its TTL is the key's, so not encoded here).
pub fn encode_override(o: &Override) -> Vec<u8> {
    let mut out = [0u8; OVERRIDE_MAX];
    let mut w = Writer::new(&mut out, Tag::Override);
    w.varint(o.limit.get());
    w.duration(o.window_ms.ms());
    w.varint(o.burst.map_or(0, Amount::get));
    let len = w.written();
    out.get(..len).unwrap_or_default().to_vec()
}

/// Either version.
pub fn decode_override(bytes: &[u8]) -> Result<Override, DecodeError> {
    let (mut r, version) = Reader::versioned(bytes, Tag::Override, VERSION_3)?;
    let (limit, window_ms, burst) = match version {
        VERSION_1 => (r.u64()?, r.u64()?, r.u64()?),
        VERSION_3 => (r.varint()?, r.duration()?, r.varint()?),
        v => return Err(DecodeError::UnsupportedVersion(v)),
    };
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
