//! The module's replies as types, read from RESP2 and RESP3 alike.

use std::num::NonZeroU64;
use std::time::Duration;

use redis::{FromRedisValue, ParsingError, Value};

/// How long until a call with the same cost would be admitted: `Ms`
/// (0 when the call was admitted; an admitted RESERVE call's wait before
/// acting on it) or `Never` (the module's -1: the cost exceeds the
/// effective limit). The module's own type, from `librl-core`.
pub use librl_core::decision::RetryAfter;

/// A reply's retry_after integer as a [`RetryAfter`].
fn retry_after_from_reply(v: i64) -> Result<RetryAfter, ParsingError> {
    match v {
        -1 => Ok(RetryAfter::Never),
        v => u64::try_from(v)
            .map(RetryAfter::Ms)
            .map_err(|_| bad(format!("retry_after {v}"))),
    }
}

/// A lease taken by `RL.CONCURRENT` (or an `RL.ALL` `CONCURRENT` clause):
/// a positive integer below 2^53, unique within its key, which `RELEASE`
/// and `RENEW` name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseId(NonZeroU64);

impl LeaseId {
    /// The largest id the module gives (2^53 - 1), from `librl-core`.
    pub const MAX: u64 = librl_core::concurrent::MAX_LEASE_ID;

    /// `id` as a lease id: from 1 to [`LeaseId::MAX`], else `None`.
    pub fn new(id: u64) -> Option<LeaseId> {
        NonZeroU64::new(id)
            .filter(|id| id.get() <= LeaseId::MAX)
            .map(LeaseId)
    }

    pub fn get(self) -> u64 {
        self.0.get()
    }
}

impl std::fmt::Display for LeaseId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl From<LeaseId> for u64 {
    fn from(id: LeaseId) -> u64 {
        id.get()
    }
}

/// The reply of `RL.FIXED`, `RL.SLIDING`, `RL.TOKEN` and `RL.CONCURRENT`
/// (and of each `RL.ALL` clause): six integers, and for `RL.CONCURRENT` a
/// seventh, the lease. Integers a later module adds after these are
/// ignored (docs/commands.md, The limiter reply).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Decision {
    /// This call was admitted and its cost recorded (always in `monitor`
    /// and `off` mode).
    pub allowed: bool,
    /// Units counted against the limit after this call (TOKEN: capacity
    /// minus tokens, rounded up).
    pub count: u64,
    pub retry_after: RetryAfter,
    /// The effective limit after any override; TOKEN: the capacity.
    pub limit: u64,
    /// `max(0, limit - count)`.
    pub remaining: u64,
    /// Milliseconds until the limiter is back to empty (TOKEN: full).
    pub reset_after_ms: u64,
    /// `RL.CONCURRENT`: the lease this call took, released or renewed;
    /// `None` when it holds none (denied, `PEEK`, `COST 0`, `off` mode, a
    /// lease not held) and for the other limiters.
    pub lease: Option<LeaseId>,
}

impl Decision {
    /// The reply's `retry_after`: ms, 0 when admitted, -1 when never.
    pub fn retry_after_ms(&self) -> i64 {
        self.retry_after.as_reply()
    }

    pub fn reset_after(&self) -> Duration {
        Duration::from_millis(self.reset_after_ms)
    }

    /// The first six integers as the module replied them.
    pub fn to_reply(&self) -> [i64; 6] {
        let int = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        [
            i64::from(self.allowed),
            int(self.count),
            self.retry_after.as_reply(),
            int(self.limit),
            int(self.remaining),
            int(self.reset_after_ms),
        ]
    }

    /// Reads the six integers, the lease when a seventh follows, and
    /// ignores whatever comes after: a reply may grow.
    fn from_items(items: &[Value]) -> Result<Decision, ParsingError> {
        let [allowed, count, retry, limit, remaining, reset, rest @ ..] = items else {
            return Err(bad(format!(
                "a limiter reply has at least six integers, not {}",
                items.len()
            )));
        };
        let lease = match rest.first() {
            None => None,
            Some(v) => match unsigned(v)? {
                0 => None,
                id => Some(LeaseId::new(id).ok_or_else(|| bad(format!("lease id {id}")))?),
            },
        };
        Ok(Decision {
            allowed: flag(allowed)?,
            count: unsigned(count)?,
            retry_after: retry_after_from_reply(int(retry)?)?,
            limit: unsigned(limit)?,
            remaining: unsigned(remaining)?,
            reset_after_ms: unsigned(reset)?,
            lease,
        })
    }
}

