//! RL.CONCURRENT's state (tag `C`, version 3): `next_id at_ms` as
//! little-endian u64s after the prefix, then the leases, newest (highest
//! id) first, each as varints:
//!
//! ```text
//! gap << 1 | many    gap: the previous lease's id (next_id for the first)
//!                    minus this one's, at least 1
//! [slots]            only when `many`: the lease holds 2 slots or more
//! end - at_ms        at least 1: every stored lease ends after the
//!                    write that stored it (`at_ms`)
//! ```
//!
//! then zero bytes up to the value's end (a 0 where a lease would start
//! ends them): room, so that leases come and go without the value being
//! reallocated. A value that outgrows its room is rebuilt with 8 bytes
//! more; one with more than 16 bytes of room left is rebuilt exactly.
//!
//! A lease of one slot that ends within 34 minutes of the write takes 4
//! bytes (a gap of 1 to 63, then 3); the key adds the 21 bytes of its
//! prefix and header, and its room. Every write drops the leases that have
//! ended, so a key holds at most `limit` leases.

use super::layout::{DecodeError, Reader, Tag, Writer, HEADER_LEN, VERSION_3};
use super::varint;
use super::{load, Checked, Commit, SmallBytes, Step, Write, SMALL};
use crate::error::RlError;
use crate::request::Action;
use crate::server::Value;
use crate::stats::Event;
use librl_core::concurrent::{
    self, ConcurrentParams, CorruptLeases, Edit, Lease, Leases, Op, MAX_LEASE_ID,
};
use librl_core::decision::{Change, RetryAfter};
use librl_core::MAX_AMOUNT;

/// What the command accepts, for the WRONGTYPE message.
const EXPECTED: &str = "an RL.CONCURRENT limiter";

/// The prefix and the two header fields.
pub const HEADER: usize = HEADER_LEN + 16;

/// A stored value's leases, read lazily (checked as they are read).
pub struct LeaseView<'v> {
    next_id: u64,
    at_ms: u64,
    body: &'v [u8],
}

/// Reads a value's header; its leases are checked as they are read.
pub fn view(bytes: &[u8]) -> Result<LeaseView<'_>, DecodeError> {
    let (mut r, version) = Reader::versioned(bytes, Tag::Concurrent, VERSION_3)?;
    if version != VERSION_3 {
        return Err(DecodeError::Corrupt);
    }
    let (next_id, at_ms) = (r.u64()?, r.u64()?);
    // A key is written only once it has given an id.
    if !(2..=MAX_LEASE_ID + 1).contains(&next_id) {
        return Err(DecodeError::Corrupt);
    }
    Ok(LeaseView {
        next_id,
        at_ms,
        body: r.rest(),
    })
}

impl Leases for LeaseView<'_> {
    fn next_id(&self) -> u64 {
        self.next_id
    }

    fn leases(&self) -> impl Iterator<Item = Result<Lease, CorruptLeases>> {
        Iter {
            view: self,
            pos: 0,
            prev: self.next_id,
            failed: false,
        }
    }
}

struct Iter<'a, 'v> {
    view: &'a LeaseView<'v>,
    pos: usize,
    prev: u64,
    failed: bool,
}

impl Iter<'_, '_> {
    fn lease(&mut self) -> Option<Lease> {
        let data = self.view.body;
        let head = varint::get(data, &mut self.pos)?;
        let id = self
            .prev
            .checked_sub(head >> 1)
            .filter(|&id| id >= 1 && id < self.prev)?;
        let slots = if head & 1 == 1 {
            varint::get(data, &mut self.pos).filter(|s| (2..=MAX_AMOUNT).contains(s))?
        } else {
            1
        };
        let end_ms = varint::get(data, &mut self.pos)
            .filter(|&delta| delta >= 1)
            .and_then(|delta| self.view.at_ms.checked_add(delta))?;
        self.prev = id;
        Some(Lease { id, end_ms, slots })
    }
}

impl Iterator for Iter<'_, '_> {
    type Item = Result<Lease, CorruptLeases>;

