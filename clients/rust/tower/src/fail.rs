//! The `local` fail mode: while Redis cannot answer, each process decides
//! the checks itself with the module's own algorithms (librl-core's
//! [`Algorithm`]/[`InMemory`]), all-or-nothing as `RL.ALL` is. Limits then
//! hold per process, not across processes; overrides are not read (they
//! live in Redis), and counts made locally stay local when Redis is back.
//! A concurrency policy's lease is taken here too, and released here when
//! the request's response is finished.
//!
//! Memory is bounded: a key is dropped when its limiter would be empty again
//! (as Redis expires it), and at `capacity` keys the ones closest to expiry
//! are evicted first (an evicted limiter starts afresh, admitting more).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use librl_client::{Decision, LeaseId, RetryAfter};
use librl_core::algorithm::{Exact, InMemory};
use librl_core::approx::{ApproxParams, ApproxState};
use librl_core::concurrent::{self, ConcurrentParams, VecLeases};
use librl_core::decision::{Change, LimiterReply, Verdict};
use librl_core::fixed::{FixedParams, FixedState};
use librl_core::sliding::{SlidingParams, VecLog};
use librl_core::token::{Bucket, TokenParams};

use crate::plan::Check;
use crate::policy::ValidAlgorithm;

/// One limiter's state, as the module would store it in its key.
#[derive(Clone, Debug)]
enum State {
    Fixed(FixedState),
    Approx(ApproxState),
    Sliding(VecLog),
    Token(Bucket),
    Concurrent(VecLeases),
}

