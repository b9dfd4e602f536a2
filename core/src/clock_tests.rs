//! Every algorithm under a clock that steps backwards and jumps across huge
//! spans: nothing panics, no count goes past the limit or below zero, and
//! every admitted call leaves state that expires (in the future). The same
//! for refunds (never above the count before, state stored only with a
//! future expiry) and reservations (debt within its bound).

use super::algorithm::{Exact, InMemory};
use super::approx::ApproxParams;
use super::decision::{Change, Decision, Refunded, Status};
use super::fixed::FixedParams;
use super::sliding::{SlidingParams, VecLog};
use super::token::{self, Bucket, TokenParams};
use super::{MAX_AMOUNT, MAX_WINDOW_MS};
use proptest::prelude::*;
use std::fmt::Debug;

/// A clock step: small moves either way, or a jump of up to half the u64
/// range either way.
fn step() -> impl Strategy<Value = i128> {
    prop_oneof![
        -2000i128..2000,
        (-(1i128 << 62))..(1i128 << 62),
        Just(i128::from(MAX_WINDOW_MS)),
    ]
}

/// Server clocks are signed 64-bit milliseconds (`mstime_t`), so `now`
/// stays within `0..=i64::MAX`: jumps clamp there.
fn advance(now: u64, by: i128) -> u64 {
    let max = i128::from(i64::MAX);
    u64::try_from((i128::from(now) + by).clamp(0, max)).unwrap_or(0)
}

fn check<S>(d: &Decision<S>, now: u64, limit: u64) -> Result<(), TestCaseError> {
    prop_assert!(d.remaining() <= d.limit);
    if d.allowed() {
        prop_assert!(d.count <= limit);
        prop_assert!(d.reset_after_ms > 0, "an admitted call's key expires later");
        prop_assert!(d
            .admitted()
            .is_some_and(|(_, expires_at_ms)| expires_at_ms > now));
    }
    Ok(())
}

/// A refund at `now`, given the status just before it.
fn check_refund<S>(r: &Refunded<S>, before: &Status, now: u64) -> Result<(), TestCaseError> {
    prop_assert!(r.count <= before.count, "a refund never raises the count");
    prop_assert_eq!(r.limit, before.limit);
    prop_assert_eq!(r.reply()[0], 1);
    prop_assert_eq!(r.reply()[2], 0);
    match r.change {
        Change::Unchanged => prop_assert_eq!(r.count, before.count),
        Change::Clear => prop_assert_eq!((r.count, r.reset_after_ms), (0, 0)),
        Change::Store { expires_at_ms, .. } => {
            prop_assert!(r.count < before.count || r.reset_after_ms < before.reset_after_ms);
            prop_assert!(expires_at_ms > now, "stored state expires later");
        }
    }
    Ok(())
}

/// Either a call of some cost, or a refund of some units.
fn call_or_refund() -> impl Strategy<Value = (bool, u64)> {
    (prop::bool::weighted(0.3), 1u64..5)
}

/// Calls and refunds of `a` at the clock's `steps` from `start`, each
/// checked, every commit kept; `consistent` holds for every stored state.
fn survives<A: InMemory>(
    a: &A,
    limit: u64,
    start: u64,
    steps: &[(i128, (bool, u64))],
    consistent: impl Fn(&A::State) -> bool,
) -> Result<(), TestCaseError>
where
    A::Error: Debug,
    A::State: Debug,
{
    let (mut now, mut state) = (start, None::<A::State>);
    for &(by, (is_refund, n)) in steps {
        now = advance(now, by);
        if is_refund {
            let before = a
                .status(state.as_ref(), now)
                .expect("an in-memory state is never corrupt");
            let r = a
                .refund(state.as_ref(), now, n)
                .expect("an in-memory state is never corrupt");
            check_refund(&r, &before, now)?;
            state = A::refunded(state, r.change);
        } else {
            let d = a
                .decide(state.as_ref(), now, n)
                .expect("an in-memory state is never corrupt");
            check(&d, now, limit)?;
            if let Some(admit) = d.into_state() {
                state = Some(A::admit(state, admit));
            }
        }
        if let Some(s) = &state {
            prop_assert!(consistent(s), "{:?}", s);
        }
    }
    Ok(())
}

fn calls_only(steps: Vec<(i128, u64)>) -> Vec<(i128, (bool, u64))> {
    steps
        .into_iter()
        .map(|(by, cost)| (by, (false, cost)))
        .collect()
}

