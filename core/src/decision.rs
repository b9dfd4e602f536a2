//! What a limiter answers for one call, shared by every algorithm.

/// How long a denied caller should wait before the same call would be admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryAfter {
    /// The call was admitted.
    Now,
    /// The call fits after this many milliseconds.
    After(u64),
    /// The cost exceeds the effective limit: no wait helps.
    Never,
}

impl RetryAfter {
    /// The reply's integer: 0, the wait in ms, or -1 for never.
    pub fn as_reply(self) -> i64 {
        match self {
            RetryAfter::Now => 0,
            RetryAfter::After(ms) => i64::try_from(ms).unwrap_or(i64::MAX),
            RetryAfter::Never => -1,
        }
    }
}

/// One call's outcome. `new_state` is what committing the call stores; it is
/// `Some` exactly when the call is admitted, so deciding and committing stay
/// separate steps (several limits can be checked before any is recorded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision<S> {
    pub allowed: bool,
    /// Units counted against the limit after this call.
    pub count: u64,
    pub retry_after: RetryAfter,
    /// The effective limit (for a token bucket, its capacity).
    pub limit: u64,
    /// Milliseconds until the limiter is back to empty; the key's remaining life.
    pub reset_after_ms: u64,
    pub new_state: Option<S>,
    /// Absolute time (ms) at which the stored state stops mattering: the
    /// key's expiry when `new_state` is written.
    pub expires_at_ms: u64,
}

impl<S> Decision<S> {
    pub fn remaining(&self) -> u64 {
        self.limit.saturating_sub(self.count)
    }

    /// The six-integer limiter reply of the SPEC:
    /// `[allowed, count, retry_after, limit, remaining, reset_after]`.
    pub fn reply(&self) -> [i64; 6] {
        let int = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        [
            i64::from(self.allowed),
            int(self.count),
            self.retry_after.as_reply(),
            int(self.limit),
            int(self.remaining()),
            int(self.reset_after_ms),
        ]
    }
}
