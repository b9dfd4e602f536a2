//! TOKEN: a bucket of `capacity` tokens that starts full and refills
//! continuously at `rate` tokens per `window`.
//!
//! Exactness: the bucket's shortfall is kept in units of 1/window_ms of a
//! token, so one millisecond refills exactly `rate` units and one token is
//! exactly `window_ms` units. Every quantity is an integer (u128, which
//! holds 2^50 tokens times 3650 days in ms with room to spare); nothing
//! rounds until a reply is formed, and then only towards the caller's
//! safety: waits round up, remaining tokens round down.
//!
//! RESERVE (the leaky bucket as a queue): a call may take tokens that do
//! not exist yet, as long as they will within `max_wait`; the bucket then
//! owes them (its debt, below empty), later calls queue behind the debt,
//! and the caller is told how long to wait. Units are handed out exactly
//! `window / rate` ms apart, first come, first served. The stored
//! [`Bucket`] keeps the debt apart from the ordinary shortfall because a
//! capacity lowered by an override caps the shortfall at the new capacity
//! (the bucket is at most empty) but never forgives what reservations owe.
//!
//! REFUND returns tokens: the debt is repaid first, then the bucket fills,
//! up to its capacity.

use super::decision::{Change, Decision, Refunded, RetryAfter, Status, Verdict};
use super::units::{Amount, Window};
use super::{MAX_AMOUNT, MAX_WINDOW_MS};
use std::num::NonZeroU128;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenParams {
    pub rate: Amount,
    pub window_ms: Window,
    pub capacity: Amount,
}

impl TokenParams {
    /// The parameters from plain numbers: None when the rate or capacity
    /// is not an [`Amount`] or the window not a [`Window`].
    pub const fn new(rate: u64, window_ms: u64, capacity: u64) -> Option<TokenParams> {
        match (
            Amount::new(rate),
            Window::new(window_ms),
            Amount::new(capacity),
        ) {
            (Some(rate), Some(window_ms), Some(capacity)) => Some(TokenParams {
                rate,
                window_ms,
                capacity,
            }),
            _ => None,
        }
    }
}

/// The bucket as of `at_ms`: `missing` units (1/`window_ms` of a token
/// each) short of full. Storing the shortfall rather than the level means a
/// missing key is simply a full bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenState {
    pub at_ms: u64,
    pub window_ms: Window,
    pub missing: u128,
}

impl TokenState {
    pub fn is_consistent(&self) -> bool {
        self.missing >= 1
            && self.missing <= u128::from(MAX_AMOUNT) * u128::from(self.window_ms.ms())
    }
}

/// The most units a bucket can owe: a reservation waits at most 3650 days
/// (the longest `max_wait`) at most 2^50 units per ms (the largest rate),
/// so a debt written by `reserve` never exceeds this, whatever the window.
pub const MAX_DEBT: u128 = MAX_AMOUNT as u128 * MAX_WINDOW_MS as u128;

/// A token bucket as stored once RESERVE exists: `state.missing` is the
/// shortfall within the capacity (at most the capacity, in
/// 1/`state.window_ms` units as of `state.at_ms`) and `debt` the units
/// reservations took beyond empty, in the same units. The level is
/// `capacity - missing - debt` tokens; refilling repays the debt first.
/// A bucket written by [`decide`] (or before RESERVE existed) is
/// `Bucket::from(state)`, with no debt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bucket {
    pub state: TokenState,
    pub debt: u128,
}

impl From<TokenState> for Bucket {
    fn from(state: TokenState) -> Bucket {
        Bucket { state, debt: 0 }
    }
}

impl Bucket {
    /// What any bucket written by this module satisfies: a consistent
    /// shortfall (never 0: an empty bucket is no key; with debt the
    /// shortfall is the whole capacity) and a debt of at most [`MAX_DEBT`].
    pub fn is_consistent(&self) -> bool {
        self.state.is_consistent() && self.debt <= MAX_DEBT
    }
}

