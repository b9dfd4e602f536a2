//! The standalone Redis connection (docs/http/rust.md, The Redis
//! connection): one connection of this crate's own that every request
//! shares, made on first use (so the app starts while Redis is down) and
//! made again by the next request after it is lost.
//!
//! A request writes its command's bytes straight into the connection's
//! buffer and waits on a one-shot slot; one task writes the buffer and
//! reads the replies. That task lets the scheduler's other ready tasks run
//! before each write, so the checks of every request served in one turn
//! go to Redis in one write and come back in one read (auto-pipelining,
//! as ioredis's `enableAutoPipelining` does). An `RL.ALL` reply is read
//! from its bytes into an [`AllDecision`] without redis-rs's value tree;
//! any other reply goes through redis-rs's parser, so its errors and
//! values are redis-rs's own.
//!
//! A command may carry a deadline (a request's timeout, docs/http.md
//! "Fail modes"): the task keeps one timer for all of them, set to the
//! earliest, and fails a command whose deadline passes (its reply, when it
//! comes, is dropped). One timer the task re-arms now and then costs less
//! than a timer of each request's own, registered and removed every time.

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use librl_client::{AllDecision, AsyncConnection, Decision, LeaseId, Prepared, RetryAfter};
use redis::{ConnectionAddr, FromRedisValue, RedisResult, Value};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::oneshot;
use tokio::time::{Instant, Sleep};

use crate::headers::decimal;

/// The shared connection and how to make it again.
pub(crate) struct Standalone {
    client: redis::Client,
    timeout: Duration,
    current: RwLock<Option<PipelinedConnection>>,
    /// One request at a time connects; the others wait for it.
    connecting: tokio::sync::Mutex<()>,
}

impl Standalone {
    pub(crate) fn new(client: redis::Client, timeout: Duration) -> Standalone {
        Standalone {
            client,
            timeout,
            current: RwLock::new(None),
            connecting: tokio::sync::Mutex::new(()),
        }
    }

    /// The connection, connecting when there is none or it was lost.
    /// Connecting ends by `deadline` when there is one, else within the
    /// timeout.
    pub(crate) async fn get(&self, deadline: Option<Instant>) -> RedisResult<PipelinedConnection> {
        if let Some(current) = self.current() {
            return Ok(current);
        }
        // Connecting is rare and its future is large: boxed, so that every
        // request's future does not carry its size.
        Box::pin(self.connect(deadline)).await
    }

    fn current(&self) -> Option<PipelinedConnection> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .filter(|c| c.is_open())
            .cloned()
    }

    /// One attempt within `timeout`: a request that finds Redis gone fails
    /// at once; the next one tries again.
    async fn connect(&self, deadline: Option<Instant>) -> RedisResult<PipelinedConnection> {
        let deadline = deadline.unwrap_or_else(|| Instant::now() + self.timeout);
        let _connecting = tokio::time::timeout_at(deadline, self.connecting.lock())
            .await
            .map_err(|_| timed_out())?;
        if let Some(current) = self.current() {
            return Ok(current);
        }
        let connection = tokio::time::timeout_at(deadline, pipelined_connection(&self.client))
            .await
            .map_err(|_| {
                redis::RedisError::from(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "connecting to redis timed out",
                ))
            })??;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Some(connection.clone());
        Ok(connection)
    }
}

/// A new connection as the middleware makes its own (docs/http/rust.md,
/// The Redis connection), its task spawned on the runtime, authenticated
/// and on the URL's database: commands sent on it (and its clones) from
/// tasks that run in the same turn of the scheduler go to Redis in one
/// write. TCP and Unix sockets, RESP2. No response timeout: bound each
/// call yourself.
pub async fn pipelined_connection(client: &redis::Client) -> RedisResult<PipelinedConnection> {
    let info = client.get_connection_info();
    let connection = match info.addr() {
        ConnectionAddr::Tcp(host, port) => {
            let stream = tokio::net::TcpStream::connect((host.as_str(), *port)).await?;
            stream.set_nodelay(true)?;
            PipelinedConnection::spawn(stream)
        }
        #[cfg(unix)]
        ConnectionAddr::Unix(path) => {
            PipelinedConnection::spawn(tokio::net::UnixStream::connect(path).await?)
        }
        other => {
            return Err(redis::RedisError::from(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("librl-tower connects over TCP or a Unix socket, not {other}"),
            )))
        }
    };
    let settings = info.redis_settings();
    if let Some(password) = settings.password() {
        let mut auth = redis::cmd("AUTH");
        if let Some(username) = settings.username() {
            auth.arg(username);
        }
        connection.value(auth.arg(password)).await?;
    }
    if settings.db() != 0 {
        connection
            .value(redis::cmd("SELECT").arg(settings.db()))
            .await?;
    }
    Ok(connection)
}

