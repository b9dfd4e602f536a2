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
#[cfg(test)]
mod read_tests;
pub mod sliding;
pub mod token;

use crate::error::RlError;
use crate::request::Action;
use crate::server::{Key, Patch, Value};
use crate::stats::Event;
use layout::DecodeError;
use librl_core::block::{self, BlockRule, Guarded, RefundWrite};
use librl_core::decision::{Decision, Refunded, RetryAfter, Status};
use librl_core::limit::Limit;

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
    pub reply: [i64; 6],
    pub denied: Option<RetryAfter>,
    pub wait_ms: u64,
    /// What the call writes: when the call as a whole is admitted (for a
    /// refund: always), or, for the denial that starts a block, although
    /// the call is denied (`on_denial`).
    pub commit: Option<Commit>,
    /// WAIT's reply at the reserved time (retry_after 0).
    pub held: [i64; 6],
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
}

impl Checked {
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
pub fn check(limit: &Limit, value: Value<'_>, step: &Step) -> Result<Checked, RlError> {
    match limit {
        Limit::Fixed(p) => sized(p, value, step),
        Limit::Approx(p) => sized(p, value, step),
        Limit::Token(p) => sized(p, value, step),
        Limit::Sliding(p) => sliding::check(p, value, step),
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

/// A fixed-size algorithm as the state room drives it: its layout and its
/// pure functions.
trait FixedSize: Copy {
    type S: Copy;
    const EXPECTED: &'static str;
    fn decode(bytes: &[u8]) -> Result<Self::S, DecodeError>;
    fn encode(s: &Self::S) -> SmallBytes;
    fn decide(
        &self,
        s: Option<Self::S>,
        now: u64,
        cost: u64,
        max_wait_ms: Option<u64>,
    ) -> Decision<Self::S>;
    fn status(&self, s: Option<Self::S>, now: u64) -> Status;
    fn refund(&self, s: Option<Self::S>, now: u64, units: u64) -> Refunded<Self::S>;
    /// WAIT's reply at `at` for a committed state, when it differs from the
    /// decision's counts (a token bucket refills meanwhile).
    fn held(&self, _committed: &Self::S, _at: u64) -> Option<[i64; 6]> {
        None
    }
}

fn sized<A: FixedSize>(p: &A, value: Value<'_>, step: &Step) -> Result<Checked, RlError> {
    let (block, inner) = split(value, A::EXPECTED)?;
    let state = inner
        .map(|b| load(Value::String(b), A::decode, A::EXPECTED))
        .transpose()?
        .flatten();
    let now = step.now;
    flow(
        step,
        block,
        inner.unwrap_or_default(),
        |cost, max_wait| Ok(p.decide(state, now, cost, max_wait)),
        || Ok(p.status(state, now)),
        |units| Ok(p.refund(state, now, units)),
        |s| Ok(Write::small(&A::encode(s))),
        |s| Ok(A::encode(s).as_slice().to_vec()),
        |s, at| p.held(s, at),
    )
}

/// The flow every algorithm shares, BLOCK and REFUND included: the
/// algorithm's parts are passed in.
#[allow(clippy::too_many_arguments)]
fn flow<S, R>(
    step: &Step,
    block: Option<u64>,
    inner: &[u8],
    decide: impl FnOnce(u64, Option<u64>) -> Result<Decision<S>, RlError>,
    status: impl FnOnce() -> Result<Status, RlError>,
    refund: impl FnOnce(u64) -> Result<Refunded<R>, RlError>,
    admit: impl FnOnce(&S) -> Result<Write, RlError>,
    refunded_bytes: impl FnOnce(&R) -> Result<Vec<u8>, RlError>,
    held: impl FnOnce(&S, u64) -> Option<[i64; 6]>,
) -> Result<Checked, RlError> {
    let now = step.now;
    let (cost, max_wait_ms) = match step.action {
        Action::Refund(units) => {
            let guarded = block::refund(block, now, refund(units)?);
            let reply = guarded.reply();
            let (write, expires_at_ms) = match guarded.write {
                RefundWrite::Nothing => (None, 0),
                RefundWrite::Store {
                    state,
                    expires_at_ms,
                } => {
                    let bytes = refunded_bytes(&state)?;
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
            let status = status()?;
            let left_ms = block::in_force(block, now).map_or(0, |b| b.left_ms);
            let reply = Status {
                reset_after_ms: status.reset_after_ms.max(left_ms),
                ..status
            }
            .reply(true, 0);
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
    };
    let guarded = match block::in_force(block, now) {
        Some(b) => b.deny(status()?, cost),
        None => {
            let rule = BlockRule {
                duration_ms: step.block_ms,
                peek: step.peek,
            };
            block::after(decide(cost, max_wait_ms)?, now, rule)
        }
    };
    let reply = guarded.reply();
    let mut checked = Checked {
        reply,
        denied: guarded.decision().denied(),
        wait_ms: 0,
        commit: None,
        held: [reply[0], reply[1], 0, reply[3], reply[4], reply[5]],
        event: None,
    };
    match guarded {
        Guarded::Decided(d) => {
            if let Some((state, expires_at_ms)) = d.admitted() {
                checked.wait_ms = d.wait_ms().unwrap_or(0);
                if checked.wait_ms > 0 {
                    checked.event = Some(Event::Reserved);
                    if let Some(h) = held(state, now.saturating_add(checked.wait_ms)) {
                        checked.held = h;
                    }
                }
                // Any ended block stored in the key is dropped.
                let write = if block.is_some() {
                    match admit(state)? {
                        Write::Small { bytes, len } => {
                            Write::Replace(bytes.get(..len).unwrap_or_default().to_vec())
                        }
                        Write::Replace(b) => Write::Replace(b),
                        Write::Grown(b) => Write::Grown(b),
                        Write::Log(_) | Write::Delete => {
                            return Err(RlError::Internal("an in-place edit under a block"))
                        }
                    }
                } else {
                    admit(state)?
                };
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
            checked.commit = Some(Commit {
                write: Write::Replace(layout::wrap_block(until_ms, inner)),
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
