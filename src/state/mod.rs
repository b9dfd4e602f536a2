//! How every limiter lives in its key: per algorithm, the byte layout with
//! its version byte, loading (with the WRONGTYPE and corrupt-value mapping),
//! deciding through the pure core, and the prepared commit. Nothing else in
//! the module knows a byte layout.
//!
//! One file per algorithm: `fixed.rs`, `approx.rs`, `token.rs`,
//! `sliding.rs` (the exact log), `concurrent.rs` (leases, with its own
//! flow: RELEASE and RENEW by id, no REFUND or BLOCK); `overrides.rs` for
//! override values; `layout.rs` for the prefix, the field encodings and
//! the block wrapper they share, `varint.rs` for variable-length numbers.
//!
//! Every write is the current layout (version 3). A rate limiter's times
//! are offsets from the key's own expiry: the commit sets that expiry in
//! the same step, and a value that must outlive it (inside a block, or
//! past the latest expiry a key can have) stores its anchor instead.

pub mod approx;
pub mod concurrent;
pub mod fixed;
pub mod layout;
#[cfg(test)]
pub mod legacy;
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
use librl_core::decision::{Change, LimiterReply, RetryAfter, Status};
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
    /// The key's new value, for the small layouts.
    Small(SmallBytes),
    /// The key's new value: a rebuilt log, or a value under a block.
    Replace(Vec<u8>),
    /// The key's new value: an exact log rebuilt larger than it was (its
    /// appends outgrew the slack), so the dataset grows.
    Grown(Vec<u8>),
    /// An in-place update of a large exact log: its fields and one entry.
    Log(sliding::LogPatch),
    /// A compact exact log's new entry, at the value's end (a growth
    /// bounded by the compact layout's size).
    Extend(sliding::Extension),
    /// The limiter is empty again: the key goes.
    Delete,
}

/// Room for the largest value written without allocating: a compact
/// exact log (at most 64 bytes) or a token bucket in debt (at most 63).
const SMALL: usize = 64;

/// Up to `SMALL` bytes of a small layout, written in place.
pub struct SmallBytes {
    bytes: [u8; SMALL],
    len: usize,
}

impl SmallBytes {
    pub fn new(src: &[u8]) -> SmallBytes {
        Self::encoded(|out| {
            let len = src.len().min(SMALL);
            if let (Some(dst), Some(src)) = (out.get_mut(..len), src.get(..len)) {
                dst.copy_from_slice(src);
            }
            len
        })
    }

    /// The bytes `fill` writes into the buffer (returning how many),
    /// without a copy in between.
    #[inline(always)]
    pub fn encoded(fill: impl FnOnce(&mut [u8; SMALL]) -> usize) -> SmallBytes {
        let mut bytes = [0u8; SMALL];
        let len = fill(&mut bytes).min(SMALL);
        SmallBytes { bytes, len }
    }

    /// A value of `tag` (version 3) whose fields `fields` writes.
    #[inline(always)]
    pub fn fields(tag: layout::Tag, fields: impl FnOnce(&mut layout::Writer<'_>)) -> SmallBytes {
        Self::encoded(|out| {
            let mut w = layout::Writer::new(out, tag);
            fields(&mut w);
            w.written()
        })
    }

    pub fn as_slice(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or_default()
    }
}

impl Write {
    /// The limiter's whole new bytes (to replace a value that holds a
    /// block, which an in-place edit would keep); `inner` is the limiter's
    /// bytes an in-place edit applies to.
    fn into_bytes(self, inner: &[u8]) -> Result<Vec<u8>, RlError> {
        Ok(match self {
            Write::Small(bytes) => bytes.as_slice().to_vec(),
            Write::Log(patch) => {
                let mut bytes = inner.to_vec();
                sliding::Edit::InPlace(patch).apply_to(&mut bytes);
                bytes
            }
            Write::Extend(x) => {
                let mut bytes = inner.to_vec();
                sliding::Edit::Extend(x).apply_to(&mut bytes);
                bytes
            }
            Write::Replace(b) | Write::Grown(b) => b,
            Write::Delete => return Err(RlError::Internal("a deletion as a stored state")),
        })
    }

