//! RL.CONCURRENT beyond the shared limiter flow: `WAIT max_wait` queues a
//! caller refused for want of a free slot (the queue, its blocked clients
//! and its timers are the server shim's, server/queue.rs), and a RELEASE
//! wakes the key's waiters at once, in arrival order. A waiter also tries
//! when the leases it needs end by themselves, and is refused at its
//! deadline.
//!
//! A waiter's lease is decided when it is served, with the clock (or the
//! releasing call's time) of that moment, and replicated as its own call
//! with that time, so replicas and AOF replay hold the same leases without
//! ever blocking.

use super::limiter::{self, count_outcome, decide, off_reply, record, How, Shape};
use crate::error::RlError;
use crate::mode::{Mode, MODE};
use crate::request::{parse_limiter, Action, Algorithm, Clause};
use crate::server::{Arg, Attempt, Call, HeldReply, Reply, Turn};
use crate::stats::{self, Command, Counter, Event};
use librl_core::decision::RetryAfter;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Settles a single RL.CONCURRENT call whose clause is decided: the shared
/// flow, except that a WAIT that is refused (or that comes while others
/// wait on the key) waits in the key's queue, and a RELEASE that freed a
/// lease then serves the key's waiters.
pub fn settle(
    call: Call<'_>,
    how: &How,
    decided: [limiter::Decided<'_>; 1],
    clause: &Clause<'_, Arg>,
) -> Result<(), RlError> {
    let key = clause.key.bytes();
    if let Some(retry_at) = queues_at(call, how, &decided[0], clause) {
        if call.can_block() && call.wait_for_slot(key, max_wait_ms(clause), retry_at, attempt) {
            stats::count_event(Event::Waited);
            return Ok(());
        }
    }
    let wakes = !how.peek && !how.replayed && decided[0].checked.event == Some(Event::Released);
    limiter::settle(call, how, &decided, std::slice::from_ref(clause))?;
    drop(decided);
    if wakes {
        call.serve_waiters(key);
    }
    Ok(())
}

/// The WAIT's `max_wait`, 0 without WAIT.
fn max_wait_ms(clause: &Clause<'_, Arg>) -> u64 {
    match clause.action {
        Action::Take {
            cost,
            reserve: Some(r),
        } if cost > 0 && r.wait => r.max_wait_ms,
        _ => 0,
    }
}

/// Whether the call waits, and until when its leases alone would let it
/// in (None: only a release can): a WAIT refused with a finite
/// retry_after, or one that would fit but comes while others wait on the
/// key (it queues behind them). A replayed call, a PEEK and a `WAIT 0` never
/// wait.
fn queues_at(
    call: Call<'_>,
    how: &How,
    d: &limiter::Decided<'_>,
    clause: &Clause<'_, Arg>,
) -> Option<Option<u64>> {
    if max_wait_ms(clause) == 0 || how.peek || how.replayed {
        return None;
    }
    match d.checked.denied {
        Some(RetryAfter::Ms(ms)) => Some(Some(how.now.saturating_add(ms))),
        Some(RetryAfter::Never) => None,
        None => call.has_waiters(clause.key.bytes()).then_some(None),
    }
}

/// A waiter's turn (see [`Turn`]), behind the panic boundary: its answer,
/// counted in `INFO rl` as the call's outcome.
pub fn attempt(call: Call<'_>, now: u64, turn: Turn) -> Attempt {
    let outcome = catch_unwind(AssertUnwindSafe(|| turn_of(call, now, turn)))
        .unwrap_or(Err(RlError::Internal("a waiter's turn panicked")));
    outcome.unwrap_or_else(|e| {
        if let RlError::Internal(what) = e {
            call.ctx
                .log_warning(&format!("librl: internal error ({what}); replied an error"));
        }
        stats::count_error(Command::Concurrent, &e);
        Attempt::Done(Err(e.to_string()))
    })
}

fn turn_of(call: Call<'_>, now: u64, turn: Turn) -> Result<Attempt, RlError> {
    let command = Command::Concurrent;
    let mode = MODE.current();
    if turn == Turn::Gone {
        // Nobody to answer: counted as refused, nothing read or written.
        count_outcome(command, false, mode);
        return Ok(Attempt::Wait(None));
    }
    if turn == Turn::Moved {
        return Err(RlError::SlotMoved);
    }
    // The arguments were checked when the call came.
    let request = parse_limiter(Algorithm::Concurrent, call.args, false)?;
    if mode == Mode::off {
        stats::count(command, Counter::Allowed);
        return Ok(Attempt::Done(Ok(Reply::One(off_reply(&request.clause)))));
    }
    let how = How {
        shape: Shape::One(Algorithm::Concurrent),
        replayed: false,
        mode,
        now,
        peek: false,
    };
    let take = matches!(turn, Turn::Head | Turn::Deadline);
    let decided = [decide(call, &request.clause, !take, now)?];
    let denied = decided[0].checked.denied;
    match denied {
        None if take => {
            record(call, &how, &decided)?;
            Ok(done(&how, true, RetryAfter::Ms(0), &decided))
        }
        Some(RetryAfter::Ms(ms)) if turn == Turn::Head => {
            Ok(Attempt::Wait(Some(now.saturating_add(ms))))
        }
        // Refused: at the deadline, by CLIENT UNBLOCK (which takes
        // nothing, even where a slot is free: then retry_after 0), or for
        // good (the limit dropped below the call's cost).
        _ => {
            count_outcome(command, false, mode);
            let decided = if denied.is_some() {
                decided
            } else {
                // The leases as they stand, this call's not among them.
                let mut read = request.clause;
                read.action = Action::Take {
                    cost: 0,
                    reserve: None,
                };
                [decide(call, &read, true, now)?]
            };
            let how = How { peek: true, ..how };
            let mut reply = done(&how, false, denied.unwrap_or(RetryAfter::Ms(0)), &decided);
            if let Attempt::Done(Ok(Reply::One(r))) = &mut reply {
                r.allowed = mode == Mode::monitor;
            }
            Ok(reply)
        }
    }
}

/// The waiter's reply, owned (it outlives the call's keys).
fn done(
    how: &How,
    admitted: bool,
    retry_after: RetryAfter,
    decided: &[limiter::Decided<'_>],
) -> Attempt {
    let reply: HeldReply = match limiter::reply(how, admitted, retry_after, decided) {
        Reply::One(r) => Reply::One(r),
        Reply::All {
            allowed,
            retry_after,
            clauses,
        } => Reply::All {
            allowed,
            retry_after,
            clauses: clauses.collect::<Vec<_>>().into_iter(),
        },
    };
    Attempt::Done(Ok(reply))
}