/// A connection to one Redis server, shared by cloning: each command's
/// bytes join a buffer that one task writes once per scheduler turn, and
/// each reply goes back to the command's own caller (see the module).
/// Made by [`pipelined_connection`]; it closes when its last clone is
/// dropped. `librl_client`'s commands run on it (`query_async`).
#[derive(Clone)]
pub struct PipelinedConnection {
    handle: Arc<Handle>,
}

/// Wakes the connection's task when the last clone goes, so it closes.
struct Handle {
    shared: Arc<Shared>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.closed.get_or_insert(io::ErrorKind::NotConnected);
        self.shared.open.store(false, Ordering::Relaxed);
        if let Some(task) = state.task.take() {
            task.wake();
        }
    }
}

struct Shared {
    state: Mutex<State>,
    /// `state.closed` is none: read by every request without the lock.
    open: AtomicBool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

struct State {
    /// Commands not yet handed to the socket.
    out: Vec<u8>,
    /// One per command written or to write, in order: where its reply goes.
    waiting: VecDeque<Waiting>,
    /// The task's waker while it waits for commands (taken by the first
    /// command that wakes it).
    task: Option<Waker>,
    /// Why the connection is closed: no command is taken after that.
    closed: Option<io::ErrorKind>,
    /// The earliest deadline of the commands queued since the task last
    /// looked: its timer is re-armed when this is sooner.
    earliest: Option<Instant>,
}

struct Waiting {
    all: bool,
    /// Taken when the deadline passes before the reply comes.
    reply: Option<oneshot::Sender<RedisResult<Reply>>>,
    deadline: Option<Instant>,
}

enum Reply {
    All(AllDecision),
    Value(Value),
}

fn closed_error(kind: io::ErrorKind) -> redis::RedisError {
    redis::RedisError::from(io::Error::new(kind, "the connection to redis was lost"))
}

/// A command's deadline passed (`RedisError::is_timeout`).
pub(crate) fn timed_out() -> redis::RedisError {
    redis::RedisError::from(io::Error::new(
        io::ErrorKind::TimedOut,
        "redis gave no answer in time",
    ))
}

impl PipelinedConnection {
    fn spawn<S>(stream: S) -> PipelinedConnection
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                out: Vec::with_capacity(4096),
                waiting: VecDeque::new(),
                task: None,
                closed: None,
                earliest: None,
            }),
            open: AtomicBool::new(true),
        });
        tokio::spawn(Driver {
            stream,
            shared: shared.clone(),
            writing: Vec::with_capacity(4096),
            written: 0,
            yielded: false,
            read: vec![0; 16 * 1024],
            start: 0,
            end: 0,
            timer: Box::pin(tokio::time::sleep_until(Instant::now())),
            armed: None,
        });
        PipelinedConnection {
            handle: Arc::new(Handle { shared }),
        }
    }

    /// False once the connection is lost: the middleware then makes another.
    pub fn is_open(&self) -> bool {
        self.handle.shared.open.load(Ordering::Relaxed)
    }

    /// Queues one command, written by `encode`, and wakes the task when
    /// it waits for commands.
    fn send_with(
        &self,
        all: bool,
        deadline: Option<Instant>,
        encode: impl FnOnce(&mut Vec<u8>),
    ) -> Result<oneshot::Receiver<RedisResult<Reply>>, redis::RedisError> {
        let (reply, receiver) = oneshot::channel();
        let mut state = self.handle.shared.lock();
        if let Some(kind) = state.closed {
            return Err(closed_error(kind));
        }
        encode(&mut state.out);
        if let Some(deadline) = deadline {
            if state.earliest.is_none_or(|e| deadline < e) {
                state.earliest = Some(deadline);
            }
        }
        state.waiting.push_back(Waiting {
            all,
            reply: Some(reply),
            deadline,
        });
        if let Some(task) = state.task.take() {
            task.wake();
        }
        Ok(receiver)
    }

    async fn reply(
        receiver: Result<oneshot::Receiver<RedisResult<Reply>>, redis::RedisError>,
    ) -> RedisResult<Reply> {
        receiver?
            .await
            .map_err(|_| closed_error(io::ErrorKind::ConnectionAborted))?
    }

    /// Sends `RL.ALL` with these words after the command's name and reads
    /// its reply.
    pub async fn all(&self, words: &[&[u8]]) -> RedisResult<AllDecision> {
        self.all_with(None, |out| {
            array_header(out, words.len() + 1);
            bulk(out, b"RL.ALL");
            for word in words {
                bulk(out, word);
            }
        })
        .await
    }

    /// Sends the `RL.ALL` that `encode` writes (whole, in RESP) and reads
    /// its reply, failing with [`timed_out`] once `deadline` passes.
    pub(crate) async fn all_with(
        &self,
        deadline: Option<Instant>,
        encode: impl FnOnce(&mut Vec<u8>),
    ) -> RedisResult<AllDecision> {
        match Self::reply(self.send_with(true, deadline, encode)).await? {
            Reply::All(decision) => Ok(decision),
            Reply::Value(_) => Err(unexpected()),
        }
    }

    /// Sends any command and reads its reply (a server error as `Err`).
    pub async fn value(&self, cmd: &redis::Cmd) -> RedisResult<Value> {
        let receiver = self.send_with(false, None, |out| cmd.write_packed_command(out));
        match Self::reply(receiver).await? {
            Reply::Value(value) => Ok(value),
            Reply::All(_) => Err(unexpected()),
        }
    }

    /// This connection, its commands failing once `deadline` passes.
    pub(crate) fn by(&self, deadline: Option<Instant>) -> ByDeadline<'_> {
        ByDeadline {
            connection: self,
            deadline,
        }
    }
}