    /// The write for a key that will expire at `anchor`, the time the
    /// written value's offsets count from: as it is, unless it must
    /// become the key's whole value (`whole`: the key holds an ended block,
    /// which an in-place edit would keep), or the server cannot give a key
    /// that expiry, when the value stores its anchor itself.
    #[cold]
    #[inline(never)]
    fn rewritten(self, inner: &[u8], whole: bool, anchor: u64) -> Result<Write, RlError> {
        if anchor > layout::MAX_KEY_EXPIRY_MS {
            let bytes = self.into_bytes(inner)?;
            let pinned = layout::pin(&bytes, Some(anchor)).map_err(RlError::BadState)?;
            return Ok(Write::Replace(pinned));
        }
        if !whole {
            return Ok(self);
        }
        let grown = matches!(self, Write::Grown(_));
        let bytes = self.into_bytes(inner)?;
        Ok(if grown {
            Write::Grown(bytes)
        } else {
            Write::Replace(bytes)
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
            Write::Small(_) | Write::Replace(_) | Write::Log(_) | Write::Extend(_) => {
                key.is_empty()
            }
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
            Write::Small(bytes) => key.write(bytes.as_slice(), expiry),
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
            Write::Extend(x) => key.extend(x.at, x.entry(), expiry),
            Write::Delete => key.delete(),
        }
    }
}

/// A key held in memory (its value and absolute expiry) for the pure
/// tests: decided and committed as the server shim does a key.
#[cfg(test)]
#[derive(Clone, Debug, Default)]
pub struct Held {
    pub bytes: Option<Vec<u8>>,
    pub expires_at_ms: Option<u64>,
}

#[cfg(test)]
impl Held {
    /// `check` on this key at the step's time (a key whose expiry has
    /// passed is gone, as on a primary).
    pub fn check(&self, limit: &Limit, step: &Step) -> Result<Checked, RlError> {
        let gone = self.expires_at_ms.is_some_and(|at| at < step.now);
        let value = match &self.bytes {
            Some(b) if !gone => Value::String(b),
            _ => Value::Empty,
        };
        let expiry = self.expires_at_ms;
        check(limit, value, &|| expiry, step)
    }

