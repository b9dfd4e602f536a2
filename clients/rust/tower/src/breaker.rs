//! The breaker (docs/http.md, Fail modes): after a Redis error or a
//! timeout, requests apply the fail mode at once for a back-off (1 s,
//! doubled after each failed probe, at most 30 s) while one request at a
//! time probes Redis; a probe that succeeds closes it. Closed, a request
//! reads one atomic and takes no lock.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The first back-off, and the longest.
pub(crate) const FIRST_BACKOFF: Duration = Duration::from_secs(1);
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(30);

#[derive(Debug)]
pub(crate) struct Breaker {
    open: AtomicBool,
    state: Mutex<Open>,
    /// A probe not heard from in this long (its request went away) lets
    /// another request probe.
    probe_lasts: Duration,
}

#[derive(Debug, Default)]
struct Open {
    /// When the back-off ends (None: closed).
    until: Option<Instant>,
    backoff: Duration,
    /// A probe is under way since then.
    probing: Option<Instant>,
}

/// What a request does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pass {
    /// Checked in Redis (the breaker is closed, or this is its probe).
    Check,
    /// The breaker is open: the fail mode applies at once.
    Skip,
}

impl Breaker {
    /// `timeout`: the Redis budget of one check (a probe's).
    pub(crate) fn new(timeout: Duration) -> Breaker {
        Breaker {
            open: AtomicBool::new(false),
            state: Mutex::new(Open::default()),
            probe_lasts: timeout.saturating_mul(2),
        }
    }

    pub(crate) fn pass(&self) -> Pass {
        self.pass_at(Instant::now())
    }

    pub(crate) fn pass_at(&self, now: Instant) -> Pass {
        if !self.open.load(Ordering::Acquire) {
            return Pass::Check;
        }
        let mut s = self.lock();
        let waiting = s.until.is_some_and(|until| now < until);
        let probing = s
            .probing
            .is_some_and(|at| now.saturating_duration_since(at) < self.probe_lasts);
        if s.until.is_none() || (!waiting && !probing) {
            if s.until.is_some() {
                s.probing = Some(now);
            }
            Pass::Check
        } else {
            Pass::Skip
        }
    }

    /// A check's outcome: Redis answered (`ok`) or failed.
    pub(crate) fn record(&self, ok: bool) {
        self.record_at(ok, Instant::now());
    }

    pub(crate) fn record_at(&self, ok: bool, now: Instant) {
        if ok && !self.open.load(Ordering::Acquire) {
            return;
        }
        let mut s = self.lock();
        if ok {
            *s = Open::default();
            self.open.store(false, Ordering::Release);
            return;
        }
        // A failed probe doubles the back-off; a first failure starts it.
        s.backoff = match (s.until, s.probing) {
            (Some(_), Some(_)) => s.backoff.saturating_mul(2).min(MAX_BACKOFF),
            (Some(_), None) => s.backoff,
            (None, _) => FIRST_BACKOFF,
        };
        s.until = Some(now + s.backoff);
        s.probing = None;
        self.open.store(true, Ordering::Release);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_probes_doubles_and_closes() {
        let b = Breaker::new(Duration::from_millis(250));
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        assert_eq!(b.pass_at(at(0)), Pass::Check);
        b.record_at(false, at(250));
        // Open for 1 s: every request skips.
        assert_eq!(b.pass_at(at(300)), Pass::Skip);
        assert_eq!(b.pass_at(at(1249)), Pass::Skip);
        // One probe after the back-off; the others skip meanwhile.
        assert_eq!(b.pass_at(at(1250)), Pass::Check);
        assert_eq!(b.pass_at(at(1260)), Pass::Skip);
        b.record_at(false, at(1500));
        // Doubled: 2 s.
        assert_eq!(b.pass_at(at(3499)), Pass::Skip);
        assert_eq!(b.pass_at(at(3500)), Pass::Check);
        b.record_at(true, at(3510));
        assert_eq!(b.pass_at(at(3511)), Pass::Check);
        assert_eq!(b.pass_at(at(3512)), Pass::Check);
        // The next failure starts from 1 s again.
        b.record_at(false, at(4000));
        assert_eq!(b.pass_at(at(4999)), Pass::Skip);
        assert_eq!(b.pass_at(at(5000)), Pass::Check);
    }

    #[test]
    fn back_off_is_capped_and_a_lost_probe_is_replaced() {
        let b = Breaker::new(Duration::from_millis(100));
        let t0 = Instant::now();
        let mut now = t0;
        b.record_at(false, now);
        for _ in 0..10 {
            now += MAX_BACKOFF;
            assert_eq!(b.pass_at(now), Pass::Check);
            b.record_at(false, now);
        }
        assert_eq!(
            b.pass_at(now + MAX_BACKOFF - Duration::from_millis(1)),
            Pass::Skip
        );
        // A probe whose request went away: another probes 200 ms later.
        now += MAX_BACKOFF;
        assert_eq!(b.pass_at(now), Pass::Check);
        assert_eq!(b.pass_at(now + Duration::from_millis(199)), Pass::Skip);
        assert_eq!(b.pass_at(now + Duration::from_millis(200)), Pass::Check);
    }
}