/// [`PipelinedConnection::by`]: librl-client's commands with a deadline.
pub(crate) struct ByDeadline<'a> {
    connection: &'a PipelinedConnection,
    deadline: Option<Instant>,
}

impl AsyncConnection for ByDeadline<'_> {
    fn send(&mut self, prepared: &Prepared) -> impl Future<Output = RedisResult<Value>> + Send {
        let receiver = self.connection.send_with(false, self.deadline, |out| {
            prepared.cmd().write_packed_command(out)
        });
        async move {
            match PipelinedConnection::reply(receiver).await? {
                Reply::Value(value) => Ok(value),
                Reply::All(_) => Err(unexpected()),
            }
        }
    }
}

fn unexpected() -> redis::RedisError {
    redis::RedisError::from(io::Error::other("a reply of the wrong kind"))
}

impl AsyncConnection for PipelinedConnection {
    fn send(&mut self, prepared: &Prepared) -> impl Future<Output = RedisResult<Value>> + Send {
        let receiver = self.send_with(false, None, |out| prepared.cmd().write_packed_command(out));
        async move {
            match Self::reply(receiver).await? {
                Reply::Value(value) => Ok(value),
                Reply::All(_) => Err(unexpected()),
            }
        }
    }
}

/// `*n\r\n`.
pub(crate) fn array_header(out: &mut Vec<u8>, n: usize) {
    out.push(b'*');
    decimal(out, n as u64);
    out.extend_from_slice(b"\r\n");
}

/// One bulk string: `$len\r\nword\r\n`.
pub(crate) fn bulk(out: &mut Vec<u8>, word: &[u8]) {
    out.push(b'$');
    decimal(out, word.len() as u64);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(word);
    out.extend_from_slice(b"\r\n");
}

