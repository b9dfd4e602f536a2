//! Calls that keep working while their slot migrates.
//!
//! While a slot moves key by key, the cluster answers `TRYAGAIN` to a call
//! whose keys are partly on each side: one whose override key was never
//! set, or an `RL.ALL` whose per-second key expired while its per-day key
//! lives on. Such a call can run only once the whole slot has moved
//! (docs/operations.md, While a slot moves). redis-rs retries it itself,
//! up to its cluster client's `retries` and with its own waits (1.28 s at
//! least by default); what it gives up on comes here, and is tried again
//! after 5 ms, then 10, 20, 40 ms and every 100 ms, until it runs or the
//! call's retry window closes. `TRYAGAIN` means the server ran nothing, so
//! a retry never counts a call twice.

use std::time::{Duration, Instant};

use redis::{ErrorKind, RedisError, ServerErrorKind};

/// How long a call keeps retrying while its slot migrates, unless the
/// limiter is told otherwise: a slot of a few thousand keys takes a second
/// or two to move.
pub const DEFAULT_TRY_AGAIN_WAIT: Duration = Duration::from_secs(5);

/// The first pause: most `TRYAGAIN`s clear as soon as the next batch of
/// keys has moved.
const FIRST_BACKOFF: Duration = Duration::from_millis(5);

/// The longest pause, so that a long migration is not polled hard.
const MAX_BACKOFF: Duration = Duration::from_millis(100);

/// The call was not run because its slot is moving: `TRYAGAIN`, or a
/// `MOVED` or `ASK` redis-rs returned after running out of redirects.
pub(crate) fn slot_moving(e: &RedisError) -> bool {
    matches!(
        e.kind(),
        ErrorKind::Server(
            ServerErrorKind::TryAgain | ServerErrorKind::Moved | ServerErrorKind::Ask
        )
    )
}

/// The pauses between the retries of one call, within its window.
pub(crate) struct Backoff {
    deadline: Instant,
    next: Duration,
}

impl Backoff {
    /// A call that started at `started` with a retry window of `window`.
    pub(crate) fn new(started: Instant, window: Duration) -> Backoff {
        Backoff {
            deadline: started + window,
            next: FIRST_BACKOFF,
        }
    }

    /// The pause before retrying after `error` at `now`, or `None` when the
    /// error is not a slot in motion or the window would close first.
    pub(crate) fn pause(&mut self, error: &RedisError, now: Instant) -> Option<Duration> {
        if !slot_moving(error) || now + self.next > self.deadline {
            return None;
        }
        let pause = self.next;
        self.next = (self.next * 2).min(MAX_BACKOFF);
        Some(pause)
    }
}

/// Retry waits for a redis-rs cluster client that suit calls in a
/// migrating slot: 5 ms at first, doubling, at most 100 ms (redis-rs's
/// default is 1.28 s at least per `TRYAGAIN`, so a call caught by a
/// migration would wait over a second past its end). Its retry count is
/// left as it is; what it gives up on, the limiter retries within its
/// window. The shorter waits apply to every error redis-rs retries after a
/// pause (also `CLUSTERDOWN` during a failover, which then ends the
/// call's retries sooner).
///
/// ```no_run
/// let client = librl_client::short_cluster_retries(
///     redis::cluster::ClusterClientBuilder::new(vec!["redis://127.0.0.1:7000/"]),
/// )
/// .build()?;
/// # Ok::<(), redis::RedisError>(())
/// ```
pub fn short_cluster_retries(
    builder: redis::cluster::ClusterClientBuilder,
) -> redis::cluster::ClusterClientBuilder {
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    builder
        .min_retry_wait(ms(FIRST_BACKOFF))
        .max_retry_wait(ms(MAX_BACKOFF))
        .retry_wait_formula(ms(FIRST_BACKOFF), 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(kind: ServerErrorKind) -> RedisError {
        RedisError::from((ErrorKind::Server(kind), "from the server"))
    }

    #[test]
    fn retries_a_slot_in_motion_with_a_growing_pause_within_the_window() {
        let t0 = Instant::now();
        let tryagain = server(ServerErrorKind::TryAgain);
        assert!(slot_moving(&tryagain), "{tryagain:?}");
        let mut b = Backoff::new(t0, Duration::from_millis(400));
        let ms = Duration::from_millis;
        let pauses: Vec<_> = std::iter::from_fn(|| b.pause(&tryagain, t0))
            .take(6)
            .collect();
        assert_eq!(pauses, [ms(5), ms(10), ms(20), ms(40), ms(80), ms(100)]);
        assert_eq!(b.pause(&tryagain, t0 + ms(300)), Some(ms(100)));
        assert_eq!(b.pause(&tryagain, t0 + ms(301)), None, "the window closes");
        let mut b = Backoff::new(t0, ms(400));
        let wrongtype = server(ServerErrorKind::ResponseError);
        assert_eq!(b.pause(&wrongtype, t0), None);
        let io = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert_eq!(b.pause(&io, t0), None);
        assert!(b.pause(&server(ServerErrorKind::Moved), t0).is_some());
        assert_eq!(Backoff::new(t0, Duration::ZERO).pause(&tryagain, t0), None);
    }
}
