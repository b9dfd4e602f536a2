//! BLOCK duration: a penalty over any algorithm. A call its limiter denies
//! starts a block: until `denied_at + duration` every call on the key is
//! denied, whatever the counts say, with retry_after = the block's time
//! left (or never, when the cost exceeds the effective limit).
//!
//! The layer knows nothing of the algorithm: it sees the key's stored block
//! end, `now`, the algorithm's decision (or, during a block, its status)
//! and the call's options, and says what to reply and what to write.
//!
//! Choices where the contract is silent:
//! - The denial that starts a block replies retry_after = `duration` (the
//!   new block's time left), or -1 when the cost exceeds the limit.
//! - reset_after while a block is in force (and for the denial starting
//!   it) is the key's remaining life: the later of the limiter's own
//!   reset_after and the block's end, so PTTL equals reset_after as for
//!   every other reply.
//! - A call during a block, PEEK or not, writes nothing and does not extend
//!   the block; PEEK shows a block and never starts one.
//! - A block ends at `until_ms` exactly: a call at `until_ms - 1` is
//!   blocked, one at `until_ms` gets the algorithm's own decision (and if
//!   that denies with BLOCK, a new block starts). An ended block is ignored
//!   and dropped by the key's next write.
//! - REFUND never lifts a block: the refund applies to the counts, its reply
//!   keeps allowed=1 and retry_after=0, and a refund that empties the
//!   limiter keeps the key alive for the block alone.

use crate::decision::{Change, Decision, LimiterReply, Refunded, RetryAfter, Status, Verdict};

/// A call's block-related options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockRule {
    /// `BLOCK duration`, in ms, when given. (A duration of 0 starts nothing.)
    pub duration_ms: Option<u64>,
    /// PEEK: a block in force shows; none ever starts.
    pub peek: bool,
}

/// A block in force at some `now`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InForce {
    /// The block's end: the first millisecond at which calls are decided
    /// by the algorithm again.
    pub until_ms: u64,
    /// `until_ms - now`, at least 1.
    pub left_ms: u64,
}

/// The block in force at `now`, from the key's stored block end: None when
/// there is none or it has ended (an ended block is ignored).
pub fn in_force(blocked_until_ms: Option<u64>, now: u64) -> Option<InForce> {
    blocked_until_ms
        .filter(|&until_ms| now < until_ms)
        .map(|until_ms| InForce {
            until_ms,
            left_ms: until_ms - now,
        })
}

/// A limiter call with BLOCK's rules applied. Each variant says what to
/// write, once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Guarded<S> {
    /// No block in force, and none starts: the algorithm's decision stands.
    /// Admitted: commit its state and expiry as usual (dropping any ended
    /// block stored in the key). Denied: nothing is written.
    Decided(Decision<S>),
    /// This denial starts a block: store `until_ms` as the key's block end,
    /// leave the limiter's stored state exactly as it is (none, if the key
    /// has none), set the key's expiry to `expires_at_ms` (the later of the
    /// state's own expiry and the block's end), and propagate. The decision
    /// is the denial to reply.
    Starts {
        decision: Decision<S>,
        until_ms: u64,
        expires_at_ms: u64,
    },
    /// A block is in force: denied, nothing written, the block not extended.
    Blocked(Decision<S>),
}

impl<S> Guarded<S> {
    /// The decision to reply (and, for `Decided`, to commit when admitted).
    pub fn decision(&self) -> &Decision<S> {
        match self {
            Guarded::Decided(d) | Guarded::Starts { decision: d, .. } | Guarded::Blocked(d) => d,
        }
    }

    pub fn into_decision(self) -> Decision<S> {
        match self {
            Guarded::Decided(d) | Guarded::Starts { decision: d, .. } | Guarded::Blocked(d) => d,
        }
    }

    pub fn limiter_reply(&self) -> LimiterReply {
        self.decision().limiter_reply()
    }

