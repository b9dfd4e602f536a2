//! TOKEN: a bucket of `capacity` tokens that starts full and refills
//! continuously at `rate` tokens per `window`.
//!
//! Exactness: the bucket's shortfall is kept in units of 1/window_ms of a
//! token, so one millisecond refills exactly `rate` units and one token is
//! exactly `window_ms` units. Every quantity is an integer (u128, which
//! holds 2^50 tokens times 3650 days in ms with room to spare); nothing
//! rounds until a reply is formed, and then only towards the caller's
//! safety: waits round up, remaining tokens round down.

use super::decision::{Decision, RetryAfter, Verdict};
use super::{MAX_AMOUNT, MAX_WINDOW_MS};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenParams {
    pub rate: u64,
    pub window_ms: u64,
    pub capacity: u64,
}

/// The bucket as of `at_ms`: `missing` units (1/`window_ms` of a token
/// each) short of full. Storing the shortfall rather than the level means a
/// missing key is simply a full bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenState {
    pub at_ms: u64,
    pub window_ms: u64,
    pub missing: u128,
}

impl TokenState {
    pub fn is_consistent(&self) -> bool {
        (1..=MAX_WINDOW_MS).contains(&self.window_ms)
            && self.missing >= 1
            && self.missing <= u128::from(MAX_AMOUNT) * u128::from(self.window_ms)
    }
}

fn div_ceil(a: u128, b: u128) -> u128 {
    a.div_ceil(b.max(1))
}

fn to_u64(v: u128) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

