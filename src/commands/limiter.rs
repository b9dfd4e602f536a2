//! The flow every limiter command shares, top to bottom: parse, resolve the
//! override, read the key, decide with an explicit `now`, write and
//! replicate only if admitted, reply. A single limiter is a call of one
//! clause; RL.ALL (all.rs) runs the same flow over its clauses, every one
//! decided, its commit prepared, before any key is written: admitted only
//! if all admit, and then all record the call. Above `maxmemory` a call
//! that would add to the dataset is refused before it writes.
//!
//! Replication: the primary propagates the call as it came plus its own
//! decision time (`NOW ms`), so replicas and AOF replay reach the same
//! decision from the same state (overrides included: their changes and
//! expiries are replicated before the calls that read them) without reading
//! their own clock. Denied calls and PEEK propagate nothing. Replies are
//! written directly: this is the hot path.

use super::{concurrent, guarded, Origin};
use crate::error::RlError;
use crate::mode::{Mode, MODE};
use crate::request::{find_keys, parse_all, parse_limiter, Action, Algorithm, Clause};
use crate::server::{Access, Arg, Call, Entry, Key, Reply};
use crate::state::{self, overrides::load_override, Checked, Step};
use crate::stats::{self, Command, Counter, Event};
use librl_core::decision::{LimiterReply, RetryAfter, Status};
use librl_core::limit::Limit;
use std::ffi::CStr;

// Each command's grammar is written once, in its entry in docs.rs (what
// COMMAND DOCS shows), which a test holds to the parser and to the
// reference's synopsis in docs/commands.md.

/// `RL.FIXED`: its grammar is [`crate::docs::FIXED`].
pub struct Fixed;
/// `RL.SLIDING`: its grammar is [`crate::docs::SLIDING`].
pub struct Sliding;
/// `RL.TOKEN`: its grammar is [`crate::docs::TOKEN`].
pub struct Token;
/// `RL.CONCURRENT`: its grammar is [`crate::docs::CONCURRENT`].
pub struct Concurrent;

impl Entry for Fixed {
    fn run(call: Call<'_>) {
        handle(call, Algorithm::Fixed);
    }
}

impl Entry for Sliding {
    fn run(call: Call<'_>) {
        handle(call, Algorithm::Sliding);
    }
}

impl Entry for Token {
    fn run(call: Call<'_>) {
        handle(call, Algorithm::Token);
    }
}

impl Entry for Concurrent {
    fn run(call: Call<'_>) {
        handle(call, Algorithm::Concurrent);
    }
}

/// Answers a getkeys request, or runs the call behind the panic boundary.
fn handle(call: Call<'_>, algorithm: Algorithm) {
    if call.ctx.is_keys_request() {
        declare_keys(call, Shape::One(algorithm));
        return;
    }
    let shape = Shape::One(algorithm);
    guarded(call, shape.command(), |origin| run(call, shape, origin));
}

/// Which limiter command a call is: one algorithm's (one clause), or RL.ALL.
#[derive(Clone, Copy)]
pub enum Shape {
    One(Algorithm),
    All,
}

impl Shape {
    pub fn command(self) -> Command {
        match self {
            Shape::One(algorithm) => Command::from(algorithm),
            Shape::All => Command::All,
        }
    }

    /// The command's name for the replication stream.
    fn name(self) -> &'static CStr {
        match self {
            Shape::One(algorithm) => algorithm.command_cstr(),
            Shape::All => c"RL.ALL",
        }
    }
}

pub fn run(call: Call<'_>, shape: Shape, origin: &Origin<'_>) -> Result<(), RlError> {
    // One parse: whether the call is replayed is asked only if it says NOW.
    match shape {
        // A single limiter is a call of one clause, kept on the stack: its
        // hot path allocates nothing, and `settle` is inlined for one clause.
        Shape::One(algorithm) => {
            let request = parse_limiter(algorithm, call.args, origin)?;
            let clauses = std::slice::from_ref(&request.clause);
            let now = request.replayed_now_ms;
            let Some(how) = begin(call, shape, origin, request.peek, now, clauses) else {
                return Ok(());
            };
            let decided = [decide(call, &request.clause, how.peek, how.now)?];
            if algorithm == Algorithm::Concurrent {
                return concurrent::settle(call, &how, decided, &request.clause);
            }
            settle(call, &how, &decided, clauses)
        }
        Shape::All => {
            let request = parse_all(call.args, origin)?;
            let clauses = &request.clauses;
            let now = request.replayed_now_ms;
            let Some(how) = begin(call, shape, origin, request.peek, now, clauses) else {
                return Ok(());
            };
            let decided = clauses
                .iter()
                .map(|clause| decide(call, clause, how.peek, how.now))
                .collect::<Result<Vec<_>, _>>()?;
            settle(call, &how, &decided, clauses)
        }
    }
}