/// The connection's task: writes the buffered commands once the other
/// ready tasks have run, reads replies and hands each to its command.
struct Driver<S> {
    stream: S,
    shared: Arc<Shared>,
    /// The bytes being written, and how many went out.
    writing: Vec<u8>,
    written: usize,
    /// This write has waited for the scheduler's other tasks once.
    yielded: bool,
    /// Replies read, `start..end` not yet handed out.
    read: Vec<u8>,
    start: usize,
    end: usize,
    /// The one timer of the commands' deadlines, and when it is set to
    /// (none: no command waits with one).
    timer: Pin<Box<Sleep>>,
    armed: Option<Instant>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Future for Driver<S> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        let outcome = match this.poll_read(cx) {
            Err(e) => Err(e),
            Ok(()) => this.poll_write(cx),
        };
        if let Ok(Poll::Pending) = outcome {
            this.poll_timer(cx);
        }
        match outcome {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(kind)) | Err(kind) => {
                this.close(kind);
                Poll::Ready(())
            }
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Driver<S> {
    /// Reads until the socket has nothing more, handing out each complete
    /// reply.
    fn poll_read(&mut self, cx: &mut Context<'_>) -> Result<(), io::ErrorKind> {
        loop {
            if self.end == self.read.len() {
                if self.start > 0 {
                    self.read.copy_within(self.start..self.end, 0);
                    self.end -= self.start;
                    self.start = 0;
                } else {
                    let grown = self.read.len() * 2;
                    self.read.resize(grown, 0);
                }
            }
            let mut buf = ReadBuf::new(&mut self.read[self.end..]);
            match Pin::new(&mut self.stream).poll_read(cx, &mut buf) {
                Poll::Pending => return Ok(()),
                Poll::Ready(Err(e)) => return Err(e.kind()),
                Poll::Ready(Ok(())) => {
                    let n = buf.filled().len();
                    if n == 0 {
                        return Err(io::ErrorKind::UnexpectedEof);
                    }
                    self.end += n;
                    self.hand_out()?;
                }
            }
        }
    }

    /// Each complete reply in the buffer to the command waiting first.
    fn hand_out(&mut self) -> Result<(), io::ErrorKind> {
        let mut state = self.shared.lock();
        loop {
            let buf = self.read.get(self.start..self.end).unwrap_or(&[]);
            // An `RL.ALL` reply of the plain shape is read, and measured,
            // in one pass; anything else is measured first, then parsed.
            let all = state.waiting.front().is_some_and(|w| w.all);
            let (len, reply) = match all.then(|| plain_all(buf)).flatten() {
                Some((decision, len)) => (len, Ok(Reply::All(decision))),
                None => {
                    let Some(len) = frame_len(buf)? else {
                        break;
                    };
                    let frame = buf.get(..len).unwrap_or(&[]);
                    let reply = match all {
                        true => any_all_reply(frame).map(Reply::All),
                        false => redis::parse_redis_value(frame)
                            .and_then(Value::extract_error)
                            .map(Reply::Value),
                    };
                    (len, reply)
                }
            };
            self.start += len;
            // A reply no command waits for: the stream is out of step.
            let waiting = state
                .waiting
                .pop_front()
                .ok_or(io::ErrorKind::InvalidData)?;
            // The caller may have gone, or its deadline passed: the reply
            // is dropped.
            if let Some(sender) = waiting.reply {
                let _ = sender.send(reply);
            }
        }
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        Ok(())
    }

    /// Writes what is buffered; Ready when the connection should close.
    fn poll_write(&mut self, cx: &mut Context<'_>) -> Result<Poll<io::ErrorKind>, io::ErrorKind> {
        loop {
            while self.written < self.writing.len() {
                let rest = self.writing.get(self.written..).unwrap_or(&[]);
                match Pin::new(&mut self.stream).poll_write(cx, rest) {
                    Poll::Pending => return Ok(Poll::Pending),
                    Poll::Ready(Err(e)) => return Err(e.kind()),
                    Poll::Ready(Ok(0)) => return Err(io::ErrorKind::WriteZero),
                    Poll::Ready(Ok(n)) => self.written += n,
                }
            }
            self.writing.clear();
            self.written = 0;
            let mut state = self.shared.lock();
            if let Some(kind) = state.closed {
                return Ok(Poll::Ready(kind));
            }
            if state.out.is_empty() {
                if !state.task.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    state.task = Some(cx.waker().clone());
                }
                return Ok(Poll::Pending);
            }
            if !self.yielded {
                // tokio runs a task that woke itself after the tasks
                // already queued: their commands join this write.
                self.yielded = true;
                cx.waker().wake_by_ref();
                return Ok(Poll::Pending);
            }
            self.yielded = false;
            std::mem::swap(&mut state.out, &mut self.writing);
        }
    }

