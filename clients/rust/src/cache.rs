//! The opt-in denial cache: after a denial with `retry_after` > 0, the same
//! call (the same argv) is answered locally until that time has passed, or
//! the cache's max age has (1 s by default), whichever comes first, so a
//! client being refused at a high rate stays off the server.
//!
//! Exactness: a limiter's `retry_after` is the least wait after which the
//! same call is admitted, and other callers' admitted calls can only push
//! that moment later, so a cached denial is never wrong and the call goes
//! back to the server no earlier than the server itself would admit it (an
//! entry's life is counted from when the call was sent). That holds while
//! no one else refunds on, deletes or overrides that key in the meantime
//! (any of those can admit the call sooner); a refund or override change
//! made through the same [`Limiter`](crate::Limiter) clears the affected
//! entries, and one made elsewhere reaches this cache within the max age,
//! or at once through [`DenialCache::forget_key`] or [`DenialCache::clear`].
//! The cached reply's `retry_after_ms` and `reset_after_ms` are reduced by
//! the time elapsed since it arrived (a monotonic clock, rounded up); its
//! `count` and `remaining` are those of the denial.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::reply::{AllDecision, Decision, RetryAfter};
use crate::sealed::Reply;
use crate::{Effect, Prepared};

/// A reply the cache keeps: a denied limiter call or `RL.ALL`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cached {
    One(Decision),
    All(AllDecision),
}

impl Cached {
    fn retry_after_ms(&self) -> u64 {
        let retry = match self {
            Cached::One(d) => d.retry_after,
            Cached::All(a) => a.retry_after,
        };
        match retry {
            RetryAfter::Ms(ms) => ms,
            RetryAfter::Never => 0,
        }
    }

    /// The reply as it would read `elapsed` after it was received.
    fn aged(&self, elapsed: Duration) -> Cached {
        match self {
            Cached::One(d) => Cached::One(age(d, elapsed)),
            Cached::All(a) => Cached::All(AllDecision {
                allowed: a.allowed,
                retry_after: age_retry(a.retry_after, elapsed),
                decisions: a.decisions.iter().map(|d| age(d, elapsed)).collect(),
            }),
        }
    }
}

/// Milliseconds left of `ms` after `elapsed`, rounded up.
fn left(ms: u64, elapsed: Duration) -> u64 {
    let left = u128::from(ms) * 1_000_000;
    let gone = elapsed.as_nanos();
    u64::try_from(left.saturating_sub(gone).div_ceil(1_000_000)).unwrap_or(u64::MAX)
}

fn age_retry(retry: RetryAfter, elapsed: Duration) -> RetryAfter {
    match retry {
        RetryAfter::Ms(ms) => RetryAfter::Ms(left(ms, elapsed)),
        RetryAfter::Never => RetryAfter::Never,
    }
}

fn age(d: &Decision, elapsed: Duration) -> Decision {
    Decision {
        retry_after: age_retry(d.retry_after, elapsed),
        reset_after_ms: left(d.reset_after_ms, elapsed),
        ..*d
    }
}

/// A denial worth keeping: denied, with a wait that helps.
fn keepable(allowed: bool, retry: RetryAfter) -> bool {
    !allowed && matches!(retry, RetryAfter::Ms(ms) if ms > 0)
}

impl Reply for Decision {
    fn to_cached(&self) -> Option<Cached> {
        keepable(self.allowed, self.retry_after).then_some(Cached::One(*self))
    }

    fn from_cached(cached: Cached) -> Option<Decision> {
        match cached {
            Cached::One(d) => Some(d),
            Cached::All(_) => None,
        }
    }
}

impl Reply for AllDecision {
    fn to_cached(&self) -> Option<Cached> {
        keepable(self.allowed, self.retry_after).then(|| Cached::All(self.clone()))
    }

    fn from_cached(cached: Cached) -> Option<AllDecision> {
        match cached {
            Cached::All(a) => Some(a),
            Cached::One(_) => None,
        }
    }
}

impl Reply for () {}
impl Reply for u64 {}
impl Reply for Option<crate::reply::Override> {}
impl Reply for crate::reply::OverridePage {}

