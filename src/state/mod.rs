//! How every limiter lives in its key: per algorithm, the byte layout with
//! its version byte, loading (with the WRONGTYPE and corrupt-value mapping),
//! deciding through the pure core, and the prepared commit. Nothing else in
//! the module knows a byte layout.
//!
//! One file per algorithm: `fixed.rs`, `approx.rs`, `token.rs`,
//! `sliding.rs` (the compact exact log), `concurrent.rs` (leases, with its
//! own flow: RELEASE and RENEW by id, no REFUND or BLOCK); `overrides.rs`
//! for override values; `layout.rs` for the prefix they share, `varint.rs`
//! for the small numbers of the variable-length layouts.

pub mod approx;
pub mod concurrent;
pub mod fixed;
pub mod layout;
pub mod overrides;
#[cfg(test)]
mod read_tests;
pub mod sliding;
pub mod token;
mod varint;

use crate::error::RlError;
use crate::request::Action;
use crate::server::{Key, Patch, Value};
use crate::stats::Event;
use layout::DecodeError;
use librl_core::algorithm::{Algorithm, Exact};
use librl_core::block::{self, BlockRule, Guarded, RefundWrite};
use librl_core::decision::{LimiterReply, RetryAfter, Status};
use librl_core::limit::Limit;
use sliding::LogView;

/// One clause's call as the state room sees it.
#[derive(Clone, Copy, Debug)]
pub struct Step {
    /// The decision's time: the server's clock, or the primary's NOW.
    pub now: u64,
    pub action: Action,
    /// BLOCK duration, if given.
    pub block_ms: Option<u64>,
    pub peek: bool,
}

/// A limit decided against its key's value, not yet committed: the reply,
/// why it was denied (None when admitted, refunds included), the wait an
/// admitted reservation must observe, and everything a commit writes,
/// prepared before any key is written.
pub struct Checked {
    pub reply: LimiterReply,
    pub denied: Option<RetryAfter>,
    pub wait_ms: u64,
    /// What the call writes: when the call as a whole is admitted (for a
    /// refund: always), or, for the denial that starts a block, although
    /// the call is denied (`on_denial`).
    pub commit: Option<Commit>,
    /// WAIT's reply at the reserved time (retry_after 0).
    pub held: LimiterReply,
    pub event: Option<Event>,
}

/// A prepared write: committing it copies bytes, sets the expiry or
/// deletes; it cannot fail or meet a value it has not already checked.
pub struct Commit {
    write: Write,
    expires_at_ms: u64,
    /// The denial that starts a block: written although the call is denied.
    pub on_denial: bool,
}

enum Write {
    /// The key's new value, for the fixed-size layouts.
    Small { bytes: [u8; SMALL], len: usize },
    /// The key's new value: a rebuilt log, or a value under a block.
    Replace(Vec<u8>),
    /// The key's new value: an exact log rebuilt larger than it was (its
    /// appends outgrew the slack), so the dataset grows.
    Grown(Vec<u8>),
    /// An in-place update of the exact log: its fields and one entry.
    Log(sliding::LogPatch),
    /// The limiter is empty again: the key goes.
    Delete,
}

/// Room for the largest value written without allocating: a fresh exact
/// log of one entry (at most 93 bytes).
const SMALL: usize = 96;

/// Up to `SMALL` bytes of a fixed-size layout.
pub struct SmallBytes {
    bytes: [u8; SMALL],
    len: usize,
}

impl SmallBytes {
    fn new(src: &[u8]) -> SmallBytes {
        let mut bytes = [0u8; SMALL];
        let len = src.len().min(SMALL);
        if let (Some(dst), Some(src)) = (bytes.get_mut(..len), src.get(..len)) {
            dst.copy_from_slice(src);
        }
        SmallBytes { bytes, len }
    }

    pub fn as_slice(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or_default()
    }
}

impl Write {
    fn small(bytes: &SmallBytes) -> Write {
        Write::Small {
            bytes: bytes.bytes,
            len: bytes.len,
        }
    }

    /// The same write as the key's whole new value (replacing a value that
    /// holds a block, which an in-place edit would keep); `inner` is the
    /// limiter's bytes an in-place edit applies to.
    fn whole(self, inner: &[u8]) -> Result<Write, RlError> {
        Ok(match self {
            Write::Small { bytes, len } => {
                Write::Replace(bytes.get(..len).unwrap_or_default().to_vec())
            }
            Write::Log(patch) => {
                let mut bytes = inner.to_vec();
                sliding::Edit::InPlace(patch).apply_to(&mut bytes);
                Write::Replace(bytes)
            }
            Write::Replace(b) => Write::Replace(b),
            Write::Grown(b) => Write::Grown(b),
            Write::Delete => {
                return Err(RlError::Internal("a deletion as an admitted call's write"))
            }
        })
    }
}