/// The call's origin, mode and decision time (the primary's NOW, or the
/// clock); None when `off` mode has already replied: admitted, nothing
/// counted, remaining = each clause's limit.
#[inline(always)]
fn begin(
    call: Call<'_>,
    shape: Shape,
    origin: &Origin<'_>,
    peek: bool,
    replayed_now_ms: Option<u64>,
    clauses: &[Clause<'_, Arg>],
) -> Option<How> {
    let replayed = replayed(origin, replayed_now_ms.is_some());
    let mode = effective_mode(replayed);
    if mode == Mode::off {
        stats::count(shape.command(), Counter::Allowed);
        let off = clauses.iter().map(off_reply);
        call.reply_limiter(shaped(shape, true, RetryAfter::Ms(0), off));
        return None;
    }
    let now = replayed_now_ms.unwrap_or_else(crate::server::now_ms);
    Some(How {
        shape,
        replayed,
        mode,
        now,
        peek,
    })
}

/// How a call is settled: its command, origin, mode, time and PEEK.
#[derive(Clone, Copy)]
pub struct How {
    pub shape: Shape,
    pub replayed: bool,
    pub mode: Mode,
    pub now: u64,
    pub peek: bool,
}

/// What a call recorded: whether it was admitted (every clause admits),
/// and if not, the largest wait among its denying clauses.
pub struct Recorded {
    pub admitted: bool,
    pub denied: Option<RetryAfter>,
}

/// Writes, replicates, counts and replies a call whose clauses are all
/// decided (`decided[i]` for `clauses[i]`): admitted only if every clause
/// admits, and then every clause records the call.
#[inline(always)]
pub fn settle(
    call: Call<'_>,
    how: &How,
    decided: &[Decided<'_>],
    clauses: &[Clause<'_, Arg>],
) -> Result<(), RlError> {
    let Recorded { admitted, denied } = record(call, how, decided)?;
    let How {
        shape,
        replayed,
        now,
        peek,
        ..
    } = *how;
    // An admitted call with reservations waits for the latest of them;
    // WAIT clauses hold the reply, each for its own wait (within its own
    // max_wait); a RESERVE clause's longer wait is left to the caller, as
    // the held reply's retry_after. (Loops, as in `record`.)
    let (mut wait_ms, mut hold_ms) = (0, 0);
    if admitted {
        for (d, c) in decided.iter().zip(clauses) {
            wait_ms = wait_ms.max(d.checked.wait_ms);
            if !peek && wants_wait(c) {
                hold_ms = hold_ms.max(d.checked.wait_ms);
            }
        }
    }
    if hold_ms > 0 && call.can_block() {
        let held = decided.iter().zip(clauses).map(|(d, c)| {
            if wants_wait(c) {
                d.checked.held
            } else {
                d.checked.reply.after_hold(hold_ms)
            }
        });
        let reply = shaped(
            shape,
            true,
            RetryAfter::Ms(wait_ms - hold_ms),
            held.collect::<Vec<_>>(),
        );
        if call.hold(hold_ms, now.saturating_add(hold_ms), reply) {
            if !replayed {
                stats::count_event(Event::Waited);
            }
            return Ok(());
        }
    }
    let retry_after = denied.unwrap_or(RetryAfter::Ms(wait_ms));
    call.reply_limiter(reply(how, admitted, retry_after, decided));
    Ok(())
}

/// Records a call whose clauses are all decided: above `maxmemory`
/// refuses what would add to the dataset; writes every clause's commit if
/// all admit (else only the blocks its denying clauses start), replicates
/// what was written, and counts the outcome.
#[inline(always)]
pub fn record(call: Call<'_>, how: &How, decided: &[Decided<'_>]) -> Result<Recorded, RlError> {
    let How {
        shape,
        replayed,
        mode,
        now,
        peek,
    } = *how;
    // The largest wait among the denying clauses; never beats any wait.
    // (Plain loops: this runs on every call, and iterator adaptors over a
    // one-clause slice were not inlined.)
    let mut denied: Option<RetryAfter> = None;
    for d in decided {
        if let Some(wait) = d.checked.denied {
            denied = Some(denied.map_or(wait, |w| w.max(wait)));
        }
    }
    let admitted = denied.is_none();
    if !peek {
        // All-or-nothing under memory pressure too: one clause that would
        // add to the dataset refuses the whole call.
        let mut adds = false;
        for d in decided {
            if let Some(commit) = d.checked.write(admitted) {
                adds |= commit.adds_to_dataset(&d.key);
            }
        }
        refuse_growth_under_oom(call, replayed, adds)?;
        // Admitted: every clause records its commit. Denied: only the
        // blocks its denying clauses start are written.
        let mut wrote = false;
        for d in decided {
            if let Some(commit) = d.checked.write(admitted) {
                commit.apply(&d.key);
                wrote = true;
            }
        }
        if wrote {
            propagate(call, shape.name(), replayed, now);
        }
    }
    if !replayed {
        count_outcome(shape.command(), admitted, mode);
        if !peek {
            // A denied call records nothing but the blocks it meets or starts.
            for d in decided {
                match d.checked.event {
                    Some(e)
                        if admitted || matches!(e, Event::BlockStarted | Event::DeniedByBlock) =>
                    {
                        stats::count_event(e)
                    }
                    _ => {}
                }
            }
        }
    }
    Ok(Recorded { admitted, denied })
}

/// The reply of a decided call: a single limiter's is its clause's own;
/// RL.ALL's says whether all admitted and the call's retry_after. A lease
/// is taken only by a call that writes: a PEEK, or a clause of a denied
/// RL.ALL, replies lease 0. Monitor mode admits, but keeps what `on`
/// would have said so the application can log it.
#[inline(always)]
pub fn reply<'d>(
    how: &How,
    admitted: bool,
    retry_after: RetryAfter,
    decided: &'d [Decided<'_>],
) -> Reply<impl ExactSizeIterator<Item = LimiterReply> + 'd> {
    let took = admitted && !how.peek;
    let one = move |d: &Decided<'_>| match took {
        true => d.checked.reply,
        false => d.checked.reply.nothing_taken(),
    };
    // A single limiter's reply is its one clause's, read directly.
    if let (Shape::One(_), [d]) = (how.shape, decided) {
        let r = one(d);
        return Reply::One(if how.mode == Mode::monitor {
            r.monitored()
        } else {
            r
        });
    }
    let reply = shaped(how.shape, admitted, retry_after, decided.iter().map(one));
    if how.mode == Mode::monitor {
        reply.monitored()
    } else {
        reply
    }
}

