//! The flow every limiter command shares: parse, read the key, decide with
//! an explicit `now`, write and replicate only if admitted, reply.
//!
//! Replication: the primary propagates the call as it came plus its own
//! decision time (`NOW ms`), so replicas and AOF replay reach the same
//! decision from the same state (overrides included: their changes and
//! expiries are replicated before the calls that read them) without reading
//! their own clock. Denied calls and PEEK propagate nothing. Replies are
//! written directly: this is the hot path.

use super::overrides::OVERRIDE_EXPECTED;
use super::{byte_args, guarded, stored};
use crate::args::{parse_all, parse_limiter, Algorithm, Clause};
use crate::codec::sliding_log::{self, Applied};
use crate::codec::{self, DecodeError};
use crate::error::RlError;
use crate::mode::{Mode, MODE};
use crate::stats::{self, Command, Counter};
use crate::store::{self, Access, Key, Value};
use librl_core::approx::{self, ApproxParams};
use librl_core::decision::Decision;
use librl_core::fixed::{self, FixedParams};
use librl_core::sliding::{self, Append, SlidingParams};
use librl_core::token::{self, TokenParams};
use redis_module::{Context, RedisResult, RedisString, RedisValue};
use std::ffi::CStr;

/// A clause decided against its key's value, not yet committed.
struct Checked {
    reply: [i64; 6],
    /// What committing writes and the key's absolute expiry, when admitted.
    commit: Option<(Commit, u64)>,
}

enum Commit {
    /// The key's new value.
    Replace(Vec<u8>),
    /// An entry for the exact sliding log, written in place.
    Log(Append),
}

impl Commit {
    fn write(&self, key: &Key<'_>, expire_at_ms: u64) {
        match self {
            Commit::Replace(bytes) => key.write(bytes, Some(expire_at_ms)),
            Commit::Log(append) => key.modify(Some(expire_at_ms), |existing| {
                match sliding_log::apply(existing, append) {
                    Applied::InPlace => None,
                    Applied::Replace(bytes) => Some(bytes),
                }
            }),
        }
    }
}

/// The handler of `RL.FIXED`, `RL.SLIDING` and `RL.TOKEN`: answers a
/// getkeys request, or runs the call behind the panic boundary.
pub fn handle(ctx: &Context, args: &[RedisString], algorithm: Algorithm) -> RedisResult {
    if ctx.is_keys_position_request() {
        limiter_keys(ctx, args, algorithm);
        return Ok(RedisValue::NoReply);
    }
    guarded(ctx, stats_command(algorithm), || run(ctx, args, algorithm))
}

/// `RL.FIXED`, `RL.SLIDING`, `RL.TOKEN`: one clause.
fn run(ctx: &Context, args: &[RedisString], algorithm: Algorithm) -> Result<RedisValue, RlError> {
    let replayed = store::is_replayed(ctx);
    let call = parse_limiter(algorithm, &byte_args(args), replayed)?;
    let mode = effective_mode(replayed);
    let command = stats_command(algorithm);
    if mode == Mode::off {
        stats::count(command, Counter::Allowed);
        store::reply_integers(ctx, &off_reply(&call.clause));
        return Ok(RedisValue::NoReply);
    }
    let now = call.replayed_now_ms.unwrap_or_else(store::now_ms);
    let decided = decide(ctx, args, call.clause, call.peek, now)?;
    let allowed = decided.allowed();
    if !call.peek && allowed {
        decided.commit();
        propagate(ctx, algorithm.command_cstr(), args, replayed, now);
    }
    let mut reply = decided.checked.reply;
    if !replayed {
        count_outcome(command, allowed, mode);
    }
    if mode == Mode::monitor {
        // Admit, but keep retry_after so the application can log it.
        reply[0] = 1;
    }
    store::reply_integers(ctx, &reply);
    Ok(RedisValue::NoReply)
}

/// Propagates an admitted call: as it came plus the primary's NOW, or, when
/// it is itself a replay, exactly as it came.
fn propagate(ctx: &Context, command: &CStr, args: &[RedisString], replayed: bool, now: u64) {
    if replayed {
        store::replicate_verbatim(ctx);
    } else {
        store::replicate_with_now(ctx, command, args, now);
    }
}

