//! The flow every limiter command shares, top to bottom: parse, resolve the
//! override, read the key, decide with an explicit `now`, write and
//! replicate only if admitted, reply. Above `maxmemory` a call that would
//! add to the dataset is refused before it writes.
//!
//! Replication: the primary propagates the call as it came plus its own
//! decision time (`NOW ms`), so replicas and AOF replay reach the same
//! decision from the same state (overrides included: their changes and
//! expiries are replicated before the calls that read them) without reading
//! their own clock. Denied calls and PEEK propagate nothing. Replies are
//! written directly: this is the hot path.

use super::{guarded, Origin};
use crate::error::RlError;
use crate::mode::{Mode, MODE};
use crate::request::{find_keys, parse_limiter, Action, Algorithm, Clause};
use crate::server::{Access, Arg, Call, Entry, HeldReply, Key};
use crate::state::{self, overrides::load_override, Checked, Commit, Step};
use crate::stats::{self, Command, Counter, Event};
use std::ffi::CStr;

/// `RL.FIXED key limit window [ALIGNED] [COST n] [OVERRIDE okey] [PEEK]`
pub struct Fixed;
/// `RL.SLIDING key limit window [APPROX] [COST n] [OVERRIDE okey] [PEEK]`
pub struct Sliding;
/// `RL.TOKEN key rate window [BURST capacity] [COST n] [OVERRIDE okey] [PEEK]`
pub struct Token;

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

/// Answers a getkeys request, or runs the call behind the panic boundary.
fn handle(call: Call<'_>, algorithm: Algorithm) {
    if call.ctx.is_keys_request() {
        declare_keys(call, algorithm);
        return;
    }
    guarded(call, Command::from(algorithm), |origin| {
        run(call, algorithm, origin)
    });
}

fn run(call: Call<'_>, algorithm: Algorithm, origin: &Origin<'_>) -> Result<(), RlError> {
    // One parse: whether the call is replayed is asked only if it says NOW.
    let request = parse_limiter(algorithm, call.args, origin)?;
    let replayed = replayed(origin, request.replayed_now_ms.is_some());
    let mode = effective_mode(replayed);
    let command = Command::from(algorithm);
    if mode == Mode::off {
        stats::count(command, Counter::Allowed);
        call.reply_integers(&off_reply(&request.clause));
        return Ok(());
    }
    let now = request
        .replayed_now_ms
        .unwrap_or_else(crate::server::now_ms);
    let decided = decide(call, &request.clause, request.peek, now)?;
    let checked = &decided.checked;
    let allowed = checked.denied.is_none();
    if !request.peek {
        // An admitted call writes its commit; a denied one only the block
        // it starts.
        if let Some(commit) = checked.write(allowed) {
            refuse_growth_under_oom(call, replayed, [(commit, &decided.key)])?;
            commit.apply(&decided.key);
            propagate(call, algorithm.command_cstr(), replayed, now);
        }
    }
    if !replayed {
        count_outcome(command, allowed, mode);
        if !request.peek {
            if let Some(event) = checked.event {
                stats::count_event(event);
            }
        }
    }
    let mut reply = checked.reply;
    if mode == Mode::monitor {
        // Admit, but keep retry_after so the application can log it.
        reply[0] = 1;
    }
    let waits = allowed && !request.peek && wants_wait(&request.clause) && checked.wait_ms > 0;
    if waits && call.can_block() {
        let reserved_at = now.saturating_add(checked.wait_ms);
        if call.hold(checked.wait_ms, reserved_at, HeldReply::One(checked.held)) {
            if !replayed {
                stats::count_event(Event::Waited);
            }
            return Ok(());
        }
    }
    call.reply_integers(&reply);
    Ok(())
}

/// Above `maxmemory`, a client's call whose writes would add to the
/// dataset is refused before anything is written; every other write runs.
/// A replayed call applies the primary's decision and is never refused.
pub fn refuse_growth_under_oom<'k, 'c: 'k>(
    call: Call<'_>,
    replayed: bool,
    writes: impl IntoIterator<Item = (&'k Commit, &'k Key<'c>)>,
) -> Result<(), RlError> {
    if replayed {
        return Ok(());
    }
    let adds = writes
        .into_iter()
        .any(|(commit, key)| commit.adds_to_dataset(key));
    // The server's memory state is asked only of a call that would grow.
    if adds && call.ctx.is_oom() {
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
pub fn propagate(call: Call<'_>, command: &CStr, replayed: bool, now: u64) {
    if replayed {
        call.replicate_verbatim();
    } else {
        call.replicate_with_now(command, now);
    }
}

/// Replayed calls apply the primary's decision whatever this node's mode.
pub fn effective_mode(replayed: bool) -> Mode {
    if replayed {
        Mode::on
    } else {
        MODE.current()
    }
}

/// Monitor mode admits what `on` would deny: counted as allowed, and as
/// would-deny.
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

/// `off` mode: admitted, nothing counted, remaining = the call's limit.
pub fn off_reply(clause: &Clause<'_, Arg>) -> [i64; 6] {
    let limit = i64::try_from(clause.limit.reported_limit()).unwrap_or(i64::MAX);
    [1, 0, 0, limit, limit, 0]
}

/// A clause decided against its key, the key still open for the commit.
pub struct Decided<'c> {
    pub key: Key<'c>,
    pub checked: Checked,
}

/// Resolves the clause's override, opens its key and decides, changing
/// nothing; the commit is prepared in `checked`.
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
    let checked = state::check(&limit, key.value(), &step)?;
    Ok(Decided { key, checked })
}

/// Reports a single limiter's key and okey (getkeys API). The key specs
/// describe them too, but Redis's cluster slot check only asks the getkeys
/// API, so without it an okey in another slot would go unnoticed. A call
/// that does not parse still names the keys it can find, so it is routed
/// and then refused by its own node.
fn declare_keys(call: Call<'_>, algorithm: Algorithm) {
    match parse_limiter(algorithm, call.args, true) {
        Ok(request) => declare_clause_keys(call, &request.clause),
        Err(_) => {
            for (pos, written) in find_keys(call.args, false) {
                call.declare_key(pos, written);
            }
        }
    }
}

pub fn declare_clause_keys(call: Call<'_>, clause: &Clause<'_, Arg>) {
    call.declare_key(clause.key.pos, true);
    if let Some(okey) = clause.okey {
        call.declare_key(okey.pos, false);
    }
}