/// The reply of a call whose clause replies are `clauses`: a single
/// limiter's is its clause's own; RL.ALL's says whether all admitted and
/// the call's retry_after.
#[inline(always)]
fn shaped<C>(shape: Shape, allowed: bool, retry_after: RetryAfter, clauses: C) -> Reply<C::IntoIter>
where
    C: IntoIterator<Item = LimiterReply>,
{
    let mut clauses = clauses.into_iter();
    let all = |clauses| Reply::All {
        allowed,
        retry_after,
        clauses,
    };
    match shape {
        Shape::One(_) => match clauses.next() {
            Some(one) => Reply::One(one),
            // (Never: a single limiter always has its clause.)
            None => all(clauses),
        },
        Shape::All => all(clauses),
    }
}

/// Above `maxmemory`, a client's call whose writes would add to the
/// dataset (`adds`) is refused before anything is written; every other
/// write runs. A replayed call applies the primary's decision and is never
/// refused.
#[inline(always)]
pub fn refuse_growth_under_oom(call: Call<'_>, replayed: bool, adds: bool) -> Result<(), RlError> {
    // The server's memory state is asked only of a call that would grow.
    if !replayed && adds && call.ctx.is_oom() {
        return Err(RlError::OutOfMemory);
    }
    Ok(())
}

