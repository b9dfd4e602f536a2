//! CONCURRENT: at most `limit` slots held at once. A call takes `cost`
//! slots (default 1) as one lease that ends by itself `lease_ms` after it
//! was taken, unless it is released first (RELEASE id) or renewed (RENEW
//! id: it then ends `lease_ms` after the renewal). A holder that crashes
//! never keeps its slots: its lease ends.
//!
//! Time is the caller's `now`: a lease taken at `t` is held during
//! `[t, t + lease_ms)` and has ended at `t + lease_ms`, as FIXED's windows
//! are half-open. Leases end at absolute times, so a clock that steps back
//! makes them last longer by as much, never shorter; a renewal never
//! shortens a lease either.
//!
//! Lease ids: a key's first lease gets the clock's millisecond times 1,000
//! plus 1, and each later one the next integer (a counter kept with the
//! leases), so ids are unique within the key. A key stays until its last
//! lease ends and, after a release of its last lease in the millisecond it
//! was taken (or more than 1,000 leases per millisecond), until the clock
//! has caught up with the counter: a key that goes and comes back starts
//! above every id it gave before, so a holder whose lease ended and that
//! releases it late can never free a slot someone else holds (as long as
//! the primary's clock does not step back). Ids stay below 2^53, so that
//! JavaScript numbers hold them exactly (until the year 2255).
//!
//! The decisions read the leases through [`Leases`] (the module's compact
//! bytes, or [`VecLeases`] in memory) and return an [`Edit`] that says
//! what committing means, so the stored layout lives elsewhere and several
//! limits can be decided before any is committed. Ended leases are
//! ignored by every call and dropped by every call that writes.

use super::decision::{Change, Decision, LimiterReply, RetryAfter, Status, Verdict};
use super::units::{Amount, Window};

/// The largest lease id: 2^53 - 1, the largest integer a JavaScript
/// number holds exactly.
pub const MAX_LEASE_ID: u64 = (1 << 53) - 1;

/// Ids a key may give per millisecond before they run ahead of the clock.
pub const IDS_PER_MS: u64 = 1000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConcurrentParams {
    /// Slots that may be held at once.
    pub limit: Amount,
    /// How long a lease lasts unless released or renewed.
    pub lease_ms: Window,
}

impl ConcurrentParams {
    /// The parameters from plain numbers: None when the limit is not an
    /// [`Amount`] or the lease not a [`Window`].
    pub const fn new(limit: u64, lease_ms: u64) -> Option<ConcurrentParams> {
        match (Amount::new(limit), Window::new(lease_ms)) {
            (Some(limit), Some(lease_ms)) => Some(ConcurrentParams { limit, lease_ms }),
            _ => None,
        }
    }
}

/// One lease: `slots` held until `end_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    pub id: u64,
    pub end_ms: u64,
    pub slots: u64,
}

/// A read-only view of a key's leases.
pub trait Leases {
    /// Every lease the key gave has an id below this.
    fn next_id(&self) -> u64;
    /// The stored leases, newest (highest id) first, ended ones included.
    /// A stored set is checked as it is read, so a lease may turn out to
    /// be corrupt.
    fn leases(&self) -> impl Iterator<Item = Result<Lease, CorruptLeases>>;
}

/// Stored leases that disagree with each other or with their header: not
/// written by us, so nothing may be decided from them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CorruptLeases;

/// What a committed call does to the leases besides dropping those that
/// have ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// A read (COST 0): only the ended leases go.
    Nothing,
    /// A new lease, newer than every stored one.
    Take(Lease),
    /// RELEASE: this lease goes.
    Release(u64),
    /// RENEW: this lease now ends at `end_ms`.
    Extend { id: u64, end_ms: u64 },
}

/// What committing stores: drop the leases that ended at or before
/// `now_ms`, apply `op`, and keep `next_id`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Edit {
    pub now_ms: u64,
    pub op: Op,
    pub next_id: u64,
}

impl Edit {
    /// The id of the lease this edit takes, if it takes one.
    pub fn taken(&self) -> Option<u64> {
        match self.op {
            Op::Take(lease) => Some(lease.id),
            _ => None,
        }
    }
}

/// The first millisecond from which a key that starts afresh gives ids of
/// at least `next_id`: a key whose counter is `next_id` lives at least
/// until then.
pub fn ids_caught_up_ms(next_id: u64) -> u64 {
    next_id.saturating_sub(1).div_ceil(IDS_PER_MS)
}

/// The id of the first lease of a key that starts at `now`.
fn first_id_at(now: u64) -> u64 {
    now.saturating_mul(IDS_PER_MS).saturating_add(1)
}

/// The leases as of `now`, read in one pass.
struct Scan {
    /// Slots of the leases held at `now`.
    count: u64,
    /// The latest end among the held leases other than `found`.
    latest_other: u64,
    /// The held lease with the id looked for.
    found: Option<Lease>,
    next_id: u64,
}