    fn next(&mut self) -> Option<Self::Item> {
        let body = self.view.body;
        if self.failed || self.pos >= body.len() {
            return None;
        }
        // A 0 where a lease would start: the room, zeros to the end.
        if body.get(self.pos) == Some(&0) {
            let rest = body.get(self.pos..).unwrap_or_default();
            self.pos = body.len();
            if rest.iter().all(|&b| b == 0) {
                return None;
            }
            self.failed = true;
            return Some(Err(CorruptLeases));
        }
        let lease = self.lease().ok_or(CorruptLeases);
        self.failed = lease.is_err();
        Some(lease)
    }
}

/// The most leases read into [`Decoded`]; a key holding more is read
/// lazily, twice (to decide, then to write).
const DECODED: usize = 8;

/// A value's leases read once, into an array on the stack: what a call
/// decides from and writes from.
struct Decoded {
    next_id: u64,
    leases: [Lease; DECODED],
    len: usize,
}

impl Decoded {
    /// The view's leases, checked, or None when there are more than fit.
    fn of(view: &LeaseView<'_>) -> Result<Option<Decoded>, CorruptLeases> {
        let none = Lease {
            id: 0,
            end_ms: 0,
            slots: 0,
        };
        let mut d = Decoded {
            next_id: view.next_id,
            leases: [none; DECODED],
            len: 0,
        };
        for lease in view.leases() {
            let Some(slot) = d.leases.get_mut(d.len) else {
                return Ok(None);
            };
            *slot = lease?;
            d.len += 1;
        }
        Ok(Some(d))
    }
}

impl Leases for Decoded {
    fn next_id(&self) -> u64 {
        self.next_id
    }

    fn leases(&self) -> impl Iterator<Item = Result<Lease, CorruptLeases>> {
        self.leases
            .get(..self.len)
            .unwrap_or_default()
            .iter()
            .copied()
            .map(Ok)
    }
}

/// The leases `edit` keeps of `old`, newest first, as stored after it.
fn kept<'a, L: Leases>(
    old: Option<&'a L>,
    edit: &'a Edit,
) -> impl Iterator<Item = Result<Lease, CorruptLeases>> + 'a {
    let taken = match edit.op {
        Op::Take(lease) => Some(Ok(lease)),
        _ => None,
    };
    let old = old
        .into_iter()
        .flat_map(Leases::leases)
        .filter_map(move |lease| {
            let mut lease = match lease {
                Ok(lease) => lease,
                Err(e) => return Some(Err(e)),
            };
            if lease.end_ms <= edit.now_ms {
                return None;
            }
            match edit.op {
                Op::Release(id) if id == lease.id => return None,
                Op::Extend { id, end_ms } if id == lease.id => lease.end_ms = end_ms,
                _ => {}
            }
            Some(Ok(lease))
        });
    taken.into_iter().chain(old)
}

/// Room a value is rebuilt with when its leases outgrow it, and the most
/// it keeps (more is given back by an exact rebuild).
const GROWTH_ROOM: usize = 8;
const MAX_ROOM: usize = 16;

/// Writes a lease's varints at `out[*at..]`, given the id before it;
/// false when they do not fit.
fn put_lease(out: &mut [u8], at: &mut usize, prev: u64, lease: &Lease, at_ms: u64) -> bool {
    let many = lease.slots != 1;
    // (Never below 0: the leases come newest first, every one ending
    // after the write.)
    let head = prev.saturating_sub(lease.id) << 1 | u64::from(many);
    let fields = [
        (head, true),
        (lease.slots, many),
        (lease.end_ms.saturating_sub(at_ms), true),
    ];
    for (v, present) in fields {
        if present && !varint::put_at(out, at, v) {
            return false;
        }
    }
    true
}

