//! SLIDING APPROX: the two-window weighted counter of the "Rate Limiting in
//! Rust Using Redis" tutorial. Windows are
//! aligned to multiples of the window in Unix time;
//! `count = current + floor(previous * (window - elapsed) / window)`.
//! Constant memory for any limit.
//!
//! How far it can be off: it assumes the previous window's calls were spread
//! evenly. If they were bunched at its end, the true sliding count is higher
//! and APPROX can admit up to `limit` more in the true window than the exact
//! log would (worst case 2x limit over a window straddling the boundary, when
//! a full previous window's calls all came in its last millisecond); if they
//! were bunched at its start, it under-admits by the same reasoning. It never
//! admits more than `limit` in any single aligned window.
//!
//! REFUND lowers the current aligned window's counter (never below 0); the
//! previous window's counter is history and is not touched.

use super::decision::{Change, Decision, Refunded, RetryAfter, Status, Verdict};
use super::units::{Amount, Window};
use std::num::NonZeroU128;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApproxParams {
    pub limit: Amount,
    pub window_ms: Window,
}

impl ApproxParams {
    /// The parameters from plain numbers: None when the limit is not an
    /// [`Amount`] or the window not a [`Window`].
    pub const fn new(limit: u64, window_ms: u64) -> Option<ApproxParams> {
        match (Amount::new(limit), Window::new(window_ms)) {
            (Some(limit), Some(window_ms)) => Some(ApproxParams { limit, window_ms }),
            _ => None,
        }
    }
}

/// The counts of the aligned window starting at `start_ms` and of the one
/// before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApproxState {
    pub start_ms: u64,
    pub current: u64,
    pub previous: u64,
}

impl ApproxState {
    pub fn is_consistent(&self) -> bool {
        self.current <= super::MAX_AMOUNT && self.previous <= super::MAX_AMOUNT
    }
}

/// floor(previous * remaining / window), exactly.
fn weighted(previous: u64, remaining_ms: u64, window: Window) -> u64 {
    let w =
        u128::from(previous) * u128::from(remaining_ms) / NonZeroU128::from(window.nonzero_ms());
    u64::try_from(w).unwrap_or(u64::MAX)
}

/// The least `x` in `1..=window` (ms left in a window) such that
/// `floor(prev * x / window) <= room`, as a bound: every `x <= max_left`
/// qualifies. None when even `x = 1` does not.
fn max_left(prev: u64, room: u64, window_ms: u64) -> Option<u64> {
    if prev == 0 {
        return Some(window_ms);
    }
    // floor(prev * x / W) <= room  <=>  prev * x < (room + 1) * W
    let bound = (u128::from(room) + 1) * u128::from(window_ms);
    let x = (bound - 1) / u128::from(prev);
    (x >= 1).then(|| u64::try_from(x.min(u128::from(window_ms))).unwrap_or(window_ms))
}

#[inline(always)]
pub fn decide(
    params: &ApproxParams,
    state: Option<ApproxState>,
    now: u64,
    cost: u64,
) -> Decision<ApproxState> {
    let (limit, w) = (params.limit.get(), params.window_ms);
    let window = w.ms();
    // A clock that steps back stands still at the stored window's start.
    let now = now.max(state.map_or(0, |s| s.start_ms));
    let start_ms = now - now % w.nonzero_ms();
    let (current, previous) = match state {
        Some(s) if s.start_ms == start_ms => (s.current, s.previous),
        Some(s) if s.start_ms.saturating_add(window) == start_ms => (0, s.current),
        _ => (0, 0),
    };
    let elapsed = now - start_ms;
    let left = window - elapsed;
    let count = current.saturating_add(weighted(previous, left, w));
    // The counters matter until the window after this one ends.
    let expires_at_ms = start_ms.saturating_add(window.saturating_mul(2));
    if let Some(after) = count.checked_add(cost).filter(|&c| c <= limit) {
        return Decision {
            count: after,
            limit,
            reset_after_ms: expires_at_ms - now,
            verdict: Verdict::Admit {
                state: ApproxState {
                    start_ms,
                    current: current + cost,
                    previous,
                },
                expires_at_ms,
                wait_ms: 0,
            },
        };
    }
    let retry_after = if cost > limit {
        RetryAfter::Never
    } else {
        RetryAfter::Ms(wait_for(current, previous, left, window, limit - cost))
    };
    Decision {
        count,
        verdict: Verdict::Deny(retry_after),
        limit,
        reset_after_ms: life(current, previous, start_ms, window, now),
    }
}