fn scan<L: Leases>(leases: Option<&L>, now: u64, id: Option<u64>) -> Result<Scan, CorruptLeases> {
    let mut s = Scan {
        count: 0,
        latest_other: 0,
        found: None,
        next_id: leases.map_or(0, Leases::next_id),
    };
    for lease in leases.into_iter().flat_map(Leases::leases) {
        let lease = lease?;
        if lease.end_ms <= now {
            continue;
        }
        s.count = s.count.saturating_add(lease.slots);
        if Some(lease.id) == id {
            s.found = Some(lease);
        } else {
            s.latest_other = s.latest_other.max(lease.end_ms);
        }
    }
    Ok(s)
}

impl Scan {
    /// When the key expires: its last held lease's end, or later while
    /// the clock has not caught up with its ids.
    fn expires_at(&self, latest: u64) -> u64 {
        latest.max(ids_caught_up_ms(self.next_id))
    }

    fn latest(&self) -> u64 {
        self.latest_other
            .max(self.found.map_or(0, |lease| lease.end_ms))
    }

    fn status(&self, params: &ConcurrentParams, now: u64) -> Status {
        Status {
            count: self.count,
            limit: params.limit.get(),
            reset_after_ms: self.expires_at(self.latest()).saturating_sub(now),
        }
    }
}

/// A lease of `cost` slots, admitted when the held slots plus `cost` are
/// at most the limit; it gets the next id and ends `lease_ms` after `now`.
/// A denial's retry_after is the least wait after which enough leases have
/// ended for `cost` to fit (the earliest end, for a cost of 1 on a full
/// key), or never when `cost` exceeds the limit. A cost of 0 is a read: it
/// takes no lease.
pub fn decide<L: Leases>(
    params: &ConcurrentParams,
    leases: Option<&L>,
    now: u64,
    cost: u64,
) -> Result<Decision<Edit>, CorruptLeases> {
    let s = scan(leases, now, None)?;
    let limit = params.limit.get();
    let status = s.status(params, now);
    let deny = |retry_after| Decision {
        verdict: Verdict::Deny(retry_after),
        count: status.count,
        limit,
        reset_after_ms: status.reset_after_ms,
    };
    let Some(count) = s.count.checked_add(cost).filter(|&c| c <= limit) else {
        if cost > limit {
            return Ok(deny(RetryAfter::Never));
        }
        return Ok(deny(RetryAfter::Ms(until_enough_end(
            leases,
            now,
            s.count.saturating_add(cost) - limit,
        )?)));
    };
    let (op, next_id, end_ms) = if cost == 0 {
        (Op::Nothing, s.next_id, 0)
    } else {
        // A new key's first id comes from the clock, the others from the
        // counter (dense ids keep the stored gaps small).
        let id = match s.next_id {
            0 => first_id_at(now),
            next => next,
        };
        if id > MAX_LEASE_ID {
            // No id is left: only a clock past the year 2255 gets here.
            return Ok(deny(RetryAfter::Never));
        }
        let end_ms = now.saturating_add(params.lease_ms.ms());
        let lease = Lease {
            id,
            end_ms,
            slots: cost,
        };
        (Op::Take(lease), id + 1, end_ms)
    };
    let expires_at_ms = s.latest_other.max(end_ms).max(ids_caught_up_ms(next_id));
    Ok(Decision {
        verdict: Verdict::Admit {
            state: Edit {
                now_ms: now,
                op,
                next_id,
            },
            expires_at_ms,
            wait_ms: 0,
        },
        count,
        limit,
        reset_after_ms: expires_at_ms.saturating_sub(now),
    })
}

/// The least wait after which leases holding `must_end` slots have ended.
fn until_enough_end<L: Leases>(
    leases: Option<&L>,
    now: u64,
    must_end: u64,
) -> Result<u64, CorruptLeases> {
    let mut held: Vec<(u64, u64)> = Vec::new();
    for lease in leases.into_iter().flat_map(Leases::leases) {
        let lease = lease?;
        if lease.end_ms > now {
            held.push((lease.end_ms, lease.slots));
        }
    }
    held.sort_unstable();
    let mut ended = 0u64;
    for (end_ms, slots) in held {
        ended = ended.saturating_add(slots);
        if ended >= must_end {
            return Ok(end_ms - now);
        }
    }
    // The held slots are at least `must_end` whenever the cost fits the
    // limit; stored leases that say otherwise are not ours.
    Err(CorruptLeases)
}

/// A RELEASE or RENEW: whether the lease was held at `now`, what
/// committing does, and the counts after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByLease {
    /// The lease the call names, when it was held.
    pub held: Option<u64>,
    pub change: Change<Edit>,
    pub count: u64,
    pub limit: u64,
    /// Milliseconds until the key expires after the call.
    pub reset_after_ms: u64,
}

