//! The redis-rs connections a command can be sent on. Standalone ones send
//! the command as it is; cluster ones route it explicitly to the primary
//! owning its key's slot, so that neither the first-argument guess of
//! redis-rs nor a `COMMAND GETKEYS` round trip is involved, and follow
//! MOVED/ASK only when the cluster changes.

use std::future::Future;

use redis::{RedisResult, Value};

use crate::Prepared;

/// A blocking connection: `redis::Connection` or
/// `redis::cluster::ClusterConnection`.
pub trait Connection {
    /// Sends the command and returns its reply (a server error as `Err`).
    fn send(&mut self, prepared: &Prepared) -> RedisResult<Value>;
}

impl Connection for redis::Connection {
    fn send(&mut self, prepared: &Prepared) -> RedisResult<Value> {
        prepared.cmd().query(self)
    }
}

impl Connection for redis::cluster::ClusterConnection {
    fn send(&mut self, prepared: &Prepared) -> RedisResult<Value> {
        let routing = prepared.routing_info()?;
        self.route_command(prepared.cmd(), routing)?.extract_error()
    }
}

impl<C: Connection + ?Sized> Connection for &mut C {
    fn send(&mut self, prepared: &Prepared) -> RedisResult<Value> {
        (**self).send(prepared)
    }
}

/// A tokio connection: `redis::aio::MultiplexedConnection`,
/// `redis::aio::ConnectionManager` or
/// `redis::cluster_async::ClusterConnection`.
pub trait AsyncConnection: Send {
    /// Sends the command and returns its reply (a server error as `Err`).
    fn send(&mut self, prepared: &Prepared) -> impl Future<Output = RedisResult<Value>> + Send;
}

impl AsyncConnection for redis::aio::MultiplexedConnection {
    fn send(&mut self, prepared: &Prepared) -> impl Future<Output = RedisResult<Value>> + Send {
        prepared.cmd().query_async(self)
    }
}

impl AsyncConnection for redis::aio::ConnectionManager {
    fn send(&mut self, prepared: &Prepared) -> impl Future<Output = RedisResult<Value>> + Send {
        prepared.cmd().query_async(self)
    }
}

impl AsyncConnection for redis::cluster_async::ClusterConnection {
    fn send(&mut self, prepared: &Prepared) -> impl Future<Output = RedisResult<Value>> + Send {
        let routed = prepared
            .routing_info()
            .map(|routing| (prepared.cmd().clone(), routing));
        async move {
            let (cmd, routing) = routed?;
            self.route_command(cmd, routing).await?.extract_error()
        }
    }
}

impl<C: AsyncConnection + ?Sized> AsyncConnection for &mut C {
    fn send(&mut self, prepared: &Prepared) -> impl Future<Output = RedisResult<Value>> + Send {
        (**self).send(prepared)
    }
}

/// Opens connections of their own for the calls the server holds (a
/// `WAIT` on `RL.CONCURRENT` or `RL.TOKEN`): such a call holds the
/// connection it is sent on until it is answered, so it must never go on
/// one that a multiplexed client shares with other calls
/// ([`AsyncLimiter::with_wait_connections`](crate::AsyncLimiter::with_wait_connections)).
/// Implemented for `redis::Client` (a `MultiplexedConnection` without a
/// response timeout) and `redis::cluster::ClusterClient` (a cluster
/// connection without one); the limiter bounds each held call by its
/// `max_wait` itself.
pub trait OpenConnection: Send + Sync + 'static {
    type Connection: AsyncConnection + 'static;

    fn open(&self) -> impl Future<Output = RedisResult<Self::Connection>> + Send;
}

impl OpenConnection for redis::Client {
    type Connection = redis::aio::MultiplexedConnection;

    fn open(&self) -> impl Future<Output = RedisResult<Self::Connection>> + Send {
        let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
        async move {
            self.get_multiplexed_async_connection_with_config(&config)
                .await
        }
    }
}

impl OpenConnection for redis::cluster::ClusterClient {
    type Connection = redis::cluster_async::ClusterConnection;

    fn open(&self) -> impl Future<Output = RedisResult<Self::Connection>> + Send {
        // A new config has no response timeout.
        self.get_async_connection_with_config(redis::cluster::ClusterConfig::new())
    }
}
