//! FIXED: a counter per window. A window opens at the first admitted call
//! (or, ALIGNED, on a multiple of the window in Unix time) and covers the
//! half-open range `[start, start + window)`.
//!
//! REFUND gives back units of the current window only: its count drops,
//! never below 0, and a window that has ended is not touched. A window
//! refunded to 0 is empty, so its key goes: the next admitted call opens
//! a window as on an empty key (ALIGNED: the same aligned window).

use super::decision::{Change, Decision, Refunded, RetryAfter, Status, Verdict};
use super::units::{Amount, Window};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixedParams {
    pub limit: Amount,
    pub window_ms: Window,
    pub aligned: bool,
}

impl FixedParams {
    /// The parameters from plain numbers: None when the limit is not an
    /// [`Amount`] or the window not a [`Window`].
    pub const fn new(limit: u64, window_ms: u64, aligned: bool) -> Option<FixedParams> {
        match (Amount::new(limit), Window::new(window_ms)) {
            (Some(limit), Some(window_ms)) => Some(FixedParams {
                limit,
                window_ms,
                aligned,
            }),
            _ => None,
        }
    }
}

/// A window that has opened, with the units admitted in it. The end is
/// stored rather than derived so that a window keeps its length even when an
/// override later changes the configured window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixedState {
    pub start_ms: u64,
    pub end_ms: u64,
    pub count: u64,
}

impl FixedState {
    /// A window whose range is empty or whose count exceeds what any call
    /// could have admitted was not written by us.
    pub fn is_consistent(&self) -> bool {
        self.start_ms < self.end_ms && self.count >= 1 && self.count <= super::MAX_AMOUNT
    }
}

fn open_window(params: &FixedParams, now: u64) -> FixedState {
    let start_ms = if params.aligned {
        now - now % params.window_ms.ms()
    } else {
        now
    };
    FixedState {
        start_ms,
        end_ms: start_ms.saturating_add(params.window_ms.ms()),
        count: 0,
    }
}

#[inline(always)]
pub fn decide(
    params: &FixedParams,
    state: Option<FixedState>,
    now: u64,
    cost: u64,
) -> Decision<FixedState> {
    // A clock that steps back stands still at the window's start, so an
    // earlier `now` can neither reopen nor lengthen a window.
    let live = state.filter(|s| now.max(s.start_ms) < s.end_ms);
    let (window, now) = match live {
        Some(s) => (s, now.max(s.start_ms)),
        None => (open_window(params, now), now),
    };
    let until_end = window.end_ms - now;
    match window
        .count
        .checked_add(cost)
        .filter(|&c| c <= params.limit.get())
    {
        Some(count) => Decision {
            count,
            limit: params.limit.get(),
            reset_after_ms: until_end,
            verdict: Verdict::Admit {
                state: FixedState { count, ..window },
                expires_at_ms: window.end_ms,
                wait_ms: 0,
            },
        },
        None => Decision {
            count: window.count,
            // The next window starts empty, so any cost within the limit
            // fits as soon as this one ends.
            verdict: Verdict::Deny(if cost > params.limit.get() {
                RetryAfter::Never
            } else {
                RetryAfter::Ms(until_end)
            }),
            limit: params.limit.get(),
            reset_after_ms: if live.is_some() { until_end } else { 0 },
        },
    }
}

/// REFUND `units`: the live window's count drops by up to `units`. Nothing
/// changes when no window is live (none stored, or it has ended).
pub fn refund(
    params: &FixedParams,
    state: Option<FixedState>,
    now: u64,
    units: u64,
) -> Refunded<FixedState> {
    // The same clock rule as `decide`: a step back stands still at the
    // window's start.
    let live = state.filter(|s| now.max(s.start_ms) < s.end_ms);
    let Some(window) = live else {
        return Refunded {
            change: Change::Unchanged,
            count: 0,
            limit: params.limit.get(),
            reset_after_ms: 0,
        };
    };
    let now = now.max(window.start_ms);
    let count = window.count.saturating_sub(units);
    let (change, reset_after_ms) = if count == 0 {
        // (A stored count of 0 is not ours; it reports empty and stays.)
        let change = if window.count == 0 {
            Change::Unchanged
        } else {
            Change::Clear
        };
        (change, 0)
    } else if count == window.count {
        (Change::Unchanged, window.end_ms - now)
    } else {
        (
            Change::Store {
                state: FixedState { count, ..window },
                expires_at_ms: window.end_ms,
            },
            window.end_ms - now,
        )
    };
    Refunded {
        change,
        count,
        limit: params.limit.get(),
        reset_after_ms,
    }
}

