//! The one renderer of a limiter command's reply. The reply stays typed
//! (`LimiterReply`: allowed, retry_after, counts, and a concurrency
//! limiter's lease id) until it is written here;
//! monitor mode and WAIT change it through its methods, never by index.

use super::Call;
use librl_core::decision::{LimiterReply, RetryAfter};

/// A limiter command's reply: a single limiter's six integers, or RL.ALL's
/// `[allowed, retry_after, clause replies...]`. `C` yields the clause
/// replies (borrowed from the decisions, or owned by a held reply).
pub enum Reply<C> {
    One(LimiterReply),
    All {
        allowed: bool,
        retry_after: RetryAfter,
        clauses: C,
    },
}

impl<C> Reply<C> {
    /// Monitor mode: the call is admitted; a single limiter's retry_after
    /// and RL.ALL's clause replies still say what `on` would have refused.
    pub fn monitored(self) -> Reply<C> {
        match self {
            Reply::One(r) => Reply::One(r.monitored()),
            Reply::All {
                retry_after,
                clauses,
                ..
            } => Reply::All {
                allowed: true,
                retry_after,
                clauses,
            },
        }
    }

    /// A held reply released `left_ms` before its reserved time (`CLIENT
    /// UNBLOCK`): that much is still to wait, added to what RL.ALL's
    /// RESERVE clauses ask of the caller after the hold.
    pub fn released_early(self, left_ms: u64) -> Reply<C> {
        match self {
            Reply::One(r) => Reply::One(LimiterReply {
                retry_after: RetryAfter::Ms(left_ms),
                ..r
            }),
            Reply::All {
                allowed,
                retry_after,
                clauses,
            } => Reply::All {
                allowed,
                retry_after: match retry_after {
                    RetryAfter::Ms(ms) => RetryAfter::Ms(ms.saturating_add(left_ms)),
                    RetryAfter::Never => RetryAfter::Never,
                },
                clauses,
            },
        }
    }
}

impl Call<'_> {
    /// Writes a limiter command's reply.
    #[inline(always)]
    pub fn reply_limiter<C>(self, reply: Reply<C>)
    where
        C: IntoIterator<Item = LimiterReply, IntoIter: ExactSizeIterator>,
    {
        #[inline(always)]
        fn integers(call: Call<'_>, r: &LimiterReply) {
            let (ints, len) = r.integers();
            call.reply_integers(ints.get(..len).unwrap_or_default());
        }
        match reply {
            Reply::One(r) => integers(self, &r),
            Reply::All {
                allowed,
                retry_after,
                clauses,
            } => {
                let clauses = clauses.into_iter();
                self.reply_array(2 + clauses.len());
                self.reply_integer(i64::from(allowed));
                self.reply_integer(retry_after.as_reply());
                for r in clauses {
                    integers(self, &r);
                }
            }
        }
    }
}