/// Replayed calls apply the primary's decision whatever this node's mode.
fn effective_mode(replayed: bool) -> Mode {
    if replayed {
        Mode::on
    } else {
        MODE.current()
    }
}

fn stats_command(algorithm: Algorithm) -> Command {
    match algorithm {
        Algorithm::Fixed => Command::Fixed,
        Algorithm::Sliding => Command::Sliding,
        Algorithm::Token => Command::Token,
    }
}

fn count_outcome(command: Command, allowed: bool, mode: Mode) {
    match (allowed, mode) {
        (true, _) => stats::count(command, Counter::Allowed),
        (false, Mode::monitor) => {
            stats::count(command, Counter::Allowed);
            stats::count(command, Counter::MonitorWouldDeny);
        }
        (false, _) => stats::count(command, Counter::Denied),
    }
}

/// `off`: nothing read or written; admitted with an untouched limit.
fn off_reply(clause: &Clause) -> [i64; 6] {
    let limit = match clause.algorithm {
        Algorithm::Token => clause.burst.unwrap_or(clause.amount),
        Algorithm::Fixed | Algorithm::Sliding => clause.amount,
    };
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    [1, 0, 0, limit, limit, 0]
}

/// `RL.ALL clause [clause ...] [PEEK]`: admitted only if every clause
/// admits; then every clause records its cost, else nothing is written.
pub fn run_all(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, RlError> {
    let replayed = store::is_replayed(ctx);
    let call = parse_all(&byte_args(args), replayed)?;
    let mode = effective_mode(replayed);
    if mode == Mode::off {
        stats::count(Command::All, Counter::Allowed);
        store::reply_array(ctx, 2 + call.clauses.len());
        store::reply_integer(ctx, 1);
        store::reply_integer(ctx, 0);
        for clause in &call.clauses {
            store::reply_integers(ctx, &off_reply(clause));
        }
        return Ok(RedisValue::NoReply);
    }
    let now = call.replayed_now_ms.unwrap_or_else(store::now_ms);
    let decided = call
        .clauses
        .iter()
        .map(|clause| decide(ctx, args, *clause, call.peek, now))
        .collect::<Result<Vec<_>, _>>()?;
    let allowed = decided.iter().all(Decided::allowed);
    if allowed && !call.peek {
        for d in &decided {
            d.commit();
        }
        propagate(ctx, c"RL.ALL", args, replayed, now);
    }
    let retries = decided
        .iter()
        .filter(|d| !d.allowed())
        .map(|d| d.checked.reply[2]);
    let retry_after = if allowed {
        0
    } else if retries.clone().any(|r| r < 0) {
        -1
    } else {
        retries.max().unwrap_or(0)
    };
    if !replayed {
        count_outcome(Command::All, allowed, mode);
    }
    // Monitor admits the call; the clause replies still say which limits
    // would have refused it.
    let replied_allowed = allowed || mode == Mode::monitor;
    store::reply_array(ctx, 2 + decided.len());
    store::reply_integer(ctx, i64::from(replied_allowed));
    store::reply_integer(ctx, retry_after);
    for d in &decided {
        store::reply_integers(ctx, &d.checked.reply);
    }
    Ok(RedisValue::NoReply)
}

/// Reports RL.ALL's keys to the server (getkeys API): every clause's key,
/// read and written, and every okey, only read.
pub fn all_keys(ctx: &Context, args: &[RedisString]) {
    let Ok(call) = parse_all(&byte_args(args), true) else {
        return;
    };
    call.clauses
        .iter()
        .for_each(|c| declare_clause_keys(ctx, c));
}

/// Reports a single limiter's key and okey (getkeys API). The key specs
/// describe them too, but Redis's cluster slot check only asks the getkeys
/// API, so without it an okey in another slot would go unnoticed. A call
/// that does not parse still names its key, so it is routed and then
/// refused by its own node.
fn limiter_keys(ctx: &Context, args: &[RedisString], algorithm: Algorithm) {
    match parse_limiter(algorithm, &byte_args(args), true) {
        Ok(call) => declare_clause_keys(ctx, &call.clause),
        Err(_) if args.len() > 1 => store::declare_key(ctx, 1, true),
        Err(_) => {}
    }
}

fn declare_clause_keys(ctx: &Context, clause: &Clause) {
    store::declare_key(ctx, clause.key, true);
    if let Some(okey) = clause.override_key {
        store::declare_key(ctx, okey, false);
    }
}

/// A clause decided against its key, the key still open for the commit.
struct Decided<'c> {
    key: Key<'c>,
    checked: Checked,
}