/// WAIT on a TOKEN clause: the server holds the reply until the reserved
/// time (where it can block the client; elsewhere WAIT acts as RESERVE).
pub fn wants_wait(clause: &Clause<'_, Arg>) -> bool {
    matches!(clause.action, Action::Take { reserve: Some(r), .. } if r.wait)
}

/// Whether a limiter call is replayed: only a call carrying NOW can be.
#[inline(always)]
pub fn replayed(origin: &Origin<'_>, has_now: bool) -> bool {
    if has_now {
        origin.replayed()
    } else {
        origin.mark_client();
        false
    }
}

/// Propagates an admitted call: as it came plus the primary's NOW, or, when
/// it is itself a replay, exactly as it came.
#[inline(always)]
pub fn propagate(call: Call<'_>, command: &CStr, replayed: bool, now: u64) {
    if replayed {
        call.replicate_verbatim();
    } else {
        call.replicate_with_now(command, now);
    }
}

/// Replayed calls apply the primary's decision whatever this node's mode.
#[inline(always)]
pub fn effective_mode(replayed: bool) -> Mode {
    if replayed {
        Mode::on
    } else {
        MODE.current()
    }
}

/// Monitor mode admits what `on` would deny: counted as allowed, and as
/// would-deny.
#[inline(always)]
pub fn count_outcome(command: Command, allowed: bool, mode: Mode) {
    match (allowed, mode) {
        (true, _) => stats::count(command, Counter::Allowed),
        (false, Mode::monitor) => {
            stats::count(command, Counter::Allowed);
            stats::count(command, Counter::MonitorWouldDeny);
        }
        (false, _) => stats::count(command, Counter::Denied),
    }
}

/// `off` mode: admitted, nothing counted, remaining = the call's limit
/// (and for a concurrency limit, no lease: 0).
pub fn off_reply(clause: &Clause<'_, Arg>) -> LimiterReply {
    let nothing = Status {
        count: 0,
        limit: clause.limit.reported_limit(),
        reset_after_ms: 0,
    };
    let reply = nothing.limiter_reply(true, RetryAfter::Ms(0));
    match clause.limit {
        Limit::Concurrent(_) => reply.with_lease(0),
        _ => reply,
    }
}

/// A clause decided against its key, the key still open for the commit.
pub struct Decided<'c> {
    pub key: Key<'c>,
    pub checked: Checked,
}

/// Resolves the clause's override, opens its key and decides, changing
/// nothing; the commit is prepared in `checked`.
#[inline(always)]
pub fn decide<'c>(
    call: Call<'c>,
    clause: &Clause<'c, Arg>,
    peek: bool,
    now: u64,
) -> Result<Decided<'c>, RlError> {
    let mut limit = clause.limit;
    if let Some(okey) = clause.okey {
        // Read in the same atomic step as the decision.
        let okey = call.open(okey.word, Access::Read);
        if let Some(o) = load_override(okey.value())? {
            limit = limit.with_override(&o);
        }
    }
    let access = if peek {
        Access::Read
    } else {
        Access::ReadWrite
    };
    let key = call.open(clause.key.word, access);
    let step = Step {
        now,
        action: clause.action,
        block_ms: clause.block_ms,
        peek,
    };
    let checked = state::check(&limit, key.value(), &|| key.expires_at_ms(), &step)?;
    Ok(Decided { key, checked })
}

/// Reports the call's keys to the server (getkeys API): every clause's
/// key, read and written, and its okey, only read. The key specs describe
/// them too, but Redis's cluster slot check only asks the getkeys API, so
/// without it an okey in another slot would go unnoticed. A call that does
/// not parse still names the keys it can find, so it is routed and then
/// refused by its own node.
pub fn declare_keys(call: Call<'_>, shape: Shape) {
    let declare = |clauses: &[Clause<'_, Arg>]| {
        for clause in clauses {
            call.declare_key(clause.key.pos, true);
            if let Some(okey) = clause.okey {
                call.declare_key(okey.pos, false);
            }
        }
    };
    let parsed = match shape {
        Shape::One(algorithm) => parse_limiter(algorithm, call.args, true)
            .map(|r| declare(std::slice::from_ref(&r.clause))),
        Shape::All => parse_all(call.args, true).map(|r| declare(&r.clauses)),
    };
    if parsed.is_err() {
        for (pos, written) in find_keys(call.args, matches!(shape, Shape::All)) {
            call.declare_key(pos, written);
        }
    }
}