    /// Arms the timer for the earliest deadline queued, and fails the
    /// commands whose deadline has passed when it fires.
    fn poll_timer(&mut self, cx: &mut Context<'_>) {
        let mut state = self.shared.lock();
        if let Some(earliest) = state.earliest.take() {
            if self.armed.is_none_or(|armed| earliest < armed) {
                self.armed = Some(earliest);
                self.timer.as_mut().reset(earliest);
            }
        }
        while self.armed.is_some() && self.timer.as_mut().poll(cx).is_ready() {
            // Deadlines are not in queue order (a request's later commands
            // keep its first one's): every waiting command is looked at.
            let now = Instant::now();
            let mut next: Option<Instant> = None;
            for waiting in state.waiting.iter_mut() {
                let Some(deadline) = waiting.deadline.filter(|_| waiting.reply.is_some()) else {
                    continue;
                };
                if deadline <= now {
                    if let Some(sender) = waiting.reply.take() {
                        let _ = sender.send(Err(timed_out()));
                    }
                } else if next.is_none_or(|n| deadline < n) {
                    next = Some(deadline);
                }
            }
            self.armed = next;
            if let Some(next) = next {
                self.timer.as_mut().reset(next);
            }
        }
    }

    /// Fails every command still waiting, and takes no more.
    fn close(&mut self, kind: io::ErrorKind) {
        let mut state = self.shared.lock();
        state.closed.get_or_insert(kind);
        self.shared.open.store(false, Ordering::Relaxed);
        state.task = None;
        state.out.clear();
        for waiting in state.waiting.drain(..) {
            if let Some(sender) = waiting.reply {
                let _ = sender.send(Err(closed_error(kind)));
            }
        }
    }
}

/// The length of the RESP2 reply at the start of `buf`, None while it is
/// incomplete.
fn frame_len(buf: &[u8]) -> Result<Option<usize>, io::ErrorKind> {
    let mut pos = 0usize;
    // Replies still to skip: nested arrays add their items.
    let mut left: u64 = 1;
    while left > 0 {
        left -= 1;
        let Some(kind) = buf.get(pos).copied() else {
            return Ok(None);
        };
        let Some(eol) = buf
            .get(pos + 1..)
            .and_then(|rest| rest.windows(2).position(|w| w == b"\r\n"))
        else {
            return Ok(None);
        };
        let line = buf.get(pos + 1..pos + 1 + eol).unwrap_or(&[]);
        pos += eol + 3;
        match kind {
            b'+' | b'-' | b':' => {}
            b'$' => {
                if let Ok(n) = usize::try_from(signed(line)?) {
                    pos = pos.saturating_add(n).saturating_add(2);
                    if pos > buf.len() {
                        return Ok(None);
                    }
                }
            }
            b'*' => {
                if let Ok(n) = u64::try_from(signed(line)?) {
                    left = left.saturating_add(n);
                }
            }
            _ => return Err(io::ErrorKind::InvalidData),
        }
    }
    Ok(Some(pos))
}

fn signed(line: &[u8]) -> Result<i64, io::ErrorKind> {
    std::str::from_utf8(line)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(io::ErrorKind::InvalidData)
}

