//! A request's concurrency leases (docs/http.md, Concurrency policies):
//! held from the decision until the response is finished, then released
//! exactly once. The response body ([`ResponseBody`]) releases them when
//! it ends, before it reports its end, so a client holding the whole
//! response finds the slot free; dropped earlier (the client went away,
//! the handler failed or panicked, the future was dropped), [`Leases`]
//! releases them from a task. A release error is ignored: the lease ends
//! by itself after `lease`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::{Either, Full};
use librl_client::{Concurrent, Decision, LeaseId};
use pin_project_lite::pin_project;
use tokio::task::JoinHandle;

use crate::limiter::Shared;
use crate::plan::Check;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One lease a request holds.
#[derive(Clone, Debug)]
pub(crate) enum Held {
    /// Taken in Redis: the `RELEASE` that gives it back (without
    /// `OVERRIDE`).
    Redis(Concurrent),
    /// Taken by the `local` fail mode, in this process.
    Local { check: Check, id: LeaseId },
}

impl Held {
    /// The leases Redis gave these checks (a concurrency check admitted in
    /// `on` mode; none in `monitor` and `off`).
    pub(crate) fn redis(checks: &[Check], replies: &[Decision]) -> Vec<Held> {
        leases(checks, replies)
            .map(|(check, id)| Held::Redis(check.release(id)))
            .collect()
    }

    /// The leases Redis gave the shadow policies among these checks.
    pub(crate) fn redis_shadow(checks: &[Check], replies: &[Decision]) -> Vec<Held> {
        leases(checks, replies)
            .filter(|(check, _)| check.policy.shadow)
            .map(|(check, id)| Held::Redis(check.release(id)))
            .collect()
    }

    /// The leases the `local` fail mode gave these checks.
    pub(crate) fn local(checks: &[Check], replies: &[Decision]) -> Vec<Held> {
        leases(checks, replies)
            .map(|(check, id)| Held::Local {
                check: check.clone(),
                id,
            })
            .collect()
    }
}

fn leases<'a>(
    checks: &'a [Check],
    replies: &'a [Decision],
) -> impl Iterator<Item = (&'a Check, LeaseId)> + 'a {
    checks
        .iter()
        .zip(replies)
        .filter(|(check, _)| check.policy.is_concurrency())
        .filter_map(|(check, reply)| Some((check, reply.lease?)))
}

/// The leases of one request, released once: by [`Leases::release`], or
/// when dropped.
pub(crate) struct Leases {
    shared: Arc<Shared>,
    held: Vec<Held>,
}

impl Leases {
    pub(crate) fn new(shared: Arc<Shared>, held: Vec<Held>) -> Leases {
        Leases { shared, held }
    }

    /// Empties the guard: another now holds (and releases) its leases.
    pub(crate) fn claim(&mut self) {
        self.held.clear();
    }

    fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Releases every lease: the local ones at once, Redis's from a task
    /// (so that the release goes out whatever becomes of the caller), whose
    /// handle says when it is done. Nothing is sent without a tokio
    /// runtime (the leases then end by themselves).
    fn release(&mut self) -> Option<JoinHandle<()>> {
        let held = std::mem::take(&mut self.held);
        let mut redis = Vec::new();
        for lease in held {
            match lease {
                Held::Redis(call) => redis.push(call),
                Held::Local { check, id } => self.shared.release_local(&check, id),
            }
        }
        if redis.is_empty() {
            return None;
        }
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let shared = self.shared.clone();
        Some(runtime.spawn(async move { shared.release(&redis).await }))
    }
}

impl Drop for Leases {
    fn drop(&mut self) {
        drop(self.release());
    }
}

pin_project! {
    /// The body of the response: the service's own, or the middleware's
    /// refusal (429, 503, 400, 413; empty for a gRPC request's). A request
    /// holding concurrency leases releases them when its body ends: the
    /// last frame (or the end) is held back until the `RELEASE` has been
    /// answered (or has failed), then passed on; dropped before its end,
    /// the body releases them from a task.
    pub struct ResponseBody<R> {
        #[pin]
        inner: Either<R, Full<Bytes>>,
        leases: Option<Leases>,
        // The release under way, and the frame held back until it is done.
        releasing: Option<(JoinHandle<()>, Option<Frame<Bytes>>)>,
    }
}

impl<R> ResponseBody<R> {
    pub(crate) fn new(inner: Either<R, Full<Bytes>>, leases: Option<Leases>) -> ResponseBody<R> {
        ResponseBody {
            inner,
            leases: leases.filter(|l| !l.is_empty()),
            releasing: None,
        }
    }
}

impl<R> Body for ResponseBody<R>
where
    R: Body<Data = Bytes>,
    R::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let mut this = self.project();
        if this.releasing.is_none() {
            let polled = ready!(this.inner.as_mut().poll_frame(cx));
            let last = match &polled {
                Some(Ok(_)) => this.inner.is_end_stream(),
                // An error ends the body: its leases go when it is dropped.
                Some(Err(_)) => false,
                None => true,
            };
            let task = match this.leases.take() {
                Some(mut leases) if last => leases.release(),
                other => {
                    *this.leases = other;
                    None
                }
            };
            match task {
                Some(task) => *this.releasing = Some((task, polled.and_then(Result::ok))),
                None => return Poll::Ready(polled),
            }
        }
        if let Some((task, _)) = this.releasing.as_mut() {
            // A release that failed or panicked is as one that never came.
            let _ = ready!(Pin::new(task).poll(cx));
        }
        let held_back = this.releasing.take().and_then(|(_, frame)| frame);
        Poll::Ready(held_back.map(Ok))
    }

    fn is_end_stream(&self) -> bool {
        self.releasing.is_none() && self.leases.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