/// `a / b` rounded up; in u64 when both fit (nearly always: a u128
/// division is a library call), else in u128.
fn div_ceil(a: u128, b: NonZeroU128) -> u128 {
    let b = b.get();
    match (u64::try_from(a), u64::try_from(b)) {
        (Ok(a), Ok(b)) => u128::from(a.div_ceil(b)),
        _ => a.div_ceil(b),
    }
}

fn to_u64(v: u128) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// A bucket refilled up to the decision's `now`.
struct Level {
    /// The decision's time: a clock that steps back stands still at the
    /// bucket's last call.
    now: u64,
    /// Units short of full, debt included.
    short: u128,
}

/// What a call asks of the bucket: `cost` tokens, within `max_wait_ms`.
struct Ask {
    cost: u64,
    max_wait_ms: u64,
}

struct Units {
    window: NonZeroU128,
    rate: NonZeroU128,
    full: u128,
}

impl Units {
    fn of(params: &TokenParams) -> Units {
        let window = NonZeroU128::from(params.window_ms.nonzero_ms());
        Units {
            window,
            rate: NonZeroU128::from(params.rate.nonzero()),
            full: u128::from(params.capacity.get()) * window.get(),
        }
    }

    /// The bucket refilled to `now` (inlined so that a plain state's debt
    /// of 0 folds away).
    #[inline(always)]
    fn level(
        &self,
        params: &TokenParams,
        state: Option<TokenState>,
        debt: u128,
        now: u64,
    ) -> Level {
        let Some(s) = state else {
            return Level { now, short: 0 };
        };
        let now = now.max(s.at_ms);
        // A changed window rescales the shortfall and the debt, rounding
        // towards fewer tokens.
        let rescale = |units: u128| {
            if s.window_ms == params.window_ms {
                units
            } else {
                units.checked_mul(self.window.get()).map_or(u128::MAX, |m| {
                    div_ceil(m, NonZeroU128::from(s.window_ms.nonzero_ms()))
                })
            }
        };
        let refilled = u128::from(now - s.at_ms) * self.rate.get();
        // Refilling repays the debt first. A smaller capacity caps the
        // shortfall (never below empty), never the debt.
        let debt = rescale(debt).min(MAX_DEBT);
        let repaid = refilled.min(debt);
        let missing = rescale(s.missing)
            .saturating_sub(refilled - repaid)
            .min(self.full);
        Level {
            now,
            short: missing.saturating_add(debt - repaid),
        }
    }

    fn level_of(&self, params: &TokenParams, bucket: Option<Bucket>, now: u64) -> Level {
        let debt = bucket.map_or(0, |b| b.debt);
        self.level(params, bucket.map(|b| b.state), debt, now)
    }

    /// The stored form of a shortfall: the part within the capacity, and
    /// the debt beyond it.
    fn bucket(&self, params: &TokenParams, now: u64, short: u128) -> Bucket {
        let missing = short.min(self.full);
        Bucket {
            state: TokenState {
                at_ms: now,
                window_ms: params.window_ms,
                missing,
            },
            debt: short - missing,
        }
    }