impl FromRedisValue for Decision {
    fn from_redis_value(v: Value) -> Result<Decision, ParsingError> {
        Decision::from_redis_value_ref(&v)
    }

    fn from_redis_value_ref(v: &Value) -> Result<Decision, ParsingError> {
        Decision::from_items(array(v)?)
    }
}

/// The reply of `RL.ALL`: `[allowed, retry_after, clause1, clause2, ...]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AllDecision {
    /// Every clause admitted the call and recorded it.
    pub allowed: bool,
    /// 0 when admitted; else the longest wait among the denying clauses, or
    /// never if any of them is never.
    pub retry_after: RetryAfter,
    /// Each clause's reply, in the order the clauses were given: the reply
    /// the clause alone gives when the call is admitted, its `PEEK` when
    /// denied (so its `allowed` says whether it was one of the reasons).
    pub decisions: Vec<Decision>,
}

impl AllDecision {
    pub fn retry_after_ms(&self) -> i64 {
        self.retry_after.as_reply()
    }

    /// The leases the call took, with their clauses' indexes: one per
    /// `CONCURRENT` clause when the call was admitted, none otherwise.
    pub fn leases(&self) -> impl Iterator<Item = (usize, LeaseId)> + '_ {
        self.decisions
            .iter()
            .enumerate()
            .filter_map(|(i, d)| Some((i, d.lease?)))
    }

    /// The clauses that refused the call.
    pub fn denied_by(&self) -> impl Iterator<Item = (usize, &Decision)> {
        self.decisions
            .iter()
            .enumerate()
            .filter(|(_, d)| !d.allowed)
    }
}

impl FromRedisValue for AllDecision {
    fn from_redis_value(v: Value) -> Result<AllDecision, ParsingError> {
        AllDecision::from_redis_value_ref(&v)
    }

    fn from_redis_value_ref(v: &Value) -> Result<AllDecision, ParsingError> {
        let items = array(v)?;
        let [allowed, retry, clauses @ ..] = items else {
            return Err(bad("an RL.ALL reply starts with allowed and retry_after"));
        };
        Ok(AllDecision {
            allowed: flag(allowed)?,
            retry_after: retry_after_from_reply(int(retry)?)?,
            decisions: clauses
                .iter()
                .map(Decision::from_redis_value_ref)
                .collect::<Result<_, _>>()?,
        })
    }
}

/// An override (`RL.OVERRIDE GET`): the limit, window and burst that
/// replace a limiter call's own when it names this override's key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Override {
    pub limit: u64,
    pub window_ms: u64,
    /// TOKEN's capacity; `None` when unset.
    pub burst: Option<u64>,
    /// The override's remaining life; `None` when it has no TTL.
    pub ttl_ms: Option<u64>,
}

impl Override {
    fn from_items(items: &[Value]) -> Result<Override, ParsingError> {
        // Fields a later module adds after these are ignored.
        let [limit, window, burst, ttl, ..] = items else {
            return Err(bad("an override is [limit, window_ms, burst, ttl_ms]"));
        };
        Ok(Override {
            limit: unsigned(limit)?,
            window_ms: unsigned(window)?,
            burst: Some(unsigned(burst)?).filter(|&b| b > 0),
            ttl_ms: match int(ttl)? {
                -1 => None,
                _ => Some(unsigned(ttl)?),
            },
        })
    }
}

impl FromRedisValue for Override {
    fn from_redis_value(v: Value) -> Result<Override, ParsingError> {
        Override::from_redis_value_ref(&v)
    }

    fn from_redis_value_ref(v: &Value) -> Result<Override, ParsingError> {
        Override::from_items(array(v)?)
    }
}

/// One page of `RL.OVERRIDE LIST`: the cursor to pass next (0 when the scan
/// is complete) and the overrides found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct OverridePage {
    pub cursor: u64,
    pub overrides: Vec<(Vec<u8>, Override)>,
}

impl FromRedisValue for OverridePage {
    fn from_redis_value(v: Value) -> Result<OverridePage, ParsingError> {
        OverridePage::from_redis_value_ref(&v)
    }

