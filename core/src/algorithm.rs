//! The one shape every algorithm has: a state it decides from, and three
//! pure functions of that state and an explicit `now`. The module's state
//! room, the benchmark, an in-process fail mode and the core's own tests
//! are written once against [`Algorithm`] instead of once per algorithm.

use crate::approx::{self, ApproxParams, ApproxState};
use crate::concurrent::{self, ConcurrentParams, CorruptLeases, Edit, Leases, VecLeases};
use crate::decision::{Change, Decision, Refunded, Status};
use crate::fixed::{self, FixedParams, FixedState};
use crate::sliding::{self, Append, CorruptLog, Log, Refund, SlidingParams, VecLog};
use crate::token::{self, Bucket, TokenParams};
use std::convert::Infallible;
use std::marker::PhantomData;

/// A rate-limiting algorithm with its parameters: `decide` (a call that
/// consumes units), `refund` (REFUND: units given back) and `status` (the
/// counts without a call), each a pure function of the stored state and
/// `now`. Deciding changes nothing; what committing stores is in the
/// outcome, so several limits are decided before any is committed.
pub trait Algorithm {
    /// The limiter's stored state as a decision reads it (for the exact
    /// log, a read-only view of it). `None` is a limiter with nothing
    /// recorded.
    type State: ?Sized;
    /// What committing an admitted call stores (for the exact log: what
    /// to append).
    type Admit;
    /// What committing a refund stores (for the exact log: what to remove).
    type Refund;
    /// A stored state nothing may be decided from. The fixed-size states
    /// are checked when decoded (`Infallible`); the exact log is checked
    /// as it is read.
    type Error;

    fn decide(
        &self,
        state: Option<&Self::State>,
        now: u64,
        cost: u64,
    ) -> Result<Decision<Self::Admit>, Self::Error>;

    fn refund(
        &self,
        state: Option<&Self::State>,
        now: u64,
        units: u64,
    ) -> Result<Refunded<Self::Refund>, Self::Error>;

    fn status(&self, state: Option<&Self::State>, now: u64) -> Result<Status, Self::Error>;

    /// RESERVE `max_wait_ms`: a call that may take units which exist only
    /// within `max_wait_ms` (see [`token::reserve`]). Only a queueing
    /// algorithm is ever asked (the command grammar has RESERVE on TOKEN
    /// alone); the others decide it as a plain call.
    fn reserve(
        &self,
        state: Option<&Self::State>,
        now: u64,
        cost: u64,
        max_wait_ms: u64,
    ) -> Result<Decision<Self::Admit>, Self::Error> {
        let _ = max_wait_ms;
        self.decide(state, now, cost)
    }

    /// The counts at `at` once `admitted` is committed, when they differ
    /// from the decision's (a reserved call's bucket refills while it
    /// waits): what WAIT replies at the reserved millisecond. None: the
    /// decision's own counts.
    fn status_after(&self, admitted: &Self::Admit, at: u64) -> Option<Status> {
        let _ = (admitted, at);
        None
    }
}

/// An algorithm whose state a caller keeps as a plain value (tests, the
/// benchmark, an in-process fail mode): how a commit changes it.
pub trait InMemory: Algorithm<State: Sized> {
    /// The state after committing an admitted call decided on `state`.
    fn admit(state: Option<Self::State>, admit: Self::Admit) -> Self::State;

    /// The state after committing a refund decided on `state`; `None` when
    /// the limiter is empty again.
    fn refunded(state: Option<Self::State>, change: Change<Self::Refund>) -> Option<Self::State>;
}

/// The state after a fixed-size refund: the stored state is the new one.
fn replaced<S>(state: Option<S>, change: Change<S>) -> Option<S> {
    match change {
        Change::Unchanged => state,
        Change::Store { state, .. } => Some(state),
        Change::Clear => None,
    }
}

