//! How every limiter lives in its key: per algorithm, the byte layout with
//! its version byte, loading (with the WRONGTYPE and corrupt-value mapping),
//! deciding through the pure core, and the prepared commit. Nothing else in
//! the module knows a byte layout.
//!
//! One file per algorithm: `fixed.rs`, `approx.rs`, `token.rs`,
//! `sliding.rs` (the compact exact log); `overrides.rs` for override
//! values; `layout.rs` for the prefix they share.

pub mod approx;
pub mod fixed;
pub mod layout;
pub mod overrides;
pub mod sliding;
pub mod token;

use crate::error::RlError;
use crate::server::{Key, Patch, Value};
use layout::DecodeError;
use librl_core::decision::{Decision, RetryAfter};
use librl_core::limit::Limit;

/// A limit decided against its key's value, not yet committed: the reply,
/// why it was denied (None when admitted) and, when admitted, everything
/// committing writes, prepared before any key is written.
pub struct Checked {
    pub reply: [i64; 6],
    pub denied: Option<RetryAfter>,
    pub commit: Option<Commit>,
}

/// A prepared write: committing it copies bytes and sets the expiry; it
/// cannot fail or meet a value it has not already checked.
pub struct Commit {
    write: Write,
    expires_at_ms: u64,
}

enum Write {
    /// The key's new value, for the fixed-size layouts.
    Small { bytes: [u8; SMALL], len: usize },
    /// The key's new value, for a rebuilt log.
    Replace(Vec<u8>),
    /// An in-place update of the exact log: its fields and one entry.
    Log(sliding::LogPatch),
}

/// Room for the largest fixed-size layout (TOKEN's, 37 bytes).
const SMALL: usize = 40;

impl Commit {
    fn small(bytes: &[u8], expires_at_ms: u64) -> Commit {
        let mut buf = [0u8; SMALL];
        let len = bytes.len().min(SMALL);
        if let (Some(dst), Some(src)) = (buf.get_mut(..len), bytes.get(..len)) {
            dst.copy_from_slice(src);
        }
        Commit {
            write: Write::Small { bytes: buf, len },
            expires_at_ms,
        }
    }

    pub fn apply(&self, key: &Key<'_>) {
        let expiry = Some(self.expires_at_ms);
        match &self.write {
            Write::Small { bytes, len } => key.write(bytes.get(..*len).unwrap_or_default(), expiry),
            Write::Replace(bytes) => key.write(bytes, expiry),
            Write::Log(patch) => key.write_patches(
                &[
                    Patch {
                        at: patch.entry_at,
                        bytes: patch.entry(),
                    },
                    Patch {
                        at: 0,
                        bytes: &patch.header,
                    },
                ],
                expiry,
            ),
        }
    }
}

/// Decides `cost` against `limit` on the key's value at `now`, preparing
/// the commit if admitted. Changes nothing.
pub fn check(limit: &Limit, value: Value<'_>, now: u64, cost: u64) -> Result<Checked, RlError> {
    match limit {
        Limit::Fixed(p) => fixed::check(p, value, now, cost),
        Limit::Sliding(p) => sliding::check(p, value, now, cost),
        Limit::Approx(p) => approx::check(p, value, now, cost),
        Limit::Token(p) => token::check(p, value, now, cost),
    }
}

/// A checked decision whose commit stores `bytes(state)`.
fn replacing<S, const N: usize>(d: &Decision<S>, bytes: impl Fn(&S) -> [u8; N]) -> Checked {
    Checked {
        reply: d.reply(),
        denied: d.denied(),
        commit: d
            .admitted()
            .map(|(s, expires_at_ms)| Commit::small(&bytes(s), expires_at_ms)),
    }
}

/// Decodes a key's value with `decode`, mapping every foreign or broken
/// value to the error its user should see; `expected` names what the
/// command accepts, for the WRONGTYPE message.
pub fn load<'v, S>(
    value: Value<'v>,
    decode: impl FnOnce(&'v [u8]) -> Result<S, DecodeError>,
    expected: &'static str,
) -> Result<Option<S>, RlError> {
    match value {
        Value::Empty => Ok(None),
        Value::OtherType => Err(RlError::WrongType { expected }),
        Value::String(bytes) => match decode(bytes) {
            Ok(s) => Ok(Some(s)),
            Err(DecodeError::Foreign | DecodeError::OtherTag) => {
                Err(RlError::WrongType { expected })
            }
            Err(e) => Err(RlError::BadState(e)),
        },
    }
}
