//! An operator's per-key override: values that replace a limiter call's own
//! limit, window and burst while it exists.

use super::units::{Amount, Window};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Override {
    /// The limit (FIXED, SLIDING) or rate (TOKEN).
    pub limit: Amount,
    pub window_ms: Window,
    /// TOKEN's capacity; None means the limit.
    pub burst: Option<Amount>,
}
