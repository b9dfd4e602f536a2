use super::*;
use crate::algorithm::{Algorithm, InMemory, Leasing};
use crate::MAX_WINDOW_MS;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

fn params(limit: u64, lease_ms: u64) -> ConcurrentParams {
    ConcurrentParams::new(limit, lease_ms).unwrap()
}

/// A key's leases as the module keeps them: the leases, and the key's
/// absolute expiry (gone once the clock reaches it).
#[derive(Default)]
struct Key {
    leases: Option<VecLeases>,
    expires_at_ms: u64,
}

impl Key {
    fn at(&mut self, now: u64) -> Option<&VecLeases> {
        if now > self.expires_at_ms {
            // Redis deletes a key once the clock is past its expiry.
            self.leases = None;
        }
        self.leases.as_ref()
    }

    /// An acquire at `now`: the seven integers of its reply.
    fn acquire(&mut self, p: &ConcurrentParams, now: u64, cost: u64) -> [i64; 7] {
        let d = decide(p, self.at(now), now, cost).unwrap();
        // A read (COST 0) writes nothing, as in the module.
        if let Some((edit, expires_at_ms)) = d.admitted().filter(|_| cost > 0) {
            let (edit, expires_at_ms) = (*edit, expires_at_ms);
            self.leases = Some(Leasing::admit(self.leases.take(), edit));
            self.expires_at_ms = expires_at_ms;
        }
        seven(&reply(&d))
    }

    fn by_lease(&mut self, change: Change<Edit>) {
        match change {
            Change::Unchanged => {}
            Change::Store {
                state,
                expires_at_ms,
            } => {
                self.leases
                    .get_or_insert_with(VecLeases::default)
                    .apply(&state);
                self.expires_at_ms = expires_at_ms;
            }
            Change::Clear => self.leases = None,
        }
    }

    fn release(&mut self, p: &ConcurrentParams, now: u64, id: u64) -> [i64; 7] {
        let r = release(p, self.at(now), now, id).unwrap();
        self.by_lease(r.change);
        seven(&r.limiter_reply())
    }

    fn renew(&mut self, p: &ConcurrentParams, now: u64, id: u64) -> [i64; 7] {
        let r = renew(p, self.at(now), now, id).unwrap();
        self.by_lease(r.change);
        seven(&r.limiter_reply())
    }

    /// The key's PTTL at `now` (0: no key).
    fn pttl(&mut self, now: u64) -> u64 {
        match self.at(now) {
            Some(_) => self.expires_at_ms - now,
            None => 0,
        }
    }
}

fn seven(r: &LimiterReply) -> [i64; 7] {
    let (ints, len) = r.integers();
    assert_eq!(len, 7, "a concurrency reply has seven integers");
    ints
}

#[test]
fn acquires_until_the_limit_and_leases_end_at_the_millisecond() {
    // Three slots, leases of one second.
    let p = params(3, 1000);
    let mut k = Key::default();
    // [allowed, count, retry_after, limit, remaining, reset_after, lease]
    assert_eq!(k.acquire(&p, 0, 1), [1, 1, 0, 3, 2, 1000, 1]);
    assert_eq!(k.acquire(&p, 0, 2), [1, 3, 0, 3, 0, 1000, 2]);
    assert_eq!(k.acquire(&p, 0, 1), [0, 3, 1000, 3, 0, 1000, 0]);
    assert_eq!(k.acquire(&p, 400, 1), [0, 3, 600, 3, 0, 600, 0]);
    // A cost above the limit never fits.
    assert_eq!(k.acquire(&p, 400, 4), [0, 3, -1, 3, 0, 600, 0]);
    // Held during [0, 1000): at 999 still held, at 1000 ended (the key
    // itself is there until the clock is past 1000: its counter goes on).
    assert_eq!(k.acquire(&p, 999, 1), [0, 3, 1, 3, 0, 1, 0]);
    assert_eq!(k.acquire(&p, 1000, 1), [1, 1, 0, 3, 2, 1000, 3]);
    assert_eq!(k.acquire(&p, 1000, 1), [1, 2, 0, 3, 1, 1000, 4]);
    assert_eq!(k.acquire(&p, 1500, 1), [1, 3, 0, 3, 0, 1000, 5]);
    // The key lives until its last lease ends.
    assert_eq!(k.pttl(1500), 1000);
    assert_eq!(k.acquire(&p, 2000, 1), [1, 2, 0, 3, 1, 1000, 6]);
    // Gone once the clock is past 3000: the next key's ids start from the
    // clock.
    assert_eq!(k.pttl(3000), 0);
    assert_eq!(k.acquire(&p, 3001, 1), [1, 1, 0, 3, 2, 1000, 3_001_001]);
}