/// Milliseconds until counters `current` (window at `start_ms`) and
/// `previous` (the one before) both stop counting.
fn life(current: u64, previous: u64, start_ms: u64, window: u64, now: u64) -> u64 {
    if current > 0 {
        start_ms.saturating_add(window.saturating_mul(2)) - now
    } else if previous > 0 {
        start_ms.saturating_add(window) - now
    } else {
        0
    }
}

/// REFUND `units`: the current aligned window's counter drops by up to
/// `units`. Nothing changes when it is already 0 (nothing recorded in this
/// window, or the stored counters are from an earlier one).
pub fn refund(
    params: &ApproxParams,
    state: Option<ApproxState>,
    now: u64,
    units: u64,
) -> Refunded<ApproxState> {
    let w = params.window_ms;
    let window = w.ms();
    let now = now.max(state.map_or(0, |s| s.start_ms));
    let start_ms = now - now % w.nonzero_ms();
    let (current, previous) = match state {
        Some(s) if s.start_ms == start_ms => (s.current, s.previous),
        Some(s) if s.start_ms.saturating_add(window) == start_ms => (0, s.current),
        _ => (0, 0),
    };
    let refunded = current.saturating_sub(units);
    let left = window - (now - start_ms);
    let count = refunded.saturating_add(weighted(previous, left, w));
    let reset_after_ms = life(refunded, previous, start_ms, window, now);
    let change = if refunded == current {
        Change::Unchanged
    } else if reset_after_ms == 0 {
        Change::Clear
    } else {
        Change::Store {
            state: ApproxState {
                start_ms,
                current: refunded,
                previous,
            },
            expires_at_ms: now + reset_after_ms,
        }
    };
    Refunded {
        change,
        count,
        limit: params.limit.get(),
        reset_after_ms,
    }
}

/// The counts at `now` without a call (what a call during a block reports).
pub fn status(params: &ApproxParams, state: Option<ApproxState>, now: u64) -> Status {
    refund(params, state, now, 0).status()
}