    fn from_redis_value_ref(v: &Value) -> Result<OverridePage, ParsingError> {
        let [cursor, found, ..] = array(v)? else {
            return Err(bad("an override page is [cursor, [[okey, ...], ...]]"));
        };
        let cursor = match cursor {
            Value::BulkString(b) => std::str::from_utf8(b).ok().and_then(|s| s.parse().ok()),
            Value::SimpleString(s) => s.parse().ok(),
            Value::Int(i) => u64::try_from(*i).ok(),
            _ => None,
        }
        .ok_or_else(|| bad("the override cursor is not an unsigned integer"))?;
        let overrides = array(found)?
            .iter()
            .map(|entry| {
                let [okey, rest @ ..] = array(entry)? else {
                    return Err(bad("an override entry starts with its key"));
                };
                let okey = match okey {
                    Value::BulkString(b) => b.clone(),
                    Value::SimpleString(s) => s.clone().into_bytes(),
                    _ => return Err(bad("an override key is a string")),
                };
                Ok((okey, Override::from_items(rest)?))
            })
            .collect::<Result<_, ParsingError>>()?;
        Ok(OverridePage { cursor, overrides })
    }
}

fn bad(message: impl Into<String>) -> ParsingError {
    ParsingError::from(message.into())
}

/// The items of an array (RESP3 sets and pushes are not librl replies).
fn array(v: &Value) -> Result<&[Value], ParsingError> {
    match v {
        Value::Array(items) => Ok(items),
        Value::Attribute { data, .. } => array(data),
        other => Err(bad(format!("expected an array, got {other:?}"))),
    }
}

fn int(v: &Value) -> Result<i64, ParsingError> {
    match v {
        Value::Int(i) => Ok(*i),
        other => Err(bad(format!("expected an integer, got {other:?}"))),
    }
}

fn unsigned(v: &Value) -> Result<u64, ParsingError> {
    let i = int(v)?;
    u64::try_from(i).map_err(|_| bad(format!("expected a non-negative integer, got {i}")))
}

