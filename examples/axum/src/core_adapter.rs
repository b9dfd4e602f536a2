//! The one file that speaks `librl-core`: it runs the module's own pure
//! algorithms for the `local` fail mode and turns their decisions into the
//! client's [`Decision`]. A change to the core's types is fixed here.

use librl_client::{Decision, RetryAfter};
use librl_core::decision::{Decision as CoreDecision, RetryAfter as CoreRetryAfter, Verdict};
use librl_core::sliding::VecLog;
use librl_core::{approx, fixed, sliding, token};

use crate::policy::Algorithm;

/// One limiter's state, as the module would store it in its key.
#[derive(Clone, Debug)]
pub enum State {
    Fixed(fixed::FixedState),
    Approx(approx::ApproxState),
    Sliding(VecLog),
    Token(token::TokenState),
}

/// What committing an admitted call does to the state.
#[derive(Clone, Debug)]
pub enum Commit {
    Replace(State),
    Append(sliding::Append),
}

/// One call decided: the reply, and for an admitted call what committing
/// it stores and until when that matters (the key's expiry, Unix ms).
#[derive(Clone, Debug)]
pub struct Outcome {
    pub reply: Decision,
    pub commit: Option<(Commit, u64)>,
}

/// Decides one call of `cost` at `now` (Unix ms). A state of another
/// algorithm (the policy changed) counts as none.
pub fn decide(
    algorithm: Algorithm,
    limit: u64,
    window_ms: u64,
    state: Option<&State>,
    now: u64,
    cost: u64,
) -> Outcome {
    match algorithm {
        Algorithm::Fixed { aligned } => {
            let params = fixed::FixedParams {
                limit,
                window_ms,
                aligned,
            };
            let state = match state {
                Some(State::Fixed(s)) => Some(*s),
                _ => None,
            };
            outcome(fixed::decide(&params, state, now, cost), |s| {
                Commit::Replace(State::Fixed(s))
            })
        }
        Algorithm::Sliding { approx: true } => {
            let params = approx::ApproxParams { limit, window_ms };
            let state = match state {
                Some(State::Approx(s)) => Some(*s),
                _ => None,
            };
            outcome(approx::decide(&params, state, now, cost), |s| {
                Commit::Replace(State::Approx(s))
            })
        }
        Algorithm::Sliding { approx: false } => {
            let params = sliding::SlidingParams { limit, window_ms };
            let log = match state {
                Some(State::Sliding(log)) => Some(log),
                _ => None,
            };
            // An in-memory log cannot be corrupt; were it, start afresh.
            let decided = sliding::decide(&params, log, now, cost)
                .or_else(|_| sliding::decide::<VecLog>(&params, None, now, cost));
            match decided {
                Ok(d) => outcome(d, Commit::Append),
                Err(_) => Outcome {
                    reply: Decision {
                        allowed: false,
                        count: 0,
                        retry_after: RetryAfter::Never,
                        limit,
                        remaining: limit,
                        reset_after_ms: 0,
                    },
                    commit: None,
                },
            }
        }
        Algorithm::Token { burst } => {
            let params = token::TokenParams {
                rate: limit,
                window_ms,
                capacity: burst.unwrap_or(limit),
            };
            let state = match state {
                Some(State::Token(s)) => Some(*s),
                _ => None,
            };
            outcome(token::decide(&params, state, now, cost), |s| {
                Commit::Replace(State::Token(s))
            })
        }
    }
}

/// The state after committing; `state` is the one the call was decided on.
pub fn commit(state: Option<State>, commit: Commit) -> State {
    match commit {
        Commit::Replace(new) => new,
        Commit::Append(append) => {
            let mut log = match state {
                Some(State::Sliding(log)) => log,
                _ => VecLog::default(),
            };
            log.apply(&append);
            State::Sliding(log)
        }
    }
}

fn outcome<S>(d: CoreDecision<S>, commit: impl FnOnce(S) -> Commit) -> Outcome {
    let (allowed, count, limit, remaining, reset_after_ms) = (
        d.allowed(),
        d.count,
        d.limit,
        d.remaining(),
        d.reset_after_ms,
    );
    let (retry_after, commit) = match d.verdict {
        Verdict::Admit {
            state,
            expires_at_ms,
            wait_ms,
        } => (
            RetryAfter::Ms(wait_ms),
            Some((commit(state), expires_at_ms)),
        ),
        Verdict::Deny(CoreRetryAfter::After(ms)) => (RetryAfter::Ms(ms), None),
        Verdict::Deny(CoreRetryAfter::Never) => (RetryAfter::Never, None),
    };
    Outcome {
        reply: Decision {
            allowed,
            count,
            retry_after,
            limit,
            remaining,
            reset_after_ms,
        },
        commit,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Calls `(now, cost)` on one limiter, committing admitted ones.
    fn run(
        algorithm: Algorithm,
        limit: u64,
        window_ms: u64,
        calls: &[(u64, u64)],
    ) -> Vec<[i64; 6]> {
        let mut state = None;
        calls
            .iter()
            .map(|&(now, cost)| {
                let o = decide(algorithm, limit, window_ms, state.as_ref(), now, cost);
                if let Some((c, _)) = o.commit {
                    state = Some(commit(state.take(), c));
                }
                o.reply.to_reply()
            })
            .collect()
    }

    #[test]
    fn each_algorithm_replies_as_the_module_does() {
        // The README's worked examples.
        let fixed = Algorithm::Fixed { aligned: false };
        assert_eq!(
            run(fixed, 3, 60_000, &[(0, 1), (10, 2), (15, 1), (20, 4)]),
            [
                [1, 1, 0, 3, 2, 60000],
                [1, 3, 0, 3, 0, 59990],
                [0, 3, 59985, 3, 0, 59985],
                [0, 3, -1, 3, 0, 59980]
            ]
        );
        let token = Algorithm::Token { burst: Some(50) };
        assert_eq!(
            run(token, 10, 1000, &[(0, 50), (0, 1)]),
            [[1, 50, 0, 50, 0, 5000], [0, 50, 100, 50, 0, 5000]]
        );
        let sliding = Algorithm::Sliding { approx: false };
        assert_eq!(
            run(
                sliding,
                3,
                1000,
                &[
                    (10_000, 1),
                    (10_100, 1),
                    (10_200, 1),
                    (10_500, 1),
                    (11_000, 1),
                    (11_050, 1)
                ]
            )
            .iter()
            .map(|r| (r[0], r[2]))
            .collect::<Vec<_>>(),
            [(1, 0), (1, 0), (1, 0), (0, 500), (1, 0), (0, 50)]
        );
        let approx = Algorithm::Sliding { approx: true };
        assert_eq!(run(approx, 2, 1000, &[(0, 1), (1, 1), (2, 1)])[2][0], 0);
    }
}