impl Decided<'_> {
    fn allowed(&self) -> bool {
        self.checked.commit.is_some()
    }

    fn commit(&self) {
        if let Some((commit, expire_at_ms)) = &self.checked.commit {
            commit.write(&self.key, *expire_at_ms);
        }
    }
}

/// Resolves the clause's override, opens its key and decides, changing
/// nothing.
fn decide<'c>(
    ctx: &'c Context,
    args: &'c [RedisString],
    mut clause: Clause,
    peek: bool,
    now: u64,
) -> Result<Decided<'c>, RlError> {
    if let Some(okey) = clause.override_key {
        let okey = Key::open(ctx, args.get(okey).ok_or(RlError::Internal)?, Access::Read);
        if let Some(o) = stored(okey.value(), codec::decode_override, OVERRIDE_EXPECTED)? {
            // Read in the same atomic step as the decision.
            clause.amount = o.limit;
            clause.window_ms = o.window_ms;
            // A burst only means something to a token bucket.
            if clause.algorithm == Algorithm::Token {
                clause.burst = o.burst;
            }
        }
    }
    let name = args.get(clause.key).ok_or(RlError::Internal)?;
    let access = if peek {
        Access::Read
    } else {
        Access::ReadWrite
    };
    let key = Key::open(ctx, name, access);
    let checked = check(&clause, key.value(), now)?;
    Ok(Decided { key, checked })
}

fn check(clause: &Clause, value: Value<'_>, now: u64) -> Result<Checked, RlError> {
    let (limit, window_ms, cost) = (clause.amount, clause.window_ms, clause.cost);
    match clause.algorithm {
        Algorithm::Fixed => {
            let state = stored(value, codec::decode_fixed, "an RL.FIXED limiter")?;
            let params = FixedParams {
                limit,
                window_ms,
                aligned: clause.aligned,
            };
            let d = fixed::decide(&params, state, now, cost);
            Ok(replacing(&d, |s| codec::encode_fixed(s).to_vec()))
        }
        Algorithm::Token => {
            let state = stored(value, codec::decode_token, "an RL.TOKEN limiter")?;
            let params = TokenParams {
                rate: limit,
                window_ms,
                capacity: clause.burst.unwrap_or(limit),
            };
            let d = token::decide(&params, state, now, cost);
            Ok(replacing(&d, |s| codec::encode_token(s).to_vec()))
        }
        Algorithm::Sliding if clause.approx => {
            let state = stored(value, codec::decode_approx, "an RL.SLIDING APPROX limiter")?;
            let d = approx::decide(&ApproxParams { limit, window_ms }, state, now, cost);
            Ok(replacing(&d, |s| codec::encode_approx(s).to_vec()))
        }
        Algorithm::Sliding => {
            let log = stored(value, sliding_log::view, "an RL.SLIDING limiter")?;
            let d = sliding::decide(&SlidingParams { limit, window_ms }, log.as_ref(), now, cost)
                .map_err(|_| RlError::BadState(DecodeError::Corrupt))?;
            Ok(Checked {
                reply: d.reply(),
                commit: d.admitted().map(|(a, expires)| (Commit::Log(*a), expires)),
            })
        }
    }
}

/// A decision whose commit replaces the key's value with `encode(state)`.
fn replacing<S>(d: &Decision<S>, encode: impl Fn(&S) -> Vec<u8>) -> Checked {
    Checked {
        reply: d.reply(),
        commit: d
            .admitted()
            .map(|(s, expires)| (Commit::Replace(encode(s)), expires)),
    }
}
