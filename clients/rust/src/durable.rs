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
    /// after a read (an override GET or LIST, a PEEK).
    pub(crate) fn wait_after(&self, call: &Prepared) -> Option<Prepared> {
        if call.effect == Effect::None || is_peek(call) {
            return None;
        }
        let mut cmd = Cmd::new();
        cmd.arg("WAIT").arg(self.replicas).arg(self.timeout_ms);
        Some(Prepared {
            cmd,
            target: call.target.clone(),
            effect: Effect::None,
            keys: Vec::new(),
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

/// The builders put PEEK last; an okey named "PEEK" follows OVERRIDE.
fn is_peek(call: &Prepared) -> bool {
    let argv = call.argv();
    match argv.as_slice() {
        [.., before, last] => last.as_slice() == b"PEEK" && before.as_slice() != b"OVERRIDE",
        _ => false,
    }
}

/// True for the error of a call that fewer replicas than asked acknowledged.
pub fn is_not_durable(e: &RedisError) -> bool {
    e.kind() == ErrorKind::Client && e.to_string().contains(NOT_DURABLE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Command, Fixed, OverrideGet};

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