pub fn decide(
    params: &TokenParams,
    state: Option<TokenState>,
    now: u64,
    cost: u64,
) -> Decision<TokenState> {
    let window = u128::from(params.window_ms);
    let rate = u128::from(params.rate).max(1);
    let full = u128::from(params.capacity) * window;
    let (now, missing) = match state {
        None => (now, 0),
        Some(s) => {
            // A clock that steps back stands still at the last call's time.
            let now = now.max(s.at_ms);
            // A changed window rescales the shortfall, rounding towards
            // fewer tokens; a smaller capacity caps it (never below empty).
            let rescaled = if s.window_ms == params.window_ms {
                s.missing
            } else {
                s.missing
                    .checked_mul(window)
                    .map_or(u128::MAX, |m| div_ceil(m, u128::from(s.window_ms)))
            };
            let refilled = u128::from(now - s.at_ms) * rate;
            (now, rescaled.saturating_sub(refilled).min(full))
        }
    };
    let need = u128::from(cost) * window;
    if missing + need <= full {
        let missing = missing + need;
        let reset_after_ms = to_u64(div_ceil(missing, rate));
        return Decision {
            count: to_u64(div_ceil(missing, window)),
            limit: params.capacity,
            reset_after_ms,
            verdict: Verdict::Admit {
                state: TokenState {
                    at_ms: now,
                    window_ms: params.window_ms,
                    missing,
                },
                expires_at_ms: now.saturating_add(reset_after_ms),
            },
        };
    }
    let retry_after = if cost > params.capacity {
        RetryAfter::Never
    } else {
        RetryAfter::After(to_u64(div_ceil(missing + need - full, rate)))
    };
    let reset_after_ms = to_u64(div_ceil(missing, rate));
    Decision {
        count: to_u64(div_ceil(missing, window)),
        verdict: Verdict::Deny(retry_after),
        limit: params.capacity,
        reset_after_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn params(rate: u64, window_ms: u64, capacity: u64) -> TokenParams {
        TokenParams {
            rate,
            window_ms,
            capacity,
        }
    }

    fn run(p: &TokenParams, calls: &[(u64, u64)]) -> Vec<[i64; 6]> {
        let mut state = None;
        calls
            .iter()
            .map(|&(now, cost)| {
                let d = decide(p, state, now, cost);
                if let Some(s) = d.into_state() {
                    state = Some(s);
                }
                d.reply()
            })
            .collect()
    }

    #[test]
    fn ten_per_second_with_bursts_of_fifty() {
        let p = params(10, 1000, 50);
        // (now, cost) -> [allowed, count, retry_after, limit, remaining, reset_after]
        let rows: &[((u64, u64), [i64; 6])] = &[
            ((0, 50), [1, 50, 0, 50, 0, 5000]),
            ((0, 1), [0, 50, 100, 50, 0, 5000]),
            ((99, 1), [0, 50, 1, 50, 0, 4901]),
            ((100, 1), [1, 50, 0, 50, 0, 5000]),
            // 1050 ms later 10.5 tokens are back; taking 10 leaves half a
            // token, so count rounds up to 50 and the refill takes 4950 ms.
            ((1150, 10), [1, 50, 0, 50, 0, 4950]),
            ((1150, 60), [0, 50, -1, 50, 0, 4950]),
            ((6150, 1), [1, 1, 0, 50, 49, 100]),
        ];
        let calls: Vec<_> = rows.iter().map(|r| r.0).collect();
        let want: Vec<_> = rows.iter().map(|r| r.1).collect();
        assert_eq!(run(&p, &calls), want);
    }

    #[test]
    fn fractional_intervals_round_waits_up() {
        // 3 per second: one token every 333.33.. ms.
        let p = params(3, 1000, 3);
        let rows: &[((u64, u64), [i64; 6])] = &[
            ((0, 3), [1, 3, 0, 3, 0, 1000]),
            ((0, 1), [0, 3, 334, 3, 0, 1000]),
            ((333, 1), [0, 3, 1, 3, 0, 667]),
            ((334, 1), [1, 3, 0, 3, 0, 1000]),
            ((1000, 2), [1, 3, 0, 3, 0, 1000]),
        ];
        let calls: Vec<_> = rows.iter().map(|r| r.0).collect();
        let want: Vec<_> = rows.iter().map(|r| r.1).collect();
        assert_eq!(run(&p, &calls), want);
    }

    #[test]
    fn extreme_rates() {
        // One token per 3650 days.
        let slow = params(1, MAX_WINDOW_MS, 1);
        let d = decide(&slow, None, 0, 1);
        assert_eq!(d.reply(), [1, 1, 0, 1, 0, MAX_WINDOW_MS as i64]);
        let again = decide(&slow, d.into_state(), MAX_WINDOW_MS - 1, 1);
        assert_eq!(again.reply(), [0, 1, 1, 1, 0, 1]);
        assert!(decide(&slow, d.into_state(), MAX_WINDOW_MS, 1).allowed());
        // A million per millisecond.
        let fast = params(1_000_000, 1, 1_000_000);
        let d = decide(&fast, None, 5, 1_000_000);
        assert_eq!(d.reply(), [1, 1_000_000, 0, 1_000_000, 0, 1]);
        assert!(decide(&fast, d.into_state(), 6, 1_000_000).allowed());
        // The largest capacity, emptied at the slowest rate, saturates
        // instead of overflowing.
        let huge = params(1, MAX_WINDOW_MS, MAX_AMOUNT);
        let d = decide(&huge, None, u64::MAX / 2, MAX_AMOUNT);
        assert!(d.allowed());
        assert_eq!(d.reset_after_ms, u64::MAX);
        assert_eq!(d.admitted().map(|(_, e)| e), Some(u64::MAX));
        assert!(!decide(&huge, d.into_state(), u64::MAX / 2 + 1, 1).allowed());
    }

    #[test]
    fn cost_above_capacity_never_fits_and_writes_nothing() {
        let d = decide(&params(10, 1000, 5), None, 0, 6);
        assert_eq!(d.reply(), [0, 0, -1, 5, 5, 0]);
        assert_eq!(d.into_state(), None);
    }

    #[test]
    fn clock_stepping_back_stands_still() {
        let p = params(1, 1000, 2);
        let d = decide(&p, None, 10_000, 2);
        let back = decide(&p, d.into_state(), 5_000, 1);
        assert_eq!(back.reply(), [0, 2, 1000, 2, 0, 2000]);
    }

    #[test]
    fn changed_parameters_keep_the_bucket_sane() {
        let p = params(10, 1000, 10);
        let s = decide(&p, None, 0, 10).into_state();
        // Capacity shrinks below the shortfall: empty, never negative.
        let smaller = decide(&params(10, 1000, 4), s, 0, 1);
        assert_eq!(smaller.reply(), [0, 4, 100, 4, 0, 400]);
        // Window doubles: the 10 missing tokens now refill at half speed.
        let slower = decide(&params(10, 2000, 10), s, 0, 1);
        assert_eq!(slower.reply(), [0, 10, 200, 10, 0, 2000]);
    }

    /// Ten million admitted calls at 3 per second, each spaced by the
    /// bucket's own retry_after: an exact bucket admits exactly one call per
    /// 1/3 s, so after N calls the clock has advanced by ceil(N * 1000 / 3)
    /// ms minus the initial burst, and the remaining tokens match the
    /// rational computation exactly.
    #[test]
    fn no_drift_after_ten_million_calls() {
        let p = params(3, 1000, 3);
        let mut state = None;
        let mut now = 0u64;
        let calls = 10_000_000u64;
        for _ in 0..calls {
            let mut d = decide(&p, state, now, 1);
            if let Some(RetryAfter::After(wait)) = d.denied() {
                now += wait;
                d = decide(&p, state, now, 1);
            }
            assert!(d.allowed());
            state = d.into_state();
        }
        // Rational model: the first 3 calls use the initial burst; call k
        // (k >= 3) needs (k - 2) refilled tokens, available at
        // ceil((k - 2) * 1000 / 3) ms.
        let want_now = ((calls - 3) * 1000).div_ceil(3);
        assert_eq!(now, want_now);
        // Tokens at `now`: 3 - calls + now * 3 / 1000, in thousandths.
        let s = state.unwrap();
        let tokens_thousandths = 3 * 1000 - (s.missing as u64);
        assert_eq!(tokens_thousandths, 3 * 1000 + now * 3 - calls * 1000);
        eprintln!(
            "drift test: {calls} calls at 3/s ended at t={now} ms with {tokens_thousandths}/1000 tokens (exact: {})",
            3 * 1000 + now * 3 - calls * 1000
        );
    }

    /// An independent model: the level in exact rational tokens, refilled
    /// and capped step by step, with waits found by search.
    #[derive(Clone, Copy)]
    struct Model {
        /// Tokens times `window_ms`.
        level: u128,
        at: u64,
    }

    impl Model {
        fn level_at(&self, p: &TokenParams, now: u64) -> u128 {
            let cap = u128::from(p.capacity) * u128::from(p.window_ms);
            (self.level + u128::from(now.max(self.at) - self.at) * u128::from(p.rate)).min(cap)
        }
        fn admits(&self, p: &TokenParams, now: u64, cost: u64) -> bool {
            self.level_at(p, now) >= u128::from(cost) * u128::from(p.window_ms)
        }
    }

    proptest! {
        #[test]
        fn matches_the_rational_model(
            rate in 1u64..50,
            window_ms in 1u64..3000,
            extra_capacity in 0u64..20,
            steps in prop::collection::vec((0u64..2000, 1u64..12), 1..60),
        ) {
            let p = params(rate, window_ms, rate + extra_capacity);
            let w = u128::from(window_ms);
            let mut model = Model { level: u128::from(p.capacity) * w, at: 0 };
            let mut state = None;
            let mut now = 0u64;
            for (gap, cost) in steps {
                now += gap;
                let d = decide(&p, state, now, cost);
                let level = model.level_at(&p, now);
                prop_assert_eq!(d.allowed(), model.admits(&p, now, cost));
                let level_after = if d.allowed() { level - u128::from(cost) * w } else { level };
                let full = u128::from(p.capacity) * w;
                prop_assert_eq!(u128::from(d.count), (full - level_after).div_ceil(w));
                prop_assert_eq!(u128::from(d.remaining()), level_after / w);
                prop_assert_eq!(u128::from(d.reset_after_ms), (full - level_after).div_ceil(u128::from(rate)));
                match d.denied() {
                    Some(RetryAfter::After(wait)) => {
                        prop_assert!(wait >= 1);
                        prop_assert!(model.admits(&p, now + wait, cost));
                        prop_assert!(!model.admits(&p, now + wait - 1, cost));
                        prop_assert!(decide(&p, state, now + wait, cost).allowed());
                    }
                    Some(RetryAfter::Never) => prop_assert!(cost > p.capacity),
                    None => prop_assert!(d.allowed()),
                }
                if d.allowed() {
                    model = Model { level: level_after, at: now };
                    state = d.into_state();
                }
            }
        }
    }
}
