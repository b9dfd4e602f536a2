//! A limit as a call states it: one variant per algorithm, each with only
//! its own parameters, and the pure merge of an operator's override.

use crate::approx::ApproxParams;
use crate::concurrent::ConcurrentParams;
use crate::fixed::FixedParams;
use crate::overrides::Override;
use crate::sliding::SlidingParams;
use crate::token::TokenParams;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    Fixed(FixedParams),
    /// SLIDING's exact log.
    Sliding(SlidingParams),
    /// SLIDING APPROX: the two-window weighted counter.
    Approx(ApproxParams),
    Token(TokenParams),
    Concurrent(ConcurrentParams),
}

impl Limit {
    /// The limit with an override's values in place of the call's own:
    /// limit (TOKEN: rate) and window (CONCURRENT: the lease) always; a
    /// token bucket's capacity becomes the override's burst, or its rate
    /// when it has none. A window's alignment is the call's, not the
    /// override's.
    pub fn with_override(self, o: &Override) -> Limit {
        match self {
            Limit::Fixed(p) => Limit::Fixed(FixedParams {
                limit: o.limit,
                window_ms: o.window_ms,
                aligned: p.aligned,
            }),
            Limit::Sliding(_) => Limit::Sliding(SlidingParams {
                limit: o.limit,
                window_ms: o.window_ms,
            }),
            Limit::Approx(_) => Limit::Approx(ApproxParams {
                limit: o.limit,
                window_ms: o.window_ms,
            }),
            Limit::Token(_) => Limit::Token(TokenParams {
                rate: o.limit,
                window_ms: o.window_ms,
                capacity: o.burst.unwrap_or(o.limit),
            }),
            Limit::Concurrent(_) => Limit::Concurrent(ConcurrentParams {
                limit: o.limit,
                lease_ms: o.window_ms,
            }),
        }
    }

    /// The effective limit a reply reports (TOKEN: the capacity).
    pub fn reported_limit(&self) -> u64 {
        match self {
            Limit::Fixed(p) => p.limit.get(),
            Limit::Sliding(p) => p.limit.get(),
            Limit::Approx(p) => p.limit.get(),
            Limit::Token(p) => p.capacity.get(),
            Limit::Concurrent(p) => p.limit.get(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::{Amount, Window};

    const O: Override = Override {
        limit: Amount::new(7).unwrap(),
        window_ms: Window::new(2_000).unwrap(),
        burst: None,
    };

    #[test]
    fn override_replaces_limit_and_window_and_keeps_alignment() {
        let fixed = Limit::Fixed(FixedParams::new(100, 60_000, true).unwrap());
        assert_eq!(
            fixed.with_override(&O),
            Limit::Fixed(FixedParams::new(7, 2_000, true).unwrap())
        );
        let sliding = Limit::Sliding(SlidingParams::new(1, 1).unwrap());
        assert_eq!(
            sliding.with_override(&O),
            Limit::Sliding(SlidingParams::new(7, 2_000).unwrap())
        );
        let approx = Limit::Approx(ApproxParams::new(1, 1).unwrap());
        assert_eq!(
            approx.with_override(&O),
            Limit::Approx(ApproxParams::new(7, 2_000).unwrap())
        );
        // A concurrency limit's lease is the override's window.
        let concurrent = Limit::Concurrent(ConcurrentParams::new(1, 30_000).unwrap());
        assert_eq!(
            concurrent.with_override(&O),
            Limit::Concurrent(ConcurrentParams::new(7, 2_000).unwrap())
        );
        assert_eq!(concurrent.with_override(&O).reported_limit(), 7);
    }

    #[test]
    fn token_capacity_is_the_override_burst_or_its_rate() {
        let token = Limit::Token(TokenParams::new(10, 1_000, 50).unwrap());
        let rate_only = token.with_override(&O);
        assert_eq!(
            rate_only,
            Limit::Token(TokenParams::new(7, 2_000, 7).unwrap())
        );
        let with_burst = token.with_override(&Override {
            burst: Amount::new(30),
            ..O
        });
        assert_eq!(with_burst.reported_limit(), 30);
    }
}
