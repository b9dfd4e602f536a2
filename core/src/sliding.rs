//! SLIDING (exact log): count is the sum of admitted costs logged in
//! `(now - window, now]`. An admitted call is logged at `now`.
//!
//! The decision only reads the log oldest-first and, when admitted, returns
//! an `Append` that says what committing means (drop entries at or before
//! the cutoff, log the cost at `now`), so the log's storage layout lives
//! elsewhere and several limits can be decided before any is committed.
//!
//! REFUND removes the newest logged units inside the window, newest first;
//! like admission, it is decided from the read-only log and returned as a
//! [`Refund`] that says what committing means, so the stored log applies it
//! in its own layout ([`VecLog::refund`] is the reference).

use super::decision::{Change, Decision, Refunded, RetryAfter, Status, Verdict};
use super::units::{Amount, Window};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlidingParams {
    pub limit: Amount,
    pub window_ms: Window,
}

impl SlidingParams {
    /// The parameters from plain numbers: None when the limit is not an
    /// [`Amount`] or the window not a [`Window`].
    pub const fn new(limit: u64, window_ms: u64) -> Option<SlidingParams> {
        match (Amount::new(limit), Window::new(window_ms)) {
            (Some(limit), Some(window_ms)) => Some(SlidingParams { limit, window_ms }),
            _ => None,
        }
    }
}

/// A read-only view of a log: entries oldest-first with strictly increasing
/// times, and the sum of their costs. A stored log is checked as it is
/// read, so an entry may turn out to be corrupt.
pub trait Log {
    fn newest_ms(&self) -> Option<u64>;
    fn total(&self) -> u64;
    fn entries(&self) -> impl Iterator<Item = Result<(u64, u64), CorruptLog>>;

    /// The same entries newest-first. REFUND and some denials read only
    /// the newest end of the log; a stored log walks it backwards instead
    /// of reading everything before it. (This default reads it all.)
    fn entries_newest_first(&self) -> impl Iterator<Item = Result<(u64, u64), CorruptLog>> {
        let all: Vec<_> = self.entries().collect();
        all.into_iter().rev()
    }
}

/// A stored log whose entries disagree with its header or with each other:
/// not written by us, so nothing may be decided from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CorruptLog;

/// What committing an admitted call does to the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Append {
    pub now_ms: u64,
    pub cost: u64,
    /// Entries logged at or before this time have left the window.
    pub cutoff_ms: u64,
}

/// What committing a refund does to the log: drop the entries logged at or
/// before `cutoff_ms` (they have left the window), then take `units` off
/// the newest entries, newest first, removing each entry that reaches 0.
/// `units` never exceeds what the entries after the cutoff hold, and some
/// units always remain (a refund of everything is `Change::Clear`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refund {
    /// The refund's time (the clock as the log sees it: never before its
    /// newest entry).
    pub now_ms: u64,
    pub units: u64,
    pub cutoff_ms: u64,
}

