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
//! A lease of one slot that ends within 34 minutes of the write takes 4
//! bytes (a gap of 1 to 63, then 3); the key adds the 21 bytes of its
//! prefix and header. Every write rebuilds the value whole, dropping the
//! leases that have ended, so a key holds at most `limit` leases.

use super::layout::{DecodeError, Reader, Tag, Writer, HEADER_LEN, VERSION_3};
use super::varint;
use super::{load, Checked, Commit, Step, Write, SMALL};
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
        if self.failed || self.pos >= self.view.body.len() {
            return None;
        }
        let lease = self.lease().ok_or(CorruptLeases);
        self.failed = lease.is_err();
        Some(lease)
    }
}

/// The leases `edit` keeps of `old`, newest first, as stored after it.
fn kept<'a>(
    old: Option<&'a LeaseView<'a>>,
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

/// A lease's varints, given the id before it.
fn encoded(prev: u64, lease: &Lease, at_ms: u64) -> [(u64, bool); 3] {
    let many = lease.slots != 1;
    [
        // (Never below 0: the leases come newest first, every one ending
        // after the write.)
        (prev.saturating_sub(lease.id) << 1 | u64::from(many), true),
        (lease.slots, many),
        (lease.end_ms.saturating_sub(at_ms), true),
    ]
}

/// The value after `edit` on the leases `old`: a rebuild, on the stack
/// when it fits (a fresh key's always does).
fn encode(old: Option<&LeaseView<'_>>, edit: &Edit) -> Result<Write, RlError> {
    let corrupt = |_| RlError::BadState(DecodeError::Corrupt);
    let mut len = HEADER;
    let mut prev = edit.next_id;
    for lease in kept(old, edit) {
        let lease = lease.map_err(corrupt)?;
        for (v, present) in encoded(prev, &lease, edit.now_ms) {
            len += if present { varint::len(v) } else { 0 };
        }
        prev = lease.id;
    }
    let mut small = [0u8; SMALL];
    let mut large = Vec::new();
    let out: &mut [u8] = if len <= SMALL {
        small.get_mut(..len).unwrap_or_default()
    } else {
        large.resize(len, 0);
        &mut large
    };
    let mut w = Writer::versioned(out, VERSION_3, Tag::Concurrent);
    w.u64(edit.next_id);
    w.u64(edit.now_ms);
    let mut prev = edit.next_id;
    for lease in kept(old, edit) {
        let lease = lease.map_err(corrupt)?;
        for (v, present) in encoded(prev, &lease, edit.now_ms) {
            if present {
                let (bytes, n) = varint::encode(v);
                w.bytes(bytes.get(..n).unwrap_or_default());
            }
        }
        prev = lease.id;
    }
    Ok(if len <= SMALL {
        Write::Small { bytes: small, len }
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
    let leases = view.as_ref();
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
                    write: encode(leases, edit)?,
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
            write: encode(leases, &state)?,
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

/// Leases (newest first) laid out as the module stores them (tests,
/// fuzzing).
#[cfg(test)]
pub fn build(next_id: u64, at_ms: u64, leases: &[Lease]) -> Vec<u8> {
    let edit = Edit {
        now_ms: at_ms,
        op: Op::Nothing,
        next_id,
    };
    let mut out = vec![0u8; HEADER];
    let mut w = Writer::versioned(&mut out, VERSION_3, Tag::Concurrent);
    w.u64(next_id);
    w.u64(at_ms);
    let mut prev = edit.next_id;
    for lease in leases {
        for (v, present) in encoded(prev, lease, at_ms) {
            if present {
                varint::put(&mut out, v);
            }
        }
        prev = lease.id;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use librl_core::concurrent::VecLeases;
    use proptest::prelude::*;

    fn written(old: Option<&[u8]>, edit: &Edit) -> Vec<u8> {
        let old = old.map(|b| view(b).unwrap());
        match encode(old.as_ref(), edit).unwrap() {
            Write::Small { bytes, len } => bytes[..len].to_vec(),
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
    fn a_lease_of_one_slot_takes_four_bytes() {
        let now = 1_700_000_000_000u64;
        let first = now * 1000 + 1;
        // Ten leases of 30 s, one taken each millisecond.
        let mut value: Option<Vec<u8>> = None;
        for i in 0..10u64 {
            let t = now + i;
            let edit = Edit {
                now_ms: t,
                op: Op::Take(Lease {
                    id: first + i,
                    end_ms: t + 30_000,
                    slots: 1,
                }),
                next_id: first + i + 1,
            };
            value = Some(written(value.as_deref(), &edit));
            assert_eq!(
                value.as_ref().map(Vec::len),
                Some(HEADER + 4 * (i as usize + 1))
            );
        }
        let value = value.unwrap();
        assert_eq!(&value[..5], b"\x00rl\x03C");
        assert_eq!(HEADER, 21);
        assert_eq!(read(&value).leases.len(), 10);
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
        // A gap of 0, a gap past id 1, slots flagged but 1, an end of 0,
        // a varint cut short, ids out of order.
        for body in [
            &[0u8, 1][..],
            &[20, 1],
            &[3, 1, 1],
            &[2, 0],
            &[2, 0x80],
            &[2, 1, 0],
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