    /// Applies a commit as `Commit::apply` does to a key.
    pub fn commit(&mut self, c: &Commit) {
        let value = self.bytes.get_or_insert_with(Vec::new);
        match &c.write {
            Write::Delete => {
                *self = Held::default();
                return;
            }
            Write::Small(bytes) => *value = bytes.as_slice().to_vec(),
            Write::Replace(b) | Write::Grown(b) => *value = b.clone(),
            Write::Log(patch) => sliding::Edit::InPlace(patch.clone()).apply_to(value),
            Write::Extend(x) => sliding::Edit::Extend(x.clone()).apply_to(value),
        }
        let at = if c.on_denial {
            c.expires_at_ms.max(self.expires_at_ms.unwrap_or(0))
        } else {
            c.expires_at_ms
        };
        // The server keeps a signed 64-bit expiry.
        self.expires_at_ms = Some(at.min(layout::MAX_KEY_EXPIRY_MS));
    }
}

/// Decides the clause's step against `limit` on the key's value, preparing
/// what committing writes. Changes nothing. `key_expiry` gives the key's
/// absolute expiry, asked only when the value's times count from it.
#[inline(always)]
pub fn check(
    limit: &Limit,
    value: Value<'_>,
    key_expiry: &dyn Fn() -> Option<u64>,
    step: &Step,
) -> Result<Checked, RlError> {
    match limit {
        Limit::Fixed(p) => flow(p, value, key_expiry, step),
        Limit::Approx(p) => flow(p, value, key_expiry, step),
        Limit::Token(p) => flow(p, value, key_expiry, step),
        Limit::Sliding(p) => flow(&Exact::<LogView<'_>>::new(*p), value, key_expiry, step),
        // Its leases store their own times.
        Limit::Concurrent(p) => concurrent::check(p, value, step),
    }
}

/// The key's value split into its block end and the limiter's own bytes
/// (`None` for no key or a key holding only a block).
#[inline(always)]
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

    /// The limiter's state from its own bytes (after any block); a value
    /// anchored to its key's expiry asks `key_expiry`.
    fn decode(
        bytes: &'v [u8],
        key_expiry: &dyn Fn() -> Option<u64>,
    ) -> Result<Self::State, DecodeError>;

    /// What committing an admitted call writes, given the state the
    /// decision was made on; the key will expire at `anchor`.
    fn admitted(
        &self,
        state: Option<&Self::State>,
        admit: &Self::Admit,
        anchor: u64,
    ) -> Result<Write, RlError>;

    /// What committing a refund of `state` writes; the limiter alone would
    /// expire at `anchor`.
    fn refunded(
        &self,
        state: Option<&Self::State>,
        refund: &Self::Refund,
        anchor: u64,
    ) -> Result<Write, RlError>;
}

/// The flow every algorithm shares, BLOCK and REFUND included: the key's
/// value is split and decoded, the algorithm decides, and the write is
/// prepared.
#[inline(always)]
fn flow<'v, A: Stored<'v>>(
    a: &A,
    value: Value<'v>,
    key_expiry: &dyn Fn() -> Option<u64>,
    step: &Step,
) -> Result<Checked, RlError> {
    let (block, inner) = split(value, A::EXPECTED)?;
    // Inside a block the limiter's value stores its own anchor: the key's
    // expiry is the block's.
    let expiry: &dyn Fn() -> Option<u64> = if block.is_some() {
        &no_expiry
    } else {
        key_expiry
    };
    let decode = |b| match A::decode(b, expiry) {
        // (We never write an anchored value inside a block.)
        Err(DecodeError::Unanchored) if block.is_some() => Err(DecodeError::Corrupt),
        decoded => decoded,
    };
    let state = inner
        .map(|b| load(Value::String(b), decode, A::EXPECTED))
        .transpose()?
        .flatten();
    let state = state.as_ref();
    let inner_bytes = inner.unwrap_or_default();
    let now = step.now;
    let (cost, max_wait_ms) = match step.action {
        Action::Refund(units) => {
            let refunded = a.refund(state, now, units).map_err(Into::into)?;
            // When the limiter alone expires: its value's anchor.
            let own_expiry = match refunded.change {
                Change::Store { expires_at_ms, .. } => expires_at_ms,
                _ => 0,
            };
            let guarded = block::refund(block, now, refunded);
            let reply = guarded.limiter_reply();
            let (write, expires_at_ms) = match guarded.write {
                RefundWrite::Nothing => (None, 0),
                RefundWrite::Store {
                    state: refund,
                    expires_at_ms,
                } => {
                    let write = a.refunded(state, &refund, own_expiry)?;
                    let write = match (block::in_force(block, now), block) {
                        (Some(b), _) => {
                            let bytes = write.into_bytes(inner_bytes)?;
                            let wrapped = layout::wrap_block(b.until_ms, &bytes, Some(own_expiry));
                            Write::Replace(wrapped.map_err(RlError::BadState)?)
                        }
                        (None, None) if own_expiry <= layout::MAX_KEY_EXPIRY_MS => write,
                        // An ended block is dropped.
                        (None, ended) => {
                            write.rewritten(inner_bytes, ended.is_some(), own_expiry)?
                        }
                    };
                    (Some(write), expires_at_ms)
                }
                RefundWrite::Delete => (Some(Write::Delete), 0),
                RefundWrite::KeepBlock { until_ms } => {
                    let wrapped = layout::wrap_block(until_ms, &[], None);
                    (
                        Some(Write::Replace(wrapped.map_err(RlError::BadState)?)),
                        until_ms,
                    )
                }
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
                let mut write = a.admitted(state, admit, expires_at_ms)?;
                if block.is_some() || expires_at_ms > layout::MAX_KEY_EXPIRY_MS {
                    // Any ended block stored in the key is dropped.
                    write = write.rewritten(inner_bytes, block.is_some(), expires_at_ms)?;
                }
                checked.commit = Some(Commit {
                    write,
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
            // The limiter's value keeps counting from when it alone would
            // expire (a value already inside a block stores that itself).
            let inner_anchor = if block.is_some() { None } else { key_expiry() };
            let wrapped = layout::wrap_block(until_ms, inner_bytes, inner_anchor);
            checked.commit = Some(Commit {
                write: Write::Replace(wrapped.map_err(RlError::BadState)?),
                expires_at_ms,
                on_denial: true,
            });
        }
        Guarded::Blocked(_) => checked.event = Some(Event::DeniedByBlock),
    }
    Ok(checked)
}

/// A value inside a block has no expiry of its own.
fn no_expiry() -> Option<u64> {
    None
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
            // Nothing to count from: the limiter starts over, as on a
            // deleted key, and its next write sets the expiry again.
            Err(DecodeError::Unanchored) => Ok(None),
            Err(e) => Err(RlError::BadState(e)),
        },
    }
}