/// The value after `edit` on the leases `old` (a value `old_len` bytes
/// long): the header, the kept leases, and room (the old value's length
/// when they fit in it, so the write is in place). Built in one pass on the
/// stack (a value that outgrows it is built again on the heap).
fn encode<L: Leases>(
    old: Option<&L>,
    old_len: Option<usize>,
    edit: &Edit,
) -> Result<Write, RlError> {
    let corrupt = |_| RlError::BadState(DecodeError::Corrupt);
    let mut small = [0u8; SMALL];
    let mut at = HEADER;
    let mut prev = edit.next_id;
    let mut fits = true;
    for lease in kept(old, edit) {
        let lease = lease.map_err(corrupt)?;
        if !put_lease(&mut small, &mut at, prev, &lease, edit.now_ms) {
            fits = false;
            break;
        }
        prev = lease.id;
    }
    let mut large = Vec::new();
    if !fits {
        // Past the stack buffer: measured, then laid out on the heap.
        let mut scratch = [0u8; varint::MAX_LEN * 3];
        let mut len = HEADER;
        let mut prev = edit.next_id;
        for lease in kept(old, edit) {
            let lease = lease.map_err(corrupt)?;
            let mut n = 0;
            put_lease(&mut scratch, &mut n, prev, &lease, edit.now_ms);
            len += n;
            prev = lease.id;
        }
        large.resize(len + GROWTH_ROOM, 0);
        let (mut at, mut prev) = (HEADER, edit.next_id);
        for lease in kept(old, edit) {
            let lease = lease.map_err(corrupt)?;
            put_lease(&mut large, &mut at, prev, &lease, edit.now_ms);
            prev = lease.id;
        }
    }
    let used = if fits { at } else { large.len() - GROWTH_ROOM };
    let len = match old_len {
        // In place, the rest zeros.
        Some(old) if used <= old && old - used <= MAX_ROOM => old,
        // A fresh key holds its first lease exactly.
        None => used,
        Some(_) => used + GROWTH_ROOM,
    };
    let out: &mut [u8] = if fits && len <= SMALL {
        &mut small
    } else {
        if fits {
            large = small.get(..at).unwrap_or_default().to_vec();
        }
        large.resize(len, 0);
        &mut large
    };
    let mut w = Writer::versioned(out, VERSION_3, Tag::Concurrent);
    w.u64(edit.next_id);
    w.u64(edit.now_ms);
    Ok(if fits && len <= SMALL {
        Write::Small(SmallBytes::new(small.get(..len).unwrap_or_default()))
    } else {
        Write::Replace(large)
    })
}

/// Decides the step against the key's leases, preparing what committing
/// writes: an acquire (COST, 0 a read), a RELEASE or a RENEW. A RELEASE or
/// RENEW of a lease that is not held is refused like a denial: it writes
/// nothing and replies allowed 0 (retry_after 0).
pub fn check(p: &ConcurrentParams, value: Value<'_>, step: &Step) -> Result<Checked, RlError> {
    let view = load(value, view, EXPECTED)?;
    let Some(view) = view else {
        return decide_on::<Decoded>(p, None, None, step);
    };
    let len = Some(HEADER + view.body.len());
    match Decoded::of(&view)? {
        Some(decoded) => decide_on(p, Some(&decoded), len, step),
        None => decide_on(p, Some(&view), len, step),
    }
}

/// `check` on the key's leases, read as `L`, from a value `old_len` bytes
/// long.
fn decide_on<L: Leases>(
    p: &ConcurrentParams,
    leases: Option<&L>,
    old_len: Option<usize>,
    step: &Step,
) -> Result<Checked, RlError> {
    let now = step.now;
    let by_lease = match step.action {
        Action::Take { cost: 0, .. } => {
            let reply = concurrent::status(p, leases, now)?
                .limiter_reply(true, RetryAfter::Ms(0))
                .with_lease(0);
            return Ok(Checked::answer(reply, None, None));
        }
        Action::Take { cost, .. } => {
            let d = concurrent::decide(p, leases, now, cost)?;
            let reply = concurrent::reply(&d);
            let commit = match d.admitted() {
                Some((edit, expires_at_ms)) => Some(Commit {
                    write: encode(leases, old_len, edit)?,
                    expires_at_ms,
                    on_denial: false,
                }),
                None => None,
            };
            return Ok(Checked::answer(reply, d.denied(), commit));
        }
        Action::Release(id) => (concurrent::release(p, leases, now, id)?, Event::Released),
        Action::Renew(id) => (concurrent::renew(p, leases, now, id)?, Event::Renewed),
        Action::Refund(_) => return Err(RlError::Internal("a REFUND on RL.CONCURRENT")),
    };
    let (outcome, event) = by_lease;
    let commit = match outcome.change {
        Change::Unchanged => None,
        Change::Store {
            state,
            expires_at_ms,
        } => Some(Commit {
            write: encode(leases, old_len, &state)?,
            expires_at_ms,
            on_denial: false,
        }),
        Change::Clear => Some(Commit {
            write: Write::Delete,
            expires_at_ms: 0,
            on_denial: false,
        }),
    };
    let denied = outcome.held.is_none().then_some(RetryAfter::Ms(0));
    let mut checked = Checked::answer(outcome.limiter_reply(), denied, commit);
    checked.event = checked.commit.as_ref().map(|_| event);
    Ok(checked)
}