struct Entry {
    received: Instant,
    /// The call's send time plus the shorter of its `retry_after` and the
    /// max age: answered locally before, sent after.
    valid_until: Instant,
    reply: Cached,
    /// The keys and override keys the call named, for refunds and
    /// `forget_key` to find it.
    keys: Vec<Vec<u8>>,
}

impl Entry {
    fn live_at(&self, now: Instant) -> bool {
        now < self.valid_until
    }
}

/// Remembers denials per argv; cheap to clone (clones share the entries), so
/// one cache can serve many connections to the same server or cluster.
/// Keeps each denial for at most its `retry_after` and at most the max age
/// ([`DenialCache::DEFAULT_MAX_AGE`], 1 s, unless
/// [`DenialCache::with_max_age`] says otherwise): the longest a change
/// made elsewhere (an override set by another process, a `DEL` of a
/// blocked key, `rl.mode`) takes to reach this process. Holds at most
/// `capacity` entries: when full, expired ones are dropped, and if none has
/// expired, a new denial is not kept.
#[derive(Clone)]
pub struct DenialCache {
    inner: Arc<Mutex<Inner>>,
}

struct Inner {
    entries: HashMap<Vec<u8>, Entry>,
    capacity: usize,
    max_age: Duration,
    /// Counts every forgetting (refund, override change, `forget_key`,
    /// `clear`): a denial whose call was sent before one of them may
    /// predate the change, and is not kept.
    forgets: u64,
}

impl Default for DenialCache {
    fn default() -> DenialCache {
        DenialCache::new()
    }
}

impl std::fmt::Debug for DenialCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DenialCache")
            .field("entries", &self.len())
            .finish()
    }
}

impl DenialCache {
    /// How long a denial is kept at most unless [`DenialCache::with_max_age`]
    /// says otherwise: long enough to keep a client refused at a high rate
    /// off the server, short enough that an operator lifting a block
    /// elsewhere is honoured within about a second.
    pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(1);

    /// A cache of at most 10,000 denials, each kept at most 1 s.
    pub fn new() -> DenialCache {
        DenialCache::with_capacity(10_000)
    }

    /// A cache of at most `capacity` denials, each kept at most 1 s.
    pub fn with_capacity(capacity: usize) -> DenialCache {
        DenialCache {
            inner: Arc::new(Mutex::new(Inner {
                entries: HashMap::new(),
                capacity,
                max_age: DenialCache::DEFAULT_MAX_AGE,
                forgets: 0,
            })),
        }
    }

    /// Keeps each denial at most `max_age` (counted from when the call was
    /// sent), however long its `retry_after`: the bound on how long a
    /// change made elsewhere takes to apply here. `Duration::ZERO` keeps
    /// nothing. Applies to this cache and every clone of it.
    pub fn with_max_age(self, max_age: Duration) -> DenialCache {
        self.lock().max_age = max_age;
        self
    }

    /// The longest a denial is kept.
    pub fn max_age(&self) -> Duration {
        self.lock().max_age
    }

    /// Denials held, expired ones included until they are next looked at.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every denial: call it when an operator's change made
    /// elsewhere (an override, `rl.mode`) must apply before the max age
    /// has passed.
    pub fn clear(&self) {
        let mut inner = self.lock();
        inner.entries.clear();
        inner.forgets += 1;
    }

    /// Forgets the denials of calls that named `key`, as their limiter key
    /// or their override key: call it when that key was deleted, or its
    /// override changed, elsewhere and the max age is too long to wait.
    pub fn forget_key(&self, key: &[u8]) {
        let mut inner = self.lock();
        inner
            .entries
            .retain(|_, e| !e.keys.iter().any(|k| k == key));
        inner.forgets += 1;
    }

