//! What a limiter answers for one call, shared by every algorithm.

/// Why a denied call was denied, as the wait that would change that.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryAfter {
    /// The same call fits after this many milliseconds.
    After(u64),
    /// The cost exceeds the effective limit: no wait helps.
    Never,
}

impl RetryAfter {
    /// The reply's integer: the wait in ms, or -1 for never.
    pub fn as_reply(self) -> i64 {
        match self {
            RetryAfter::After(ms) => i64::try_from(ms).unwrap_or(i64::MAX),
            RetryAfter::Never => -1,
        }
    }

    /// The larger of two reasons to wait: never beats any wait.
    pub fn max(self, other: RetryAfter) -> RetryAfter {
        match (self, other) {
            (RetryAfter::After(a), RetryAfter::After(b)) => RetryAfter::After(a.max(b)),
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
            } => Some((state, *expires_at_ms)),
            Verdict::Deny(_) => None,
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

    /// The six-integer limiter reply of the SPEC:
    /// `[allowed, count, retry_after, limit, remaining, reset_after]`.
    pub fn reply(&self) -> [i64; 6] {
        let int = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        [
            i64::from(self.allowed()),
            int(self.count),
            self.denied().map_or(0, RetryAfter::as_reply),
            int(self.limit),
            int(self.remaining()),
            int(self.reset_after_ms),
        ]
    }
}
