//! Opt-in durability: after a call that may write, `WAIT numreplicas
//! timeout` on the same connection (in a cluster, to the same node), so a
//! decision is returned only once that many replicas hold it.
//!
//! Why: replication is asynchronous. A primary that fails right after
//! admitting a call may not have passed it on; the promoted replica then
//! admits that many calls again (docs/memory.md, Failover). With
//! `durable`, an admission a replica does not hold is reported as an
//! error, so the caller applies its fail mode instead of acting on it.
//!
//! Cost: one more round trip per call (the `WAIT`), plus the time the
//! replica takes to acknowledge.

use std::time::Duration;

use redis::{Cmd, ErrorKind, RedisError, RedisResult, Value};

use crate::args::ArgError;
use crate::{Effect, Prepared};

/// The code an insufficiently replicated call's error starts with.
pub const NOT_DURABLE: &str = "NOTDURABLE";

/// `WAIT replicas timeout` after each call that may write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Durability {
    replicas: u64,
    timeout_ms: u64,
}

impl Durability {
    /// At least one replica, and a timeout of at least 1 ms: `WAIT n 0`
    /// would block the connection until the replicas answer, however long.
    pub fn new(replicas: u64, timeout: Duration) -> Result<Durability, ArgError> {
        if replicas == 0 {
            return Err(ArgError::new("durable: numreplicas must be at least 1"));
        }
        let timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        if timeout_ms == 0 {
            return Err(ArgError::new(
                "durable: the timeout must be at least 1 ms (WAIT with 0 waits forever)",
            ));
        }
        Ok(Durability {
            replicas,
            timeout_ms,
        })
    }