    /// Takes the call's tokens, waiting at most its `max_wait_ms` (see
    /// `reserve`), from a bucket given as its plain state and debt; `store`
    /// builds the state type the caller commits. Inlined into each caller
    /// so that `decide`'s constant debt and wait of 0 fold away.
    #[inline(always)]
    fn take<S>(
        &self,
        params: &TokenParams,
        state: Option<TokenState>,
        debt: u128,
        now: u64,
        Ask { cost, max_wait_ms }: Ask,
        store: impl FnOnce(Bucket) -> S,
    ) -> Decision<S> {
        let Level { now, short } = self.level(params, state, debt, now);
        let after = short.saturating_add(u128::from(cost) * self.window.get());
        // What the bucket would owe beyond empty once the call's tokens
        // are taken; each ms repays `rate` units of it, so the call may act
        // after ceil(owed / rate) ms.
        let owed = after.saturating_sub(self.full);
        let fits = owed == 0
            || (cost <= params.capacity.get()
                && owed <= u128::from(max_wait_ms) * self.rate.get()
                && owed <= MAX_DEBT);
        if fits {
            let status = self.status(params, after);
            return Decision {
                count: status.count,
                limit: status.limit,
                reset_after_ms: status.reset_after_ms,
                verdict: Verdict::Admit {
                    state: store(self.bucket(params, now, after)),
                    expires_at_ms: now.saturating_add(status.reset_after_ms),
                    // (Nearly always nothing is owed: no division then.)
                    wait_ms: if owed == 0 {
                        0
                    } else {
                        to_u64(div_ceil(owed, self.rate))
                    },
                },
            };
        }
        let retry_after = if cost > params.capacity.get() {
            RetryAfter::Never
        } else {
            // The wait shrinks by exactly 1 per ms waited, so the call fits
            // once it is down to max_wait. (At least 1: a denial always
            // waits; only a debt beyond MAX_DEBT, out of any valid
            // parameters' reach, could deny a wait within max_wait.)
            let wait = div_ceil(owed, self.rate);
            RetryAfter::Ms(to_u64(wait.saturating_sub(u128::from(max_wait_ms))).max(1))
        };
        let status = self.status(params, short);
        Decision {
            count: status.count,
            verdict: Verdict::Deny(retry_after),
            limit: status.limit,
            reset_after_ms: status.reset_after_ms,
        }
    }

    fn status(&self, params: &TokenParams, short: u128) -> Status {
        Status {
            count: to_u64(div_ceil(short, self.window)),
            limit: params.capacity.get(),
            reset_after_ms: to_u64(div_ceil(short, self.rate)),
        }
    }
}

/// TOKEN: admitted when at least `cost` tokens are in the bucket now.
pub fn decide(
    params: &TokenParams,
    state: Option<TokenState>,
    now: u64,
    cost: u64,
) -> Decision<TokenState> {
    // With no wait allowed no debt is ever taken, so the bucket written is
    // the plain state.
    decide_as(params, state, now, cost, |b| b.state)
}

/// [`decide`] committing a [`Bucket`] without debt: the module's hot path,
/// the bucket built in place rather than the decision mapped after.
#[inline]
pub fn decide_plain(
    params: &TokenParams,
    state: Option<TokenState>,
    now: u64,
    cost: u64,
) -> Decision<Bucket> {
    decide_as(params, state, now, cost, |b| Bucket::from(b.state))
}

/// TOKEN with no wait allowed, committing what `store` makes of the
/// bucket (inlined so each caller's state type is built directly).
#[inline(always)]
fn decide_as<S>(
    params: &TokenParams,
    state: Option<TokenState>,
    now: u64,
    cost: u64,
    store: impl FnOnce(Bucket) -> S,
) -> Decision<S> {
    let ask = Ask {
        cost,
        max_wait_ms: 0,
    };
    Units::of(params).take(params, state, 0, now, ask, store)
}

/// TOKEN without RESERVE on a bucket that may be in debt: admitted when at
/// least `cost` tokens are there now, debt repaid; a bucket in debt denies
/// every call until its reservations are repaid and the call's tokens
/// refilled. The same as `reserve` with `max_wait_ms` 0.
pub fn decide_bucket(
    params: &TokenParams,
    bucket: Option<Bucket>,
    now: u64,
    cost: u64,
) -> Decision<Bucket> {
    reserve(params, bucket, now, cost, 0)
}

