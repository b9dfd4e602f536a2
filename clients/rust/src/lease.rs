//! Leases of `RL.CONCURRENT` as values that give their slots back: on the
//! tokio limiter a [`Lease`] guard (`release().await`, `renew().await`,
//! released on drop where it can be, an optional background renewal), on
//! the blocking one a [`HeldLease`] with `Limiter::release`/`renew`, a
//! scope, [`Limiter::with_lease`], that always releases, and a renewing
//! thread, [`HeldLease::keep_alive`].
//!
//! A lease that is neither released nor renewed ends by itself `lease`
//! after it was taken (or last renewed), so a holder that crashes, or a
//! guard dropped where nothing can send its release, keeps its slots no
//! longer than that.

use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::time::{Duration, Instant};

use redis::{RedisError, RedisResult};
use tokio::sync::watch;

use crate::args::{ArgError, DurationArg};
use crate::concurrent::Concurrent;
use crate::conn::{AsyncConnection, Connection};
use crate::limiter::{AsyncLimiter, Limiter};
use crate::reply::{Decision, LeaseId, RetryAfter};

/// An acquire the server refused: not enough slots free (within `max_wait`
/// for a `WAIT`). Its [`Decision`] says for how long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refused {
    pub decision: Decision,
}

impl Refused {
    /// The least wait after which enough leases have ended by themselves
    /// (a release may free a slot sooner); `Never` when the cost exceeds
    /// the limit.
    pub fn retry_after(&self) -> RetryAfter {
        self.decision.retry_after
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no free slot: {} of {} held",
            self.decision.count, self.decision.limit
        )?;
        match self.decision.retry_after.duration() {
            Some(d) => write!(f, ", one ends within {d:?}"),
            None => write!(f, ", and the cost exceeds the limit"),
        }
    }
}

impl std::error::Error for Refused {}

/// A lease as data: the call that took it, its id and the reply. What the
/// blocking [`Limiter`] releases and renews, and what [`Lease::detach`]
/// leaves to release later (here or in another process).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldLease {
    call: Concurrent,
    id: Option<LeaseId>,
    decision: Decision,
}

impl HeldLease {
    /// A lease taken by `call` (an `RL.CONCURRENT` acquire, or the
    /// [`Concurrent`] clause of an `RL.ALL` with that clause's lease), to
    /// release or renew by `id`.
    pub fn new(call: Concurrent, id: LeaseId, decision: Decision) -> HeldLease {
        HeldLease {
            call,
            id: Some(id),
            decision,
        }
    }

    /// The lease's id; `None` for an admission that holds none (`monitor`
    /// and `off` mode), whose release and renewal send nothing.
    pub fn id(&self) -> Option<LeaseId> {
        self.id
    }

    /// The reply that admitted it.
    pub fn decision(&self) -> &Decision {
        &self.decision
    }

    /// The call that took it.
    pub fn call(&self) -> &Concurrent {
        &self.call
    }

    /// `RL.CONCURRENT ... RELEASE id` for this lease, without the call's
    /// `OVERRIDE`: a release frees the same slots either way, and naming
    /// one key it never meets `TRYAGAIN` while its slot migrates (its
    /// reply's `limit` is then the call's own).
    pub fn release_call(&self) -> Option<Concurrent> {
        Some(self.call.clone().without_override().release(self.id?))
    }

    /// `RL.CONCURRENT ... RENEW id` for this lease, with the call's
    /// `OVERRIDE` (whose window is the lease's length).
    pub fn renew_call(&self) -> Option<Concurrent> {
        Some(self.call.clone().renew(self.id?))
    }

    /// The acquire's reply as a lease, or the refusal.
    fn from_reply(call: Concurrent, decision: Decision) -> Result<HeldLease, Refused> {
        if !decision.allowed {
            return Err(Refused { decision });
        }
        Ok(HeldLease {
            call,
            id: decision.lease,
            decision,
        })
    }

    /// A lease's length, as the period of a background renewal: a third of
    /// it, at least 1 ms.
    fn renewal_period(&self) -> Result<Duration, ArgError> {
        Ok(Duration::from_millis((self.call.lease_ms()? / 3).max(1)))
    }
}

/// Refuses a call that would not take a lease.
fn acquiring(call: &Concurrent) -> Result<(), ArgError> {
    match call.slots() {
        Some(0) => Err(ArgError::new("acquire: COST 0 reads and takes no lease")),
        Some(_) if call.is_peek() => Err(ArgError::new("acquire: a PEEK takes no lease")),
        Some(_) => Ok(()),
        None => Err(ArgError::new(
            "acquire: RELEASE and RENEW take no lease; run them with run",
        )),
    }
}