/// An `RL.ALL` reply (one whole frame) of any shape, through redis-rs's
/// parser and librl-client's reading, whose errors (a server error
/// included) are the reference; [`plain_all`] reads the usual shape the
/// same way, faster.
fn any_all_reply(frame: &[u8]) -> RedisResult<AllDecision> {
    let value = redis::parse_redis_value(frame)?.extract_error()?;
    Ok(AllDecision::from_redis_value(value)?)
}

/// The `RL.ALL` reply at the start of `buf` and its length in bytes, read
/// from its bytes when it is the plain shape (an array of allowed,
/// retry_after and one array of integers per clause) with values
/// librl-client reads the same way; None for anything else, or a reply
/// not whole yet.
fn plain_all(buf: &[u8]) -> Option<(AllDecision, usize)> {
    let mut r = Reader { buf, pos: 0 };
    let items = r.header(b'*')?;
    let clauses = items.checked_sub(2)?;
    let allowed = flag(r.int()?)?;
    let retry_after = retry_after_of(r.int()?)?;
    let mut decisions = Vec::with_capacity(usize::try_from(clauses).ok()?.min(64));
    for _ in 0..clauses {
        let n = r.header(b'*')?;
        if n < 6 {
            return None;
        }
        let allowed = flag(r.int()?)?;
        let count = u64::try_from(r.int()?).ok()?;
        let retry_after = retry_after_of(r.int()?)?;
        let limit = u64::try_from(r.int()?).ok()?;
        let remaining = u64::try_from(r.int()?).ok()?;
        let reset_after_ms = u64::try_from(r.int()?).ok()?;
        let lease = match n {
            6 => None,
            _ => match u64::try_from(r.int()?).ok()? {
                0 => None,
                id => Some(LeaseId::new(id)?),
            },
        };
        // Integers a later module adds are ignored.
        for _ in 7..n {
            r.int()?;
        }
        decisions.push(Decision {
            allowed,
            count,
            retry_after,
            limit,
            remaining,
            reset_after_ms,
            lease,
        });
    }
    let decision = AllDecision {
        allowed,
        retry_after,
        decisions,
    };
    Some((decision, r.pos))
}

fn flag(v: i64) -> Option<bool> {
    match v {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    }
}

fn retry_after_of(v: i64) -> Option<RetryAfter> {
    match v {
        -1 => Some(RetryAfter::Never),
        v => u64::try_from(v).ok().map(RetryAfter::Ms),
    }
}