/// FIXED and SLIDING APPROX: a fixed-size state, decided by the
/// algorithm module's own functions and stored whole.
macro_rules! stored_whole {
    ($params:ty, $state:ty, $module:ident) => {
        impl Algorithm for $params {
            type State = $state;
            type Admit = $state;
            type Refund = $state;
            type Error = Infallible;

            #[inline]
            fn decide(
                &self,
                state: Option<&$state>,
                now: u64,
                cost: u64,
            ) -> Result<Decision<$state>, Infallible> {
                Ok($module::decide(self, state.copied(), now, cost))
            }

            fn refund(
                &self,
                state: Option<&$state>,
                now: u64,
                units: u64,
            ) -> Result<Refunded<$state>, Infallible> {
                Ok($module::refund(self, state.copied(), now, units))
            }

            fn status(&self, state: Option<&$state>, now: u64) -> Result<Status, Infallible> {
                Ok($module::status(self, state.copied(), now))
            }
        }

        impl InMemory for $params {
            fn admit(_: Option<$state>, admit: $state) -> $state {
                admit
            }

            fn refunded(state: Option<$state>, change: Change<$state>) -> Option<$state> {
                replaced(state, change)
            }
        }
    };
}

stored_whole!(FixedParams, FixedState, fixed);
stored_whole!(ApproxParams, ApproxState, approx);

/// TOKEN over the stored [`Bucket`], which may owe reserved tokens. A
/// bucket without debt takes the plain bucket's path ([`token::decide_plain`]).
impl Algorithm for TokenParams {
    type State = Bucket;
    type Admit = Bucket;
    type Refund = Bucket;
    type Error = Infallible;

    #[inline]
    fn decide(
        &self,
        state: Option<&Bucket>,
        now: u64,
        cost: u64,
    ) -> Result<Decision<Bucket>, Infallible> {
        Ok(match state {
            // The plain bucket, as before RESERVE existed: the hot path.
            None => token::decide_plain(self, None, now, cost),
            Some(b) if b.debt == 0 => token::decide_plain(self, Some(b.state), now, cost),
            Some(b) => token::decide_bucket(self, Some(*b), now, cost),
        })
    }

    fn refund(
        &self,
        state: Option<&Bucket>,
        now: u64,
        units: u64,
    ) -> Result<Refunded<Bucket>, Infallible> {
        Ok(token::refund(self, state.copied(), now, units))
    }

    fn status(&self, state: Option<&Bucket>, now: u64) -> Result<Status, Infallible> {
        Ok(token::status(self, state.copied(), now))
    }

    fn reserve(
        &self,
        state: Option<&Bucket>,
        now: u64,
        cost: u64,
        max_wait_ms: u64,
    ) -> Result<Decision<Bucket>, Infallible> {
        Ok(token::reserve(self, state.copied(), now, cost, max_wait_ms))
    }

    fn status_after(&self, admitted: &Bucket, at: u64) -> Option<Status> {
        Some(token::status(self, Some(*admitted), at))
    }
}

impl InMemory for TokenParams {
    fn admit(_: Option<Bucket>, admit: Bucket) -> Bucket {
        admit
    }

    fn refunded(state: Option<Bucket>, change: Change<Bucket>) -> Option<Bucket> {
        replaced(state, change)
    }
}

/// SLIDING's exact log over a log stored as `L` (the module's compact
/// bytes, or [`VecLog`] in memory): decided from a read-only view, and
/// committed as an [`Append`] or a [`Refund`] in the log's own layout.
pub struct Exact<L> {
    pub params: SlidingParams,
    log: PhantomData<fn(&L)>,
}

impl<L> Exact<L> {
    pub fn new(params: SlidingParams) -> Exact<L> {
        Exact {
            params,
            log: PhantomData,
        }
    }
}

impl<L: Log> Algorithm for Exact<L> {
    type State = L;
    type Admit = Append;
    type Refund = Refund;
    type Error = CorruptLog;

    fn decide(&self, log: Option<&L>, now: u64, cost: u64) -> Result<Decision<Append>, CorruptLog> {
        sliding::decide(&self.params, log, now, cost)
    }

    fn refund(
        &self,
        log: Option<&L>,
        now: u64,
        units: u64,
    ) -> Result<Refunded<Refund>, CorruptLog> {
        sliding::refund(&self.params, log, now, units)
    }