impl<C: Connection> Limiter<C> {
    /// Takes a lease (`RL.CONCURRENT`, with the call's `COST`, `WAIT` and
    /// `OVERRIDE`): `Ok(Err(Refused))` when its slots are not free.
    /// Release it with [`Limiter::release`], or use
    /// [`Limiter::with_lease`], which always does.
    pub fn acquire(&mut self, call: &Concurrent) -> RedisResult<Result<HeldLease, Refused>> {
        acquiring(call)?;
        let decision: Decision = self.run(call)?;
        Ok(HeldLease::from_reply(call.clone(), decision))
    }

    /// Gives the lease's slots back at once: true if it was held, false if
    /// it had ended (its slots were free already).
    pub fn release(&mut self, lease: HeldLease) -> RedisResult<bool> {
        match lease.release_call() {
            Some(call) => Ok(self.run(&call)?.allowed),
            None => Ok(true),
        }
    }

    /// Makes the lease last its length from now: true if it was held,
    /// false if it had ended (stop the work: its slots may be someone
    /// else's).
    pub fn renew(&mut self, lease: &HeldLease) -> RedisResult<bool> {
        match lease.renew_call() {
            Some(call) => Ok(self.run(&call)?.allowed),
            None => Ok(true),
        }
    }

    /// Runs `body` holding a lease, and releases it afterwards, whatever
    /// `body` returns and if it panics (the panic then goes on). `body`
    /// gets this limiter back, to make other calls (`renew` among them).
    /// `Ok(Err(Refused))` when the lease was refused: `body` did not run.
    /// An error sending the release is returned in place of `body`'s
    /// value (the lease then ends by itself).
    ///
    /// ```no_run
    /// use librl_client::{Concurrent, Limiter};
    ///
    /// # fn export(_: &mut Limiter<redis::Connection>) {}
    /// # fn main() -> redis::RedisResult<()> {
    /// let con = redis::Client::open("redis://127.0.0.1/")?.get_connection()?;
    /// let mut limiter = Limiter::new(con);
    /// let exports = Concurrent::new("exports:{customer:7}", 2, "10m");
    /// match limiter.with_lease(&exports, |limiter, _lease| export(limiter))? {
    ///     Ok(()) => println!("exported"),
    ///     Err(refused) => println!("busy: {refused}"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn with_lease<T>(
        &mut self,
        call: &Concurrent,
        body: impl FnOnce(&mut Limiter<C>, &HeldLease) -> T,
    ) -> RedisResult<Result<T, Refused>> {
        let lease = match self.acquire(call)? {
            Ok(lease) => lease,
            Err(refused) => return Ok(Err(refused)),
        };
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(self, &lease)));
        let released = self.release(lease);
        match outcome {
            Ok(value) => released.map(|_| Ok(value)),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

impl HeldLease {
    /// Renews this lease every third of its length on a thread of its own,
    /// sending on `con` (a connection of its own: the limiter's stays with
    /// its caller), until the [`KeepAlive`] is dropped or the lease is
    /// found lost. Release the lease after dropping it.
    ///
    /// ```no_run
    /// use librl_client::{Concurrent, Limiter};
    ///
    /// # fn main() -> redis::RedisResult<()> {
    /// let client = redis::Client::open("redis://127.0.0.1/")?;
    /// let mut limiter = Limiter::new(client.get_connection()?);
    /// let exports = Concurrent::new("exports:{customer:7}", 2, "1m");
    /// if let Ok(lease) = limiter.acquire(&exports)? {
    ///     let renewing = lease.keep_alive(client.get_connection()?)?;
    ///     // ... an export that may take longer than a minute ...
    ///     if let Some(lost) = renewing.lost() {
    ///         eprintln!("{lost}");
    ///     }
    ///     drop(renewing);
    ///     limiter.release(lease)?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn keep_alive<C: Connection + Send + 'static>(
        &self,
        con: C,
    ) -> Result<KeepAlive, ArgError> {
        let period = self.renewal_period()?;
        let length = Duration::from_millis(self.call.lease_ms()?);
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let (report, lost) = watch::channel(None);
        let renew = self.renew_call();
        let thread = std::thread::spawn(move || {
            let Some(call) = renew else {
                return;
            };
            let mut limiter = Limiter::new(con);
            let mut held_until = Instant::now() + length;
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(period)
            {
                let sent = Instant::now();
                let verdict = match limiter.run(&call) {
                    Ok(d) if d.allowed => {
                        held_until = sent + length;
                        continue;
                    }
                    Ok(_) => LeaseLost::Ended,
                    Err(e) if Instant::now() + period >= held_until => LeaseLost::Unreachable(e),
                    Err(_) => continue,
                };
                let _ = report.send(Some(verdict));
                return;
            }
        });
        Ok(KeepAlive {
            stop: Some(stop),
            thread: Some(thread),
            lost,
        })
    }
}

