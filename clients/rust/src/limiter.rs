//! A connection with an optional denial cache in front of it.

use std::time::{Duration, Instant};

use redis::RedisResult;

use crate::cache::DenialCache;
use crate::conn::{AsyncConnection, Connection};
use crate::durable::Durability;
use crate::{ArgError, Command};

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
pub struct Limiter<C> {
    con: C,
    cache: Option<DenialCache>,
    durability: Option<Durability>,
}

impl<C: Connection> Limiter<C> {
    pub fn new(con: C) -> Limiter<C> {
        Limiter {
            con,
            cache: None,
            durability: None,
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

    /// Sends `command`, or answers it from the cache.
    pub fn run<Q: Command + ?Sized>(&mut self, command: &Q) -> RedisResult<Q::Output> {
        let prepared = command.prepare()?;
        let Some(cache) = &self.cache else {
            let reply = redis::from_redis_value(self.con.send(&prepared)?)?;
            self.wait_for_replicas(&prepared)?;
            return Ok(reply);
        };
        if let Some(answer) = cache.lookup(&prepared, Instant::now()) {
            return Ok(answer);
        }
        let reply = self
            .con
            .send(&prepared)
            .and_then(|v| Ok(redis::from_redis_value::<Q::Output>(v)?));
        cache.record(&prepared, reply.as_ref().ok(), Instant::now());
        let reply = reply?;
        self.wait_for_replicas(&prepared)?;
        Ok(reply)
    }

    fn wait_for_replicas(&mut self, call: &crate::Prepared) -> RedisResult<()> {
        match self.durability.and_then(|d| Some((d, d.wait_after(call)?))) {
            Some((d, wait)) => d.check(self.con.send(&wait)?),
            None => Ok(()),
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
///     .with_cache(DenialCache::new());
/// let all = limiter
///     .run(&All::new()
///         .clause(Fixed::new("{ip:203.0.113.7}:s", 5, "1s").aligned())
///         .clause(Sliding::new("{ip:203.0.113.7}:m", 100, "1m")))
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct AsyncLimiter<C> {
    con: C,
    cache: Option<DenialCache>,
    durability: Option<Durability>,
}

impl<C: AsyncConnection + Clone + Sync> AsyncLimiter<C> {
    pub fn new(con: C) -> AsyncLimiter<C> {
        AsyncLimiter {
            con,
            cache: None,
            durability: None,
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

    /// Sends `command`, or answers it from the cache.
    pub async fn run<Q: Command + ?Sized>(&self, command: &Q) -> RedisResult<Q::Output> {
        let prepared = command.prepare()?;
        if let Some(answer) = self
            .cache
            .as_ref()
            .and_then(|cache| cache.lookup(&prepared, Instant::now()))
        {
            return Ok(answer);
        }
        let mut con = self.con.clone();
        let reply = match con.send(&prepared).await {
            Ok(v) => redis::from_redis_value::<Q::Output>(v).map_err(Into::into),
            Err(e) => Err(e),
        };
        if let Some(cache) = &self.cache {
            cache.record(&prepared, reply.as_ref().ok(), Instant::now());
        }
        let reply = reply?;
        if let Some((d, wait)) = self
            .durability
            .and_then(|d| Some((d, d.wait_after(&prepared)?)))
        {
            d.check(con.send(&wait).await?)?;
        }
        Ok(reply)
    }

    pub fn cache(&self) -> Option<&DenialCache> {
        self.cache.as_ref()
    }

    pub fn connection(&self) -> &C {
        &self.con
    }
}
