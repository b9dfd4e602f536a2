//! A connection with an optional denial cache in front of it; calls retried
//! while their slot migrates (`retry.rs`); held calls (`WAIT`) on
//! connections of their own.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::{ErrorKind, FromRedisValue, RedisError, RedisResult, Value};

use crate::cache::DenialCache;
use crate::conn::{AsyncConnection, Connection, OpenConnection};
use crate::durable::Durability;
use crate::retry::{Backoff, DEFAULT_TRY_AGAIN_WAIT};
use crate::sealed::Reply;
use crate::{ArgError, Command, Prepared};

/// Runs librl commands on a blocking connection (standalone or cluster),
/// answering repeated denied calls from a [`DenialCache`] when given one.
///
/// ```no_run
/// use librl_client::{DenialCache, Fixed, Limiter};
///
/// # fn main() -> redis::RedisResult<()> {
/// let con = redis::Client::open("redis://127.0.0.1/")?.get_connection()?;
/// let mut limiter = Limiter::new(con).with_cache(DenialCache::new());
/// let decision = limiter.run(&Fixed::new("login:203.0.113.7", 5, "15m").block("1h"))?;
/// # Ok(()) }
/// ```
///
/// The connection is the limiter's alone, so a `WAIT` is sent on it: give
/// it a read timeout longer than the `max_wait` (redis-rs sets none by
/// default).
pub struct Limiter<C> {
    con: C,
    cache: Option<DenialCache>,
    durability: Option<Durability>,
    try_again: Duration,
}

impl<C: Connection> Limiter<C> {
    pub fn new(con: C) -> Limiter<C> {
        Limiter {
            con,
            cache: None,
            durability: None,
            try_again: DEFAULT_TRY_AGAIN_WAIT,
        }
    }

    /// After each call that may write, `WAIT numreplicas timeout` (one
    /// more round trip): a decision fewer replicas acknowledged is an
    /// error (see [`crate::is_not_durable`]). Refuses 0 replicas and a
    /// timeout under 1 ms.
    pub fn durable(mut self, numreplicas: u64, timeout: Duration) -> Result<Limiter<C>, ArgError> {
        self.durability = Some(Durability::new(numreplicas, timeout)?);
        Ok(self)
    }

    /// Remembers denials (see [`DenialCache`] for what that promises).
    pub fn with_cache(mut self, cache: DenialCache) -> Limiter<C> {
        self.cache = Some(cache);
        self
    }

    /// How long a call keeps retrying while its slot migrates
    /// ([`DEFAULT_TRY_AGAIN_WAIT`](crate::DEFAULT_TRY_AGAIN_WAIT), 5 s,
    /// unless set); `Duration::ZERO` leaves it to redis-rs's own retries.
    pub fn with_try_again_wait(mut self, window: Duration) -> Limiter<C> {
        self.try_again = window;
        self
    }

    /// Sends `command`, or answers it from the cache.
    pub fn run<Q: Command + ?Sized>(&mut self, command: &Q) -> RedisResult<Q::Output> {
        let prepared = command.prepare()?;
        self.run_prepared(&prepared)
    }

    pub(crate) fn run_prepared<R: FromRedisValue + Reply>(
        &mut self,
        prepared: &Prepared,
    ) -> RedisResult<R> {
        let cache = self.cache.clone();
        if let Some(answer) = cache
            .as_ref()
            .and_then(|c| c.lookup(prepared, Instant::now()))
        {
            return Ok(answer);
        }
        let generation = cache.as_ref().map_or(0, DenialCache::generation);
        let sent = Instant::now();
        let reply = self
            .send(prepared)
            .and_then(|v| Ok(redis::from_redis_value::<R>(v)?));
        if let Some(cache) = &cache {
            cache.record(
                prepared,
                reply.as_ref().ok(),
                generation,
                sent,
                Instant::now(),
            );
        }
        let reply = reply?;
        if let Some((d, wait)) = self
            .durability
            .and_then(|d| Some((d, d.wait_after(prepared)?)))
        {
            d.check(self.con.send(&wait)?)?;
        }
        Ok(reply)
    }