/// A blocking lease's background renewal ([`HeldLease::keep_alive`]):
/// stopped when dropped.
pub struct KeepAlive {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    lost: watch::Receiver<Option<LeaseLost>>,
}

impl KeepAlive {
    /// Whether a renewal found the lease lost (renewing then stopped).
    pub fn lost(&self) -> Option<LeaseLost> {
        self.lost.borrow().clone()
    }
}

impl Drop for KeepAlive {
    fn drop(&mut self) {
        // Closing the channel wakes the thread at once.
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Why a lease under background renewal is no longer known to be held.
#[derive(Clone, Debug)]
pub enum LeaseLost {
    /// The server says it is not held: it ended before a renewal came (its
    /// slots may be someone else's now).
    Ended,
    /// No renewal got through before the lease's end: the last error.
    Unreachable(RedisError),
}

impl fmt::Display for LeaseLost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LeaseLost::Ended => f.write_str("the lease ended before it was renewed"),
            LeaseLost::Unreachable(e) => {
                write!(f, "no renewal got through before the lease's end: {e}")
            }
        }
    }
}

impl std::error::Error for LeaseLost {}

/// A lease taken through an [`AsyncLimiter`]: its slots are held until
/// [`Lease::release`], or until the guard is dropped, or until the lease
/// ends by itself.
///
/// Dropping a lease that was not released releases it where it can: on
/// the tokio runtime current at the drop, a task sends the `RELEASE`
/// (after the drop, so a call made right after may still find the slot
/// held). Dropped outside a runtime, or with the runtime shutting down,
/// nothing is sent and the lease ends by itself `lease` after it was taken
/// or last renewed. `release().await` is the sure way, and says whether
/// the lease was still held.
pub struct Lease<C: AsyncConnection + Clone + Sync + 'static> {
    limiter: AsyncLimiter<C>,
    held: HeldLease,
    renewal: Option<Renewal>,
    /// Released, or detached: nothing to do on drop.
    done: bool,
}

struct Renewal {
    task: tokio::task::JoinHandle<()>,
    lost: watch::Receiver<Option<LeaseLost>>,
}

