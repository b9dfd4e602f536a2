//! The standalone Redis connection (docs/http/rust.md, The Redis
//! connection): one redis-rs `MultiplexedConnection` every request shares,
//! made on first use (so the app starts while Redis is down) and remade by
//! the next request after it is lost, whose socket defers each write to
//! the end of the scheduler's turn: the checks of every request that runs
//! in that turn go to Redis in one write, and come back in one read
//! (auto-pipelining, as ioredis's `enableAutoPipelining` does).
//!
//! Without the deferral, tokio runs the connection's task as soon as the
//! first request of a turn hands it a command (the task it wakes runs
//! next), so nearly every check costs a write and a read of its own.

use std::io;
use std::pin::Pin;
use std::sync::RwLock;
use std::task::{Context, Poll};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ConnectionAddr, RedisResult};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The shared connection and how to make it again.
pub(crate) struct Standalone {
    client: redis::Client,
    timeout: Duration,
    /// The connection, and its generation (so that a request reporting a
    /// lost connection never drops a newer one).
    current: RwLock<Option<(u64, MultiplexedConnection)>>,
    /// One request at a time connects; the others wait for it.
    connecting: tokio::sync::Mutex<u64>,
}

impl Standalone {
    pub(crate) fn new(client: redis::Client, timeout: Duration) -> Standalone {
        Standalone {
            client,
            timeout,
            current: RwLock::new(None),
            connecting: tokio::sync::Mutex::new(0),
        }
    }

    /// The connection and its generation, connecting when there is none.
    pub(crate) async fn get(&self) -> RedisResult<(u64, MultiplexedConnection)> {
        if let Some(current) = self.current() {
            return Ok(current);
        }
        // Connecting is rare and its future is large: boxed, so that every
        // request's future does not carry its size.
        Box::pin(self.connect()).await
    }

    fn current(&self) -> Option<(u64, MultiplexedConnection)> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// One attempt within `timeout`: a request that finds Redis gone fails
    /// at once; the next one tries again.
    async fn connect(&self) -> RedisResult<(u64, MultiplexedConnection)> {
        let mut generation = self.connecting.lock().await;
        if let Some(current) = self.current() {
            return Ok(current);
        }
        let connection = tokio::time::timeout(self.timeout, pipelined_connection(&self.client))
            .await
            .map_err(|_| {
                redis::RedisError::from(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "connecting to redis timed out",
                ))
            })??;
        *generation += 1;
        let current = (*generation, connection);
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Some(current.clone());
        Ok(current)
    }

    /// A command on the connection of this generation failed: when the
    /// error says the connection is lost, it is dropped, and the next
    /// request connects again.
    pub(crate) fn failed(&self, generation: u64, error: &redis::RedisError) {
        if !error.is_unrecoverable_error() {
            return;
        }
        let mut current = self.current.write().unwrap_or_else(|p| p.into_inner());
        if current.as_ref().is_some_and(|(g, _)| *g == generation) {
            *current = None;
        }
    }
}

/// A new connection as the middleware makes its own (docs/http/rust.md,
/// The Redis connection), its driver spawned on the runtime: commands
/// sent on it (and its clones) from tasks that run in the same turn of
/// the scheduler go to Redis in one write. TCP and Unix sockets get the
/// deferring socket; any other address (TLS) is left to redis-rs as it
/// is. No response timeout: bound each call yourself.
pub async fn pipelined_connection(client: &redis::Client) -> RedisResult<MultiplexedConnection> {
    // The exchange has its own timeout (the configuration's `timeout`),
    // so the connection needs none of its own per command.
    let config = AsyncConnectionConfig::new().set_response_timeout(None);
    let info = client.get_connection_info();
    let settings = info.redis_settings();
    match info.addr() {
        ConnectionAddr::Tcp(host, port) => {
            let stream = tokio::net::TcpStream::connect((host.as_str(), *port)).await?;
            stream.set_nodelay(true)?;
            let (connection, driver) =
                MultiplexedConnection::new_with_config(settings, Deferred::new(stream), config)
                    .await?;
            tokio::spawn(driver);
            Ok(connection)
        }
        #[cfg(unix)]
        ConnectionAddr::Unix(path) => {
            let stream = tokio::net::UnixStream::connect(path).await?;
            let (connection, driver) =
                MultiplexedConnection::new_with_config(settings, Deferred::new(stream), config)
                    .await?;
            tokio::spawn(driver);
            Ok(connection)
        }
        _ => {
            client
                .get_multiplexed_async_connection_with_config(&config)
                .await
        }
    }
}

/// A socket whose first write of each flush waits for the scheduler's
/// other ready tasks: the connection's task wakes itself and yields
/// (tokio runs a task that woke itself after the tasks already queued),
/// and the commands those tasks hand it meanwhile join the same write.
struct Deferred<S> {
    inner: S,
    /// This flush has yielded once already.
    yielded: bool,
}

impl<S> Deferred<S> {
    fn new(inner: S) -> Deferred<S> {
        Deferred {
            inner,
            yielded: false,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Deferred<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Deferred<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if !self.yielded {
            self.yielded = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // The buffer went out: the next write yields again.
        let flushed = Pin::new(&mut self.inner).poll_flush(cx);
        if flushed.is_ready() {
            self.yielded = false;
        }
        flushed
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