impl ByLease {
    pub fn status(&self) -> Status {
        Status {
            count: self.count,
            limit: self.limit,
            reset_after_ms: self.reset_after_ms,
        }
    }

    /// `[held, count, 0, limit, remaining, reset_after, id or 0]`.
    pub fn limiter_reply(&self) -> LimiterReply {
        self.status()
            .limiter_reply(self.held.is_some(), RetryAfter::Ms(0))
            .with_lease(self.held.unwrap_or(0))
    }

    fn unchanged(s: &Scan, params: &ConcurrentParams, now: u64, held: Option<u64>) -> ByLease {
        let status = s.status(params, now);
        ByLease {
            held,
            change: Change::Unchanged,
            count: status.count,
            limit: status.limit,
            reset_after_ms: status.reset_after_ms,
        }
    }
}

/// RELEASE `id`: the lease's slots are free at once. Nothing changes when
/// no lease with that id is held (unknown, released, or ended). A key left
/// without leases goes, unless its ids are ahead of the clock (released in
/// the millisecond its last lease was taken): it then keeps its counter,
/// and nothing else, until the clock has caught up.
pub fn release<L: Leases>(
    params: &ConcurrentParams,
    leases: Option<&L>,
    now: u64,
    id: u64,
) -> Result<ByLease, CorruptLeases> {
    let s = scan(leases, now, Some(id))?;
    let Some(lease) = s.found else {
        return Ok(ByLease::unchanged(&s, params, now, None));
    };
    let count = s.count - lease.slots;
    let expires_at_ms = s.expires_at(s.latest_other);
    let change = if expires_at_ms <= now {
        Change::Clear
    } else {
        Change::Store {
            state: Edit {
                now_ms: now,
                op: Op::Release(id),
                next_id: s.next_id,
            },
            expires_at_ms,
        }
    };
    Ok(ByLease {
        held: Some(id),
        change,
        count,
        limit: params.limit.get(),
        reset_after_ms: expires_at_ms.saturating_sub(now),
    })
}

/// RENEW `id`: the held lease now ends `lease_ms` after `now`, or stays as
/// it is if it already ends later. Nothing changes when no lease with that
/// id is held: an ended lease cannot come back (its slots may be taken).
pub fn renew<L: Leases>(
    params: &ConcurrentParams,
    leases: Option<&L>,
    now: u64,
    id: u64,
) -> Result<ByLease, CorruptLeases> {
    let s = scan(leases, now, Some(id))?;
    let Some(lease) = s.found else {
        return Ok(ByLease::unchanged(&s, params, now, None));
    };
    let end_ms = lease.end_ms.max(now.saturating_add(params.lease_ms.ms()));
    if end_ms == lease.end_ms {
        return Ok(ByLease::unchanged(&s, params, now, Some(id)));
    }
    let expires_at_ms = s.expires_at(s.latest_other.max(end_ms));
    Ok(ByLease {
        held: Some(id),
        change: Change::Store {
            state: Edit {
                now_ms: now,
                op: Op::Extend { id, end_ms },
                next_id: s.next_id,
            },
            expires_at_ms,
        },
        count: s.count,
        limit: params.limit.get(),
        reset_after_ms: expires_at_ms.saturating_sub(now),
    })
}

/// The counts at `now` without a call: slots held, and the key's life.
pub fn status<L: Leases>(
    params: &ConcurrentParams,
    leases: Option<&L>,
    now: u64,
) -> Result<Status, CorruptLeases> {
    Ok(scan(leases, now, None)?.status(params, now))
}

/// An acquire's reply: the limiter reply with the lease it took (0 when
/// it took none: denied, or a read).
pub fn reply(decision: &Decision<Edit>) -> LimiterReply {
    let id = decision
        .admitted()
        .and_then(|(edit, _)| edit.taken())
        .unwrap_or(0);
    decision.limiter_reply().with_lease(id)
}

/// Leases kept as a plain value (tests, the benchmark, an in-process fail
/// mode), newest last.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VecLeases {
    pub next_id: u64,
    pub leases: Vec<Lease>,
}

impl Leases for VecLeases {
    fn next_id(&self) -> u64 {
        self.next_id
    }

    fn leases(&self) -> impl Iterator<Item = Result<Lease, CorruptLeases>> {
        self.leases.iter().rev().copied().map(Ok)
    }
}

impl VecLeases {
    /// Commits `edit`: the reference for every stored layout.
    pub fn apply(&mut self, edit: &Edit) {
        self.leases.retain(|lease| lease.end_ms > edit.now_ms);
        match edit.op {
            Op::Nothing => {}
            Op::Take(lease) => self.leases.push(lease),
            Op::Release(id) => self.leases.retain(|lease| lease.id != id),
            Op::Extend { id, end_ms } => {
                for lease in self.leases.iter_mut().filter(|l| l.id == id) {
                    lease.end_ms = end_ms;
                }
            }
        }
        self.next_id = edit.next_id;
    }
}

#[cfg(test)]
mod tests;