pub fn decide<L: Log>(
    params: &SlidingParams,
    log: Option<&L>,
    now: u64,
    cost: u64,
) -> Result<Decision<Append>, CorruptLog> {
    // A clock that steps back stands still at the newest logged call.
    let now = now.max(log.and_then(Log::newest_ms).unwrap_or(0));
    let window = params.window_ms.ms();
    let cutoff_ms = now.saturating_sub(window);
    let mut live = log.into_iter().flat_map(|l| l.entries()).peekable();
    let mut expired = 0u64;
    while let Some(&entry) = live.peek() {
        let (t, c) = entry?;
        if t > cutoff_ms {
            break;
        }
        expired = expired.saturating_add(c);
        live.next();
    }
    let count = log.map_or(0, |l| l.total()).saturating_sub(expired);
    if let Some(after) = count.checked_add(cost).filter(|&c| c <= params.limit.get()) {
        return Ok(Decision {
            count: after,
            limit: params.limit.get(),
            reset_after_ms: window,
            verdict: Verdict::Admit {
                state: Append {
                    now_ms: now,
                    cost,
                    cutoff_ms,
                },
                expires_at_ms: now.saturating_add(window),
                wait_ms: 0,
            },
        });
    }
    let retry_after = if cost > params.limit.get() {
        RetryAfter::Never
    } else {
        // The oldest entries leave first: wait until enough of them have.
        // The entry where they have is read from whichever end of the
        // window is nearer to it: oldest-first it is where `must_leave`
        // units have passed, newest-first where more than the `stay`
        // units that may remain have (fewer entries read when a limit
        // lowered far below the count leaves most of them to go).
        let must_leave = count.saturating_add(cost) - params.limit.get();
        let stay = count.saturating_sub(must_leave);
        let mut passed = 0u64;
        let mut wait = window;
        if must_leave <= stay {
            for entry in live {
                let (t, c) = entry?;
                passed = passed.saturating_add(c);
                if passed >= must_leave {
                    wait = t.saturating_add(window).saturating_sub(now);
                    break;
                }
            }
        } else if let Some(l) = log {
            for entry in l.entries_newest_first() {
                let (t, c) = entry?;
                // Past the window's oldest entry: the log disagrees with
                // its own total.
                if t <= cutoff_ms {
                    return Err(CorruptLog);
                }
                passed = passed.saturating_add(c);
                if passed > stay {
                    wait = t.saturating_add(window).saturating_sub(now);
                    break;
                }
            }
        }
        RetryAfter::Ms(wait)
    };
    let newest = log.and_then(Log::newest_ms).filter(|_| count > 0);
    // (Saturating: a log whose header disagrees with its entries must not
    // underflow here; the caller refuses such a log anyway.)
    let reset_after_ms = newest.map_or(0, |n| n.saturating_add(window).saturating_sub(now));
    Ok(Decision {
        count,
        verdict: Verdict::Deny(retry_after),
        limit: params.limit.get(),
        reset_after_ms,
    })
}

/// REFUND `units`: the newest logged units inside `(now - window, now]` are
/// removed, newest first, down to an empty window at most. Nothing changes
/// when the window holds nothing.
pub fn refund<L: Log>(
    params: &SlidingParams,
    log: Option<&L>,
    now: u64,
    units: u64,
) -> Result<Refunded<Refund>, CorruptLog> {
    let now = now.max(log.and_then(Log::newest_ms).unwrap_or(0));
    let window = params.window_ms.ms();
    let cutoff_ms = now.saturating_sub(window);
    // As `decide` counts: the header's total less the entries that have
    // left the window (read oldest-first up to the cutoff).
    let mut expired = 0u64;
    for entry in log.into_iter().flat_map(|l| l.entries()) {
        let (t, c) = entry?;
        if t > cutoff_ms {
            break;
        }
        expired = expired.saturating_add(c);
    }
    let inside = log.map_or(0, |l| l.total()).saturating_sub(expired);
    let removed = units.min(inside);
    let count = inside - removed;
    // The newest entry that still holds a counted unit: the log's newest
    // when nothing is removed, else the first one, newest-first, that
    // the removed units do not use up (only the entries the refund
    // touches are read).
    let newest_kept = if count == 0 {
        None
    } else if removed == 0 {
        log.and_then(Log::newest_ms)
    } else {
        let mut left = removed;
        let mut found = None;
        for entry in log.into_iter().flat_map(|l| l.entries_newest_first()) {
            let (t, c) = entry?;
            if t <= cutoff_ms {
                break;
            }
            if c > left {
                found = Some(t);
                break;
            }
            left -= c;
        }
        // Entries that hold fewer units than the header's total: not ours.
        Some(found.ok_or(CorruptLog)?)
    };
    let expires_at_ms = newest_kept.map(|t| t.saturating_add(window));
    let reset_after_ms = expires_at_ms.map_or(0, |e| e.saturating_sub(now));
    let change = match expires_at_ms {
        _ if removed == 0 => Change::Unchanged,
        None => Change::Clear,
        Some(expires_at_ms) => Change::Store {
            state: Refund {
                now_ms: now,
                units: removed,
                cutoff_ms,
            },
            expires_at_ms,
        },
    };
    Ok(Refunded {
        change,
        count,
        limit: params.limit.get(),
        reset_after_ms,
    })
}