    /// Taken before a call is sent, and given back to
    /// [`DenialCache::record`] with its reply.
    pub(crate) fn generation(&self) -> u64 {
        self.lock().forgets
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic elsewhere while holding the lock leaves a consistent map.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The remembered answer to this call at `now`, if it is still denied.
    pub(crate) fn lookup<R: Reply>(&self, prepared: &Prepared, now: Instant) -> Option<R> {
        if prepared.effect != Effect::Cacheable {
            return None;
        }
        let argv = prepared.cmd().get_packed_command();
        let mut inner = self.lock();
        let entry = inner.entries.get(&argv)?;
        if !entry.live_at(now) {
            inner.entries.remove(&argv);
            return None;
        }
        R::from_cached(
            entry
                .reply
                .aged(now.saturating_duration_since(entry.received)),
        )
    }

    /// Takes note of a reply to a call sent at `sent` (when the cache's
    /// generation was `generation`) and received at `received`, and of what
    /// the call changes: a refund forgets its keys, an override change
    /// everything.
    pub(crate) fn record<R: Reply>(
        &self,
        prepared: &Prepared,
        reply: Option<&R>,
        generation: u64,
        sent: Instant,
        received: Instant,
    ) {
        match prepared.effect {
            Effect::None | Effect::Uncached => {}
            Effect::ClearAll => self.clear(),
            Effect::Refund => {
                for key in &prepared.keys {
                    self.forget_key(key);
                }
            }
            Effect::Cacheable => {
                let Some(cached) = reply.and_then(Reply::to_cached) else {
                    return;
                };
                let mut inner = self.lock();
                if inner.forgets != generation {
                    return;
                }
                let life = Duration::from_millis(cached.retry_after_ms()).min(inner.max_age);
                let valid_until = sent + life;
                if valid_until <= received {
                    return;
                }
                if inner.entries.len() >= inner.capacity {
                    inner.entries.retain(|_, e| e.live_at(received));
                    if inner.entries.len() >= inner.capacity {
                        return;
                    }
                }
                inner.entries.insert(
                    prepared.cmd().get_packed_command(),
                    Entry {
                        received,
                        valid_until,
                        reply: cached,
                        keys: prepared.keys.clone(),
                    },
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{All, Command, Concurrent, Fixed, OverrideGet, OverrideSet, Token};

    fn denied(retry: i64, reset: u64) -> Decision {
        Decision {
            allowed: false,
            count: 3,
            retry_after: if retry < 0 {
                RetryAfter::Never
            } else {
                RetryAfter::Ms(retry as u64)
            },
            limit: 3,
            remaining: 0,
            reset_after_ms: reset,
            lease: None,
        }
    }

    /// A reply to a call sent and received at `at`.
    fn record<R: Reply>(cache: &DenialCache, call: &Prepared, reply: Option<&R>, at: Instant) {
        cache.record(call, reply, cache.generation(), at, at);
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn answers_a_denial_until_retry_after_with_times_reduced() {
        let cache = DenialCache::new();
        let call = Fixed::new("k", 3, "1s").prepare().unwrap();
        let t0 = Instant::now();
        record(&cache, &call, Some(&denied(500, 800)), t0);
        assert_eq!(cache.len(), 1);

        let at = |d: Duration| cache.lookup::<Decision>(&call, t0 + d);
        assert_eq!(at(Duration::ZERO), Some(denied(500, 800)));
        // Rounded up: 0.1 ms gone leaves 500 ms as the next whole ms.
        assert_eq!(at(Duration::from_micros(100)), Some(denied(500, 800)));
        assert_eq!(at(ms(200)), Some(denied(300, 600)));
        assert_eq!(at(Duration::from_micros(499_001)), Some(denied(1, 301)));
        // Never early: at retry_after the call goes to the server again.
        assert_eq!(at(ms(500)), None);
        assert!(
            cache.is_empty(),
            "an expired entry is dropped when looked at"
        );
    }

    #[test]
    fn only_the_same_argv_is_answered() {
        let cache = DenialCache::new();
        let t0 = Instant::now();
        let call = Fixed::new("k", 3, "1s").prepare().unwrap();
        record(&cache, &call, Some(&denied(500, 500)), t0);
        for other in [
            Fixed::new("k", 3, "1s").cost(2),
            Fixed::new("k", 4, "1s"),
            Fixed::new("k", 3, "1s").peek(),
            Fixed::new("j", 3, "1s"),
        ] {
            let other = other.prepare().unwrap();
            assert_eq!(cache.lookup::<Decision>(&other, t0), None);
        }
        // "1s" and 1000 ms are the same argv.
        let same = Fixed::new("k", 3, Duration::from_secs(1))
            .prepare()
            .unwrap();
        assert!(cache.lookup::<Decision>(&same, t0).is_some());
    }

    #[test]
    fn keeps_no_admission_no_hopeless_denial_and_no_refund() {
        let cache = DenialCache::new();
        let t0 = Instant::now();
        let call = Fixed::new("k", 3, "1s").prepare().unwrap();
        let admitted = Decision {
            allowed: true,
            ..denied(0, 500)
        };
        // An admitted RESERVE: allowed with a wait.
        let reserved = Decision {
            allowed: true,
            ..denied(300, 500)
        };
        for reply in [admitted, reserved, denied(-1, 500), denied(0, 0)] {
            record(&cache, &call, Some(&reply), t0);
        }
        assert!(cache.is_empty());
        let refund = Fixed::new("k", 3, "1s").refund(1).prepare().unwrap();
        record(&cache, &refund, Some(&denied(500, 500)), t0);
        assert!(cache.is_empty());
        assert_eq!(cache.lookup::<Decision>(&refund, t0), None);
    }

    #[test]
    fn a_refund_forgets_its_keys_and_an_override_change_everything() {
        let cache = DenialCache::new();
        let t0 = Instant::now();
        let on_k = Fixed::new("k", 3, "1s").prepare().unwrap();
        let on_j = Token::new("j", 3, "1s").prepare().unwrap();
        let both = All::new()
            .clause(Fixed::new("k", 3, "1s"))
            .clause(Fixed::new("x", 3, "1s"))
            .prepare()
            .unwrap();
        let all_denied = AllDecision {
            allowed: false,
            retry_after: RetryAfter::Ms(400),
            decisions: vec![denied(400, 400), denied(0, 10)],
        };
        record(&cache, &on_k, Some(&denied(500, 500)), t0);
        record(&cache, &on_j, Some(&denied(500, 500)), t0);
        record(&cache, &both, Some(&all_denied), t0);
        assert_eq!(cache.len(), 3);
        let aged = cache.lookup::<AllDecision>(&both, t0 + ms(100)).unwrap();
        assert_eq!(aged.retry_after, RetryAfter::Ms(300));
        assert_eq!(aged.decisions[0].retry_after, RetryAfter::Ms(300));
        assert_eq!(aged.decisions[1].reset_after_ms, 0);

        let refund = sliding_refund("k");
        record::<Decision>(&cache, &refund, None, t0);
        assert_eq!(cache.len(), 1, "both entries naming k are gone");
        assert!(cache.lookup::<Decision>(&on_j, t0).is_some());

        let read = OverrideGet::new("o").prepare().unwrap();
        record::<Option<crate::Override>>(&cache, &read, None, t0);
        assert_eq!(cache.len(), 1);
        let set = OverrideSet::new("o", 1, "1s").prepare().unwrap();
        record::<()>(&cache, &set, None, t0);
        assert!(cache.is_empty());
    }

    fn sliding_refund(key: &str) -> Prepared {
        crate::Sliding::new(key, 3, "1s")
            .refund(2)
            .prepare()
            .unwrap()
    }

    #[test]
    fn a_full_cache_drops_expired_entries_and_keeps_no_more() {
        let cache = DenialCache::with_capacity(2);
        let t0 = Instant::now();
        let call = |k: &str| Fixed::new(k, 3, "1s").prepare().unwrap();
        record(&cache, &call("a"), Some(&denied(100, 100)), t0);
        record(&cache, &call("b"), Some(&denied(900, 900)), t0);
        record(&cache, &call("c"), Some(&denied(900, 900)), t0 + ms(50));
        assert_eq!(cache.len(), 2);
        assert!(cache.lookup::<Decision>(&call("c"), t0 + ms(50)).is_none());
        record(&cache, &call("c"), Some(&denied(900, 900)), t0 + ms(100));
        assert!(cache.lookup::<Decision>(&call("a"), t0 + ms(100)).is_none());
        assert!(cache.lookup::<Decision>(&call("c"), t0 + ms(100)).is_some());
    }

    #[test]
    fn a_denial_is_kept_at_most_the_max_age() {
        let t0 = Instant::now();
        let call = Fixed::new("k", 1, "1h").block("1h").prepare().unwrap();
        let cache = DenialCache::new();
        assert_eq!(cache.max_age(), Duration::from_secs(1));
        record(&cache, &call, Some(&denied(3_600_000, 3_600_000)), t0);
        assert!(cache.lookup::<Decision>(&call, t0 + ms(999)).is_some());
        assert!(
            cache.lookup::<Decision>(&call, t0 + ms(1000)).is_none(),
            "an hour's block goes back to the server after a second"
        );
        let short = DenialCache::new().with_max_age(ms(200));
        let shared = short.clone();
        record(&shared, &call, Some(&denied(3_600_000, 3_600_000)), t0);
        let aged = short.lookup::<Decision>(&call, t0 + ms(150)).unwrap();
        assert_eq!(
            aged.retry_after,
            RetryAfter::Ms(3_599_850),
            "the server's wait, aged"
        );
        assert!(short.lookup::<Decision>(&call, t0 + ms(200)).is_none());
        let none = DenialCache::new().with_max_age(Duration::ZERO);
        record(&none, &call, Some(&denied(500, 500)), t0);
        assert!(none.is_empty());
    }

    #[test]
    fn an_entry_lives_from_when_its_call_was_sent() {
        let cache = DenialCache::new();
        let call = Fixed::new("k", 1, "1s").prepare().unwrap();
        let sent = Instant::now();
        cache.record(&call, Some(&denied(300, 300)), 0, sent, sent + ms(100));
        assert!(cache.lookup::<Decision>(&call, sent + ms(299)).is_some());
        assert!(cache.lookup::<Decision>(&call, sent + ms(300)).is_none());
        // A reply that arrived after its wait was over is not kept.
        cache.record(&call, Some(&denied(300, 300)), 0, sent, sent + ms(300));
        assert!(cache.is_empty());
    }

    #[test]
    fn forget_key_finds_limiter_and_override_keys() {
        let cache = DenialCache::new();
        let t0 = Instant::now();
        let with_okey = Fixed::new("{t}k", 1, "1s").override_key("{t}plan");
        let in_all = All::new().clause(Token::new("{t}b", 1, "1s").override_key("{t}plan"));
        let other = Fixed::new("{t}j", 1, "1s").prepare().unwrap();
        record(
            &cache,
            &with_okey.prepare().unwrap(),
            Some(&denied(500, 500)),
            t0,
        );
        let all_denied = AllDecision {
            allowed: false,
            retry_after: RetryAfter::Ms(400),
            decisions: vec![denied(400, 400)],
        };
        record(&cache, &in_all.prepare().unwrap(), Some(&all_denied), t0);
        record(&cache, &other, Some(&denied(500, 500)), t0);
        cache.forget_key(b"{t}plan");
        assert_eq!(cache.len(), 1);
        cache.forget_key(b"{t}j");
        assert!(cache.is_empty());
    }

    #[test]
    fn a_denial_sent_before_a_forget_is_not_kept() {
        let cache = DenialCache::new();
        let call = Fixed::new("k", 1, "1s").prepare().unwrap();
        let t0 = Instant::now();
        let generation = cache.generation();
        // Another task clears the cache while this call is on the wire.
        cache.clear();
        cache.record(&call, Some(&denied(500, 500)), generation, t0, t0);
        assert!(cache.is_empty());
    }

    #[test]
    fn leases_are_never_remembered() {
        let cache = DenialCache::new();
        let t0 = Instant::now();
        let acquire = Concurrent::new("c", 1, "30s").prepare().unwrap();
        record(&cache, &acquire, Some(&denied(500, 500)), t0);
        let all = All::new()
            .clause(Fixed::new("{c}f", 1, "1s"))
            .clause(Concurrent::new("{c}c", 1, "30s"))
            .prepare()
            .unwrap();
        let all_denied = AllDecision {
            allowed: false,
            retry_after: RetryAfter::Ms(400),
            decisions: vec![denied(400, 400), denied(400, 400)],
        };
        record(&cache, &all, Some(&all_denied), t0);
        assert!(cache.is_empty());
        assert!(cache.lookup::<Decision>(&acquire, t0).is_none());
    }
}
