//! What a limiter answers for one call, shared by every algorithm: a
//! [`Decision`] for a call that asks to consume units (COST, RESERVE), a
//! [`Refunded`] for a call that gives units back (REFUND), and the
//! [`Status`] a call reports when it changes nothing.

/// A reply's retry_after: how long until the same call would be admitted
/// (for an admitted call, 0, or a RESERVE's wait before acting). Also the
/// Rust client's type for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RetryAfter {
    /// The same call fits after this many milliseconds.
    Ms(u64),
    /// The cost exceeds the effective limit: no wait helps (the reply's -1).
    Never,
}

impl RetryAfter {
    /// The wait as a duration; `None` when no wait helps.
    pub fn duration(self) -> Option<std::time::Duration> {
        match self {
            RetryAfter::Ms(ms) => Some(std::time::Duration::from_millis(ms)),
            RetryAfter::Never => None,
        }
    }

    /// The reply's integer: the wait in ms, or -1 for never.
    pub fn as_reply(self) -> i64 {
        match self {
            RetryAfter::Ms(ms) => i64::try_from(ms).unwrap_or(i64::MAX),
            RetryAfter::Never => -1,
        }
    }

    /// The larger of two reasons to wait: never beats any wait.
    pub fn max(self, other: RetryAfter) -> RetryAfter {
        match (self, other) {
            (RetryAfter::Ms(a), RetryAfter::Ms(b)) => RetryAfter::Ms(a.max(b)),
            _ => RetryAfter::Never,
        }
    }
}

/// Whether a call is admitted, said once: an admitted call carries what
/// committing it stores, a denied one why it was denied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict<S> {
    Admit {
        /// What committing the call stores.
        state: S,
        /// Absolute time (ms) at which the stored state stops mattering:
        /// the key's expiry.
        expires_at_ms: u64,
        /// How long the caller must wait before acting: 0 for every
        /// algorithm except a token bucket's RESERVE, whose admitted call
        /// takes tokens that only exist this many ms after the decision's
        /// `now`. The reply's retry_after.
        wait_ms: u64,
    },
    Deny(RetryAfter),
}

/// One call's outcome. Deciding and committing are separate steps, so
/// several limits can be checked before any is recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision<S> {
    pub verdict: Verdict<S>,
    /// Units counted against the limit after this call.
    pub count: u64,
    /// The effective limit (for a token bucket, its capacity).
    pub limit: u64,
    /// Milliseconds until the limiter is back to empty; the key's remaining life.
    pub reset_after_ms: u64,
}

impl<S> Decision<S> {
    pub fn allowed(&self) -> bool {
        matches!(self.verdict, Verdict::Admit { .. })
    }

    /// The denial's reason, or None when admitted.
    pub fn denied(&self) -> Option<RetryAfter> {
        match self.verdict {
            Verdict::Admit { .. } => None,
            Verdict::Deny(retry) => Some(retry),
        }
    }

    /// What committing stores and the key's absolute expiry, when admitted.
    pub fn admitted(&self) -> Option<(&S, u64)> {
        match &self.verdict {
            Verdict::Admit {
                state,
                expires_at_ms,
                ..
            } => Some((state, *expires_at_ms)),
            Verdict::Deny(_) => None,
        }
    }

    /// When admitted, the ms the caller waits before acting (RESERVE's
    /// turn; 0 for a call that may act now). WAIT holds its reply this
    /// long: the reserved millisecond is the decision's `now` plus this.
    pub fn wait_ms(&self) -> Option<u64> {
        match self.verdict {
            Verdict::Admit { wait_ms, .. } => Some(wait_ms),
            Verdict::Deny(_) => None,
        }
    }

    /// The same decision with its state turned into another type (e.g. a
    /// richer stored state into the one an older caller expects).
    pub fn map<T>(self, f: impl FnOnce(S) -> T) -> Decision<T> {
        Decision {
            verdict: match self.verdict {
                Verdict::Admit {
                    state,
                    expires_at_ms,
                    wait_ms,
                } => Verdict::Admit {
                    state: f(state),
                    expires_at_ms,
                    wait_ms,
                },
                Verdict::Deny(retry) => Verdict::Deny(retry),
            },
            count: self.count,
            limit: self.limit,
            reset_after_ms: self.reset_after_ms,
        }
    }

    /// The counts the decision reports, without its verdict.
    pub fn status(&self) -> Status {
        Status {
            count: self.count,
            limit: self.limit,
            reset_after_ms: self.reset_after_ms,
        }
    }

    /// The state committing stores, when admitted.
    pub fn into_state(self) -> Option<S> {
        match self.verdict {
            Verdict::Admit { state, .. } => Some(state),
            Verdict::Deny(_) => None,
        }
    }

    pub fn remaining(&self) -> u64 {
        self.limit.saturating_sub(self.count)
    }

    /// The limiter's reply: retry_after is the denial's wait, or an
    /// admitted RESERVE's wait (0 for every other admitted call).
    pub fn limiter_reply(&self) -> LimiterReply {
        let retry_after = match self.verdict {
            Verdict::Admit { wait_ms, .. } => RetryAfter::Ms(wait_ms),
            Verdict::Deny(retry) => retry,
        };
        self.status().limiter_reply(self.allowed(), retry_after)
    }

    /// The six integers of [`Decision::limiter_reply`].
    pub fn reply(&self) -> [i64; 6] {
        self.limiter_reply().six()
    }
}