#[test]
fn a_larger_cost_waits_until_enough_leases_have_ended() {
    let p = params(5, 1000);
    let mut k = Key::default();
    k.acquire(&p, 0, 2);
    k.acquire(&p, 100, 1);
    k.acquire(&p, 300, 2);
    // Full. Three slots need the leases of 0 (2) and 100 (1) to end.
    assert_eq!(k.acquire(&p, 500, 3), [0, 5, 600, 5, 0, 800, 0]);
    assert_eq!(k.acquire(&p, 500, 1), [0, 5, 500, 5, 0, 800, 0]);
    assert_eq!(k.acquire(&p, 500, 5), [0, 5, 800, 5, 0, 800, 0]);
    assert_eq!(k.acquire(&p, 1099, 3)[..3], [0, 3, 1]);
    assert_eq!(k.acquire(&p, 1100, 3)[..3], [1, 5, 0]);
}

#[test]
fn release_frees_slots_at_once_and_only_once() {
    let p = params(2, 10_000);
    let mut k = Key::default();
    let a = k.acquire(&p, 5, 1)[6] as u64;
    let b = k.acquire(&p, 6, 1)[6] as u64;
    assert_eq!((a, b), (5001, 5002));
    assert_eq!(k.acquire(&p, 7, 1)[0], 0);
    // [held, count after, 0, limit, remaining, reset_after, id or 0]
    assert_eq!(k.release(&p, 8, a), [1, 1, 0, 2, 1, 9998, 5001]);
    assert_eq!(k.release(&p, 8, a), [0, 1, 0, 2, 1, 9998, 0]);
    assert_eq!(k.release(&p, 8, 424_242), [0, 1, 0, 2, 1, 9998, 0]);
    assert_eq!(k.acquire(&p, 9, 1), [1, 2, 0, 2, 0, 10_000, 5003]);
    // Releasing the latest lease shortens the key's life to the others'.
    assert_eq!(k.release(&p, 10, 5003), [1, 1, 0, 2, 1, 9996, 5003]);
    assert_eq!(k.pttl(10), 9996);
    // The last lease released in a later millisecond than the clock's
    // part of its id: the key goes.
    assert_eq!(k.release(&p, 11, b), [1, 0, 0, 2, 2, 0, 5002]);
    assert!(k.leases.is_none());
    // A lease that has ended cannot be released: its slot is free already.
    let c = k.acquire(&p, 20, 1)[6] as u64;
    assert_eq!(c, 20_001);
    assert_eq!(k.release(&p, 10_020, c), [0, 0, 0, 2, 2, 0, 0]);
}

#[test]
fn a_key_released_in_the_millisecond_it_was_taken_keeps_its_ids() {
    let p = params(1, 60_000);
    let mut k = Key::default();
    let id = k.acquire(&p, 7, 1)[6] as u64;
    // Released at once: no lease, but the key stays one millisecond with
    // its counter, so the next lease cannot get the same id.
    assert_eq!(k.release(&p, 7, id), [1, 0, 0, 1, 1, 1, 7001]);
    assert_eq!(k.pttl(7), 1);
    assert_eq!(k.acquire(&p, 7, 1)[6], 7002);
    assert_eq!(k.release(&p, 7, 7002)[0], 1);
    // Still there at 8 (gone once the clock is past it): the counter goes
    // on, and a late second release of the first lease frees nothing.
    assert_eq!(k.acquire(&p, 8, 1)[6], 7003);
    assert_eq!(k.release(&p, 8, 7001)[..2], [0, 1]);
    assert_eq!(k.release(&p, 8, 7003)[0], 1);
    // 7004 is ahead of the clock's 8001 nowhere: the key goes at once.
    assert_eq!(k.pttl(8), 0);
    assert_eq!(k.acquire(&p, 9, 1)[6], 9001);
}

#[test]
fn a_burst_beyond_the_clock_keeps_the_key_until_the_clock_catches_up() {
    // 2,500 leases in one millisecond: ids run 2.5 ms ahead of the clock.
    let p = params(10_000, 1);
    let mut k = Key::default();
    let mut ids = Vec::new();
    for _ in 0..2500 {
        ids.push(k.acquire(&p, 100, 1)[6] as u64);
    }
    assert_eq!(ids.first(), Some(&100_001));
    assert_eq!(ids.last(), Some(&102_500));
    // Every lease has ended at 101, but the key stays until 103.
    assert_eq!(k.acquire(&p, 101, 0)[..6], [1, 0, 0, 10_000, 10_000, 2]);
    assert_eq!(k.pttl(101), 2);
    assert_eq!(k.acquire(&p, 102, 1)[6], 102_501);
    // At 103 (the key's last millisecond) the counter goes on; a key that
    // has gone starts at the clock, above every earlier id.
    assert_eq!(k.acquire(&p, 103, 1)[6], 102_502);
    assert_eq!(k.acquire(&p, 200, 1)[6], 200_001);
}

