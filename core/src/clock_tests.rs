//! Every algorithm under a clock that steps backwards and jumps across huge
//! spans: nothing panics, no count goes past the limit or below zero, and
//! every admitted call leaves state that expires (in the future).

use super::approx::{self, ApproxParams};
use super::decision::Decision;
use super::fixed::{self, FixedParams};
use super::sliding::{self, SlidingParams, VecLog};
use super::token::{self, TokenParams};
use super::{MAX_AMOUNT, MAX_WINDOW_MS};
use proptest::prelude::*;

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

proptest! {
    #[test]
    fn fixed_survives_any_clock(
        limit in 1u64..=MAX_AMOUNT, window_ms in 1u64..=MAX_WINDOW_MS, aligned in any::<bool>(),
        start in 0..=i64::MAX as u64, steps in prop::collection::vec((step(), 1u64..5), 1..60),
    ) {
        let p = FixedParams { limit, window_ms, aligned };
        let (mut now, mut state) = (start, None);
        for (by, cost) in steps {
            now = advance(now, by);
            let d = fixed::decide(&p, state, now, cost);
            check(&d, now, limit)?;
            if let Some(s) = d.into_state() {
                prop_assert!(s.start_ms < s.end_ms);
                state = Some(s);
            }
        }
    }

    #[test]
    fn token_survives_any_clock(
        rate in 1u64..=MAX_AMOUNT, window_ms in 1u64..=MAX_WINDOW_MS, capacity in 1u64..=MAX_AMOUNT,
        start in 0..=i64::MAX as u64, steps in prop::collection::vec((step(), 1u64..5), 1..60),
    ) {
        let p = TokenParams { rate, window_ms, capacity };
        let (mut now, mut state) = (start, None);
        for (by, cost) in steps {
            now = advance(now, by);
            let d = token::decide(&p, state, now, cost);
            check(&d, now, capacity)?;
            prop_assert!(d.count <= capacity);
            if let Some(s) = d.into_state() {
                prop_assert!(s.is_consistent());
                state = Some(s);
            }
        }
    }

    #[test]
    fn sliding_survives_any_clock(
        limit in 1u64..50, window_ms in 1u64..=MAX_WINDOW_MS,
        start in 0..=i64::MAX as u64, steps in prop::collection::vec((step(), 1u64..5), 1..60),
    ) {
        let p = SlidingParams { limit, window_ms };
        let (mut now, mut log) = (start, VecLog::default());
        for (by, cost) in steps {
            now = advance(now, by);
            let d = sliding::decide(&p, Some(&log), now, cost).expect("a VecLog is never corrupt");
            check(&d, now, limit)?;
            if let Some(a) = d.into_state() {
                log.apply(&a);
            }
        }
    }

    #[test]
    fn approx_survives_any_clock(
        limit in 1u64..=MAX_AMOUNT, window_ms in 1u64..=MAX_WINDOW_MS,
        start in 0..=i64::MAX as u64, steps in prop::collection::vec((step(), 1u64..5), 1..60),
    ) {
        let p = ApproxParams { limit, window_ms };
        let (mut now, mut state) = (start, None);
        for (by, cost) in steps {
            now = advance(now, by);
            let d = approx::decide(&p, state, now, cost);
            check(&d, now, limit)?;
            if let Some(s) = d.into_state() {
                state = Some(s);
            }
        }
    }
}