    /// Sends the call, retrying it while its slot migrates.
    fn send(&mut self, prepared: &Prepared) -> RedisResult<Value> {
        let mut backoff = Backoff::new(Instant::now(), self.try_again);
        loop {
            match self.con.send(prepared) {
                Err(e) => match backoff.pause(&e, Instant::now()) {
                    Some(pause) => std::thread::sleep(pause),
                    None => return Err(e),
                },
                ok => return ok,
            }
        }
    }

    pub fn cache(&self) -> Option<&DenialCache> {
        self.cache.as_ref()
    }

    pub fn connection(&mut self) -> &mut C {
        &mut self.con
    }

    pub fn into_connection(self) -> C {
        self.con
    }
}

/// Runs librl commands on a tokio connection (a `MultiplexedConnection`,
/// `ConnectionManager` or cluster connection, which are cheap to clone):
/// `run` takes `&self`, so one `AsyncLimiter` serves concurrent tasks.
///
/// ```no_run
/// use librl_client::{All, AsyncLimiter, DenialCache, Fixed, Sliding};
///
/// # async fn f() -> redis::RedisResult<()> {
/// let client = redis::cluster::ClusterClient::new(vec!["redis://127.0.0.1:7000/"])?;
/// let limiter = AsyncLimiter::new(client.get_async_connection().await?)
///     .with_cache(DenialCache::new())
///     .with_wait_connections(client);
/// let all = limiter
///     .run(&All::new()
///         .clause(Fixed::new("{ip:203.0.113.7}:s", 5, "1s").aligned())
///         .clause(Sliding::new("{ip:203.0.113.7}:m", 100, "1m")))
///     .await?;
/// # Ok(()) }
/// ```
///
/// The connection is shared by every task calling through the limiter, so
/// a call the server holds (a `WAIT`) is never sent on it: it goes on a
/// connection of its own, from [`AsyncLimiter::with_wait_connections`],
/// and without one it is refused before sending.
pub struct AsyncLimiter<C> {
    con: C,
    cache: Option<DenialCache>,
    durability: Option<Durability>,
    try_again: Duration,
    waits: Option<Arc<dyn HeldCalls>>,
}

impl<C: Clone> Clone for AsyncLimiter<C> {
    fn clone(&self) -> AsyncLimiter<C> {
        AsyncLimiter {
            con: self.con.clone(),
            cache: self.cache.clone(),
            durability: self.durability,
            try_again: self.try_again,
            waits: self.waits.clone(),
        }
    }
}

impl<C: AsyncConnection + Clone + Sync> AsyncLimiter<C> {
    pub fn new(con: C) -> AsyncLimiter<C> {
        AsyncLimiter {
            con,
            cache: None,
            durability: None,
            try_again: DEFAULT_TRY_AGAIN_WAIT,
            waits: None,
        }
    }

    /// As [`Limiter::durable`]: `WAIT numreplicas timeout` after each call
    /// that may write, on the same connection.
    pub fn durable(
        mut self,
        numreplicas: u64,
        timeout: Duration,
    ) -> Result<AsyncLimiter<C>, ArgError> {
        self.durability = Some(Durability::new(numreplicas, timeout)?);
        Ok(self)
    }

    /// Remembers denials (see [`DenialCache`] for what that promises).
    pub fn with_cache(mut self, cache: DenialCache) -> AsyncLimiter<C> {
        self.cache = Some(cache);
        self
    }

    /// As [`Limiter::with_try_again_wait`].
    pub fn with_try_again_wait(mut self, window: Duration) -> AsyncLimiter<C> {
        self.try_again = window;
        self
    }

    /// Sends each call the server may hold (`WAIT`) on a connection of its
    /// own, opened by `opener` (a `redis::Client` or
    /// `redis::cluster::ClusterClient`, or your own pool). Up to 8 idle
    /// ones are kept for the next such calls. A held call is given its
    /// `max_wait`, plus the retry window and 5 s, to be answered.
    pub fn with_wait_connections<O: OpenConnection>(mut self, opener: O) -> AsyncLimiter<C> {
        self.waits = Some(Arc::new(WaitPool {
            opener,
            idle: Mutex::new(Vec::new()),
        }));
        self
    }

    /// Sends `command`, or answers it from the cache.
    pub async fn run<Q: Command + ?Sized>(&self, command: &Q) -> RedisResult<Q::Output> {
        let prepared = command.prepare()?;
        self.run_prepared(&prepared).await
    }