/// The counts at `now` without a call (what a call during a block reports).
pub fn status(params: &FixedParams, state: Option<FixedState>, now: u64) -> Status {
    refund(params, state, now, 0).status()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MAX_AMOUNT, MAX_WINDOW_MS};
    use proptest::prelude::*;

    fn params(limit: u64, window_ms: u64, aligned: bool) -> FixedParams {
        FixedParams::new(limit, window_ms, aligned).unwrap()
    }

    #[test]
    fn table_of_edges() {
        // (now, cost) -> [allowed, count, retry_after, limit, remaining, reset_after]
        let p = params(3, 1000, false);
        let rows: &[((u64, u64), [i64; 6])] = &[
            ((5000, 1), [1, 1, 0, 3, 2, 1000]),
            ((5001, 2), [1, 3, 0, 3, 0, 999]),
            ((5002, 1), [0, 3, 998, 3, 0, 998]),
            ((5999, 1), [0, 3, 1, 3, 0, 1]),
            // Half-open: at start + window the next window has begun.
            ((6000, 1), [1, 1, 0, 3, 2, 1000]),
            ((6001, 4), [0, 1, -1, 3, 2, 999]),
            ((6002, 2), [1, 3, 0, 3, 0, 998]),
        ];
        let calls: Vec<_> = rows.iter().map(|r| r.0).collect();
        let want: Vec<_> = rows.iter().map(|r| r.1).collect();
        assert_eq!(crate::algorithm::replay(&p, &calls), want);
    }

    #[test]
    fn aligned_windows_reset_on_multiples() {
        let p = params(2, 60_000, true);
        let rows: &[((u64, u64), [i64; 6])] = &[
            ((60_000 * 7 + 59_000, 2), [1, 2, 0, 2, 0, 1000]),
            ((60_000 * 7 + 59_999, 1), [0, 2, 1, 2, 0, 1]),
            ((60_000 * 8, 1), [1, 1, 0, 2, 1, 60_000]),
        ];
        let calls: Vec<_> = rows.iter().map(|r| r.0).collect();
        let want: Vec<_> = rows.iter().map(|r| r.1).collect();
        assert_eq!(crate::algorithm::replay(&p, &calls), want);
    }

    #[test]
    fn denies_cost_above_limit_on_empty_key_without_writing() {
        let d = decide(&params(5, 1000, false), None, 10, 6);
        assert_eq!(d.reply(), [0, 0, -1, 5, 5, 0]);
        assert_eq!(d.into_state(), None);
    }

    #[test]
    fn limit_shrunk_below_count_denies_until_window_ends() {
        let state = FixedState {
            start_ms: 0,
            end_ms: 1000,
            count: 10,
        };
        let d = decide(&params(4, 1000, false), Some(state), 400, 1);
        assert_eq!(d.reply(), [0, 10, 600, 4, 0, 600]);
    }

    #[test]
    fn clock_stepping_back_stands_still_at_window_start() {
        let state = FixedState {
            start_ms: 1000,
            end_ms: 2000,
            count: 1,
        };
        let d = decide(&params(5, 1000, false), Some(state), 10, 1);
        assert_eq!(d.reply(), [1, 2, 0, 5, 3, 1000]);
        assert_eq!(d.into_state().map(|s| s.end_ms), Some(2000));
    }

    #[test]
    fn extreme_values_do_not_overflow() {
        let p = params(MAX_AMOUNT, MAX_WINDOW_MS, true);
        let d = decide(&p, None, u64::MAX - 1, MAX_AMOUNT);
        assert!(d.allowed());
        let p = params(MAX_AMOUNT, MAX_WINDOW_MS, false);
        let d = decide(&p, None, u64::MAX - 1, MAX_AMOUNT);
        assert!(d.allowed());
        let full = d.into_state();
        let d = decide(&p, full, u64::MAX - 1, MAX_AMOUNT);
        assert!(!d.allowed());
    }

    fn arb_params() -> impl Strategy<Value = FixedParams> {
        (1u64..20, 1u64..5000, any::<bool>()).prop_map(|(l, w, a)| params(l, w, a))
    }

    proptest! {
        #[test]
        fn no_window_admits_more_than_limit(
            p in arb_params(),
            steps in prop::collection::vec((0u64..700, 1u64..6), 1..200),
        ) {
            let mut now = 1_000_000u64;
            let mut state: Option<FixedState> = None;
            let mut admitted: std::collections::BTreeMap<u64, u64> = Default::default();
            for (gap, cost) in steps {
                now += gap;
                let d = decide(&p, state, now, cost);
                if let Some(s) = d.into_state() {
                    prop_assert!(now >= s.start_ms && now < s.end_ms);
                    prop_assert_eq!(d.reset_after_ms, s.end_ms - now);
                    *admitted.entry(s.start_ms).or_default() += cost;
                    state = Some(s);
                }
                prop_assert!(d.count <= p.limit.get());
            }
            for total in admitted.values() {
                prop_assert!(*total <= p.limit.get());
            }
        }

        #[test]
        fn retry_after_is_exact(
            p in arb_params(),
            steps in prop::collection::vec((0u64..700, 1u64..6), 1..100),
        ) {
            let mut now = 1_000_000u64;
            let mut state: Option<FixedState> = None;
            for (gap, cost) in steps {
                now += gap;
                let d = decide(&p, state, now, cost);
                match d.denied() {
                    Some(RetryAfter::Ms(wait)) => {
                        prop_assert!(wait >= 1);
                        prop_assert!(decide(&p, state, now + wait, cost).allowed());
                        prop_assert!(!decide(&p, state, now + wait - 1, cost).allowed());
                    }
                    Some(RetryAfter::Never) => prop_assert!(cost > p.limit.get()),
                    None => prop_assert!(d.allowed()),
                }
                if let Some(s) = d.into_state() {
                    state = Some(s);
                }
            }
        }
    }

    #[test]
    fn refund_table() {
        let p = params(5, 1000, false);
        let s = decide(&p, None, 1000, 4).into_state();
        let r = refund(&p, s, 1200, 1);
        assert_eq!(r.reply(), [1, 3, 0, 5, 2, 800]);
        assert_eq!(
            r.change,
            Change::Store {
                state: FixedState {
                    start_ms: 1000,
                    end_ms: 2000,
                    count: 3
                },
                expires_at_ms: 2000
            }
        );
        // More than was counted: down to 0, and the key goes.
        let r = refund(&p, s, 1200, 9);
        assert_eq!((r.change, r.reply()), (Change::Clear, [1, 0, 0, 5, 5, 0]));
        // The window has ended: nothing to give back.
        let r = refund(&p, s, 2000, 1);
        assert_eq!(
            (r.change, r.reply()),
            (Change::Unchanged, [1, 0, 0, 5, 5, 0])
        );
        assert_eq!(refund(&p, None, 0, 1).change, Change::Unchanged);
        // A clock step back stands still at the window's start.
        assert_eq!(refund(&p, s, 0, 1).reply(), [1, 3, 0, 5, 2, 1000]);
        assert_eq!(
            status(&p, s, 1500),
            Status {
                count: 4,
                limit: 5,
                reset_after_ms: 500
            }
        );
    }

    proptest! {
        /// Calls and refunds against a model that keeps the units each
        /// admitted call recorded in the live window: a refund takes back
        /// at most what is recorded there, never more, never from an ended
        /// window, and later decisions see exactly what is left.
        #[test]
        fn refund_gives_back_only_what_the_window_recorded(
            p in arb_params(),
            steps in prop::collection::vec((0u64..700, any::<bool>(), 1u64..6), 1..150),
        ) {
            let mut now = 1_000_000u64;
            let mut state: Option<FixedState> = None;
            // The model: the live window's end and the units recorded in it.
            let mut window: Option<(u64, Vec<u64>)> = None;
            for (gap, is_refund, n) in steps {
                now += gap;
                if window.as_ref().is_some_and(|w| now >= w.0) {
                    window = None;
                }
                let recorded: u64 = window.as_ref().map_or(0, |w| w.1.iter().sum());
                if is_refund {
                    let r = refund(&p, state, now, n);
                    let left = recorded.saturating_sub(n);
                    prop_assert_eq!(r.count, left);
                    prop_assert_eq!(r.changed(), left != recorded);
                    prop_assert_eq!(r.reply()[..3].to_vec(), vec![1, left as i64, 0]);
                    match r.change {
                        Change::Unchanged => {}
                        Change::Clear => {
                            prop_assert_eq!(left, 0);
                            prop_assert_eq!(r.reset_after_ms, 0);
                            state = None;
                            window = None;
                        }
                        Change::Store { state: s, expires_at_ms } => {
                            prop_assert!(s.is_consistent());
                            prop_assert_eq!(s.count, left);
                            prop_assert_eq!(expires_at_ms, now + r.reset_after_ms);
                            let w = window.as_mut().unwrap();
                            prop_assert_eq!(expires_at_ms, w.0);
                            // Take the units back from the model, newest first.
                            let mut back = n;
                            while back > 0 {
                                let last = w.1.last_mut().unwrap();
                                let take = back.min(*last);
                                *last -= take;
                                back -= take;
                                if *last == 0 { w.1.pop(); }
                            }
                            state = Some(s);
                        }
                    }
                } else {
                    let d = decide(&p, state, now, n);
                    prop_assert_eq!(d.allowed(), recorded + n <= p.limit.get());
                    if let Some(s) = d.into_state() {
                        window.get_or_insert((s.end_ms, Vec::new())).1.push(n);
                        state = Some(s);
                    }
                }
            }
        }
    }
}