/// The counts at `now` without a call (what a call during a block reports).
pub fn status<L: Log>(
    params: &SlidingParams,
    log: Option<&L>,
    now: u64,
) -> Result<Status, CorruptLog> {
    refund(params, log, now, 0).map(|r| r.status())
}

/// The obvious log, one entry per admitted call: the reference the compact
/// stored log is tested against, and an in-process log for callers that
/// keep state in memory.
#[derive(Clone, Debug, Default)]
pub struct VecLog(pub Vec<(u64, u64)>);

impl Log for VecLog {
    fn newest_ms(&self) -> Option<u64> {
        self.0.last().map(|e| e.0)
    }
    fn total(&self) -> u64 {
        self.0.iter().map(|e| e.1).sum()
    }
    fn entries(&self) -> impl Iterator<Item = Result<(u64, u64), CorruptLog>> {
        self.0.iter().copied().map(Ok)
    }
    fn entries_newest_first(&self) -> impl Iterator<Item = Result<(u64, u64), CorruptLog>> {
        self.0.iter().rev().copied().map(Ok)
    }
}

impl VecLog {
    pub fn apply(&mut self, a: &Append) {
        self.0.retain(|&(t, _)| t > a.cutoff_ms);
        match self.0.last_mut() {
            Some(last) if last.0 == a.now_ms => last.1 += a.cost,
            _ => self.0.push((a.now_ms, a.cost)),
        }
    }