/// Leases (newest first) laid out as the module stores them, with no
/// room (tests, fuzzing).
#[cfg(test)]
pub fn build(next_id: u64, at_ms: u64, leases: &[Lease]) -> Vec<u8> {
    let mut out = vec![0u8; HEADER + leases.len() * varint::MAX_LEN * 3];
    let mut w = Writer::versioned(&mut out, VERSION_3, Tag::Concurrent);
    w.u64(next_id);
    w.u64(at_ms);
    let (mut at, mut prev) = (HEADER, next_id);
    for lease in leases {
        put_lease(&mut out, &mut at, prev, lease, at_ms);
        prev = lease.id;
    }
    out.truncate(at);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use librl_core::concurrent::VecLeases;
    use proptest::prelude::*;

    fn written(old: Option<&[u8]>, edit: &Edit) -> Vec<u8> {
        let len = old.map(<[u8]>::len);
        let old = old.map(|b| view(b).unwrap());
        match encode(old.as_ref(), len, edit).unwrap() {
            Write::Small(bytes) => bytes.as_slice().to_vec(),
            Write::Replace(bytes) => bytes,
            _ => panic!("a rebuild"),
        }
    }

    fn read(bytes: &[u8]) -> VecLeases {
        let v = view(bytes).unwrap();
        let mut leases: Vec<Lease> = v.leases().map(Result::unwrap).collect();
        leases.reverse();
        VecLeases {
            next_id: v.next_id(),
            leases,
        }
    }

    #[test]
    fn a_lease_of_one_slot_takes_four_bytes_and_leases_come_and_go_in_place() {
        let now = 1_700_000_000_000u64;
        let first = now * 1000 + 1;
        let take = |i: u64| Edit {
            now_ms: now + i,
            op: Op::Take(Lease {
                id: first + i,
                end_ms: now + i + 30_000,
                slots: 1,
            }),
            next_id: first + i + 1,
        };
        // A fresh key holds its first lease exactly.
        let mut value = written(None, &take(0));
        assert_eq!(value.len(), HEADER + 4);
        assert_eq!(&value[..5], b"\x00rl\x03C");
        assert_eq!(HEADER, 21);
        // Ten leases of 30 s, one taken each millisecond: 4 bytes each,
        // then room (zeros).
        for i in 1..10u64 {
            value = written(Some(&value), &take(i));
            let leases = read(&value).leases;
            let newest_first: Vec<Lease> = leases.iter().rev().copied().collect();
            let exact = build(first + i + 1, now + i, &newest_first);
            assert_eq!(exact.len(), HEADER + 4 * (i as usize + 1));
            assert_eq!(value[..exact.len()], exact[..], "lease {i}");
            let room = &value[exact.len()..];
            assert!(
                room.len() <= MAX_ROOM && room.iter().all(|&b| b == 0),
                "{room:?}"
            );
        }
        // A release, then an acquire: the same length, so written in place.
        let full = value.len();
        let release = Edit {
            now_ms: now + 20,
            op: Op::Release(first + 3),
            next_id: first + 10,
        };
        value = written(Some(&value), &release);
        assert_eq!(value.len(), full);
        value = written(Some(&value), &take(10));
        assert_eq!((value.len(), read(&value).leases.len()), (full, 10));
        // Two slots take one byte more.
        let two = Edit {
            now_ms: now,
            op: Op::Take(Lease {
                id: first,
                end_ms: now + 30_000,
                slots: 2,
            }),
            next_id: first + 1,
        };
        assert_eq!(written(None, &two).len(), HEADER + 5);
        // Most leases gone: the room is given back.
        for id in first + 4..first + 11 {
            let release = Edit {
                now_ms: now + 21,
                op: Op::Release(id),
                next_id: first + 11,
            };
            value = written(Some(&value), &release);
        }
        assert!(value.len() <= HEADER + 3 * 4 + MAX_ROOM, "{}", value.len());
    }

    #[test]
    fn a_value_past_the_stack_buffer_is_built_on_the_heap() {
        let leases: Vec<Lease> = (0..40u64)
            .rev()
            .map(|i| Lease {
                id: 100 + i,
                end_ms: 5_000 + i,
                slots: 1,
            })
            .collect();
        let value = build(140, 1000, &leases);
        assert!(value.len() > SMALL);
        let take = Edit {
            now_ms: 1000,
            op: Op::Take(Lease {
                id: 140,
                end_ms: 9_000,
                slots: 3,
            }),
            next_id: 141,
        };
        let after = written(Some(&value), &take);
        // (The new lease: its head, 3 slots and an end 8 s after the write.)
        assert_eq!(after.len(), value.len() + 4 + GROWTH_ROOM);
        assert_eq!(read(&after).leases.len(), 41);
        let mut reference = read(&value);
        reference.apply(&take);
        assert_eq!(read(&after), reference);
    }

    #[test]
    fn rebuilds_drop_ended_leases_and_apply_the_edit() {
        // Oldest first, as VecLeases keeps them.
        let leases = [
            Lease {
                id: 3,
                end_ms: 150,
                slots: 1,
            },
            Lease {
                id: 7,
                end_ms: 400,
                slots: 5,
            },
            Lease {
                id: 9,
                end_ms: 300,
                slots: 1,
            },
        ];
        let newest_first: Vec<Lease> = leases.iter().rev().copied().collect();
        let value = build(10, 100, &newest_first);
        assert_eq!(read(&value).leases, leases);
        let release = Edit {
            now_ms: 200,
            op: Op::Release(9),
            next_id: 10,
        };
        let after = written(Some(&value), &release);
        assert_eq!(read(&after).leases, [leases[1]]);
        let extend = Edit {
            now_ms: 120,
            op: Op::Extend { id: 3, end_ms: 900 },
            next_id: 10,
        };
        let after = read(&written(Some(&value), &extend));
        assert_eq!(
            after.leases[0],
            Lease {
                id: 3,
                end_ms: 900,
                slots: 1
            }
        );
        // The reference in memory agrees.
        let mut reference = read(&value);
        reference.apply(&release);
        assert_eq!(read(&written(Some(&value), &release)), reference);
    }

    /// A key of up to 8 leases is read once into an array, one of more
    /// lazily: both give what the reference in memory gives, for every
    /// kind of call.
    #[test]
    fn both_ways_of_reading_agree_with_the_reference() {
        let p = ConcurrentParams::new(20, 1000).unwrap();
        for n in [2u64, 3, 8, 9, 12] {
            let leases: Vec<Lease> = (0..n)
                .map(|i| Lease {
                    id: 100 + i,
                    end_ms: 2000 + 10 * i,
                    slots: 1 + i % 2,
                })
                .collect();
            let newest_first: Vec<Lease> = leases.iter().rev().copied().collect();
            let value = build(100 + n, 1500, &newest_first);
            let reference = read(&value);
            let mid = 100 + n / 2;
            for action in [
                Action::Take {
                    cost: 2,
                    reserve: None,
                },
                Action::Release(mid),
                Action::Renew(mid),
            ] {
                let step = Step {
                    now: 1600,
                    action,
                    block_ms: None,
                    peek: false,
                };
                let checked = check(&p, Value::String(&value), &step).unwrap();
                let commit = checked.commit.expect("a write");
                let got = match commit.write {
                    Write::Small(bytes) => bytes.as_slice().to_vec(),
                    Write::Replace(bytes) => bytes,
                    _ => panic!("a rebuild"),
                };
                let edit = match action {
                    Action::Take { cost, .. } => {
                        concurrent::decide(&p, Some(&reference), 1600, cost)
                            .unwrap()
                            .into_state()
                    }
                    Action::Release(id) => {
                        match concurrent::release(&p, Some(&reference), 1600, id)
                            .unwrap()
                            .change
                        {
                            Change::Store { state, .. } => Some(state),
                            _ => None,
                        }
                    }
                    _ => match concurrent::renew(&p, Some(&reference), 1600, mid)
                        .unwrap()
                        .change
                    {
                        Change::Store { state, .. } => Some(state),
                        _ => None,
                    },
                }
                .expect("an edit");
                let mut want = reference.clone();
                want.apply(&edit);
                assert_eq!(read(&got), want, "{n} leases, {action:?}");
            }
        }
    }

    #[test]
    fn room_after_the_leases_is_zeros() {
        let mut value = build(
            10,
            100,
            &[Lease {
                id: 9,
                end_ms: 300,
                slots: 1,
            }],
        );
        value.extend([0, 0, 0]);
        assert_eq!(read(&value).leases.len(), 1);
        let empty = [build(10, 100, &[]), vec![0; 8]].concat();
        assert!(read(&empty).leases.is_empty());
    }

    #[test]
    fn rejects_tampered_values() {
        let good = build(
            10,
            100,
            &[Lease {
                id: 9,
                end_ms: 300,
                slots: 1,
            }],
        );
        assert!(view(&good).is_ok());
        let corrupt = |bytes: &[u8]| match view(bytes) {
            Err(DecodeError::Corrupt) => true,
            Ok(v) => v.leases().any(|l| l.is_err()),
            Err(_) => false,
        };
        // Leases are version 3: a version-1 value tagged `C` was never
        // written; version 2 has no `C` and 4 is a later module's.
        let mut old = good.clone();
        old[3] = 1;
        assert!(corrupt(&old));
        for v in [2, 4] {
            let mut other = good.clone();
            other[3] = v;
            assert!(matches!(view(&other), Err(DecodeError::UnsupportedVersion(n)) if n == v));
        }
        assert!(corrupt(&good[..HEADER - 1]));
        assert!(corrupt(&build(0, 100, &[])));
        assert!(corrupt(&build(1, 100, &[])));
        assert!(corrupt(&build(MAX_LEASE_ID + 2, 100, &[])));
        // Room that is not zeros, a gap past id 1, slots flagged but 1,
        // an end of 0, a varint cut short, ids out of order (a gap of 0).
        for body in [
            &[0u8, 1][..],
            &[2, 1, 0, 0, 5],
            &[20, 1],
            &[3, 1, 1],
            &[2, 0],
            &[2, 0x80],
            &[2, 1, 1, 1],
        ] {
            let mut bytes = build(10, 100, &[]);
            bytes.extend(body);
            assert!(corrupt(&bytes), "{body:?}");
        }
    }

    proptest! {
        /// Any edit of any leases, stored and read back, gives what the
        /// reference in memory gives.
        #[test]
        fn stored_leases_match_the_reference(
            ends in prop::collection::vec((1u64..5, 1u64..5000, 1u64..4), 0..12),
            now in 0u64..3000,
            op in 0u8..4,
            pick in 0usize..12,
        ) {
            let mut leases = Vec::new();
            let mut id = 100u64;
            for (gap, end, slots) in ends {
                id += gap;
                leases.push(Lease { id, end_ms: 1000 + end, slots });
            }
            let next_id = id + 1;
            let newest_first: Vec<Lease> = leases.iter().rev().copied().collect();
            let value = build(next_id, 1000, &newest_first);
            let target = leases.get(pick).map_or(5, |l| l.id);
            let op = match op {
                0 => Op::Nothing,
                1 => Op::Take(Lease { id: next_id, end_ms: 1000 + now + 1, slots: 2 }),
                2 => Op::Release(target),
                _ => Op::Extend { id: target, end_ms: 9000 },
            };
            let next_id = if matches!(op, Op::Take(_)) { next_id + 1 } else { next_id };
            let edit = Edit { now_ms: 1000 + now, op, next_id };
            let mut reference = read(&value);
            reference.apply(&edit);
            prop_assert_eq!(read(&written(Some(&value), &edit)), reference);
        }

        #[test]
        fn arbitrary_bytes_never_panic(tail in prop::collection::vec(any::<u8>(), 0..64)) {
            let mut bytes = build(1 << 40, 5, &[]);
            bytes.extend(tail);
            if let Ok(v) = view(&bytes) {
                let _ = v.leases().count();
            }
        }
    }
}