#[test]
fn renew_extends_a_held_lease_and_never_shortens_it() {
    let p = params(1, 1000);
    let mut k = Key::default();
    let id = k.acquire(&p, 0, 1)[6] as u64;
    assert_eq!(k.renew(&p, 600, id), [1, 1, 0, 1, 0, 1000, 1]);
    assert_eq!(k.acquire(&p, 1599, 1)[..3], [0, 1, 1]);
    // A shorter lease does not cut it short: held, nothing written.
    let short = params(1, 10);
    assert_eq!(k.renew(&short, 700, id), [1, 1, 0, 1, 0, 900, 1]);
    assert_eq!(k.expires_at_ms, 1600);
    // Unknown and ended leases are not renewed.
    assert_eq!(k.renew(&p, 700, 2), [0, 1, 0, 1, 0, 900, 0]);
    assert_eq!(k.acquire(&p, 1600, 1)[..2], [1, 1]);
    assert_eq!(k.renew(&p, 1600, id)[..2], [0, 1]);
}

#[test]
fn an_override_changes_the_limit_and_the_length_of_new_leases() {
    let p = params(4, 1000);
    let mut k = Key::default();
    k.acquire(&p, 0, 2);
    k.acquire(&p, 200, 2);
    // The limit drops below the slots held: denied until enough end.
    let small = params(1, 5000);
    assert_eq!(k.acquire(&small, 300, 1), [0, 4, 900, 1, 0, 900, 0]);
    assert_eq!(k.acquire(&small, 1199, 1)[..3], [0, 2, 1]);
    // New leases take the new length; the held ones keep theirs.
    assert_eq!(k.acquire(&small, 1200, 1), [1, 1, 0, 1, 0, 5000, 3]);
    let big = params(10, 10);
    assert_eq!(k.acquire(&big, 1200, 1), [1, 2, 0, 10, 8, 5000, 4]);
    assert_eq!(k.renew(&big, 1205, 4)[5], 5000 - 5);
}

#[test]
fn cost_zero_reads_and_takes_no_lease() {
    let p = params(3, 1000);
    let mut k = Key::default();
    assert_eq!(k.acquire(&p, 0, 0), [1, 0, 0, 3, 3, 0, 0]);
    k.acquire(&p, 0, 2);
    assert_eq!(k.acquire(&p, 10, 0), [1, 2, 0, 3, 1, 990, 0]);
    assert_eq!(status(&p, k.leases.as_ref(), 10).unwrap().count, 2);
}

#[test]
fn ids_run_out_only_past_the_year_2255() {
    let p = params(3, 1000);
    let last_ms = MAX_LEASE_ID / IDS_PER_MS;
    let mut k = Key::default();
    assert_eq!(k.acquire(&p, last_ms, 1)[6] as u64, last_ms * 1000 + 1);
    let mut fresh = Key::default();
    assert_eq!(fresh.acquire(&p, last_ms + 1, 1)[2], -1);
    // The counter itself stops at the last id.
    let full = VecLeases {
        next_id: MAX_LEASE_ID + 1,
        leases: Vec::new(),
    };
    let d = decide(&p, Some(&full), 0, 1).unwrap();
    assert_eq!(d.denied(), Some(RetryAfter::Never));
    let d = decide::<VecLeases>(&p, None, u64::MAX, 1).unwrap();
    assert_eq!(d.denied(), Some(RetryAfter::Never));
    // The widest values do not panic.
    let wide = params(crate::MAX_AMOUNT, MAX_WINDOW_MS);
    let mut k = Key::default();
    k.acquire(&wide, 1, crate::MAX_AMOUNT);
    let _ = k.acquire(&wide, u64::MAX, u64::MAX);
    let _ = k.release(&wide, u64::MAX, u64::MAX);
    let _ = k.renew(&wide, 0, u64::MAX);
    let _ = status(&wide, k.leases.as_ref(), u64::MAX);
    assert_eq!(ConcurrentParams::new(0, 1), None);
    assert_eq!(ConcurrentParams::new(1, 0), None);
}

#[test]
fn the_algorithm_trait_takes_leases_and_refunds_nothing() {
    let a = Leasing::<VecLeases>::new(params(2, 100));
    let d = a.decide(None, 0, 1).unwrap();
    let leases = Leasing::admit(None, d.into_state().unwrap());
    let r = a.refund(Some(&leases), 10, 5).unwrap();
    assert_eq!((r.change, r.count), (Change::Unchanged, 1));
    assert_eq!(a.status(Some(&leases), 100).unwrap().count, 0);
}

/// The model: leases as a map from id to (end, slots), with the ids ever
/// given, the slots taken and the slots returned by release or expiry.
#[derive(Default)]
struct Model {
    held: BTreeMap<u64, (u64, u64)>,
    given: BTreeSet<u64>,
    taken: u64,
    released: u64,
    expired: u64,
}

