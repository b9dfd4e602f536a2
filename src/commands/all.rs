//! `RL.ALL FIXED key limit window [ALIGNED] [COST n] [OVERRIDE okey]
//!         [SLIDING key limit window [APPROX] [COST n] [OVERRIDE okey]]
//!         [TOKEN key rate window [BURST capacity] [COST n] [OVERRIDE okey]]
//!         ... [PEEK]`
//!
//! Every clause is decided, and its commit prepared, before any key is
//! written: admitted only if all admit, and then all record the call.

use super::limiter::{
    count_outcome, decide, declare_clause_keys, effective_mode, off_reply, propagate,
    refuse_growth_under_oom, replayed, wants_wait,
};
use super::{guarded, Origin};
use crate::error::RlError;
use crate::mode::Mode;
use crate::request::{find_keys, parse_all};
use crate::server::{Call, Entry, HeldReply};
use crate::stats::{self, Command, Counter, Event};
use librl_core::decision::RetryAfter;

pub struct All;

impl Entry for All {
    fn run(call: Call<'_>) {
        if call.ctx.is_keys_request() {
            declare_keys(call);
            return;
        }
        guarded(call, Command::All, |origin| run(call, origin));
    }
}

fn run(call: Call<'_>, origin: &Origin<'_>) -> Result<(), RlError> {
    // One parse: whether the call is replayed is asked only if it says NOW.
    let request = parse_all(call.args, origin)?;
    let replayed = replayed(origin, request.replayed_now_ms.is_some());
    let mode = effective_mode(replayed);
    if mode == Mode::off {
        stats::count(Command::All, Counter::Allowed);
        call.reply_array(2 + request.clauses.len());
        call.reply_integer(1);
        call.reply_integer(0);
        for clause in &request.clauses {
            call.reply_integers(&off_reply(clause));
        }
        return Ok(());
    }
    let now = request
        .replayed_now_ms
        .unwrap_or_else(crate::server::now_ms);
    let decided = request
        .clauses
        .iter()
        .map(|clause| decide(call, clause, request.peek, now))
        .collect::<Result<Vec<_>, _>>()?;
    // The largest wait among the denying clauses; never beats any wait.
    let denied = decided
        .iter()
        .filter_map(|d| d.checked.denied)
        .reduce(RetryAfter::max);
    if !request.peek {
        // All-or-nothing under memory pressure too: one clause that would
        // add to the dataset refuses the whole call.
        let writes = decided
            .iter()
            .filter_map(|d| d.checked.write(denied.is_none()).map(|c| (c, &d.key)));
        refuse_growth_under_oom(call, replayed, writes)?;
        // Admitted: every clause records its commit. Denied: only the
        // blocks its denying clauses start are written.
        let mut wrote = false;
        for d in &decided {
            if let Some(commit) = d.checked.write(denied.is_none()) {
                commit.apply(&d.key);
                wrote = true;
            }
        }
        if wrote {
            propagate(call, c"RL.ALL", replayed, now);
        }
    }
    if !replayed {
        count_outcome(Command::All, denied.is_none(), mode);
        if !request.peek {
            // A denied call records nothing but the blocks it meets or starts.
            decided
                .iter()
                .filter_map(|d| d.checked.event)
                .filter(|e| {
                    denied.is_none() || matches!(e, Event::BlockStarted | Event::DeniedByBlock)
                })
                .for_each(stats::count_event);
        }
    }
    // An admitted call with reservations waits for the latest of them.
    let wait_ms = if denied.is_none() {
        decided.iter().map(|d| d.checked.wait_ms).max().unwrap_or(0)
    } else {
        0
    };
    // WAIT clauses hold the reply, each for its own wait (within its own
    // max_wait); a RESERVE clause's longer wait is left to the caller, as
    // the held reply's retry_after.
    let hold_ms = if denied.is_none() && !request.peek {
        decided
            .iter()
            .zip(&request.clauses)
            .filter(|(_, c)| wants_wait(c))
            .map(|(d, _)| d.checked.wait_ms)
            .max()
            .unwrap_or(0)
    } else {
        0
    };
    if hold_ms > 0 && call.can_block() {
        let held = decided
            .iter()
            .zip(&request.clauses)
            .map(|(d, c)| {
                if wants_wait(c) {
                    d.checked.held
                } else {
                    let mut reply = d.checked.reply;
                    reply[2] = reply[2]
                        .saturating_sub(i64::try_from(hold_ms).unwrap_or(i64::MAX))
                        .max(0);
                    reply
                }
            })
            .collect();
        let left = i64::try_from(wait_ms - hold_ms).unwrap_or(i64::MAX);
        let reply = HeldReply::All {
            retry_after: left,
            clauses: held,
        };
        if call.hold(hold_ms, now.saturating_add(hold_ms), reply) {
            if !replayed {
                stats::count_event(Event::Waited);
            }
            return Ok(());
        }
    }
    // Monitor admits the call; the clause replies still say which limits
    // would have refused it.
    let replied_allowed = denied.is_none() || mode == Mode::monitor;
    let retry_after = match denied {
        Some(retry) => retry.as_reply(),
        None => i64::try_from(wait_ms).unwrap_or(i64::MAX),
    };
    call.reply_array(2 + decided.len());
    call.reply_integer(i64::from(replied_allowed));
    call.reply_integer(retry_after);
    for d in &decided {
        call.reply_integers(&d.checked.reply);
    }
    Ok(())
}

/// Reports RL.ALL's keys to the server (getkeys API): every clause's key,
/// read and written, and every okey, only read. A call that does not parse
/// still reports every key it can find, so a cluster client routes it and
/// its node replies librl's own error.
fn declare_keys(call: Call<'_>) {
    match parse_all(call.args, true) {
        Ok(request) => request
            .clauses
            .iter()
            .for_each(|c| declare_clause_keys(call, c)),
        Err(_) => {
            for (pos, written) in find_keys(call.args, true) {
                call.declare_key(pos, written);
            }
        }
    }
}