/// Reads RESP2 lines from a complete reply.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    /// The number after `kind` on the next line: `kind`, an optional `-`,
    /// 1 to 18 digits and CRLF, read in one pass.
    fn line(&mut self, kind: u8) -> Option<i64> {
        let rest = self.buf.get(self.pos..)?;
        if *rest.first()? != kind {
            return None;
        }
        let negative = rest.get(1) == Some(&b'-');
        let start = if negative { 2 } else { 1 };
        let mut end = start;
        let mut n: i64 = 0;
        while let Some(&d) = rest.get(end) {
            if !d.is_ascii_digit() {
                break;
            }
            if end - start == 18 {
                return None;
            }
            n = n * 10 + i64::from(d - b'0');
            end += 1;
        }
        if end == start || rest.get(end..end + 2) != Some(b"\r\n") {
            return None;
        }
        self.pos += end + 2;
        Some(if negative { -n } else { n })
    }

    fn int(&mut self) -> Option<i64> {
        self.line(b':')
    }

    fn header(&mut self, kind: u8) -> Option<u64> {
        u64::try_from(self.line(kind)?).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(frame: &[u8]) -> AllDecision {
        let value = redis::parse_redis_value(frame).unwrap();
        AllDecision::from_redis_value(value).unwrap()
    }

    /// The fast reading gives what librl-client's reading gives, and
    /// defers to it for anything else.
    #[test]
    fn plain_all_reads_as_librl_client_does() {
        let replies: [&[u8]; 4] = [
            b"*3\r\n:1\r\n:0\r\n*6\r\n:1\r\n:1\r\n:0\r\n:10\r\n:9\r\n:60000\r\n",
            b"*4\r\n:0\r\n:-1\r\n*6\r\n:0\r\n:5\r\n:-1\r\n:5\r\n:0\r\n:100\r\n*7\r\n:1\r\n:1\r\n:0\r\n:3\r\n:2\r\n:5\r\n:0\r\n",
            b"*3\r\n:1\r\n:0\r\n*7\r\n:1\r\n:1\r\n:0\r\n:3\r\n:2\r\n:5\r\n:42\r\n",
            b"*3\r\n:1\r\n:0\r\n*8\r\n:1\r\n:1\r\n:0\r\n:3\r\n:2\r\n:5\r\n:0\r\n:7\r\n",
        ];
        for reply in replies {
            assert_eq!(plain_all(reply), Some((all(reply), reply.len())));
            // Followed by the next reply, it is measured whole; cut short,
            // it is not read yet.
            let mut two = reply.to_vec();
            two.extend_from_slice(reply);
            assert_eq!(plain_all(&two), Some((all(reply), reply.len())));
            for cut in 0..reply.len() {
                assert_eq!(plain_all(&reply[..cut]), None, "{cut}");
            }
            assert_eq!(frame_len(reply), Ok(Some(reply.len())));
            assert_eq!(frame_len(&reply[..reply.len() - 1]), Ok(None));
        }
        let odd: [&[u8]; 7] = [
            b"*3\r\n:2\r\n:0\r\n*6\r\n:1\r\n:1\r\n:0\r\n:10\r\n:9\r\n:60000\r\n",
            b"*3\r\n:1\r\n:0\r\n*5\r\n:1\r\n:1\r\n:0\r\n:10\r\n:9\r\n",
            b"*3\r\n:1\r\n:0\r\n*6\r\n:1\r\n$1\r\n1\r\n:0\r\n:10\r\n:9\r\n:60000\r\n",
            b"*3\r\n:1\r\n:0\r\n*6\r\n:1\r\n:1\r\n:0\r\n:1000000000000000000\r\n:9\r\n:6\r\n",
            b"*3\r\n:1\r\n:0\r\n*6\r\n:1\r\n:1\r\n:0\r\n:10\r\n:9\r\n:6\r\r\n",
            b"*3\r\n:1\r\n:0\r\n*6\r\n:1\r\n:1\r\n:0\r\n:-\r\n:9\r\n:6\r\n",
            b"-ERR unknown command 'RL.ALL'\r\n",
        ];
        for reply in odd {
            assert_eq!(plain_all(reply), None, "{reply:?}");
        }
        let error = any_all_reply(b"-ERR unknown command 'RL.ALL'\r\n").unwrap_err();
        assert!(error.to_string().contains("unknown command"), "{error}");
        for reply in &odd[..3] {
            let generic = redis::parse_redis_value(reply)
                .ok()
                .and_then(|v| AllDecision::from_redis_value(v).ok());
            assert_eq!(any_all_reply(reply).ok(), generic);
            assert!(generic.is_none());
        }
    }

    #[test]
    fn frames_are_measured_whole() {
        let frames: [&[u8]; 6] = [
            b"+OK\r\n",
            b"$-1\r\n",
            b"$5\r\nab\r\nc\r\n",
            b"*-1\r\n",
            b"*2\r\n*1\r\n:1\r\n$0\r\n\r\n",
            b"*0\r\n",
        ];
        for frame in frames {
            let mut two = frame.to_vec();
            two.extend_from_slice(b":1\r\n");
            assert_eq!(frame_len(&two), Ok(Some(frame.len())), "{frame:?}");
            assert_eq!(frame_len(&frame[..frame.len() - 1]), Ok(None));
        }
        assert_eq!(frame_len(b"!3\r\n"), Err(io::ErrorKind::InvalidData));
        assert_eq!(frame_len(b"*x\r\n"), Err(io::ErrorKind::InvalidData));
    }

    #[test]
    fn words_are_bulk_strings() {
        let mut out = Vec::new();
        array_header(&mut out, 2);
        bulk(&mut out, b"RL.ALL");
        bulk(&mut out, b"");
        assert_eq!(out, b"*2\r\n$6\r\nRL.ALL\r\n$0\r\n\r\n");
    }
}
