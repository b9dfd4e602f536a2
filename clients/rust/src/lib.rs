//! Typed access to librl's rate-limiting commands from redis-rs.
//!
//! Each command is a builder that mirrors the grammar and becomes a
//! [`redis::Cmd`] addressed to the slot of its key; replies are
//! [`Decision`], [`AllDecision`], [`Override`] and [`OverridePage`], which
//! implement [`redis::FromRedisValue`] for RESP2 and RESP3.
//!
//! ```no_run
//! use std::time::Duration;
//! use librl_client::{All, Command, Fixed, Sliding};
//!
//! # fn main() -> redis::RedisResult<()> {
//! let mut con = redis::Client::open("redis://127.0.0.1/")?.get_connection()?;
//! let d = Fixed::new("user:42", 10, Duration::from_secs(60)).query(&mut con)?;
//! if !d.allowed {
//!     println!("retry in {:?}", d.retry_after.duration());
//! }
//! let all = All::new()
//!     .clause(Fixed::new("{user:42}:second", 5, Duration::from_secs(1)).aligned())
//!     .clause(Sliding::new("{user:42}:minute", 100, "1m"))
//!     .query(&mut con)?;
//! println!("admitted by all: {}", all.allowed);
//! # Ok(()) }
//! ```
//!
//! The same `query` works on a `redis::cluster::ClusterConnection`, and
//! `query_async` on a `MultiplexedConnection`, a `ConnectionManager` or a
//! `redis::cluster_async::ClusterConnection`: in a cluster every call goes
//! straight to the primary owning its key's slot (`RL.ALL` and
//! `RL.OVERRIDE` included, whose second word is not a key), with no
//! `COMMAND GETKEYS` round trip; keys of one call that hash to different
//! slots are refused before sending, with a hint to use a hash tag.
//!
//! [`Limiter`] and [`AsyncLimiter`] hold a connection and an optional
//! [`DenialCache`], which answers a call that was just denied locally until
//! its `retry_after` has passed (a second at most, by default); they retry
//! a call whose slot migrates, and take `RL.CONCURRENT` leases that give
//! their slots back ([`Lease`], [`Limiter::with_lease`]).

mod args;
mod cache;
mod command;
mod concurrent;
mod conn;
mod durable;
mod lease;
mod limiter;
mod overrides;
mod reply;
mod retry;
mod slot;

use std::future::Future;

use redis::{Cmd, FromRedisValue, RedisResult};

pub use args::{ArgError, DurationArg, MAX_AMOUNT, MAX_DURATION_MS};
pub use cache::DenialCache;
pub use command::{All, Clause, Fixed, Sliding, Token};
pub use concurrent::Concurrent;
pub use conn::{AsyncConnection, Connection, OpenConnection};
pub use durable::{is_not_durable, Durability, NOT_DURABLE};
pub use lease::{Acquire, HeldLease, KeepAlive, Lease, LeaseLost, Refused};
pub use limiter::{AsyncLimiter, Limiter};
pub use overrides::{OverrideDel, OverrideGet, OverrideList, OverrideSet};
pub use reply::{AllDecision, Decision, LeaseId, Override, OverridePage, RetryAfter};
pub use retry::{short_cluster_retries, DEFAULT_TRY_AGAIN_WAIT};
pub use slot::{slot, Target};

/// A librl command: its argv and where it goes, and its typed reply.
pub trait Command {
    type Output: FromRedisValue + sealed::Reply + Send + 'static;

    /// Checks the arguments and builds the command. Nothing is sent.
    fn prepare(&self) -> Result<Prepared, ArgError>;

    /// Sends the command on `con` and reads its reply.
    fn query<C: Connection + ?Sized>(&self, con: &mut C) -> RedisResult<Self::Output> {
        let prepared = self.prepare()?;
        Ok(redis::from_redis_value(con.send(&prepared)?)?)
    }

    /// Sends the command on `con` and reads its reply.
    fn query_async<C: AsyncConnection>(
        &self,
        con: &mut C,
    ) -> impl Future<Output = RedisResult<Self::Output>> + Send {
        let prepared = self.prepare();
        async move {
            let prepared = prepared?;
            Ok(redis::from_redis_value(con.send(&prepared).await?)?)
        }
    }
}

/// A checked command, ready to send.
#[derive(Clone, Debug)]
pub struct Prepared {
    cmd: Cmd,
    /// An error when a cluster could not run it: keys in different slots.
    target: Result<Target, ArgError>,
    effect: Effect,
    /// The keys and override keys the call names, for the cache to
    /// forget after a refund or on `forget_key`.
    keys: Vec<Vec<u8>>,
    /// The `max_wait` (ms) of a call the server may hold (a `WAIT`), which
    /// holds the connection it is sent on.
    held_ms: Option<u64>,
}

/// What a command means to the [`DenialCache`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Effect {
    /// A limiter call whose denial may be remembered.
    Cacheable,
    /// A limiter call that refunds: forget its keys' denials.
    Refund,
    /// An override change: forget every denial.
    ClearAll,
    /// A limiter call whose denial is never remembered (`RL.CONCURRENT`,
    /// an `RL.ALL` taking a lease: a release elsewhere frees a slot sooner
    /// than the reply's `retry_after`).
    Uncached,
    /// A read.
    None,
}

impl Prepared {
    /// A command on one key, routed by that key's slot.
    fn for_key(cmd: Cmd, key: &[u8], effect: Effect) -> Prepared {
        Prepared {
            cmd,
            target: Ok(Target::Slot(slot(key))),
            effect,
            keys: Vec::new(),
            held_ms: None,
        }
    }

    /// The command, as a standalone connection sends it.
    pub fn cmd(&self) -> &Cmd {
        &self.cmd
    }

    /// The command's words, name first.
    pub fn argv(&self) -> Vec<Vec<u8>> {
        self.cmd
            .args_iter()
            .filter_map(|arg| match arg {
                redis::Arg::Simple(word) => Some(word.to_vec()),
                _ => None,
            })
            .collect()
    }

    /// Where a cluster connection sends it; an error when its keys do not
    /// share a slot.
    pub fn target(&self) -> Result<&Target, &ArgError> {
        self.target.as_ref()
    }

    /// The routing redis-rs's cluster `route_command` takes.
    pub fn routing_info(&self) -> Result<redis::cluster_routing::RoutingInfo, ArgError> {
        self.target.clone().map(|t| t.routing_info())
    }
}

/// The argv of a command as text, for tests.
#[cfg(test)]
pub(crate) fn argv_text(command: &impl Command) -> Vec<String> {
    match command.prepare() {
        Ok(prepared) => prepared
            .argv()
            .iter()
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .collect(),
        Err(e) => panic!("{e}"),
    }
}

pub(crate) mod sealed {
    use crate::cache::Cached;

    /// Replies the denial cache may keep: only limiter decisions.
    pub trait Reply: Sized {
        fn to_cached(&self) -> Option<Cached> {
            None
        }

        fn from_cached(_cached: Cached) -> Option<Self> {
            None
        }
    }
}