proptest! {
    #[test]
    fn refunds_survive_any_clock(
        limit in 1u64..=MAX_AMOUNT, window_ms in 1u64..=MAX_WINDOW_MS, aligned in any::<bool>(),
        small_limit in 1u64..50,
        start in 0..=i64::MAX as u64,
        steps in prop::collection::vec((step(), call_or_refund()), 1..60),
    ) {
        let fp = FixedParams::new(limit, window_ms, aligned).unwrap();
        survives(&fp, limit, start, &steps, |s| s.start_ms < s.end_ms)?;
        let ap = ApproxParams::new(limit, window_ms).unwrap();
        survives(&ap, limit, start, &steps, |s| s.is_consistent())?;
        let sp = SlidingParams::new(small_limit, window_ms).unwrap();
        survives(&Exact::<VecLog>::new(sp), small_limit, start, &steps, |_| true)?;
        let tp = TokenParams::new(limit, window_ms, limit).unwrap();
        survives(&tp, limit, start, &steps, |b| b.is_consistent())?;
    }

    #[test]
    fn reservations_survive_any_clock(
        rate in 1u64..=MAX_AMOUNT, window_ms in 1u64..=MAX_WINDOW_MS, capacity in 1u64..=MAX_AMOUNT,
        start in 0..=i64::MAX as u64,
        steps in prop::collection::vec((step(), call_or_refund(), 0u64..=MAX_WINDOW_MS, 0u64..3), 1..60),
    ) {
        let p = TokenParams::new(rate, window_ms, capacity).unwrap();
        let (mut now, mut bucket): (u64, Option<Bucket>) = (start, None);
        for (by, (is_refund, n), max_wait, scale) in steps {
            now = advance(now, by);
            // Costs up to the whole capacity, so debts grow large.
            let cost = if scale == 0 { n } else { capacity / scale.max(1) }.max(1);
            if is_refund {
                let r = token::refund(&p, bucket, now, cost);
                check_refund(&r, &token::status(&p, bucket, now), now)?;
                match r.change {
                    Change::Store { state, .. } => {
                        prop_assert!(state.is_consistent());
                        bucket = Some(state);
                    }
                    Change::Clear => bucket = None,
                    Change::Unchanged => {}
                }
                continue;
            }
            let d = token::reserve(&p, bucket, now, cost, max_wait);
            prop_assert!(d.remaining() <= d.limit);
            if let Some(wait) = d.wait_ms() {
                prop_assert!(wait <= max_wait);
                prop_assert!(d.reset_after_ms > 0);
                prop_assert!(d.admitted().is_some_and(|(_, e)| e > now));
                if wait == 0 {
                    prop_assert!(d.count <= capacity);
                }
            }
            if let Some(b) = d.into_state() {
                prop_assert!(b.is_consistent(), "{:?}", b);
                bucket = Some(b);
            }
        }
    }

    #[test]
    fn fixed_survives_any_clock(
        limit in 1u64..=MAX_AMOUNT, window_ms in 1u64..=MAX_WINDOW_MS, aligned in any::<bool>(),
        start in 0..=i64::MAX as u64, steps in prop::collection::vec((step(), 1u64..5), 1..60),
    ) {
        let p = FixedParams::new(limit, window_ms, aligned).unwrap();
        survives(&p, limit, start, &calls_only(steps), |s| s.start_ms < s.end_ms)?;
    }

    #[test]
    fn token_survives_any_clock(
        rate in 1u64..=MAX_AMOUNT, window_ms in 1u64..=MAX_WINDOW_MS, capacity in 1u64..=MAX_AMOUNT,
        start in 0..=i64::MAX as u64, steps in prop::collection::vec((step(), 1u64..5), 1..60),
    ) {
        let p = TokenParams::new(rate, window_ms, capacity).unwrap();
        survives(&p, capacity, start, &calls_only(steps), |b| b.is_consistent() && b.debt == 0)?;
    }

    #[test]
    fn sliding_survives_any_clock(
        limit in 1u64..50, window_ms in 1u64..=MAX_WINDOW_MS,
        start in 0..=i64::MAX as u64, steps in prop::collection::vec((step(), 1u64..5), 1..60),
    ) {
        let p = Exact::<VecLog>::new(SlidingParams::new(limit, window_ms).unwrap());
        survives(&p, limit, start, &calls_only(steps), |_| true)?;
    }

    #[test]
    fn approx_survives_any_clock(
        limit in 1u64..=MAX_AMOUNT, window_ms in 1u64..=MAX_WINDOW_MS,
        start in 0..=i64::MAX as u64, steps in prop::collection::vec((step(), 1u64..5), 1..60),
    ) {
        let p = ApproxParams::new(limit, window_ms).unwrap();
        survives(&p, limit, start, &calls_only(steps), |s| s.is_consistent())?;
    }
}