fn flag(v: &Value) -> Result<bool, ParsingError> {
    match int(v)? {
        0 => Ok(false),
        1 => Ok(true),
        other => Err(bad(format!("allowed is 0 or 1, not {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(v: &[i64]) -> Value {
        Value::Array(v.iter().map(|&i| Value::Int(i)).collect())
    }

    #[test]
    fn decision_reads_six_integers() {
        let d: Decision = redis::from_redis_value(ints(&[0, 3, 59985, 3, 0, 59985])).unwrap();
        assert_eq!(
            d,
            Decision {
                allowed: false,
                count: 3,
                retry_after: RetryAfter::Ms(59985),
                limit: 3,
                remaining: 0,
                reset_after_ms: 59985,
                lease: None,
            }
        );
        assert_eq!(d.to_reply(), [0, 3, 59985, 3, 0, 59985]);
        let never: Decision = redis::from_redis_value(ints(&[0, 3, -1, 3, 0, 10])).unwrap();
        assert_eq!(never.retry_after, RetryAfter::Never);
        assert_eq!(never.retry_after_ms(), -1);
        assert_eq!(never.retry_after.duration(), None);
        for bad in [
            ints(&[1, 2, 3]),
            ints(&[1, 2, 3, 4, 5]),
            ints(&[1, 1, 0, 2, 1, 30000, -1]),
            ints(&[1, 1, 0, 2, 1, 30000, 1 << 53]),
            ints(&[2, 0, 0, 1, 1, 0]),
            ints(&[1, -5, 0, 1, 1, 0]),
            ints(&[0, 0, -2, 1, 1, 0]),
            Value::Nil,
            Value::Int(1),
        ] {
            assert!(
                redis::from_redis_value::<Decision>(bad.clone()).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn decision_reads_the_lease_and_ignores_what_follows() {
        let d: Decision =
            redis::from_redis_value(ints(&[1, 1, 0, 2, 1, 30000, 1754500000123001])).unwrap();
        assert_eq!(d.lease.map(LeaseId::get), Some(1754500000123001));
        assert_eq!(d.to_reply(), [1, 1, 0, 2, 1, 30000]);
        let none: Decision = redis::from_redis_value(ints(&[0, 2, 100, 2, 0, 100, 0])).unwrap();
        assert_eq!(none.lease, None, "0: no lease held");
        // A later module's fields, of any type, after the ones known.
        let mut longer = vec![Value::Int(1), Value::Int(1), Value::Int(0)];
        longer.extend([
            Value::Int(2),
            Value::Int(1),
            Value::Int(30000),
            Value::Int(7),
        ]);
        longer.extend([
            Value::BulkString(b"new".to_vec()),
            Value::Nil,
            ints(&[1, 2]),
        ]);
        let d: Decision = redis::from_redis_value(Value::Array(longer.clone())).unwrap();
        assert_eq!((d.count, d.lease.map(LeaseId::get)), (1, Some(7)));
        let six_and_more: Decision =
            redis::from_redis_value(ints(&[1, 1, 0, 10, 9, 1000, 0, 42, 43])).unwrap();
        assert_eq!(six_and_more.to_reply(), [1, 1, 0, 10, 9, 1000]);
        let all: AllDecision = redis::from_redis_value(Value::Array(vec![
            Value::Int(1),
            Value::Int(0),
            ints(&[1, 1, 0, 10, 9, 1000, 0, 99]),
            Value::Array(longer),
        ]))
        .unwrap();
        assert_eq!(
            all.leases().collect::<Vec<_>>(),
            [(1, LeaseId::new(7).unwrap())]
        );
        let o: Override = redis::from_redis_value(ints(&[5, 60000, 0, -1, 123])).unwrap();
        assert_eq!(o.limit, 5);
        let page: OverridePage = redis::from_redis_value(Value::Array(vec![
            Value::BulkString(b"0".to_vec()),
            Value::Array(vec![Value::Array(vec![
                Value::BulkString(b"o".to_vec()),
                Value::Int(5),
                Value::Int(1000),
                Value::Int(0),
                Value::Int(-1),
                Value::Int(8),
            ])]),
            Value::Int(3),
        ]))
        .unwrap();
        assert_eq!(page.overrides.len(), 1);
    }

    #[test]
    fn lease_ids_are_from_one_to_two_to_the_53_minus_one() {
        assert_eq!(LeaseId::new(0), None);
        assert_eq!(LeaseId::new(1).map(LeaseId::get), Some(1));
        assert_eq!(
            LeaseId::new(LeaseId::MAX).map(u64::from),
            Some((1 << 53) - 1)
        );
        assert_eq!(LeaseId::new(1 << 53), None);
    }

    #[test]
    fn all_decision_reads_each_clause() {
        let v = Value::Array(vec![
            Value::Int(0),
            Value::Int(500),
            ints(&[1, 1, 0, 10, 9, 1000]),
            ints(&[0, 5, 500, 5, 0, 500]),
        ]);
        let all: AllDecision = redis::from_redis_value(v).unwrap();
        assert!(!all.allowed);
        assert_eq!(all.retry_after, RetryAfter::Ms(500));
        assert_eq!(all.decisions.len(), 2);
        assert_eq!(all.denied_by().map(|(i, _)| i).collect::<Vec<_>>(), [1]);
        assert!(redis::from_redis_value::<AllDecision>(ints(&[1])).is_err());
    }

    #[test]
    fn override_reads_unset_burst_and_ttl() {
        let o: Option<Override> = redis::from_redis_value(ints(&[5, 60000, 0, -1])).unwrap();
        assert_eq!(
            o,
            Some(Override {
                limit: 5,
                window_ms: 60000,
                burst: None,
                ttl_ms: None
            })
        );
        let o: Option<Override> = redis::from_redis_value(Value::Nil).unwrap();
        assert_eq!(o, None);
        let o: Override = redis::from_redis_value(ints(&[5, 60000, 9, 1234])).unwrap();
        assert_eq!((o.burst, o.ttl_ms), (Some(9), Some(1234)));
    }

    #[test]
    fn override_page_reads_cursor_and_entries() {
        let v = Value::Array(vec![
            Value::BulkString(b"17".to_vec()),
            Value::Array(vec![Value::Array(vec![
                Value::BulkString(b"o:1".to_vec()),
                Value::Int(5),
                Value::Int(1000),
                Value::Int(0),
                Value::Int(-1),
            ])]),
        ]);
        let page: OverridePage = redis::from_redis_value(v).unwrap();
        assert_eq!(page.cursor, 17);
        assert_eq!(page.overrides[0].0, b"o:1");
        assert_eq!(page.overrides[0].1.limit, 5);
    }
}