    pub fn replicas(&self) -> u64 {
        self.replicas
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    /// The `WAIT` to send after `call`, to the node `call` went to; none
    /// after a read (an override GET or LIST, a PEEK, a `COST 0` call).
    pub(crate) fn wait_after(&self, call: &Prepared) -> Option<Prepared> {
        if call.effect == Effect::None || only_reads(call) {
            return None;
        }
        let mut cmd = Cmd::new();
        cmd.arg("WAIT").arg(self.replicas).arg(self.timeout_ms);
        Some(Prepared {
            cmd,
            target: call.target.clone(),
            effect: Effect::None,
            keys: Vec::new(),
            held_ms: None,
        })
    }

    /// `WAIT`'s reply: Ok when enough replicas acknowledged, else the
    /// `NOTDURABLE` error (the call itself was decided and recorded on the
    /// primary).
    pub(crate) fn check(&self, reply: Value) -> RedisResult<()> {
        let acked: u64 = redis::from_redis_value(reply)?;
        if acked >= self.replicas {
            return Ok(());
        }
        Err(RedisError::from((
            ErrorKind::Client,
            NOT_DURABLE,
            format!(
                "the call reached {acked} of {} replicas within {} ms",
                self.replicas, self.timeout_ms
            ),
        )))
    }
}

/// True for a limiter call that writes nothing: a `PEEK`, or a call whose
/// every clause is a `COST 0` read. Reads the argv the builders write:
/// `RL.<X> key amount window options...`, or `RL.ALL` followed by clauses
/// `<X> key amount window options...`, each option's value after it
/// (`COST` before `RELEASE`/`RENEW` never: the builder sends one or the
/// other).
fn only_reads(call: &Prepared) -> bool {
    let argv = call.argv();
    let word = |i: usize| argv.get(i).map(Vec::as_slice);
    let (mut i, in_all) = match word(0) {
        Some(b"RL.ALL") => (1, true),
        Some(b"RL.FIXED" | b"RL.SLIDING" | b"RL.TOKEN" | b"RL.CONCURRENT") => (0, false),
        _ => return false,
    };
    let (mut clauses, mut reads, mut peek) = (0, 0, false);
    while i < argv.len() {
        // A clause (or the command itself): its name, key, amount, window.
        clauses += 1;
        i += 4;
        let mut cost_zero = false;
        while let Some(w) = word(i) {
            match w {
                b"FIXED" | b"SLIDING" | b"TOKEN" | b"CONCURRENT" if in_all => break,
                b"PEEK" => peek = true,
                b"COST" => {
                    cost_zero = word(i + 1) == Some(b"0");
                    i += 1;
                }
                b"REFUND" | b"BLOCK" | b"OVERRIDE" | b"BURST" | b"RESERVE" | b"WAIT" => i += 1,
                // A release or renewal writes, whatever its key is called.
                b"RELEASE" | b"RENEW" => {
                    cost_zero = false;
                    i += 1;
                }
                _ => {}
            }
            i += 1;
        }
        reads += usize::from(cost_zero);
    }
    peek || (clauses > 0 && reads == clauses)
}

/// True for the error of a call that fewer replicas than asked acknowledged.
pub fn is_not_durable(e: &RedisError) -> bool {
    e.kind() == ErrorKind::Client && e.to_string().contains(NOT_DURABLE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{All, Command, Concurrent, Fixed, LeaseId, OverrideGet, Sliding, Token};

    #[test]
    fn refuses_what_would_wait_forever_or_for_nobody() {
        assert!(Durability::new(0, Duration::from_secs(1)).is_err());
        assert!(Durability::new(1, Duration::from_micros(999)).is_err());
        let d = Durability::new(2, Duration::from_millis(250)).unwrap();
        assert_eq!((d.replicas(), d.timeout()), (2, Duration::from_millis(250)));
    }

    #[test]
    fn waits_after_writes_only_on_the_call_s_node() {
        let d = Durability::new(1, Duration::from_millis(100)).unwrap();
        let call = Fixed::new("k", 1, "1s").prepare().unwrap();
        let wait = d.wait_after(&call).expect("a limiter call may write");
        assert_eq!(
            wait.argv(),
            [b"WAIT".to_vec(), b"1".to_vec(), b"100".to_vec()]
        );
        assert_eq!(wait.target().ok(), call.target().ok());
        let read = OverrideGet::new("o").prepare().unwrap();
        assert!(d.wait_after(&read).is_none());
        let peek = Fixed::new("k", 1, "1s").peek().prepare().unwrap();
        assert!(d.wait_after(&peek).is_none());
        let okey_named_peek = Fixed::new("k", 1, "1s").override_key("PEEK");
        assert!(d.wait_after(&okey_named_peek.prepare().unwrap()).is_some());
        let read = Fixed::new("k", 1, "1s")
            .cost(0)
            .block("1h")
            .prepare()
            .unwrap();
        assert!(d.wait_after(&read).is_none());
        let reads = All::new()
            .clause(Fixed::new("a", 1, "1s").cost(0).override_key("COST"))
            .clause(Token::new("FIXED", 1, "1s").cost(0));
        assert!(d.wait_after(&reads.prepare().unwrap()).is_none());
        let writes = reads
            .clone()
            .clause(Sliding::new("s", 1, "1s").override_key("TOKEN"));
        assert!(d.wait_after(&writes.prepare().unwrap()).is_some());
        assert!(d.wait_after(&writes.peek().prepare().unwrap()).is_none());

        let lease = || Concurrent::new("c", 2, "30s");
        assert!(d.wait_after(&lease().prepare().unwrap()).is_some());
        assert!(d.wait_after(&lease().cost(0).prepare().unwrap()).is_none());
        assert!(d.wait_after(&lease().peek().prepare().unwrap()).is_none());
        let id = LeaseId::new(5).unwrap();
        let release = lease().cost(0).release(id).override_key("COST");
        assert!(d.wait_after(&release.prepare().unwrap()).is_some());
        let all_lease = All::new()
            .clause(Fixed::new("a", 1, "1s").cost(0))
            .clause(lease().cost(0));
        assert!(d.wait_after(&all_lease.prepare().unwrap()).is_none());
        let all_lease = all_lease.clause(Concurrent::new("d", 2, "30s").override_key("x"));
        assert!(d.wait_after(&all_lease.prepare().unwrap()).is_some());
    }

    #[test]
    fn too_few_acknowledgements_are_an_error() {
        let d = Durability::new(2, Duration::from_millis(100)).unwrap();
        assert!(d.check(Value::Int(2)).is_ok());
        let e = d.check(Value::Int(1)).unwrap_err();
        assert!(is_not_durable(&e), "{e}");
        assert!(e.to_string().contains("reached 1 of 2 replicas"), "{e}");
    }
}