/// A limiter's reply, typed until the one renderer writes it:
/// `[allowed, count, retry_after, limit, remaining, reset_after]`, and for
/// a concurrency limiter a seventh integer, the lease id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LimiterReply {
    pub allowed: bool,
    pub retry_after: RetryAfter,
    pub status: Status,
    /// The lease this call took or named (0: none); None for the limiters
    /// without leases, whose reply has six integers.
    pub lease: Option<u64>,
}

impl LimiterReply {
    /// The six integers every limiter replies, in the reply's order.
    #[inline(always)]
    pub fn six(&self) -> [i64; 6] {
        [
            i64::from(self.allowed),
            int(self.status.count),
            self.retry_after.as_reply(),
            int(self.status.limit),
            int(self.status.remaining()),
            int(self.status.reset_after_ms),
        ]
    }

    /// The reply's integers: the first `len` of the array (six, or seven
    /// with the lease id).
    #[inline(always)]
    pub fn integers(&self) -> ([i64; 7], usize) {
        let [a, b, c, d, e, f] = self.six();
        match self.lease {
            Some(id) => ([a, b, c, d, e, f, int(id)], 7),
            None => ([a, b, c, d, e, f, 0], 6),
        }
    }

    /// The reply of a concurrency limiter: with the lease id `id` (0 when
    /// the call holds no lease).
    pub fn with_lease(self, id: u64) -> LimiterReply {
        LimiterReply {
            lease: Some(id),
            ..self
        }
    }

    /// The reply of a call that took nothing although its clause would
    /// have admitted it (PEEK, an RL.ALL call another clause denied): a
    /// lease id, if the reply has one, is 0.
    pub fn nothing_taken(self) -> LimiterReply {
        LimiterReply {
            lease: self.lease.map(|_| 0),
            ..self
        }
    }

    /// Monitor mode: admitted, retry_after kept so the application can log
    /// what `on` would have said.
    pub fn monitored(self) -> LimiterReply {
        LimiterReply {
            allowed: true,
            ..self
        }
    }

    /// The reply at the reserved millisecond (WAIT): nothing left to wait.
    pub fn at_turn(self) -> LimiterReply {
        LimiterReply {
            retry_after: RetryAfter::Ms(0),
            ..self
        }
    }

    /// The reply after the server held it `held_ms`: the wait that is left
    /// (never below 0).
    pub fn after_hold(self, held_ms: u64) -> LimiterReply {
        let left = match self.retry_after {
            RetryAfter::Ms(ms) => ms.saturating_sub(held_ms),
            RetryAfter::Never => 0,
        };
        LimiterReply {
            retry_after: RetryAfter::Ms(left),
            ..self
        }
    }
}

fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A limiter's counts at some `now`: what a reply reports besides its
/// verdict. A call that changes nothing (a call during a block, a refund of
/// nothing) reports the limiter's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    /// Units counted against the limit.
    pub count: u64,
    /// The effective limit (for a token bucket, its capacity).
    pub limit: u64,
    /// Milliseconds until the limiter is back to empty; the key's remaining life.
    pub reset_after_ms: u64,
}

impl Status {
    pub fn remaining(&self) -> u64 {
        self.limit.saturating_sub(self.count)
    }

    /// The reply with these counts and the given verdict.
    pub fn limiter_reply(self, allowed: bool, retry_after: RetryAfter) -> LimiterReply {
        LimiterReply {
            allowed,
            retry_after,
            status: self,
            lease: None,
        }
    }

    /// The six integers of [`Status::limiter_reply`].
    pub fn reply(&self, allowed: bool, retry_after: RetryAfter) -> [i64; 6] {
        self.limiter_reply(allowed, retry_after).six()
    }
}

/// What a refund does to the limiter's stored state. "Nothing changed" is
/// its own variant, so it can never be written or propagated by mistake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change<S> {
    /// Nothing recorded was given back (nothing recorded, or the window
    /// has ended): no write, no propagation.
    Unchanged,
    /// Store this (the new state, or for the exact log the change to apply
    /// to it); the key expires at `expires_at_ms`.
    Store { state: S, expires_at_ms: u64 },
    /// Nothing is counted any more: the limiter is empty, so its key goes
    /// (deleted, as it would have expired at once). Under a block in force
    /// the key keeps the block alone (see `block`).
    Clear,
}

/// A REFUND's outcome: what it does to the key, and the counts after it.
/// Its reply has allowed=1 and retry_after=0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refunded<S> {
    pub change: Change<S>,
    /// Units counted against the limit after the refund.
    pub count: u64,
    pub limit: u64,
    /// Milliseconds until the limiter is back to empty after the refund.
    pub reset_after_ms: u64,
}

impl<S> Refunded<S> {
    /// Whether the refund writes (and so propagates) anything.
    pub fn changed(&self) -> bool {
        !matches!(self.change, Change::Unchanged)
    }

    pub fn status(&self) -> Status {
        Status {
            count: self.count,
            limit: self.limit,
            reset_after_ms: self.reset_after_ms,
        }
    }

    pub fn remaining(&self) -> u64 {
        self.limit.saturating_sub(self.count)
    }

    /// `[1, count, 0, limit, remaining, reset_after]`.
    pub fn reply(&self) -> [i64; 6] {
        self.status().reply(true, RetryAfter::Ms(0))
    }

    /// The refund's change with its state turned into another type.
    pub fn map<T>(self, f: impl FnOnce(S) -> T) -> Refunded<T> {
        Refunded {
            change: match self.change {
                Change::Unchanged => Change::Unchanged,
                Change::Store {
                    state,
                    expires_at_ms,
                } => Change::Store {
                    state: f(state),
                    expires_at_ms,
                },
                Change::Clear => Change::Clear,
            },
            count: self.count,
            limit: self.limit,
            reset_after_ms: self.reset_after_ms,
        }
    }
}