/// A call decided: the reply, and for an admitted call the state to store
/// and until when it matters (Unix ms).
struct LocalDecision {
    reply: Decision,
    commit: Option<(State, u64)>,
}

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

    /// Checks now (Unix time); see [`LocalLimiter::check_at`].
    pub fn check(&self, checks: &[Check]) -> (bool, Vec<Decision>) {
        self.check_at(checks, now_ms())
    }

    /// As `RL.ALL`: admitted only if every check admits, then recorded by
    /// each; a refused request is recorded by none. Each reply is the one
    /// the check alone gives.
    pub fn check_at(&self, checks: &[Check], now: u64) -> (bool, Vec<Decision>) {
        let mut store = self.lock();
        let outcomes: Vec<LocalDecision> = checks
            .iter()
            .map(|check| {
                let state = store.live(&check.key, now).map(|e| &e.state);
                decide(check, state, now)
            })
            .collect();
        let admitted = outcomes.iter().all(|o| o.reply.allowed);
        let mut replies = Vec::with_capacity(outcomes.len());
        for (check, outcome) in checks.iter().zip(outcomes) {
            if admitted {
                if let Some((state, expires_at_ms)) = outcome.commit {
                    store.insert(
                        check.key.clone(),
                        Entry {
                            state,
                            expires_at_ms,
                        },
                        now,
                    );
                }
            }
            replies.push(outcome.reply);
        }
        (admitted, replies)
    }

    /// Releases lease `id` of a concurrency check's key (nothing when it is
    /// not held: ended, or its key evicted).
    pub fn release(&self, check: &Check, id: LeaseId) {
        let now = now_ms();
        let params = ConcurrentParams {
            limit: check.policy.limit,
            lease_ms: check.policy.window,
        };
        let mut store = self.lock();
        let Some(entry) = store.keys.get_mut(&check.key) else {
            return;
        };
        let State::Concurrent(leases) = &mut entry.state else {
            return;
        };
        match concurrent::release(&params, Some(&*leases), now, id.get()).map(|r| r.change) {
            Ok(Change::Store {
                state,
                expires_at_ms,
            }) => {
                leases.apply(&state);
                entry.expires_at_ms = expires_at_ms;
            }
            Ok(Change::Clear) => {
                store.keys.remove(&check.key);
            }
            Ok(Change::Unchanged) | Err(_) => {}
        }
    }

    /// Keys held, expired ones included until they are next looked at.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().keys.len()
    }

    fn lock(&self) -> MutexGuard<'_, Store> {
        self.store
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Decides one check on the state its key holds (a state of another
/// algorithm, after a policy changed, counts as none).
fn decide(check: &Check, state: Option<&State>, now: u64) -> LocalDecision {
    let p = &check.policy;
    let (limit, window_ms, cost) = (p.limit, p.window, check.cost.get());
    match p.algorithm {
        ValidAlgorithm::Fixed { aligned } => {
            let params = FixedParams {
                limit,
                window_ms,
                aligned,
            };
            let old = match state {
                Some(State::Fixed(s)) => Some(s),
                _ => None,
            };
            run(&params, old, now, cost, State::Fixed)
        }
        ValidAlgorithm::Approx => {
            let old = match state {
                Some(State::Approx(s)) => Some(s),
                _ => None,
            };
            run(
                &ApproxParams { limit, window_ms },
                old,
                now,
                cost,
                State::Approx,
            )
        }
        ValidAlgorithm::Sliding => {
            let log = match state {
                Some(State::Sliding(log)) => Some(log),
                _ => None,
            };
            let exact = Exact::<VecLog>::new(SlidingParams { limit, window_ms });
            run(&exact, log, now, cost, State::Sliding)
        }
        ValidAlgorithm::Token { burst } => {
            let params = TokenParams {
                rate: limit,
                window_ms,
                capacity: burst.unwrap_or(limit),
            };
            let old = match state {
                Some(State::Token(s)) => Some(s),
                _ => None,
            };
            run(&params, old, now, cost, State::Token)
        }
        ValidAlgorithm::Concurrency => {
            let old = match state {
                Some(State::Concurrent(leases)) => Some(leases),
                _ => None,
            };
            let params = ConcurrentParams {
                limit,
                lease_ms: window_ms,
            };
            let decided = concurrent::decide(&params, old, now, cost)
                .or_else(|_| concurrent::decide::<VecLeases>(&params, None, now, cost));
            let Ok(decision) = decided else {
                return refused();
            };
            let commit = decision.admitted().map(|(edit, expires_at_ms)| {
                let mut leases = old.cloned().unwrap_or_default();
                leases.apply(edit);
                (State::Concurrent(leases), expires_at_ms)
            });
            LocalDecision {
                reply: typed(concurrent::reply(&decision)),
                commit,
            }
        }
    }
}

/// One algorithm's decision as an [`LocalDecision`]; an admitted call's state
/// is committed onto a copy of the old one.
fn run<A>(
    algorithm: &A,
    state: Option<&A::State>,
    now: u64,
    cost: u64,
    wrap: fn(A::State) -> State,
) -> LocalDecision
where
    A: InMemory,
    A::State: Clone,
{
    // A state this process wrote cannot be corrupt; were it, start afresh,
    // and were even that refused, deny without recording.
    let decided = algorithm
        .decide(state, now, cost)
        .or_else(|_| algorithm.decide(None, now, cost));
    let Ok(decision) = decided else {
        return refused();
    };
    let reply = typed(decision.limiter_reply());
    let commit = match decision.verdict {
        Verdict::Admit {
            state: admit,
            expires_at_ms,
            ..
        } => Some((wrap(A::admit(state.cloned(), admit)), expires_at_ms)),
        Verdict::Deny(_) => None,
    };
    LocalDecision { reply, commit }
}

/// The core's reply as the client's typed one.
fn typed(reply: LimiterReply) -> Decision {
    let r = reply.six();
    Decision {
        allowed: r[0] == 1,
        count: non_negative(r[1]),
        retry_after: if r[2] < 0 {
            RetryAfter::Never
        } else {
            RetryAfter::Ms(non_negative(r[2]))
        },
        limit: non_negative(r[3]),
        remaining: non_negative(r[4]),
        reset_after_ms: non_negative(r[5]),
        lease: reply.lease.and_then(LeaseId::new),
    }
}

fn non_negative(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// A check denied for good, committing nothing.
fn refused() -> LocalDecision {
    LocalDecision {
        reply: never(),
        commit: None,
    }
}

fn never() -> Decision {
    Decision {
        allowed: false,
        count: 0,
        retry_after: RetryAfter::Never,
        limit: 0,
        remaining: 0,
        reset_after_ms: 0,
        lease: None,
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
        if !self.keys.contains_key(&key) && self.keys.len() >= self.capacity {
            self.keys.retain(|_, e| e.expires_at_ms > now);
        }
        if !self.keys.contains_key(&key) && self.keys.len() >= self.capacity {
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
    use crate::policy::Policy;
    use std::time::Duration;

    fn check(policy: &Policy, key: &str) -> Check {
        Check {
            key: key.into(),
            ..Check::for_test(policy.clone(), 1)
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
            assert!(!replies[1].allowed);
        }
        assert_eq!(local.check_at(&checks[..1], 3_000).1[0].count, 2);
        let (_, replies) = local.check_at(&checks, 10_999);
        assert_eq!(replies[1].retry_after, RetryAfter::Ms(1));
        assert!(local.check_at(&checks, 11_000).0);
    }

    #[test]
    fn every_algorithm_replies_as_the_module_does() {
        let s = Duration::from_secs;
        for (policy, denied_at) in [
            (Policy::fixed("f", 3, s(60)), 3),
            (Policy::sliding("s", 3, s(60)), 3),
            (Policy::approx("a", 3, s(60)), 3),
            (Policy::token("t", 3, s(60)).burst(5), 5),
        ] {
            let local = LocalLimiter::new(10);
            let c = [check(&policy, "k")];
            for i in 0..denied_at {
                assert!(local.check_at(&c, 1_000).0, "{} call {i}", policy.name);
            }
            let (ok, replies) = local.check_at(&c, 1_000);
            assert!(!ok, "{}", policy.name);
            assert_eq!(replies[0].remaining, 0);
        }
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
        for i in 0..2_000 {
            local.check_at(&[check(&long, &format!("flood{i}"))], 30);
            assert!(local.len() <= 20);
        }
    }
}
