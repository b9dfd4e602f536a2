//! The builder for `RL.CONCURRENT`, mirroring its grammar:
//!
//! ```text
//! RL.CONCURRENT key limit lease [COST n] [WAIT max_wait] [OVERRIDE okey] [PEEK]
//! RL.CONCURRENT key limit lease RELEASE id | RENEW id [OVERRIDE okey] [PEEK]
//! ```
//!
//! It is a [`Command`] like the other limiters (its reply a [`Decision`]
//! whose `lease` is the seventh integer) and an [`All`](crate::All)
//! clause; the lease guards built on it are in `lease.rs`.

use crate::args::{amount, ms_word, ArgError, DurationArg};
use crate::reply::{Decision, LeaseId};
use crate::slot::{common_slot, Target};
use crate::{Command, Effect, Prepared};

/// What an `RL.CONCURRENT` call does.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Op {
    /// Takes `cost` slots as one lease (0: reads the slots held).
    Acquire {
        cost: u64,
        wait: Option<DurationArg>,
    },
    Release(LeaseId),
    Renew(LeaseId),
}

/// `RL.CONCURRENT key limit lease`: at most `limit` slots held at once, each
/// call taking its slots as a lease that ends when released, or by itself
/// `lease` after it was taken (or last renewed).
///
/// ```
/// use librl_client::{Concurrent, LeaseId};
///
/// let acquire = Concurrent::new("llm:inflight:{key:7f3a}", 5, "30s").cost(2);
/// let release = acquire.clone().release(LeaseId::new(1754500000123001).unwrap());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Concurrent {
    key: Vec<u8>,
    limit: u64,
    lease: DurationArg,
    op: Op,
    okey: Option<Vec<u8>>,
    peek: bool,
}

impl Concurrent {
    pub fn new(key: impl AsRef<[u8]>, limit: u64, lease: impl Into<DurationArg>) -> Concurrent {
        Concurrent {
            key: key.as_ref().to_vec(),
            limit,
            lease: lease.into(),
            op: Op::Acquire {
                cost: 1,
                wait: None,
            },
            okey: None,
            peek: false,
        }
    }

    /// Slots this lease takes (default 1); `cost(0)` reads the slots held
    /// and takes no lease. Replaces an earlier `release` or `renew`.
    pub fn cost(mut self, n: u64) -> Concurrent {
        let wait = match self.op {
            Op::Acquire { wait, .. } => wait,
            _ => None,
        };
        self.op = Op::Acquire { cost: n, wait };
        self
    }

    /// A refused call waits on the server, up to `max_wait` (0 ms allowed),
    /// for a `RELEASE` or a lease's end to free its slots. The server holds
    /// the connection meanwhile: send it on a connection of its own
    /// ([`AsyncLimiter::with_wait_connections`](crate::AsyncLimiter::with_wait_connections)
    /// does). Replaces an earlier `release` or `renew`.
    pub fn wait(mut self, max_wait: impl Into<DurationArg>) -> Concurrent {
        let cost = match self.op {
            Op::Acquire { cost, .. } => cost,
            _ => 1,
        };
        self.op = Op::Acquire {
            cost,
            wait: Some(max_wait.into()),
        };
        self
    }

    /// `RELEASE id`: frees the lease's slots at once. Replaces `cost`,
    /// `wait` and `renew`.
    pub fn release(mut self, id: LeaseId) -> Concurrent {
        self.op = Op::Release(id);
        self
    }

    /// `RENEW id`: the lease lasts `lease` from now (never shorter than it
    /// already does). Replaces `cost`, `wait` and `release`.
    pub fn renew(mut self, id: LeaseId) -> Concurrent {
        self.op = Op::Renew(id);
        self
    }

    /// Reads the limit (and, as the lease's length, the window) of the
    /// override at `okey`, if one is there. In a cluster `okey` must share
    /// the key's slot.
    pub fn override_key(mut self, okey: impl AsRef<[u8]>) -> Concurrent {
        self.okey = Some(okey.as_ref().to_vec());
        self
    }