/// RESERVE `max_wait_ms`: admitted now when the bucket has `cost` tokens
/// left after every earlier reservation within `max_wait_ms`; the tokens it
/// lacks are taken from the future (the bucket goes into debt) and the
/// decision's `wait_ms` (the reply's retry_after) is the ms until they
/// exist, rounded up. count may then exceed the capacity (remaining 0) and
/// reset_after is the time until the bucket is full again.
///
/// A call whose wait would exceed `max_wait_ms` reserves nothing and is
/// denied with the least extra wait after which the same call is admitted
/// (denied at `now + retry_after - 1`, admitted at `now + retry_after`,
/// nothing else happening meanwhile). A cost above the capacity is denied
/// with `RetryAfter::Never`: no wait helps.
pub fn reserve(
    params: &TokenParams,
    bucket: Option<Bucket>,
    now: u64,
    cost: u64,
    max_wait_ms: u64,
) -> Decision<Bucket> {
    let debt = bucket.map_or(0, |b| b.debt);
    Units::of(params).take(
        params,
        bucket.map(|b| b.state),
        debt,
        now,
        Ask { cost, max_wait_ms },
        |b| b,
    )
}

/// REFUND `units`: that many tokens return to the bucket, repaying its
/// debt first, up to full. Nothing changes when the bucket is full.
pub fn refund(
    params: &TokenParams,
    bucket: Option<Bucket>,
    now: u64,
    units: u64,
) -> Refunded<Bucket> {
    let u = Units::of(params);
    let Level { now, short } = u.level_of(params, bucket, now);
    let after = short.saturating_sub(u128::from(units) * u.window.get());
    let status = u.status(params, after);
    let change = if after == short {
        Change::Unchanged
    } else if after == 0 {
        Change::Clear
    } else {
        Change::Store {
            state: u.bucket(params, now, after),
            expires_at_ms: now.saturating_add(status.reset_after_ms),
        }
    };
    Refunded {
        change,
        count: status.count,
        limit: status.limit,
        reset_after_ms: status.reset_after_ms,
    }
}