impl Model {
    /// Lets time run to `now`: leases ending by then return their slots.
    fn advance(&mut self, now: u64) {
        let ended: Vec<u64> = self
            .held
            .iter()
            .filter(|(_, (end, _))| *end <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in ended {
            if let Some((_, slots)) = self.held.remove(&id) {
                self.expired += slots;
            }
        }
    }

    fn count(&self) -> u64 {
        self.held.values().map(|(_, slots)| slots).sum()
    }
}

#[derive(Clone, Copy, Debug)]
enum Step {
    Acquire(u64),
    /// Release the n-th id ever given (or an unknown one).
    Release(usize),
    Renew(usize),
    Read,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (1u64..4).prop_map(Step::Acquire),
        3 => (0usize..64).prop_map(Step::Release),
        1 => (0usize..64).prop_map(Step::Renew),
        1 => Just(Step::Read),
    ]
}

proptest! {
    /// Random acquires, releases, renewals and time against the model:
    /// never more than `limit` held; the same verdicts and counts; every
    /// id fresh and higher than the last; a denial's retry_after exact;
    /// and once time has run past every lease, every slot taken has come
    /// back by release or by expiry.
    #[test]
    fn leases_match_the_model(
        limit in 1u64..6,
        lease_ms in 1u64..400,
        steps in prop::collection::vec((0u64..120, step()), 1..120),
    ) {
        let p = params(limit, lease_ms);
        let mut k = Key::default();
        let mut m = Model::default();
        let mut now = 1_000u64;
        let mut order: Vec<u64> = Vec::new();
        for (gap, step) in steps {
            now += gap;
            m.advance(now);
            // One of the ids given, or (one time in len + 1) an unknown one.
            let pick = |n: usize| order.get(n % (order.len() + 1)).copied().unwrap_or(9_999_999);
            match step {
                Step::Acquire(cost) => {
                    let r = k.acquire(&p, now, cost);
                    let admits = m.count() + cost <= limit;
                    prop_assert_eq!(r[0] == 1, admits);
                    if admits {
                        let id = r[6] as u64;
                        prop_assert!(id >= 1 && !m.given.contains(&id));
                        prop_assert!(m.given.iter().all(|&g| g < id));
                        m.given.insert(id);
                        order.push(id);
                        m.held.insert(id, (now + lease_ms, cost));
                        m.taken += cost;
                    } else {
                        prop_assert_eq!(r[6], 0);
                        let retry = r[2];
                        if cost > limit {
                            prop_assert_eq!(retry, -1);
                        } else {
                            // Exact: admitted at now + retry, not 1 ms before.
                            let retry = u64::try_from(retry).unwrap();
                            prop_assert!(retry >= 1);
                            let leases = k.leases.clone();
                            let at = |t: u64| decide(&p, leases.as_ref(), t, cost).unwrap().allowed();
                            prop_assert!(at(now + retry));
                            prop_assert!(!at(now + retry - 1));
                        }
                    }
                }
                Step::Release(n) => {
                    let id = pick(n);
                    let r = k.release(&p, now, id);
                    let held = m.held.remove(&id);
                    prop_assert_eq!(r[0] == 1, held.is_some());
                    prop_assert_eq!(r[6], if held.is_some() { id as i64 } else { 0 });
                    if let Some((_, slots)) = held {
                        m.released += slots;
                    }
                }
                Step::Renew(n) => {
                    let id = pick(n);
                    let r = k.renew(&p, now, id);
                    prop_assert_eq!(r[0] == 1, m.held.contains_key(&id));
                    if let Some((end, _)) = m.held.get_mut(&id) {
                        *end = (*end).max(now + lease_ms);
                    }
                }
                Step::Read => {
                    prop_assert_eq!(k.acquire(&p, now, 0)[..2].to_vec(), vec![1, m.count() as i64]);
                }
            }
            let count = status(&p, k.at(now), now).unwrap().count;
            prop_assert_eq!(count, m.count());
            prop_assert!(count <= limit, "{} held, limit {}", count, limit);
            // The key lives exactly until its last lease ends, or until
            // its ids' millisecond has passed.
            let last = m.held.values().map(|(end, _)| *end).max().unwrap_or(0);
            let next = m.given.iter().max().map_or(0, |id| id + 1);
            let caught_up = ids_caught_up_ms(next);
            let want = if last > now || caught_up > now { last.max(caught_up) - now } else { 0 };
            prop_assert_eq!(k.pttl(now), want);
            prop_assert_eq!(status(&p, k.at(now), now).unwrap().reset_after_ms, want);
        }
        now += lease_ms + 1;
        m.advance(now);
        prop_assert_eq!(status(&p, k.at(now), now).unwrap().count, 0);
        prop_assert_eq!(m.taken, m.released + m.expired);
    }
}