    /// Answers as the call would and changes nothing. In an
    /// [`All`](crate::All), use [`All::peek`](crate::All::peek) instead.
    pub fn peek(mut self) -> Concurrent {
        self.peek = true;
        self
    }

    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The call without its `OVERRIDE`.
    pub(crate) fn without_override(mut self) -> Concurrent {
        self.okey = None;
        self
    }

    pub(crate) fn okey(&self) -> Option<&[u8]> {
        self.okey.as_deref()
    }

    pub(crate) fn is_peek(&self) -> bool {
        self.peek
    }

    /// The lease's length in ms, checked.
    pub fn lease_ms(&self) -> Result<u64, ArgError> {
        self.lease.millis("lease", false)
    }

    /// The slots an acquire takes; `None` for a release or renewal.
    pub(crate) fn slots(&self) -> Option<u64> {
        match self.op {
            Op::Acquire { cost, .. } => Some(cost),
            _ => None,
        }
    }

    /// The `max_wait` of an acquire with `WAIT`, in ms, checked.
    pub(crate) fn wait_ms(&self) -> Result<Option<u64>, ArgError> {
        match &self.op {
            Op::Acquire { wait: Some(d), .. } => d.millis("WAIT", true).map(Some),
            _ => Ok(None),
        }
    }

    /// Key, limit, lease and options, without PEEK. In an `RL.ALL` only
    /// COST and OVERRIDE are options of the clause.
    pub(crate) fn words(&self, in_all: bool) -> Result<Vec<Vec<u8>>, ArgError> {
        let mut words = vec![
            self.key.clone(),
            amount("limit", self.limit)?.to_string().into_bytes(),
            ms_word(self.lease_ms()?).into_bytes(),
        ];
        let mut push = |option: &str, value: String| {
            words.push(option.as_bytes().to_vec());
            words.push(value.into_bytes());
        };
        match &self.op {
            Op::Acquire { cost, wait } => {
                match cost {
                    1 => {}
                    0 => push("COST", "0".to_string()),
                    n => push("COST", amount("COST", *n)?.to_string()),
                }
                if let Some(d) = wait {
                    if in_all {
                        return Err(ArgError::new(
                            "WAIT is not an option of an RL.ALL CONCURRENT clause",
                        ));
                    }
                    push("WAIT", ms_word(d.millis("WAIT", true)?));
                }
            }
            Op::Release(_) | Op::Renew(_) if in_all => {
                return Err(ArgError::new(
                    "RELEASE and RENEW are RL.CONCURRENT's alone, not an RL.ALL clause's",
                ));
            }
            Op::Release(id) => push("RELEASE", id.to_string()),
            Op::Renew(id) => push("RENEW", id.to_string()),
        }
        if let Some(okey) = &self.okey {
            words.push(b"OVERRIDE".to_vec());
            words.push(okey.clone());
        }
        Ok(words)
    }
}

impl Command for Concurrent {
    type Output = Decision;