    pub fn refund(&mut self, r: &Refund) {
        self.0.retain(|&(t, _)| t > r.cutoff_ms);
        let mut units = r.units;
        while units > 0 {
            let Some(last) = self.0.last_mut() else {
                break;
            };
            let take = units.min(last.1);
            last.1 -= take;
            units -= take;
            if last.1 == 0 {
                self.0.pop();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn table_of_edges() {
        let p = SlidingParams::new(3, 1000).unwrap();
        // (now, cost) -> [allowed, count, retry_after, limit, remaining, reset_after]
        let rows: &[((u64, u64), [i64; 6])] = &[
            ((10_000, 1), [1, 1, 0, 3, 2, 1000]),
            ((10_100, 1), [1, 2, 0, 3, 1, 1000]),
            ((10_200, 1), [1, 3, 0, 3, 0, 1000]),
            // The call at 10_000 leaves the window at 11_000 exactly.
            ((10_500, 1), [0, 3, 500, 3, 0, 700]),
            ((10_999, 1), [0, 3, 1, 3, 0, 201]),
            ((11_000, 1), [1, 3, 0, 3, 0, 1000]),
            // COST 2 must wait for two entries (10_100 and 10_200) to leave.
            ((11_050, 2), [0, 3, 150, 3, 0, 950]),
            ((11_200, 2), [1, 3, 0, 3, 0, 1000]),
            ((11_200, 4), [0, 3, -1, 3, 0, 1000]),
        ];
        let calls: Vec<_> = rows.iter().map(|r| r.0).collect();
        let want: Vec<_> = rows.iter().map(|r| r.1).collect();
        assert_eq!(
            crate::algorithm::replay(&crate::algorithm::Exact::<VecLog>::new(p), &calls),
            want
        );
    }

    #[test]
    fn shrunk_limit_waits_for_enough_entries_to_leave() {
        let log = VecLog(vec![(100, 5), (200, 5), (300, 5)]);
        let p = SlidingParams::new(4, 1000).unwrap();
        // count 15 + 1 must fall to 4: all three entries must leave.
        let d = decide(&p, Some(&log), 400, 1).unwrap();
        assert_eq!(d.reply(), [0, 15, 900, 4, 0, 900]);
    }

    #[test]
    fn clock_stepping_back_stands_still_at_the_newest_entry() {
        let log = VecLog(vec![(5000, 1)]);
        let p = SlidingParams::new(5, 1000).unwrap();
        let d = decide(&p, Some(&log), 10, 1).unwrap();
        assert_eq!(d.reply(), [1, 2, 0, 5, 3, 1000]);
        assert_eq!(d.into_state().map(|a| a.now_ms), Some(5000));
    }

    /// Brute force: the count over `(now - window, now]` of a plain list.
    fn count_at(log: &[(u64, u64)], now: u64, window: u64) -> u64 {
        log.iter()
            .filter(|&&(t, _)| t <= now && t + window > now)
            .map(|e| e.1)
            .sum()
    }

    proptest! {
        #[test]
        fn matches_a_brute_force_log(
            limit in 1u64..30,
            window_ms in 1u64..2000,
            steps in prop::collection::vec((0u64..400, 1u64..8), 1..120),
        ) {
            let p = SlidingParams::new(limit, window_ms).unwrap();
            let mut all: Vec<(u64, u64)> = Vec::new();
            let mut log = VecLog::default();
            let mut now = 1_000_000u64;
            for (gap, cost) in steps {
                now += gap;
                let d = decide(&p, Some(&log), now, cost).unwrap();
                let count = count_at(&all, now, window_ms);
                prop_assert_eq!(d.allowed(), count + cost <= limit);
                prop_assert_eq!(d.count, if d.allowed() { count + cost } else { count });
                prop_assert!(d.count <= limit || !d.allowed());
                match d.denied() {
                    Some(RetryAfter::Ms(wait)) => {
                        prop_assert!(wait >= 1);
                        prop_assert!(count_at(&all, now + wait, window_ms) + cost <= limit);
                        prop_assert!(count_at(&all, now + wait - 1, window_ms) + cost > limit);
                    }
                    Some(RetryAfter::Never) => prop_assert!(cost > limit),
                    None => prop_assert!(d.allowed()),
                }
                if let Some(a) = d.into_state() {
                    log.apply(&a);
                    all.push((now, cost));
                }
                let newest = all.iter().rev().find(|e| e.0 + window_ms > now);
                let reset = newest.map_or(0, |e| e.0 + window_ms - now);
                prop_assert_eq!(d.reset_after_ms, reset);
            }
        }
    }

    proptest! {
        /// A limit lowered far below what the log holds (an override)
        /// waits exactly until enough of the oldest units have left, the
        /// deciding entry being read from either end of the log.
        #[test]
        fn a_lowered_limit_waits_exactly(
            window_ms in 1u64..2000,
            steps in prop::collection::vec((0u64..50, 1u64..8), 1..80),
            lowered in 1u64..400,
            cost in 1u64..8,
            later in 0u64..100,
        ) {
            let big = SlidingParams::new(1000, window_ms).unwrap();
            let mut all: Vec<(u64, u64)> = Vec::new();
            let mut log = VecLog::default();
            let mut now = 1_000_000u64;
            for (gap, c) in steps {
                now += gap;
                if let Some(a) = decide(&big, Some(&log), now, c).unwrap().into_state() {
                    log.apply(&a);
                    all.push((now, c));
                }
            }
            now += later;
            let p = SlidingParams::new(lowered, window_ms).unwrap();
            let d = decide(&p, Some(&log), now, cost).unwrap();
            let count = count_at(&all, now, window_ms);
            prop_assert_eq!(d.allowed(), count + cost <= lowered);
            if let Some(RetryAfter::Ms(wait)) = d.denied() {
                prop_assert!(count_at(&all, now + wait, window_ms) + cost <= lowered);
                prop_assert!(count_at(&all, now + wait - 1, window_ms) + cost > lowered);
            }
        }
    }

    #[test]
    fn refund_takes_the_newest_units_first() {
        let p = SlidingParams::new(10, 1000).unwrap();
        let mut log = VecLog(vec![(100, 2), (200, 3), (300, 1)]);
        let r = refund(&p, Some(&log), 400, 2).unwrap();
        assert_eq!(r.reply(), [1, 4, 0, 10, 6, 800]);
        let Change::Store {
            state,
            expires_at_ms,
        } = r.change
        else {
            panic!("{r:?}");
        };
        assert_eq!(expires_at_ms, 1200);
        log.refund(&state);
        assert_eq!(log.0, [(100, 2), (200, 2)]);
        // Entries that left the window are not given back: only (200, 2)
        // still counts at 1150.
        let r = refund(&p, Some(&log), 1150, 5).unwrap();
        assert_eq!((r.change, r.reply()), (Change::Clear, [1, 0, 0, 10, 10, 0]));
        let r = refund(&p, Some(&log), 1150, 1).unwrap();
        assert_eq!(r.reply(), [1, 1, 0, 10, 9, 50]);
        let Change::Store { state, .. } = r.change else {
            panic!("{r:?}");
        };
        log.refund(&state);
        assert_eq!(log.0, [(200, 1)]);
        // Nothing inside the window: nothing changes.
        assert_eq!(
            refund(&p, Some(&log), 1200, 1).unwrap().change,
            Change::Unchanged
        );
        assert_eq!(
            refund::<VecLog>(&p, None, 0, 1).unwrap().change,
            Change::Unchanged
        );
        assert_eq!(
            status(&p, Some(&log), 1100).unwrap(),
            Status {
                count: 1,
                limit: 10,
                reset_after_ms: 100
            }
        );
    }

    proptest! {
        /// Calls and refunds against a plain list of recorded units: a
        /// refund removes the newest units inside the window, never more
        /// than the window holds; the log after it counts exactly what the
        /// list does, at every later time.
        #[test]
        fn refund_matches_a_list_of_recorded_units(
            limit in 1u64..30,
            window_ms in 1u64..2000,
            steps in prop::collection::vec((0u64..400, any::<bool>(), 1u64..8), 1..120),
        ) {
            let p = SlidingParams::new(limit, window_ms).unwrap();
            let mut all: Vec<(u64, u64)> = Vec::new();
            let mut log = VecLog::default();
            let mut now = 1_000_000u64;
            for (gap, is_refund, n) in steps {
                now += gap;
                let count = count_at(&all, now, window_ms);
                if is_refund {
                    let r = refund(&p, Some(&log), now, n).unwrap();
                    prop_assert_eq!(r.count, count.saturating_sub(n));
                    prop_assert_eq!(r.changed(), count > 0);
                    // The model: take n units off the newest entries in the window.
                    let mut back = n;
                    while back > 0 {
                        match all.last_mut() {
                            Some(last) if last.0 + window_ms > now => {
                                let take = back.min(last.1);
                                last.1 -= take;
                                back -= take;
                                if last.1 == 0 { all.pop(); }
                            }
                            _ => break,
                        }
                    }
                    match r.change {
                        Change::Unchanged => {}
                        Change::Clear => log = VecLog::default(),
                        Change::Store { state, expires_at_ms } => {
                            prop_assert_eq!(expires_at_ms, now + r.reset_after_ms);
                            log.refund(&state);
                        }
                    }
                    let newest = all.iter().rev().find(|e| e.0 + window_ms > now);
                    prop_assert_eq!(r.reset_after_ms, newest.map_or(0, |e| e.0 + window_ms - now));
                } else {
                    let d = decide(&p, Some(&log), now, n).unwrap();
                    prop_assert_eq!(d.allowed(), count + n <= limit);
                    if let Some(a) = d.into_state() {
                        log.apply(&a);
                        all.push((now, n));
                    }
                }
                for later in [now, now + 1, now + window_ms / 2, now + window_ms] {
                    prop_assert_eq!(count_at(&log.0, later, window_ms), count_at(&all, later, window_ms));
                }
            }
        }
    }
}