    pub fn reply(&self) -> [i64; 6] {
        self.decision().reply()
    }
}

impl InForce {
    /// A call (COST, RESERVE, PEEK, ...) during the block: denied with the
    /// block's time left, or never when `cost` exceeds the effective limit.
    /// `status` is the algorithm's status at `now` (its `status` function):
    /// the counts without this call.
    pub fn deny<S>(&self, status: Status, cost: u64) -> Guarded<S> {
        Guarded::Blocked(Decision {
            verdict: Verdict::Deny(if cost > status.limit {
                RetryAfter::Never
            } else {
                RetryAfter::Ms(self.left_ms)
            }),
            count: status.count,
            limit: status.limit,
            reset_after_ms: status.reset_after_ms.max(self.left_ms),
        })
    }
}

/// The algorithm's decision `inner` for a call made when no block is in
/// force (see [`in_force`]): it stands, unless it is a denial of a call
/// with BLOCK (not PEEK), which starts a block ending at `now + duration`
/// (saturating).
pub fn after<S>(inner: Decision<S>, now: u64, rule: BlockRule) -> Guarded<S> {
    let Some(retry) = inner.denied() else {
        return Guarded::Decided(inner);
    };
    let duration_ms = match rule.duration_ms {
        Some(d) if d > 0 && !rule.peek => d,
        _ => return Guarded::Decided(inner),
    };
    let until_ms = now.saturating_add(duration_ms);
    let left_ms = until_ms - now;
    let reset_after_ms = inner.reset_after_ms.max(left_ms);
    Guarded::Starts {
        decision: Decision {
            verdict: Verdict::Deny(match retry {
                RetryAfter::Never => RetryAfter::Never,
                RetryAfter::Ms(_) => RetryAfter::Ms(left_ms),
            }),
            count: inner.count,
            limit: inner.limit,
            reset_after_ms,
        },
        until_ms,
        expires_at_ms: now.saturating_add(reset_after_ms),
    }
}

/// What a refund writes to its key, a block considered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefundWrite<S> {
    /// Nothing changed: no write, no propagation.
    Nothing,
    /// Store the refunded state (for the exact log: apply the `Refund` to
    /// it), keep the key's stored block as it is (an ended one may be
    /// dropped), and set the key's expiry to `expires_at_ms` (already the
    /// later of the state's expiry and a block in force's end).
    Store { state: S, expires_at_ms: u64 },
    /// The limiter is empty and no block is in force: delete the key.
    Delete,
    /// The limiter is empty but a block is in force: the key keeps the
    /// block alone (no limiter state) and expires at its end.
    KeepBlock { until_ms: u64 },
}

/// A REFUND with BLOCK's rule applied: the counts to reply (allowed=1,
/// retry_after=0) and what to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GuardedRefund<S> {
    /// The counts after the refund; reset_after is the key's remaining life
    /// (a block in force included).
    pub status: Status,
    pub write: RefundWrite<S>,
}

impl<S> GuardedRefund<S> {
    /// Whether the refund writes (and so propagates) anything.
    pub fn changed(&self) -> bool {
        !matches!(self.write, RefundWrite::Nothing)
    }

    /// `[1, count, 0, limit, remaining, reset_after]`.
    pub fn limiter_reply(&self) -> LimiterReply {
        self.status.limiter_reply(true, RetryAfter::Ms(0))
    }

    pub fn reply(&self) -> [i64; 6] {
        self.limiter_reply().six()
    }
}