/// The counts at `now` without a call (what a call during a block reports;
/// also what WAIT's reply shows at the reserved millisecond, given the
/// committed bucket and `now + wait_ms`).
pub fn status(params: &TokenParams, bucket: Option<Bucket>, now: u64) -> Status {
    let u = Units::of(params);
    let Level { short, .. } = u.level_of(params, bucket, now);
    u.status(params, short)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn params(rate: u64, window_ms: u64, capacity: u64) -> TokenParams {
        TokenParams::new(rate, window_ms, capacity).unwrap()
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
        assert_eq!(crate::algorithm::replay(&p, &calls), want);
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
        assert_eq!(crate::algorithm::replay(&p, &calls), want);
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
            if let Some(RetryAfter::Ms(wait)) = d.denied() {
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
            let cap = u128::from(p.capacity.get()) * u128::from(p.window_ms.ms());
            (self.level + u128::from(now.max(self.at) - self.at) * u128::from(p.rate.get()))
                .min(cap)
        }
        fn admits(&self, p: &TokenParams, now: u64, cost: u64) -> bool {
            self.level_at(p, now) >= u128::from(cost) * u128::from(p.window_ms.ms())
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
            let mut model = Model { level: u128::from(p.capacity.get()) * w, at: 0 };
            let mut state = None;
            let mut now = 0u64;
            for (gap, cost) in steps {
                now += gap;
                let d = decide(&p, state, now, cost);
                let level = model.level_at(&p, now);
                prop_assert_eq!(d.allowed(), model.admits(&p, now, cost));
                let level_after = if d.allowed() { level - u128::from(cost) * w } else { level };
                let full = u128::from(p.capacity.get()) * w;
                prop_assert_eq!(u128::from(d.count), (full - level_after).div_ceil(w));
                prop_assert_eq!(u128::from(d.remaining()), level_after / w);
                prop_assert_eq!(u128::from(d.reset_after_ms), (full - level_after).div_ceil(u128::from(rate)));
                match d.denied() {
                    Some(RetryAfter::Ms(wait)) => {
                        prop_assert!(wait >= 1);
                        prop_assert!(model.admits(&p, now + wait, cost));
                        prop_assert!(!model.admits(&p, now + wait - 1, cost));
                        prop_assert!(decide(&p, state, now + wait, cost).allowed());
                    }
                    Some(RetryAfter::Never) => prop_assert!(cost > p.capacity.get()),
                    None => prop_assert!(d.allowed()),
                }
                if d.allowed() {
                    model = Model { level: level_after, at: now };
                    state = d.into_state();
                }
            }
        }
    }

    fn reserving(
        p: &TokenParams,
        bucket: &mut Option<Bucket>,
        now: u64,
        cost: u64,
        max_wait_ms: u64,
    ) -> [i64; 6] {
        let d = reserve(p, *bucket, now, cost, max_wait_ms);
        if let Some(b) = d.into_state() {
            *bucket = Some(b);
        }
        d.reply()
    }

    #[test]
    fn reservations_queue_and_plain_calls_wait_behind_them() {
        // One token a second, a bucket of two, waits of up to 3 s.
        let p = params(1, 1000, 2);
        let mut b = None;
        let r = |b: &mut Option<Bucket>, now, cost, max_wait| reserving(&p, b, now, cost, max_wait);
        // [allowed, count, retry_after, limit, remaining, reset_after]
        assert_eq!(r(&mut b, 0, 2, 3000), [1, 2, 0, 2, 0, 2000]);
        assert_eq!(r(&mut b, 0, 1, 3000), [1, 3, 1000, 2, 0, 3000]);
        assert_eq!(r(&mut b, 0, 1, 3000), [1, 4, 2000, 2, 0, 4000]);
        assert_eq!(r(&mut b, 0, 1, 3000), [1, 5, 3000, 2, 0, 5000]);
        // The next turn is 4 s away: 1 s more than allowed, nothing taken.
        assert_eq!(r(&mut b, 0, 1, 3000), [0, 5, 1000, 2, 0, 5000]);
        assert_eq!(r(&mut b, 999, 1, 3000), [0, 5, 1, 2, 0, 4001]);
        // A plain call waits for the whole queue.
        assert_eq!(decide_bucket(&p, b, 0, 1).reply(), [0, 5, 4000, 2, 0, 5000]);
        assert_eq!(decide_bucket(&p, b, 3999, 1).reply(), [0, 2, 1, 2, 0, 1001]);
        assert!(decide_bucket(&p, b, 4000, 1).allowed());
        // Max wait 0 is the plain call.
        assert_eq!(r(&mut b, 0, 1, 0), [0, 5, 4000, 2, 0, 5000]);
        // A cost above the capacity never fits, debt or not.
        assert_eq!(r(&mut b, 1000, 3, 100_000), [0, 4, -1, 2, 0, 4000]);
        assert_eq!(r(&mut b, 1000, 1, 3000), [1, 5, 3000, 2, 0, 5000]);
        assert_eq!(b.map(|b| b.debt), Some(3000));
        // A refund repays the debt first: two tokens back, two turns sooner.
        let back = refund(&p, b, 1000, 2);
        assert_eq!(back.reply(), [1, 3, 0, 2, 0, 3000]);
        let Change::Store {
            state,
            expires_at_ms,
        } = back.change
        else {
            panic!("{back:?}");
        };
        assert_eq!(
            (state.debt, state.state.missing, expires_at_ms),
            (1000, 2000, 4000)
        );
        assert_eq!(
            reserve(&p, Some(state), 1000, 1, 3000).wait_ms(),
            Some(2000)
        );
        // Refunding more than is missing fills the bucket: the key goes.
        let all = refund(&p, Some(state), 1000, 10);
        assert_eq!(
            (all.change, all.reply()),
            (Change::Clear, [1, 0, 0, 2, 2, 0])
        );
        // A full bucket has nothing to refund.
        assert_eq!(refund(&p, None, 0, 1).change, Change::Unchanged);
        assert_eq!(refund(&p, Some(state), 10_000, 1).change, Change::Unchanged);
    }

    #[test]
    fn fractional_turns_round_up_and_do_not_drift() {
        // 3 per second: turns every 333.33.. ms, each rounded up on its own.
        let p = params(3, 1000, 1);
        let mut b = None;
        let waits: Vec<_> = (0..7)
            .map(|_| reserving(&p, &mut b, 0, 1, 10_000)[2])
            .collect();
        assert_eq!(waits, [0, 334, 667, 1000, 1334, 1667, 2000]);
    }

    #[test]
    fn a_lower_capacity_caps_the_shortfall_but_keeps_the_debt() {
        let p = params(10, 1000, 10);
        let mut b = None;
        reserving(&p, &mut b, 0, 10, 0);
        reserving(&p, &mut b, 0, 5, 1000);
        assert_eq!(b.map(|b| (b.state.missing, b.debt)), Some((10_000, 5000)));
        // Capacity 4: the bucket is empty (4 short) and still owes 5.
        let small = params(10, 1000, 4);
        assert_eq!(status(&small, b, 0).count, 9);
        assert_eq!(
            decide_bucket(&small, b, 0, 1).reply(),
            [0, 9, 600, 4, 0, 900]
        );
        // Capacity back to 10: the shortfall was never lost.
        assert_eq!(status(&p, b, 0).count, 15);
        // A doubled window halves the refill speed of both.
        let slow = params(10, 2000, 10);
        assert_eq!(
            decide_bucket(&slow, b, 0, 1).reply(),
            [0, 15, 1200, 10, 0, 3000]
        );
    }

    #[test]
    fn a_plain_state_is_a_bucket_without_debt() {
        let p = params(3, 1000, 5);
        let s = decide(&p, None, 0, 4).into_state();
        for (now, cost) in [(0, 1), (0, 2), (100, 2), (400, 1), (5000, 5)] {
            let plain = decide(&p, s, now, cost);
            let bucket = decide_bucket(&p, s.map(Bucket::from), now, cost);
            assert_eq!(plain, bucket.map(|b| b.state));
            assert_eq!(
                bucket.into_state().map(|b| b.debt),
                plain.allowed().then_some(0)
            );
        }
    }

    #[test]
    fn extreme_reservations_saturate() {
        // The slowest rate, the largest bucket, the longest wait.
        let p = params(1, MAX_WINDOW_MS, MAX_AMOUNT);
        let d = reserve(&p, None, 0, MAX_AMOUNT, MAX_WINDOW_MS);
        let d2 = reserve(&p, d.into_state(), 0, 1, MAX_WINDOW_MS);
        assert_eq!(d2.wait_ms(), Some(MAX_WINDOW_MS));
        let b = d2.into_state().unwrap();
        assert!(b.is_consistent());
        assert_eq!(b.debt, u128::from(MAX_WINDOW_MS));
        assert_eq!(
            reserve(&p, Some(b), 0, 1, MAX_WINDOW_MS).denied(),
            Some(RetryAfter::Ms(MAX_WINDOW_MS))
        );
        // The fastest rate with the longest wait: the debt bound holds.
        let p = params(MAX_AMOUNT, 1, MAX_AMOUNT);
        let mut b = None;
        for _ in 0..4 {
            reserving(&p, &mut b, 7, MAX_AMOUNT, MAX_WINDOW_MS);
        }
        assert!(b.is_some_and(|b| b.is_consistent() && b.debt == 3 * u128::from(MAX_AMOUNT)));
        // A debt taken under a 1 ms window, read under the longest one.
        let wide = params(MAX_AMOUNT, MAX_WINDOW_MS, MAX_AMOUNT);
        let d = reserve(&wide, b, 7, 1, MAX_WINDOW_MS);
        assert!(!d.allowed());
        let r = refund(&wide, b, 7, 1);
        if let Change::Store { state, .. } = r.change {
            assert!(state.is_consistent());
        }
        // Nonsense parameters cannot be built; the widest ones with
        // nonsense calls do not panic.
        assert_eq!(TokenParams::new(0, 1, 1), None);
        assert_eq!(TokenParams::new(1, 0, 1), None);
        assert_eq!(TokenParams::new(1, 1, 0), None);
        assert_eq!(TokenParams::new(u64::MAX, u64::MAX, u64::MAX), None);
        let _ = reserve(&wide, b, u64::MAX, u64::MAX, u64::MAX);
        let _ = refund(&wide, b, u64::MAX, u64::MAX);
        let _ = refund(&wide, b, 0, u64::MAX);
        let _ = status(&wide, b, 0);
    }

    /// A million reservations at 3 per second through a bucket of 5: after
    /// the burst, the k-th unit's turn is ceil(k * 1000 / 3) ms exactly,
    /// callers served in arrival order, each arriving at some time before
    /// its turn.
    #[test]
    fn a_million_reservations_start_exactly_a_third_of_a_second_apart() {
        let (rate, window_ms, capacity) = (3u64, 1000u64, 5u64);
        let p = params(rate, window_ms, capacity);
        let mut bucket = None;
        let mut now = 0u64;
        let mut unit = 0u64;
        let mut lcg = 0x2545_f491_4f6c_dd1du64;
        let mut last_start = 0u64;
        for call in 0..1_000_000u64 {
            lcg = lcg.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let cost = 1 + (lcg >> 62) % 3;
            let d = reserve(&p, bucket, now, cost, 10_000);
            let wait = d
                .wait_ms()
                .unwrap_or_else(|| panic!("call {call} denied: {d:?}"));
            assert!(wait <= 10_000);
            unit += cost;
            // The call's last unit: the burst is free, then one unit per
            // window/rate ms after the bucket started emptying at 0.
            let want = (unit.saturating_sub(capacity) * window_ms).div_ceil(rate);
            assert_eq!(now + wait, want, "call {call} (unit {unit})");
            assert!(now + wait >= last_start, "first come, first served");
            last_start = now + wait;
            bucket = d.into_state();
            // The next caller arrives at some time up to this turn.
            now += (lcg >> 33) % (wait + 1);
        }
        assert_eq!(last_start, ((unit - capacity) * window_ms).div_ceil(rate));
    }

    /// An independent model of the bucket as a queue: the theoretical
    /// arrival time `tat` (in 1/rate ms, so exact), the time at which the
    /// bucket would be full again. A call of `cost` takes the slot after
    /// `max(tat, now)`; it may act once the bucket's level, taken that far,
    /// is back to 0: at `tat' - capacity * window / rate`.
    #[derive(Clone, Copy, Debug)]
    struct Queue {
        tat: u128,
    }

    impl Queue {
        /// The ms the call would wait at `now`, None if its cost never fits.
        fn wait(&self, p: &TokenParams, now: u64, cost: u64) -> Option<u128> {
            let r = u128::from(p.rate.get());
            let tat =
                self.tat.max(u128::from(now) * r) + u128::from(cost) * u128::from(p.window_ms.ms());
            let start =
                tat.saturating_sub(u128::from(p.capacity.get()) * u128::from(p.window_ms.ms()));
            (cost <= p.capacity.get()).then(|| start.div_ceil(r).saturating_sub(u128::from(now)))
        }
        fn take(&mut self, p: &TokenParams, now: u64, cost: u64) {
            let r = u128::from(p.rate.get());
            self.tat =
                self.tat.max(u128::from(now) * r) + u128::from(cost) * u128::from(p.window_ms.ms());
        }
        fn give(&mut self, p: &TokenParams, now: u64, units: u64) {
            let r = u128::from(p.rate.get());
            let now = u128::from(now) * r;
            self.tat = self
                .tat
                .saturating_sub(u128::from(units) * u128::from(p.window_ms.ms()))
                .max(now);
        }
        /// Tokens short of full at `now`, times window.
        fn short(&self, p: &TokenParams, now: u64) -> u128 {
            self.tat
                .saturating_sub(u128::from(now) * u128::from(p.rate.get()))
        }
    }

    #[derive(Clone, Copy, Debug)]
    enum Op {
        Reserve(u64, u64),
        Plain(u64),
        Refund(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (1u64..8, 0u64..5000).prop_map(|(c, w)| Op::Reserve(c, w)),
            1 => (1u64..8).prop_map(Op::Plain),
            1 => (1u64..8).prop_map(Op::Refund),
        ]
    }

    proptest! {
        /// RESERVE, plain calls on a bucket in debt, and REFUND against the
        /// queue model: the same verdicts, waits and counts; a wait never
        /// exceeds max_wait; a denial's retry_after is exact (denied 1 ms
        /// before, admitted then); a denial changes nothing (the model is
        /// not advanced, and the next step must still agree).
        #[test]
        fn reserve_matches_the_queue_model(
            rate in 1u64..20,
            window_ms in 1u64..3000,
            capacity in 1u64..10,
            steps in prop::collection::vec((0u64..1500, op()), 1..80),
        ) {
            let p = params(rate, window_ms, capacity);
            let w = u128::from(window_ms);
            let mut model = Queue { tat: 0 };
            let mut bucket: Option<Bucket> = None;
            let mut now = 0u64;
            for (gap, op) in steps {
                now += gap;
                let (cost, max_wait) = match op {
                    Op::Reserve(c, m) => (c, m),
                    Op::Plain(c) => (c, 0),
                    Op::Refund(units) => {
                        let r = refund(&p, bucket, now, units);
                        let before = model.short(&p, now);
                        model.give(&p, now, units);
                        let short = model.short(&p, now);
                        prop_assert_eq!(u128::from(r.count), short.div_ceil(w));
                        prop_assert_eq!(u128::from(r.reset_after_ms), short.div_ceil(u128::from(rate)));
                        prop_assert_eq!(r.reply()[..3].to_vec(), vec![1, r.count as i64, 0]);
                        prop_assert_eq!(r.changed(), short != before);
                        match r.change {
                            Change::Unchanged => {}
                            Change::Clear => { prop_assert_eq!(short, 0); bucket = None; }
                            Change::Store { state, expires_at_ms } => {
                                prop_assert!(state.is_consistent());
                                prop_assert_eq!(expires_at_ms, now + r.reset_after_ms);
                                bucket = Some(state);
                            }
                        }
                        continue;
                    }
                };
                let d = if max_wait == 0 && matches!(op, Op::Plain(_)) {
                    decide_bucket(&p, bucket, now, cost)
                } else {
                    reserve(&p, bucket, now, cost, max_wait)
                };
                let model_wait = model.wait(&p, now, cost);
                let admits = model_wait.is_some_and(|x| x <= u128::from(max_wait));
                prop_assert_eq!(d.allowed(), admits);
                match d.denied() {
                    None => {
                        let wait = d.wait_ms().unwrap();
                        prop_assert!(wait <= max_wait);
                        prop_assert_eq!(Some(u128::from(wait)), model_wait);
                        model.take(&p, now, cost);
                        let b = d.into_state().unwrap();
                        prop_assert!(b.is_consistent());
                        prop_assert_eq!(d.admitted().map(|a| a.1), Some(now + d.reset_after_ms));
                        bucket = Some(b);
                    }
                    Some(RetryAfter::Never) => prop_assert!(cost > capacity),
                    Some(RetryAfter::Ms(r)) => {
                        prop_assert!(r >= 1);
                        let later = |t: u64| model.wait(&p, t, cost).is_some_and(|x| x <= u128::from(max_wait));
                        prop_assert!(later(now + r));
                        prop_assert!(!later(now + r - 1));
                        prop_assert!(reserve(&p, bucket, now + r, cost, max_wait).allowed());
                        prop_assert!(!reserve(&p, bucket, now + r - 1, cost, max_wait).allowed());
                    }
                }
                let short = model.short(&p, now);
                prop_assert_eq!(u128::from(d.count), short.div_ceil(w));
                prop_assert_eq!(u128::from(d.reset_after_ms), short.div_ceil(u128::from(rate)));
                prop_assert_eq!(u128::from(d.remaining()), u128::from(capacity).saturating_sub(short.div_ceil(w)));
            }
        }
    }
}