impl<C: AsyncConnection + Clone + Sync + 'static> Lease<C> {
    /// The lease's id; `None` for an admission that holds none (`monitor`
    /// and `off` mode), whose release and renewal send nothing.
    pub fn id(&self) -> Option<LeaseId> {
        self.held.id
    }

    /// The reply that admitted it.
    pub fn decision(&self) -> &Decision {
        &self.held.decision
    }

    /// Makes the lease last its length from now: true if it was held,
    /// false if it had ended (stop the work: its slots may be someone
    /// else's).
    pub async fn renew(&mut self) -> RedisResult<bool> {
        match self.held.renew_call() {
            Some(call) => Ok(self.limiter.run(&call).await?.allowed),
            None => Ok(true),
        }
    }

    /// Gives the slots back at once (and stops the background renewal):
    /// true if the lease was held, false if it had ended.
    pub async fn release(mut self) -> RedisResult<bool> {
        self.stop_renewal();
        self.done = true;
        match self.held.release_call() {
            Some(call) => Ok(self.limiter.run(&call).await?.allowed),
            None => Ok(true),
        }
    }

    /// Keeps the lease held past this guard: neither its drop nor the
    /// background renewal (stopped) releases it. Release or renew it later
    /// with the [`HeldLease`]'s calls, here or in another process.
    pub fn detach(mut self) -> HeldLease {
        self.stop_renewal();
        self.done = true;
        self.held.clone()
    }

    /// Resolves when the background renewal finds the lease lost (see
    /// [`Acquire::keep_alive`]); pending for ever without one, or while
    /// the lease is held. Use it to stop the work the lease guards:
    ///
    /// ```ignore
    /// tokio::select! {
    ///     done = generate(prompt) => done,
    ///     lost = lease.lost() => return Err(lost.into()),
    /// }
    /// ```
    pub async fn lost(&self) -> LeaseLost {
        let Some(renewal) = &self.renewal else {
            return std::future::pending().await;
        };
        let mut lost = renewal.lost.clone();
        let verdict = lost
            .wait_for(Option::is_some)
            .await
            .ok()
            .and_then(|state| state.clone());
        match verdict {
            Some(verdict) => verdict,
            // The renewal stopped without a verdict: released or detached.
            None => std::future::pending().await,
        }
    }

    /// What the background renewal found, if it found the lease lost.
    pub fn is_lost(&self) -> Option<LeaseLost> {
        self.renewal.as_ref()?.lost.borrow().clone()
    }

    /// Renews the lease in the background from now on, as
    /// [`Acquire::keep_alive`] does (a lease [adopted](AsyncLimiter::adopt),
    /// say). Replaces a renewal already running. An error, and no renewal,
    /// outside a tokio runtime.
    pub fn keep_alive(&mut self) -> Result<(), ArgError> {
        let period = self.held.renewal_period()?;
        self.keep_alive_every(period)
    }

    /// As [`Lease::keep_alive`], every `period` (at least 1 ms).
    pub fn keep_alive_every(&mut self, period: Duration) -> Result<(), ArgError> {
        self.stop_renewal();
        self.start_renewal(period.max(Duration::from_millis(1)))
    }

    fn stop_renewal(&mut self) {
        if let Some(renewal) = &self.renewal {
            renewal.task.abort();
        }
    }

    /// Renews every `period` until stopped, or until the lease is lost.
    fn start_renewal(&mut self, period: Duration) -> Result<(), ArgError> {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return Err(ArgError::new(
                "keep_alive renews on a tokio runtime, and none is current",
            ));
        };
        // A lease held without an id (monitor or off mode) needs none.
        let Some(call) = self.held.renew_call() else {
            return Ok(());
        };
        let length = Duration::from_millis(self.held.call.lease_ms()?);
        let limiter = self.limiter.clone();
        let (report, lost) = watch::channel(None);
        let task = runtime.spawn(async move {
            // The lease is known held until `held_until`.
            let mut held_until = Instant::now() + length;
            loop {
                tokio::time::sleep(period).await;
                let sent = Instant::now();
                let verdict = match limiter.run(&call).await {
                    Ok(d) if d.allowed => {
                        held_until = sent + length;
                        continue;
                    }
                    Ok(_) => LeaseLost::Ended,
                    Err(e) if Instant::now() + period >= held_until => LeaseLost::Unreachable(e),
                    // Another try comes before the lease can end.
                    Err(_) => continue,
                };
                let _ = report.send(Some(verdict));
                return;
            }
        });
        self.renewal = Some(Renewal { task, lost });
        Ok(())
    }
}

impl<C: AsyncConnection + Clone + Sync + 'static> Drop for Lease<C> {
    fn drop(&mut self) {
        self.stop_renewal();
        if self.done {
            return;
        }
        let (Some(call), Ok(runtime)) = (
            self.held.release_call(),
            tokio::runtime::Handle::try_current(),
        ) else {
            return;
        };
        let limiter = self.limiter.clone();
        runtime.spawn(async move {
            // Nobody to tell of a failure: the lease then ends by itself.
            let _ = limiter.run(&call).await;
        });
    }
}

impl<C: AsyncConnection + Clone + Sync + 'static> fmt::Debug for Lease<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("key", &self.held.call.key().escape_ascii().to_string())
            .field("id", &self.held.id)
            .field("renewing", &self.renewal.is_some())
            .finish()
    }
}

/// An acquire being built: `limiter.acquire(key, limit, lease)`, options,
/// then `.await`.
#[must_use = "an acquire does nothing until awaited"]
pub struct Acquire<C> {
    limiter: AsyncLimiter<C>,
    call: Concurrent,
    renew_every: Option<Option<Duration>>,
}

