//! The `local` fail mode: while Redis cannot answer, each process enforces
//! the route's policies itself with the module's own algorithms (from
//! `librl-core`), all-or-nothing as `RL.ALL` is. Limits then hold per
//! process, not across processes; overrides are not read (they live in
//! Redis), and counts made locally stay local when Redis is back.
//!
//! Memory is bounded: a key is dropped when its limiter would be empty again
//! (as Redis expires it), and at `capacity` keys the ones closest to expiry
//! are evicted first (an evicted limiter starts afresh, admitting more).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::core_adapter::{self, State};
use crate::policy::{Check, Decision};

pub struct LocalLimiter {
    store: Mutex<Store>,
}

struct Store {
    keys: HashMap<String, Entry>,
    capacity: usize,
}

struct Entry {
    state: State,
    expires_at_ms: u64,
}

impl LocalLimiter {
    /// Holds at most `capacity` keys (at least 1).
    pub fn new(capacity: usize) -> LocalLimiter {
        LocalLimiter {
            store: Mutex::new(Store {
                keys: HashMap::new(),
                capacity: capacity.max(1),
            }),
        }
    }

    /// Checks every policy now (Unix time); see [`LocalLimiter::check_at`].
    pub fn check(&self, checks: &[Check<'_>]) -> (bool, Vec<Decision>) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        self.check_at(checks, now)
    }

    /// As `RL.ALL`: the request is admitted only if every check admits it,
    /// and then recorded by each; a refused one is recorded by none. Each
    /// reply is the one the check alone gives (a PEEK's when refused).
    pub fn check_at(&self, checks: &[Check<'_>], now: u64) -> (bool, Vec<Decision>) {
        let mut store = self.lock();
        let outcomes: Vec<_> = checks
            .iter()
            .map(|check| {
                let p = check.policy;
                let state = store.live(&check.key, now).map(|e| &e.state);
                let window_ms = u64::try_from(p.window.as_millis()).unwrap_or(u64::MAX);
                core_adapter::decide(p.algorithm, p.limit, window_ms, state, now, check.cost)
            })
            .collect();
        let admitted = outcomes.iter().all(|o| o.reply.allowed);
        if admitted {
            for (check, outcome) in checks.iter().zip(&outcomes) {
                if let Some((commit, expires_at_ms)) = outcome.commit.clone() {
                    let old = store.keys.remove(&check.key).map(|e| e.state);
                    store.insert(
                        check.key.clone(),
                        Entry {
                            state: core_adapter::commit(old, commit),
                            expires_at_ms,
                        },
                        now,
                    );
                }
            }
        }
        (admitted, outcomes.into_iter().map(|o| o.reply).collect())
    }

    /// Keys held, expired ones included until they are next looked at.
    pub fn len(&self) -> usize {
        self.lock().keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> MutexGuard<'_, Store> {
        self.store
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Store {
    /// The key's entry unless it has expired (an expired one is dropped).
    fn live(&mut self, key: &str, now: u64) -> Option<&Entry> {
        if self.keys.get(key).is_some_and(|e| e.expires_at_ms <= now) {
            self.keys.remove(key);
        }
        self.keys.get(key)
    }

    fn insert(&mut self, key: String, entry: Entry, now: u64) {
        if self.keys.len() >= self.capacity {
            self.keys.retain(|_, e| e.expires_at_ms > now);
        }
        if self.keys.len() >= self.capacity {
            // Evict the tenth closest to expiry at once, so that a full
            // store sorts once per many inserts, not on each.
            let mut expiries: Vec<u64> = self.keys.values().map(|e| e.expires_at_ms).collect();
            let cut = (self.capacity / 10).max(1).min(expiries.len() - 1);
            let (_, &mut threshold, _) = expiries.select_nth_unstable(cut);
            self.keys.retain(|_, e| e.expires_at_ms > threshold);
            // Many keys with the same expiry: drop arbitrary ones.
            while self.keys.len() >= self.capacity {
                let Some(victim) = self.keys.keys().next().cloned() else {
                    break;
                };
                self.keys.remove(&victim);
            }
        }
        self.keys.insert(key, entry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Policy, RetryAfter};
    use std::time::Duration;

    fn check<'p>(policy: &'p Policy, key: &str) -> Check<'p> {
        Check {
            policy,
            key: key.into(),
            override_key: None,
            cost: 1,
        }
    }

    #[test]
    fn a_request_one_policy_refuses_is_counted_by_none() {
        let minute = Policy::fixed("minute", 10, Duration::from_secs(60));
        let burst = Policy::fixed("burst", 1, Duration::from_secs(10));
        let local = LocalLimiter::new(100);
        let checks = [check(&minute, "m"), check(&burst, "b")];
        let (ok, replies) = local.check_at(&checks, 1_000);
        assert!(ok);
        assert_eq!((replies[0].count, replies[1].count), (1, 1));
        for now in [1_001, 2_000, 3_000] {
            let (ok, replies) = local.check_at(&checks, now);
            assert!(!ok);
            assert!(replies[0].allowed, "the minute policy alone admits");
            assert_eq!(replies[0].count, 2, "as its PEEK: one recorded, plus this");
            assert!(!replies[1].allowed);
        }
        assert_eq!(local.check_at(&checks[..1], 3_000).1[0].count, 2);
        // The burst window ends at 11 000.
        let (_, replies) = local.check_at(&checks, 10_999);
        assert_eq!(replies[1].retry_after, RetryAfter::Ms(1));
        assert!(local.check_at(&checks, 11_000).0);
    }

    #[test]
    fn keys_expire_as_their_limiters_empty() {
        let p = Policy::token("t", 10, Duration::from_secs(1));
        let local = LocalLimiter::new(100);
        assert!(local.check_at(&[check(&p, "k")], 0).0);
        assert_eq!(local.len(), 1);
        // Full again after 100 ms: the key is gone when next looked at (by a
        // call too large to admit, which records nothing).
        let (ok, replies) = local.check_at(
            &[Check {
                cost: 11,
                ..check(&p, "k")
            }],
            100,
        );
        assert!(!ok);
        assert_eq!(
            (replies[0].count, replies[0].retry_after),
            (0, RetryAfter::Never)
        );
        assert!(local.is_empty());
    }

    #[test]
    fn a_full_store_evicts_the_keys_closest_to_expiry() {
        let short = Policy::fixed("short", 5, Duration::from_secs(1));
        let long = Policy::fixed("long", 5, Duration::from_secs(3600));
        let local = LocalLimiter::new(20);
        for i in 0..10 {
            local.check_at(&[check(&long, &format!("long{i}"))], 0);
            local.check_at(&[check(&short, &format!("short{i}"))], 0);
        }
        assert_eq!(local.len(), 20);
        local.check_at(&[check(&long, "new")], 10);
        assert!(local.len() <= 20);
        let (_, replies) = local.check_at(&[check(&long, "long3")], 20);
        assert_eq!(replies[0].count, 2, "long-lived keys are kept");
        let (_, replies) = local.check_at(&[check(&long, "new")], 20);
        assert_eq!(replies[0].count, 2);
        for i in 0..10_000 {
            local.check_at(&[check(&long, &format!("flood{i}"))], 30);
            assert!(local.len() <= 20);
        }
    }
}