    fn prepare(&self) -> Result<Prepared, ArgError> {
        let mut cmd = redis::cmd("RL.CONCURRENT");
        for word in self.words(false)? {
            cmd.arg(word);
        }
        if self.peek {
            cmd.arg("PEEK");
        }
        let keys: Vec<&[u8]> = std::iter::once(self.key.as_slice())
            .chain(self.okey.as_deref())
            .collect();
        Ok(Prepared {
            cmd,
            target: common_slot("RL.CONCURRENT", &keys).map(Target::Slot),
            // A refusal frees up when any holder releases, which the cache
            // cannot see: never remembered.
            effect: Effect::Uncached,
            keys: keys.iter().map(|k| k.to_vec()).collect(),
            held_ms: if self.peek { None } else { self.wait_ms()? },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::argv_text as argv;
    use crate::slot::slot;
    use std::time::Duration;

    fn id(n: u64) -> LeaseId {
        LeaseId::new(n).unwrap()
    }

    #[test]
    fn concurrent_argv() {
        assert_eq!(
            argv(&Concurrent::new("k", 5, Duration::from_secs(30))),
            ["RL.CONCURRENT", "k", "5", "30000ms"]
        );
        assert_eq!(
            argv(
                &Concurrent::new("k", 5, "1m")
                    .cost(2)
                    .wait("10s")
                    .override_key("o")
                    .peek()
            ),
            [
                "RL.CONCURRENT",
                "k",
                "5",
                "60000ms",
                "COST",
                "2",
                "WAIT",
                "10000ms",
                "OVERRIDE",
                "o",
                "PEEK"
            ]
        );
        assert_eq!(
            argv(&Concurrent::new("k", 5, "30s").wait("10s").cost(3)),
            [
                "RL.CONCURRENT",
                "k",
                "5",
                "30000ms",
                "COST",
                "3",
                "WAIT",
                "10000ms"
            ],
            "cost keeps an earlier wait"
        );
        assert_eq!(
            argv(&Concurrent::new("k", 5, "30s").cost(0)),
            ["RL.CONCURRENT", "k", "5", "30000ms", "COST", "0"]
        );
        let max = LeaseId::MAX.to_string();
        assert_eq!(
            argv(
                &Concurrent::new("k", 5, "30s")
                    .cost(4)
                    .release(id(LeaseId::MAX))
            ),
            [
                "RL.CONCURRENT",
                "k",
                "5",
                "30000ms",
                "RELEASE",
                max.as_str()
            ],
            "release replaces cost"
        );
        assert_eq!(
            argv(
                &Concurrent::new("k", 5, "2m")
                    .wait("1s")
                    .renew(id(7))
                    .override_key("o")
            ),
            [
                "RL.CONCURRENT",
                "k",
                "5",
                "120000ms",
                "RENEW",
                "7",
                "OVERRIDE",
                "o"
            ]
        );
        assert_eq!(
            argv(&Concurrent::new("k", 5, "30s").renew(id(7)).cost(1)),
            ["RL.CONCURRENT", "k", "5", "30000ms"],
            "cost replaces renew"
        );
    }

    #[test]
    fn refuses_bad_arguments_before_sending() {
        let error = |c: Concurrent| c.prepare().unwrap_err().message().to_string();
        assert_eq!(
            error(Concurrent::new("k", 0, "30s")),
            "limit must be an integer from 1 to 2^50, not 0"
        );
        assert!(error(Concurrent::new("k", 1, Duration::ZERO)).starts_with("lease must be"));
        assert!(error(Concurrent::new("k", 1, "1.5s")).starts_with("lease must be"));
        assert!(error(Concurrent::new("k", 1, "1s").cost(1 << 51)).starts_with("COST must be"));
        assert!(error(Concurrent::new("k", 1, "1s").wait("3651d")).starts_with("WAIT must be"));
        assert!(Concurrent::new("k", 1, "1s").wait("0").prepare().is_ok());
    }

    #[test]
    fn routes_by_its_key_and_marks_a_wait_as_held() {
        let p = Concurrent::new("{t}k", 1, "1s")
            .override_key("{t}o")
            .prepare()
            .unwrap();
        assert_eq!(p.target, Ok(Target::Slot(slot(b"t"))));
        assert_eq!((p.effect, p.held_ms), (Effect::Uncached, None));
        let split = Concurrent::new("a", 1, "1s").override_key("b").prepare();
        assert!(split.unwrap().target.is_err());
        let held = Concurrent::new("k", 1, "1s").wait("250ms").prepare();
        assert_eq!(held.unwrap().held_ms, Some(250));
        let peek = Concurrent::new("k", 1, "1s").wait("250ms").peek().prepare();
        assert_eq!(peek.unwrap().held_ms, None, "a PEEK never waits");
    }
}