impl<C: AsyncConnection + Clone + Sync + 'static> Acquire<C> {
    /// Slots this lease takes (default 1).
    pub fn cost(mut self, n: u64) -> Acquire<C> {
        self.call = self.call.cost(n);
        self
    }

    /// Waits on the server up to `max_wait` for the slots to be free, on a
    /// connection of its own (see [`AsyncLimiter::with_wait_connections`]).
    pub fn wait(mut self, max_wait: impl Into<DurationArg>) -> Acquire<C> {
        self.call = self.call.wait(max_wait);
        self
    }

    /// Reads the limit and the lease's length from the override at
    /// `okey`, if one is there.
    pub fn override_key(mut self, okey: impl AsRef<[u8]>) -> Acquire<C> {
        self.call = self.call.override_key(okey);
        self
    }

    /// Renews the lease in the background every third of its length until
    /// it is released or dropped; a renewal that finds it lost is reported
    /// by [`Lease::lost`] and [`Lease::is_lost`], and renewing stops. A
    /// failed renewal is tried again at the next period, and the lease is
    /// reported lost once its end has come without one getting through.
    /// Needs a tokio runtime (the current one at the acquire).
    pub fn keep_alive(mut self) -> Acquire<C> {
        self.renew_every = Some(None);
        self
    }

    /// As [`Acquire::keep_alive`], every `period`.
    pub fn keep_alive_every(mut self, period: Duration) -> Acquire<C> {
        self.renew_every = Some(Some(period));
        self
    }

    async fn run(self) -> RedisResult<Result<Lease<C>, Refused>> {
        acquiring(&self.call)?;
        let decision: Decision = self.limiter.run(&self.call).await?;
        let held = match HeldLease::from_reply(self.call, decision) {
            Ok(held) => held,
            Err(refused) => return Ok(Err(refused)),
        };
        let mut lease = Lease {
            limiter: self.limiter,
            held,
            renewal: None,
            done: false,
        };
        // Were renewing refused, the lease dropped here is released.
        match self.renew_every {
            None => {}
            Some(None) => lease.keep_alive()?,
            Some(Some(period)) => lease.keep_alive_every(period)?,
        }
        Ok(Ok(lease))
    }
}

impl<C: AsyncConnection + Clone + Sync + 'static> IntoFuture for Acquire<C> {
    type Output = RedisResult<Result<Lease<C>, Refused>>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.run())
    }
}

impl<C: AsyncConnection + Clone + Sync + 'static> AsyncLimiter<C> {
    /// Takes a lease of `RL.CONCURRENT key limit lease`: at most `limit`
    /// slots held at once. `Ok(Err(Refused))` when its slots are not free.
    ///
    /// ```no_run
    /// use librl_client::AsyncLimiter;
    ///
    /// # async fn f(limiter: AsyncLimiter<redis::aio::MultiplexedConnection>) -> redis::RedisResult<()> {
    /// match limiter.acquire("llm:inflight:{key:7f3a}", 5, "60s").keep_alive().await? {
    ///     Ok(lease) => {
    ///         // ... the work ...
    ///         lease.release().await?;
    ///     }
    ///     Err(refused) => println!("busy, retry in {:?}", refused.retry_after()),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn acquire(
        &self,
        key: impl AsRef<[u8]>,
        limit: u64,
        lease: impl Into<DurationArg>,
    ) -> Acquire<C> {
        self.acquire_with(Concurrent::new(key, limit, lease))
    }

    /// As [`AsyncLimiter::acquire`], for a [`Concurrent`] built already.
    pub fn acquire_with(&self, call: Concurrent) -> Acquire<C> {
        Acquire {
            limiter: self.clone(),
            call,
            renew_every: None,
        }
    }

    /// A guard for a lease taken elsewhere: by the [`Concurrent`] clause of
    /// an `RL.ALL` (its id in [`AllDecision::leases`](crate::AllDecision::leases)),
    /// or a [`HeldLease`] detached earlier.
    pub fn adopt(&self, held: HeldLease) -> Lease<C> {
        Lease {
            limiter: self.clone(),
            held,
            renewal: None,
            done: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::argv_text as argv;

    #[test]
    fn a_release_leaves_the_override_out_and_a_renewal_keeps_it() {
        let call = Concurrent::new("{t}k", 5, "30s")
            .cost(2)
            .override_key("{t}o");
        let id = LeaseId::new(7).unwrap();
        let decision = Decision {
            allowed: true,
            count: 2,
            retry_after: RetryAfter::Ms(0),
            limit: 5,
            remaining: 3,
            reset_after_ms: 30000,
            lease: Some(id),
        };
        let held = HeldLease::new(call, id, decision);
        assert_eq!(
            argv(&held.release_call().unwrap()),
            ["RL.CONCURRENT", "{t}k", "5", "30000ms", "RELEASE", "7"]
        );
        assert_eq!(
            argv(&held.renew_call().unwrap()),
            [
                "RL.CONCURRENT",
                "{t}k",
                "5",
                "30000ms",
                "RENEW",
                "7",
                "OVERRIDE",
                "{t}o"
            ]
        );
    }
}