/// The algorithm's refund `r` at `now` on a key whose stored block end is
/// `blocked_until_ms`: the refund applies, and a block in force stays.
pub fn refund<S>(blocked_until_ms: Option<u64>, now: u64, r: Refunded<S>) -> GuardedRefund<S> {
    let block = in_force(blocked_until_ms, now);
    let left_ms = block.map_or(0, |b| b.left_ms);
    let status = Status {
        reset_after_ms: r.reset_after_ms.max(left_ms),
        ..r.status()
    };
    let write = match (r.change, block) {
        (Change::Unchanged, _) => RefundWrite::Nothing,
        (
            Change::Store {
                state,
                expires_at_ms,
            },
            _,
        ) => RefundWrite::Store {
            state,
            expires_at_ms: expires_at_ms.max(block.map_or(0, |b| b.until_ms)),
        },
        (Change::Clear, None) => RefundWrite::Delete,
        (Change::Clear, Some(b)) => RefundWrite::KeepBlock {
            until_ms: b.until_ms,
        },
    };
    GuardedRefund { status, write }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::Algorithm;
    use crate::fixed::{self, FixedParams, FixedState};
    use crate::token::{Bucket, TokenParams};
    use proptest::prelude::*;
    use std::convert::Infallible;

    /// A token bucket whose every call reserves up to `max_wait_ms`.
    struct Reserving(TokenParams, u64);

    impl Algorithm for Reserving {
        type State = Bucket;
        type Admit = Bucket;
        type Refund = Bucket;
        type Error = Infallible;
        fn decide(
            &self,
            s: Option<&Bucket>,
            now: u64,
            cost: u64,
        ) -> Result<Decision<Bucket>, Infallible> {
            self.0.reserve(s, now, cost, self.1)
        }
        fn status(&self, s: Option<&Bucket>, now: u64) -> Result<Status, Infallible> {
            self.0.status(s, now)
        }
        fn refund(
            &self,
            s: Option<&Bucket>,
            now: u64,
            units: u64,
        ) -> Result<Refunded<Bucket>, Infallible> {
            self.0.refund(s, now, units)
        }
    }

    /// The algorithms the block tests drive: fixed-size states that cannot
    /// be corrupt, committed by storing the decision's state.
    trait Plain:
        Algorithm<State = Self::S, Admit = Self::S, Refund = Self::S, Error = Infallible>
    {
        type S: Copy + std::fmt::Debug + PartialEq;
    }

    impl Plain for FixedParams {
        type S = FixedState;
    }

    impl Plain for Reserving {
        type S = Bucket;
    }

    fn ok<T>(r: Result<T, Infallible>) -> T {
        match r {
            Ok(v) => v,
            Err(never) => match never {},
        }
    }

    /// A key as the module stores it: the limiter's state, the block's
    /// end, and the key's absolute expiry.
    #[derive(Clone, Copy, Debug)]
    struct Key<S> {
        state: Option<S>,
        blocked_until_ms: Option<u64>,
        expires_at_ms: u64,
    }

    impl<S: Copy> Key<S> {
        fn empty() -> Key<S> {
            Key {
                state: None,
                blocked_until_ms: None,
                expires_at_ms: 0,
            }
        }

        /// The key as seen at `now`: gone once expired.
        fn at(self, now: u64) -> Key<S> {
            if now >= self.expires_at_ms {
                Key::empty()
            } else {
                self
            }
        }

        fn pttl(&self, now: u64) -> u64 {
            self.expires_at_ms.saturating_sub(now)
        }
    }

    /// One call through the block layer, as the module would make it.
    fn call<A: Plain>(
        a: &A,
        key: Key<A::S>,
        now: u64,
        cost: u64,
        rule: BlockRule,
    ) -> Guarded<A::S> {
        let state = key.state.as_ref();
        match in_force(key.blocked_until_ms, now) {
            Some(b) => b.deny(ok(a.status(state, now)), cost),
            None => after(ok(a.decide(state, now, cost)), now, rule),
        }
    }

    /// What the module writes for a guarded call.
    fn commit<S: Copy>(key: Key<S>, g: &Guarded<S>) -> Key<S> {
        match g {
            Guarded::Decided(d) => match d.admitted() {
                Some((s, expires_at_ms)) => Key {
                    state: Some(*s),
                    blocked_until_ms: None,
                    expires_at_ms,
                },
                None => key,
            },
            Guarded::Starts {
                until_ms,
                expires_at_ms,
                ..
            } => Key {
                blocked_until_ms: Some(*until_ms),
                expires_at_ms: *expires_at_ms,
                ..key
            },
            Guarded::Blocked(_) => key,
        }
    }

    fn commit_refund<S: Copy>(key: Key<S>, g: &GuardedRefund<S>) -> Key<S> {
        match g.write {
            RefundWrite::Nothing => key,
            RefundWrite::Store {
                state,
                expires_at_ms,
            } => Key {
                state: Some(state),
                expires_at_ms,
                ..key
            },
            RefundWrite::Delete => Key::empty(),
            RefundWrite::KeepBlock { until_ms } => Key {
                state: None,
                blocked_until_ms: Some(until_ms),
                expires_at_ms: until_ms,
            },
        }
    }

    const LOGIN: FixedParams = FixedParams::new(2, 1000, false).unwrap();
    const BLOCK: BlockRule = BlockRule {
        duration_ms: Some(5000),
        peek: false,
    };

    /// `(now, cost, peek)` and the reply it gets.
    type Row = ((u64, u64, bool), [i64; 6]);

    #[test]
    fn login_lockout_table() {
        // BLOCK 5000 on every call.
        let rows: &[Row] = &[
            ((0, 1, false), [1, 1, 0, 2, 1, 1000]),
            ((1, 1, false), [1, 2, 0, 2, 0, 999]),
            // PEEK shows the denial and starts nothing.
            ((2, 1, true), [0, 2, 998, 2, 0, 998]),
            // The denial starts a block: retry_after is its whole length,
            // reset_after the key's life (the block outlives the window).
            ((2, 1, false), [0, 2, 5000, 2, 0, 5000]),
            ((3, 1, false), [0, 2, 4999, 2, 0, 4999]),
            ((3, 3, false), [0, 2, -1, 2, 0, 4999]),
            ((4, 1, true), [0, 2, 4998, 2, 0, 4998]),
            // The window has ended: the counts are empty, the block is not.
            ((1000, 1, false), [0, 0, 4002, 2, 2, 4002]),
            ((5001, 1, false), [0, 0, 1, 2, 2, 1]),
            // It ends exactly at denied_at + duration.
            ((5002, 1, false), [1, 1, 0, 2, 1, 1000]),
        ];
        let mut key = Key::<FixedState>::empty();
        for &((now, cost, peek), want) in rows {
            let key_now = key.at(now);
            let g = call(&LOGIN, key_now, now, cost, BlockRule { peek, ..BLOCK });
            assert_eq!(g.reply(), want, "at {now}");
            if !peek {
                key = commit(key_now, &g);
            }
            assert_eq!(key.at(now).pttl(now), want[5] as u64, "PTTL at {now}");
        }
    }

    #[test]
    fn a_denial_above_the_limit_starts_a_block_on_an_empty_key() {
        let g = after(fixed::decide(&LOGIN, None, 100, 3), 100, BLOCK);
        assert_eq!(
            g,
            Guarded::Starts {
                decision: Decision {
                    verdict: Verdict::Deny(RetryAfter::Never),
                    count: 0,
                    limit: 2,
                    reset_after_ms: 5000,
                },
                until_ms: 5100,
                expires_at_ms: 5100,
            }
        );
        assert_eq!(g.reply(), [0, 0, -1, 2, 2, 5000]);
    }

    #[test]
    fn without_block_or_with_zero_a_denial_writes_nothing() {
        let full = fixed::decide(&LOGIN, None, 0, 2).into_state();
        let d = fixed::decide(&LOGIN, full, 10, 1);
        for rule in [
            BlockRule::default(),
            BlockRule {
                duration_ms: Some(0),
                peek: false,
            },
        ] {
            assert_eq!(after(d, 10, rule), Guarded::Decided(d));
        }
    }

    #[test]
    fn a_huge_block_saturates() {
        let g = after(
            fixed::decide(&LOGIN, None, u64::MAX - 5, 3),
            u64::MAX - 5,
            BLOCK,
        );
        let Guarded::Starts {
            until_ms,
            expires_at_ms,
            decision,
        } = g
        else {
            panic!("{g:?}");
        };
        assert_eq!((until_ms, expires_at_ms), (u64::MAX, u64::MAX));
        assert_eq!(decision.reset_after_ms, 5);
        assert_eq!(in_force(Some(until_ms), u64::MAX - 1).unwrap().left_ms, 1);
    }

    #[test]
    fn refund_during_a_block_keeps_it() {
        let mut key = Key::<FixedState>::empty();
        for (now, cost) in [(0, 1), (1, 1), (2, 1)] {
            key = commit(key, &call(&LOGIN, key, now, cost, BLOCK));
        }
        assert_eq!(key.blocked_until_ms, Some(5002));
        // One unit back: counts drop, the block stays, the key lives on.
        let g = refund(
            key.blocked_until_ms,
            10,
            ok(LOGIN.refund(key.state.as_ref(), 10, 1)),
        );
        assert_eq!(g.reply(), [1, 1, 0, 2, 1, 4992]);
        key = commit_refund(key, &g);
        assert_eq!(
            (key.blocked_until_ms, key.expires_at_ms),
            (Some(5002), 5002)
        );
        assert_eq!(
            call(&LOGIN, key, 11, 1, BLOCK).reply(),
            [0, 1, 4991, 2, 1, 4991]
        );
        // Everything back: the state goes, the block alone stays.
        let g = refund(
            key.blocked_until_ms,
            20,
            ok(LOGIN.refund(key.state.as_ref(), 20, 5)),
        );
        assert_eq!(g.write, RefundWrite::KeepBlock { until_ms: 5002 });
        assert_eq!(g.reply(), [1, 0, 0, 2, 2, 4982]);
        key = commit_refund(key, &g);
        assert_eq!(
            call(&LOGIN, key, 21, 1, BLOCK).reply(),
            [0, 0, 4981, 2, 2, 4981]
        );
        // A refund of nothing writes nothing, block or not.
        let g = refund(
            key.blocked_until_ms,
            30,
            ok(LOGIN.refund(key.state.as_ref(), 30, 1)),
        );
        assert!(!g.changed());
        // Without a block, emptying the limiter deletes the key.
        let s = fixed::decide(&LOGIN, None, 0, 1).into_state();
        let g = refund(Some(0), 5, ok(LOGIN.refund(s.as_ref(), 5, 1)));
        assert_eq!(g.write, RefundWrite::Delete);
        assert_eq!(g.reply(), [1, 0, 0, 2, 2, 0]);
    }

    /// One step of a random workload on one key.
    #[derive(Clone, Copy, Debug)]
    enum Op {
        Call {
            cost: u64,
            block_ms: Option<u64>,
            peek: bool,
        },
        Refund(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (1u64..4, prop::option::of(1u64..3000), prop::bool::weighted(0.2))
                .prop_map(|(cost, block_ms, peek)| Op::Call { cost, block_ms, peek }),
            1 => (1u64..4).prop_map(Op::Refund),
        ]
    }

    /// Drives a workload through the block layer and checks, at every step:
    /// a block in force denies with exactly its time left and writes
    /// nothing; a block ends exactly at denied_at + duration (blocked one
    /// ms before, the algorithm's own decision then); outside a block the
    /// algorithm's decision stands unless a BLOCK denial starts one; and
    /// every reply's reset_after is the key's remaining life.
    fn run_workload<A: Plain>(a: &A, limit: u64, steps: &[(u64, Op)]) -> Result<(), TestCaseError> {
        let mut now = 1_000_000u64;
        let mut key = Key::<A::S>::empty();
        for &(gap, op) in steps {
            now += gap;
            key = key.at(now);
            let block = in_force(key.blocked_until_ms, now);
            match op {
                Op::Call {
                    cost,
                    block_ms,
                    peek,
                } => {
                    let rule = BlockRule {
                        duration_ms: block_ms,
                        peek,
                    };
                    let g = call(a, key, now, cost, rule);
                    let inner = ok(a.decide(key.state.as_ref(), now, cost));
                    match block {
                        Some(b) => {
                            let want = if cost > limit { -1 } else { b.left_ms as i64 };
                            prop_assert!(matches!(g, Guarded::Blocked(_)));
                            prop_assert_eq!(
                                &g.reply()[..3],
                                &[0, ok(a.status(key.state.as_ref(), now)).count as i64, want]
                            );
                        }
                        None if inner.allowed() || peek || block_ms.is_none() => {
                            prop_assert_eq!(g, Guarded::Decided(inner));
                        }
                        None => {
                            let d = block_ms.unwrap_or(0);
                            let Guarded::Starts { until_ms, .. } = g else {
                                return Err(TestCaseError::fail(format!("no block: {g:?}")));
                            };
                            prop_assert_eq!(until_ms, now + d);
                            let want = if cost > limit { -1 } else { d as i64 };
                            prop_assert_eq!(g.reply()[2], want);
                            // Blocked one ms before its end, decided by the
                            // algorithm at its end.
                            let blocked = commit(key, &g);
                            let last = call(a, blocked.at(until_ms - 1), until_ms - 1, cost, rule);
                            prop_assert!(matches!(last, Guarded::Blocked(_)));
                            prop_assert_eq!(last.reply()[2], if cost > limit { -1 } else { 1 });
                            let at_end = blocked.at(until_ms);
                            let first = call(a, at_end, until_ms, cost, BlockRule::default());
                            prop_assert_eq!(
                                first,
                                Guarded::Decided(ok(a.decide(
                                    at_end.state.as_ref(),
                                    until_ms,
                                    cost
                                )))
                            );
                        }
                    }
                    if !peek {
                        let before = key;
                        key = commit(key, &g);
                        if block.is_some() {
                            prop_assert_eq!(key.state, before.state);
                            prop_assert_eq!(key.blocked_until_ms, before.blocked_until_ms);
                        }
                    }
                    if !peek {
                        prop_assert_eq!(g.reply()[5] as u64, key.pttl(now), "PTTL after {:?}", g);
                    }
                }
                Op::Refund(units) => {
                    let g = refund(
                        key.blocked_until_ms,
                        now,
                        ok(a.refund(key.state.as_ref(), now, units)),
                    );
                    key = commit_refund(key, &g);
                    // REFUND never lifts a block.
                    if let Some(b) = block {
                        prop_assert_eq!(key.blocked_until_ms, Some(b.until_ms));
                        prop_assert!(key.expires_at_ms >= b.until_ms);
                    }
                    prop_assert_eq!(&g.reply()[..3], &[1, g.status.count as i64, 0]);
                    prop_assert_eq!(g.status.reset_after_ms, key.pttl(now), "PTTL after {:?}", g);
                }
            }
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn blocks_over_fixed_windows(
            limit in 1u64..6, window_ms in 1u64..3000, aligned in any::<bool>(),
            steps in prop::collection::vec((0u64..1500, op()), 1..80),
        ) {
            let p = FixedParams::new(limit, window_ms, aligned).unwrap();
            run_workload(&p, limit, &steps)?;
        }

        #[test]
        fn blocks_over_reserving_token_buckets(
            rate in 1u64..5, window_ms in 1u64..3000, capacity in 1u64..6, max_wait_ms in 0u64..2000,
            steps in prop::collection::vec((0u64..1500, op()), 1..80),
        ) {
            let p = TokenParams::new(rate, window_ms, capacity).unwrap();
            run_workload(&Reserving(p, max_wait_ms), capacity, &steps)?;
        }
    }
}