    fn status(&self, log: Option<&L>, now: u64) -> Result<Status, CorruptLog> {
        sliding::status(&self.params, log, now)
    }
}

/// A log kept as a plain value ([`VecLog`], a benchmark's queue), which
/// commits in place.
pub trait OwnedLog: Log + Default {
    fn apply(&mut self, admit: &Append);
    fn refund(&mut self, refund: &Refund);
}

impl OwnedLog for VecLog {
    fn apply(&mut self, admit: &Append) {
        VecLog::apply(self, admit);
    }

    fn refund(&mut self, refund: &Refund) {
        VecLog::refund(self, refund);
    }
}

impl<L: OwnedLog> InMemory for Exact<L> {
    fn admit(log: Option<L>, admit: Append) -> L {
        let mut log = log.unwrap_or_default();
        log.apply(&admit);
        log
    }

    fn refunded(log: Option<L>, change: Change<Refund>) -> Option<L> {
        match change {
            Change::Unchanged => log,
            Change::Store { state, .. } => {
                let mut log = log.unwrap_or_default();
                log.refund(&state);
                Some(log)
            }
            Change::Clear => None,
        }
    }
}

/// CONCURRENT over leases stored as `L` (the module's compact bytes, or
/// [`VecLeases`] in memory): decided from a read-only view, and committed
/// as an [`Edit`] in the leases' own layout. `decide` takes a lease;
/// leases are given back by id ([`concurrent::release`]), never by units,
/// so `refund` changes nothing.
pub struct Leasing<L> {
    pub params: ConcurrentParams,
    leases: PhantomData<fn(&L)>,
}

impl<L> Leasing<L> {
    pub fn new(params: ConcurrentParams) -> Leasing<L> {
        Leasing {
            params,
            leases: PhantomData,
        }
    }
}

impl<L: Leases> Algorithm for Leasing<L> {
    type State = L;
    type Admit = Edit;
    type Refund = Edit;
    type Error = CorruptLeases;

    fn decide(
        &self,
        leases: Option<&L>,
        now: u64,
        cost: u64,
    ) -> Result<Decision<Edit>, CorruptLeases> {
        concurrent::decide(&self.params, leases, now, cost)
    }

    fn refund(
        &self,
        leases: Option<&L>,
        now: u64,
        _units: u64,
    ) -> Result<Refunded<Edit>, CorruptLeases> {
        let status = concurrent::status(&self.params, leases, now)?;
        Ok(Refunded {
            change: Change::Unchanged,
            count: status.count,
            limit: status.limit,
            reset_after_ms: status.reset_after_ms,
        })
    }

    fn status(&self, leases: Option<&L>, now: u64) -> Result<Status, CorruptLeases> {
        concurrent::status(&self.params, leases, now)
    }
}

impl InMemory for Leasing<VecLeases> {
    fn admit(leases: Option<VecLeases>, admit: Edit) -> VecLeases {
        let mut leases = leases.unwrap_or_default();
        leases.apply(&admit);
        leases
    }

    fn refunded(leases: Option<VecLeases>, change: Change<Edit>) -> Option<VecLeases> {
        match change {
            Change::Unchanged => leases,
            Change::Store { state, .. } => {
                let mut leases = leases.unwrap_or_default();
                leases.apply(&state);
                Some(leases)
            }
            Change::Clear => None,
        }
    }
}

/// Replays calls `(now, cost)` on a limiter that starts empty, committing
/// each admitted one: every call's reply (the core's table tests).
#[cfg(test)]
pub(crate) fn replay<A: InMemory>(a: &A, calls: &[(u64, u64)]) -> Vec<[i64; 6]>
where
    A::Error: std::fmt::Debug,
{
    let mut state = None;
    calls
        .iter()
        .map(|&(now, cost)| {
            let d = a
                .decide(state.as_ref(), now, cost)
                .expect("an in-memory state");
            let reply = d.reply();
            if let Some(admit) = d.into_state() {
                state = Some(A::admit(state.take(), admit));
            }
            reply
        })
        .collect()
}