/// The least wait after which `count + cost <= limit`, given `room = limit
/// - cost`, nothing else being admitted meanwhile.
fn wait_for(current: u64, previous: u64, left: u64, window: u64, room: u64) -> u64 {
    // Later in this window: the previous window's weight shrinks.
    if let Some(room_here) = room.checked_sub(current) {
        if let Some(x) = max_left(previous, room_here, window) {
            // x ms left means waiting left - x; x < left here because the
            // call is denied now.
            return left - x.min(left);
        }
    }
    // In the next window, this window's count becomes the weighted one.
    match max_left(current, room, window) {
        Some(x) => left + (window - x),
        None => left + window,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn seed_001_weighting() {
        let p = ApproxParams::new(10, 1000).unwrap();
        let prev = Some(ApproxState {
            start_ms: 0,
            current: 8,
            previous: 0,
        });
        // 250 ms into the next window: 8 * 750 / 1000 = 6 counted.
        let d = decide(&p, prev, 1250, 4);
        assert_eq!(d.reply(), [1, 10, 0, 10, 0, 750 + 1000]);
        let d = decide(&p, prev, 1250, 5);
        // floor(8 * x / 1000) <= 5 needs x <= 749: wait 1 ms.
        assert_eq!(d.reply(), [0, 6, 1, 10, 4, 750]);
        assert!(decide(&p, prev, 1251, 5).allowed());
    }

    #[test]
    fn cost_above_limit_never_fits() {
        let p = ApproxParams::new(3, 100).unwrap();
        assert_eq!(decide(&p, None, 50, 4).reply(), [0, 0, -1, 3, 3, 0]);
    }

    proptest! {
        #[test]
        fn retry_after_is_exact(
            limit in 1u64..40,
            window_ms in 1u64..500,
            steps in prop::collection::vec((0u64..300, 1u64..10), 1..80),
        ) {
            let p = ApproxParams::new(limit, window_ms).unwrap();
            let mut state = None;
            let mut now = 1_000_000u64;
            for (gap, cost) in steps {
                now += gap;
                let d = decide(&p, state, now, cost);
                prop_assert!(!d.allowed() || d.count <= limit);
                match d.denied() {
                    Some(RetryAfter::Ms(wait)) => {
                        prop_assert!(wait >= 1);
                        prop_assert!(decide(&p, state, now + wait, cost).allowed());
                        prop_assert!(!decide(&p, state, now + wait - 1, cost).allowed());
                    }
                    Some(RetryAfter::Never) => prop_assert!(cost > limit),
                    None => prop_assert!(d.allowed()),
                }
                if let Some(s) = d.into_state() {
                    prop_assert!(s.current <= limit);
                    state = Some(s);
                }
            }
        }
    }

    #[test]
    fn refund_lowers_only_the_current_window() {
        let p = ApproxParams::new(10, 1000).unwrap();
        let s = Some(ApproxState {
            start_ms: 1000,
            current: 3,
            previous: 8,
        });
        // 250 ms in: 3 + floor(8 * 750 / 1000) = 9 counted.
        let r = refund(&p, s, 1250, 2);
        assert_eq!(r.reply(), [1, 7, 0, 10, 3, 1750]);
        assert_eq!(
            r.change,
            Change::Store {
                state: ApproxState {
                    start_ms: 1000,
                    current: 1,
                    previous: 8
                },
                expires_at_ms: 3000
            }
        );
        // The current counter empties; the previous still counts this window.
        let r = refund(&p, s, 1250, 5);
        assert_eq!(r.reply(), [1, 6, 0, 10, 4, 750]);
        assert_eq!(
            r.change,
            Change::Store {
                state: ApproxState {
                    start_ms: 1000,
                    current: 0,
                    previous: 8
                },
                expires_at_ms: 2000
            }
        );
        // Nothing of the previous window can be given back.
        let r = refund(&p, s, 2250, 5);
        assert_eq!(
            (r.change, r.reply()),
            (Change::Unchanged, [1, 2, 0, 10, 8, 750])
        );
        // Both counters empty: the key goes.
        let only_current = Some(ApproxState {
            start_ms: 1000,
            current: 3,
            previous: 0,
        });
        let r = refund(&p, only_current, 1999, 3);
        assert_eq!((r.change, r.reply()), (Change::Clear, [1, 0, 0, 10, 10, 0]));
        assert_eq!(refund(&p, None, 0, 1).change, Change::Unchanged);
    }

    proptest! {
        /// Calls and refunds against a model that keeps the units recorded
        /// per aligned window: a refund takes back at most what the current
        /// window recorded, and the count is always the weighted sum of
        /// what is left.
        #[test]
        fn refund_gives_back_only_what_this_window_recorded(
            limit in 1u64..40,
            window_ms in 1u64..500,
            steps in prop::collection::vec((0u64..300, any::<bool>(), 1u64..10), 1..120),
        ) {
            let p = ApproxParams::new(limit, window_ms).unwrap();
            let mut state = None;
            let mut per_window: std::collections::BTreeMap<u64, u64> = Default::default();
            let mut now = 1_000_000u64;
            for (gap, is_refund, n) in steps {
                now += gap;
                let start = now - now % window_ms;
                let cur = per_window.get(&start).copied().unwrap_or(0);
                let prev = per_window.get(&(start - window_ms)).copied().unwrap_or(0);
                let weighted = prev * (window_ms - (now - start)) / window_ms;
                if is_refund {
                    let r = refund(&p, state, now, n);
                    let left = cur.saturating_sub(n);
                    prop_assert_eq!(r.count, left + weighted);
                    prop_assert_eq!(r.changed(), left != cur);
                    match r.change {
                        Change::Unchanged => {}
                        Change::Clear => {
                            prop_assert_eq!((left, prev), (0, 0));
                            state = None;
                        }
                        Change::Store { state: s, expires_at_ms } => {
                            prop_assert_eq!(expires_at_ms, now + r.reset_after_ms);
                            state = Some(s);
                        }
                    }
                    per_window.insert(start, left);
                } else {
                    let d = decide(&p, state, now, n);
                    prop_assert_eq!(d.allowed(), cur + weighted + n <= limit);
                    if let Some(s) = d.into_state() {
                        *per_window.entry(start).or_default() += n;
                        state = Some(s);
                    }
                }
            }
        }
    }
}