impl Checked {
    /// A decision with nothing to wait for: its reply, why it was denied,
    /// and what committing writes.
    fn answer(reply: LimiterReply, denied: Option<RetryAfter>, commit: Option<Commit>) -> Checked {
        Checked {
            reply,
            denied,
            wait_ms: 0,
            commit,
            held: reply,
            event: None,
        }
    }

    /// What to write given whether the call as a whole is admitted: an
    /// admitted call writes its commit, a denied one only a block it starts.
    pub fn write(&self, admitted: bool) -> Option<&Commit> {
        self.commit.as_ref().filter(|c| c.on_denial != admitted)
    }
}

impl Commit {
    /// Whether committing adds to the dataset: a key that does not exist
    /// yet, or an exact log rebuilt larger. Under `maxmemory` only these are
    /// refused; an update of a key that exists (the same size, or a bounded
    /// field such as a block's end or a bucket's debt) goes ahead, so every
    /// subject already held keeps being limited.
    pub fn adds_to_dataset(&self, key: &Key<'_>) -> bool {
        match self.write {
            Write::Delete => false,
            Write::Grown(_) => true,
            Write::Small { .. } | Write::Replace(_) | Write::Log(_) => key.is_empty(),
        }
    }

    pub fn apply(&self, key: &Key<'_>) {
        let expiry = if self.on_denial {
            // A block keeps the key alive at least until it ends, and never
            // shortens a life the limiter's state already has (as when the
            // clock has stepped back behind the state's times).
            Some(self.expires_at_ms.max(key.expires_at_ms().unwrap_or(0)))
        } else {
            Some(self.expires_at_ms)
        };
        match &self.write {
            Write::Small { bytes, len } => key.write(bytes.get(..*len).unwrap_or_default(), expiry),
            Write::Replace(bytes) | Write::Grown(bytes) => key.write(bytes, expiry),
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
            Write::Delete => key.delete(),
        }
    }
}

/// Decides the clause's step against `limit` on the key's value, preparing
/// what committing writes. Changes nothing.
#[inline(always)]
pub fn check(limit: &Limit, value: Value<'_>, step: &Step) -> Result<Checked, RlError> {
    match limit {
        Limit::Fixed(p) => flow(p, value, step),
        Limit::Approx(p) => flow(p, value, step),
        Limit::Token(p) => flow(p, value, step),
        Limit::Sliding(p) => flow(&Exact::<LogView<'_>>::new(*p), value, step),
        Limit::Concurrent(p) => concurrent::check(p, value, step),
    }
}

/// The key's value split into its block end and the limiter's own bytes
/// (`None` for no key or a key holding only a block).
fn split<'v>(
    value: Value<'v>,
    expected: &'static str,
) -> Result<(Option<u64>, Option<&'v [u8]>), RlError> {
    match value {
        Value::Empty => Ok((None, None)),
        Value::OtherType => Err(RlError::WrongType { expected }),
        Value::String(bytes) => {
            let (block, inner) = layout::split_block(bytes).map_err(RlError::BadState)?;
            Ok((
                block,
                Some(inner).filter(|b| !b.is_empty() || block.is_none()),
            ))
        }
    }
}