    pub(crate) async fn run_prepared<R: FromRedisValue + Reply>(
        &self,
        prepared: &Prepared,
    ) -> RedisResult<R> {
        if let Some(answer) = self
            .cache
            .as_ref()
            .and_then(|cache| cache.lookup(prepared, Instant::now()))
        {
            return Ok(answer);
        }
        let generation = self.cache.as_ref().map_or(0, DenialCache::generation);
        let sent = Instant::now();
        let reply = match prepared.held_ms {
            None => {
                let mut con = self.con.clone();
                call_on(&mut con, prepared, self.durability, self.try_again).await
            }
            Some(max_wait_ms) => match &self.waits {
                Some(waits) => {
                    let held = HeldCall {
                        prepared: prepared.clone(),
                        durability: self.durability,
                        try_again: self.try_again,
                        max_wait: Duration::from_millis(max_wait_ms),
                    };
                    waits.send(held).await
                }
                None => Err(RedisError::from(ArgError::new(
                    "a WAIT holds the connection it is sent on: give the AsyncLimiter \
                     connections of their own for it with with_wait_connections",
                ))),
            },
        };
        let reply = reply.and_then(|v| Ok(redis::from_redis_value::<R>(v)?));
        if let Some(cache) = &self.cache {
            cache.record(
                prepared,
                reply.as_ref().ok(),
                generation,
                sent,
                Instant::now(),
            );
        }
        reply
    }

    pub fn cache(&self) -> Option<&DenialCache> {
        self.cache.as_ref()
    }

    pub fn connection(&self) -> &C {
        &self.con
    }
}

/// Sends `prepared` on `con`, retrying it while its slot migrates, then
/// the durability `WAIT` when there is one.
async fn call_on<D: AsyncConnection>(
    con: &mut D,
    prepared: &Prepared,
    durability: Option<Durability>,
    try_again: Duration,
) -> RedisResult<Value> {
    let mut backoff = Backoff::new(Instant::now(), try_again);
    let value = loop {
        match con.send(prepared).await {
            Err(e) => match backoff.pause(&e, Instant::now()) {
                Some(pause) => tokio::time::sleep(pause).await,
                None => return Err(e),
            },
            Ok(v) => break v,
        }
    };
    if let Some((d, wait)) = durability.and_then(|d| Some((d, d.wait_after(prepared)?))) {
        d.check(con.send(&wait).await?)?;
    }
    Ok(value)
}

/// A call the server may hold, with what sending it needs.
struct HeldCall {
    prepared: Prepared,
    durability: Option<Durability>,
    try_again: Duration,
    max_wait: Duration,
}

/// Beyond a held call's `max_wait`, how long its answer may take to come.
const HELD_GRACE: Duration = Duration::from_secs(5);

/// Idle connections kept for held calls.
const IDLE_HELD: usize = 8;

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Sends held calls on connections of their own (type-erased, so that
/// `AsyncLimiter` keeps one type parameter).
trait HeldCalls: Send + Sync {
    fn send(&self, call: HeldCall) -> BoxFuture<'_, RedisResult<Value>>;
}

struct WaitPool<O: OpenConnection> {
    opener: O,
    idle: Mutex<Vec<O::Connection>>,
}

impl<O: OpenConnection> HeldCalls for WaitPool<O> {
    fn send(&self, call: HeldCall) -> BoxFuture<'_, RedisResult<Value>> {
        Box::pin(async move {
            let idle = self
                .idle
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .pop();
            let mut con = match idle {
                Some(con) => con,
                None => self.opener.open().await?,
            };
            let bound = call.max_wait + call.try_again + HELD_GRACE;
            let answered = tokio::time::timeout(
                bound,
                call_on(&mut con, &call.prepared, call.durability, call.try_again),
            )
            .await;
            // A connection whose call was not answered may still get that
            // answer: it is dropped, not kept.
            let Ok(reply) = answered else {
                return Err(RedisError::from((
                    ErrorKind::Io,
                    "librl",
                    format!("a held call was not answered within {bound:?}"),
                )));
            };
            if !matches!(&reply, Err(e) if e.is_unrecoverable_error() || e.is_io_error()) {
                let mut idle = self
                    .idle
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                if idle.len() < IDLE_HELD {
                    idle.push(con);
                }
            }
            reply
        })
    }
}
