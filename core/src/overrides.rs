//! An operator's per-key override: values that replace a limiter call's own
//! limit, window and burst while it exists.

use super::{MAX_AMOUNT, MAX_WINDOW_MS};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Override {
    /// The limit (FIXED, SLIDING) or rate (TOKEN).
    pub limit: u64,
    pub window_ms: u64,
    /// TOKEN's capacity; None means the limit.
    pub burst: Option<u64>,
}

impl Override {
    pub fn is_consistent(&self) -> bool {
        (1..=MAX_AMOUNT).contains(&self.limit)
            && (1..=MAX_WINDOW_MS).contains(&self.window_ms)
            && self.burst.is_none_or(|b| (1..=MAX_AMOUNT).contains(&b))
    }
}