/// An algorithm as its key stores it: the core's pure functions
/// ([`Algorithm`]) and, here, its byte layout. `'v` is the key's value,
/// which the exact log's state borrows.
trait Stored<'v>: Algorithm<State: Sized, Error: Into<RlError>> {
    /// What the command accepts, for the WRONGTYPE message.
    const EXPECTED: &'static str;

    /// The limiter's state from its own bytes (after any block).
    fn decode(bytes: &'v [u8]) -> Result<Self::State, DecodeError>;

    /// What committing an admitted call writes, given the limiter's own
    /// bytes the decision was made on.
    fn admitted(&self, inner: Option<&'v [u8]>, admit: &Self::Admit) -> Result<Write, RlError>;

    /// The limiter's bytes after a refund of `state`.
    fn refunded(
        &self,
        state: Option<&Self::State>,
        refund: &Self::Refund,
    ) -> Result<Vec<u8>, RlError>;
}

/// The flow every algorithm shares, BLOCK and REFUND included: the key's
/// value is split and decoded, the algorithm decides, and the write is
/// prepared.
fn flow<'v, A: Stored<'v>>(a: &A, value: Value<'v>, step: &Step) -> Result<Checked, RlError> {
    let (block, inner) = split(value, A::EXPECTED)?;
    let state = inner
        .map(|b| load(Value::String(b), A::decode, A::EXPECTED))
        .transpose()?
        .flatten();
    let state = state.as_ref();
    let now = step.now;
    let (cost, max_wait_ms) = match step.action {
        Action::Refund(units) => {
            let refunded = a.refund(state, now, units).map_err(Into::into)?;
            let guarded = block::refund(block, now, refunded);
            let reply = guarded.limiter_reply();
            let (write, expires_at_ms) = match guarded.write {
                RefundWrite::Nothing => (None, 0),
                RefundWrite::Store {
                    state: refund,
                    expires_at_ms,
                } => {
                    let bytes = a.refunded(state, &refund)?;
                    let bytes = match block::in_force(block, now) {
                        Some(b) => layout::wrap_block(b.until_ms, &bytes),
                        None => bytes,
                    };
                    (Some(Write::Replace(bytes)), expires_at_ms)
                }
                RefundWrite::Delete => (Some(Write::Delete), 0),
                RefundWrite::KeepBlock { until_ms } => (
                    Some(Write::Replace(layout::wrap_block(until_ms, &[]))),
                    until_ms,
                ),
            };
            let event = write.is_some().then_some(Event::Refunded);
            return Ok(Checked {
                reply,
                denied: None,
                wait_ms: 0,
                commit: write.map(|write| Commit {
                    write,
                    expires_at_ms,
                    on_denial: false,
                }),
                held: reply,
                event,
            });
        }
        // COST 0 reads: the limiter as it stands, admitted, nothing to
        // write. A block in force shows in reset_after, as after a REFUND.
        Action::Take { cost: 0, .. } => {
            let status = a.status(state, now).map_err(Into::into)?;
            let left_ms = block::in_force(block, now).map_or(0, |b| b.left_ms);
            let reply = Status {
                reset_after_ms: status.reset_after_ms.max(left_ms),
                ..status
            }
            .limiter_reply(true, RetryAfter::Ms(0));
            return Ok(Checked {
                reply,
                denied: None,
                wait_ms: 0,
                commit: None,
                held: reply,
                event: None,
            });
        }
        Action::Take { cost, reserve } => (cost, reserve.map(|r| r.max_wait_ms)),
        Action::Release(_) | Action::Renew(_) => {
            return Err(RlError::Internal("a lease id on a rate limiter"))
        }
    };
    let guarded = match block::in_force(block, now) {
        Some(b) => b.deny(a.status(state, now).map_err(Into::into)?, cost),
        None => {
            let rule = BlockRule {
                duration_ms: step.block_ms,
                peek: step.peek,
            };
            let decision = match max_wait_ms {
                Some(max_wait_ms) => a.reserve(state, now, cost, max_wait_ms),
                None => a.decide(state, now, cost),
            };
            block::after(decision.map_err(Into::into)?, now, rule)
        }
    };
    let reply = guarded.limiter_reply();
    let mut checked = Checked {
        reply,
        denied: guarded.decision().denied(),
        wait_ms: 0,
        commit: None,
        held: reply.at_turn(),
        event: None,
    };
    match guarded {
        Guarded::Decided(d) => {
            if let Some((admit, expires_at_ms)) = d.admitted() {
                checked.wait_ms = d.wait_ms().unwrap_or(0);
                if checked.wait_ms > 0 {
                    checked.event = Some(Event::Reserved);
                    let at = now.saturating_add(checked.wait_ms);
                    if let Some(status) = a.status_after(admit, at) {
                        checked.held = status.limiter_reply(true, RetryAfter::Ms(0));
                    }
                }
                let write = a.admitted(inner, admit)?;
                checked.commit = Some(Commit {
                    // Any ended block stored in the key is dropped.
                    write: match block {
                        Some(_) => write.whole(inner.unwrap_or_default())?,
                        None => write,
                    },
                    expires_at_ms,
                    on_denial: false,
                });
            }
        }
        Guarded::Starts {
            until_ms,
            expires_at_ms,
            ..
        } => {
            checked.event = Some(Event::BlockStarted);
            checked.commit = Some(Commit {
                write: Write::Replace(layout::wrap_block(until_ms, inner.unwrap_or_default())),
                expires_at_ms,
                on_denial: true,
            });
        }
        Guarded::Blocked(_) => checked.event = Some(Event::DeniedByBlock),
    }
    Ok(checked)
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
