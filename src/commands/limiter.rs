//! The flow every limiter command shares: parse, read the key, decide with
//! an explicit `now`, write and replicate only if admitted, reply.
//!
//! Replication: the primary propagates the call rewritten with its own
//! decision time (`NOW ms`) and its effective parameters, so replicas and
//! AOF replay reach the same decision from the same state without reading
//! their own clock. Denied calls and PEEK propagate nothing.

use super::overrides::OVERRIDE_EXPECTED;
use super::{byte_args, stored};
use crate::args::{parse_limiter, Algorithm, Clause};
use crate::codec::sliding_log::{self, Applied};
use crate::codec::{self, DecodeError};
use crate::core::approx::{self, ApproxParams};
use crate::core::fixed::{self, FixedParams};
use crate::core::sliding::{self, Append, SlidingParams};
use crate::core::token::{self, TokenParams};
use crate::error::RlError;
use crate::store::{self, Access, Key, Value};
use redis_module::{Context, RedisString, RedisValue};

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

pub fn run(
    ctx: &Context,
    args: &[RedisString],
    algorithm: Algorithm,
) -> Result<RedisValue, RlError> {
    let call = parse_limiter(algorithm, &byte_args(args), store::is_replayed(ctx))?;
    let mut clause = call.clause;
    if let Some(okey) = clause.override_key {
        let okey = Key::open(ctx, args.get(okey).ok_or(RlError::Internal)?, Access::Read);
        if let Some(o) = stored(okey.value(), codec::decode_override, OVERRIDE_EXPECTED)? {
            // Read in the same atomic step as the decision.
            clause.amount = o.limit;
            clause.window_ms = o.window_ms;
            clause.burst = o.burst;
        }
    }
    let now = call.replayed_now_ms.unwrap_or_else(store::now_ms);
    let name = args.get(clause.key).ok_or(RlError::Internal)?;
    let access = if call.peek {
        Access::Read
    } else {
        Access::ReadWrite
    };
    let key = Key::open(ctx, name, access);
    let checked = check(&clause, key.value(), now)?;
    if let (false, Some((commit, expire_at_ms))) = (call.peek, &checked.commit) {
        commit.write(&key, *expire_at_ms);
        replicate(ctx, &clause, name.as_slice(), now);
    }
    Ok(RedisValue::Array(
        checked
            .reply
            .iter()
            .map(|&v| RedisValue::Integer(v))
            .collect(),
    ))
}

fn check(clause: &Clause, value: Value<'_>, now: u64) -> Result<Checked, RlError> {
    match clause.algorithm {
        Algorithm::Fixed => {
            let state = stored(value, codec::decode_fixed, "an RL.FIXED limiter")?;
            let params = FixedParams {
                limit: clause.amount,
                window_ms: clause.window_ms,
                aligned: clause.aligned,
            };
            let d = fixed::decide(&params, state, now, clause.cost);
            Ok(Checked {
                reply: d.reply(),
                commit: d.new_state.map(|s| {
                    (
                        Commit::Replace(codec::encode_fixed(&s).to_vec()),
                        d.expires_at_ms,
                    )
                }),
            })
        }
        Algorithm::Token => {
            let state = stored(value, codec::decode_token, "an RL.TOKEN limiter")?;
            let params = TokenParams {
                rate: clause.amount,
                window_ms: clause.window_ms,
                capacity: clause.burst.unwrap_or(clause.amount),
            };
            let d = token::decide(&params, state, now, clause.cost);
            Ok(Checked {
                reply: d.reply(),
                commit: d.new_state.map(|s| {
                    (
                        Commit::Replace(codec::encode_token(&s).to_vec()),
                        d.expires_at_ms,
                    )
                }),
            })
        }
        Algorithm::Sliding if clause.approx => {
            let state = stored(value, codec::decode_approx, "an RL.SLIDING APPROX limiter")?;
            let params = ApproxParams {
                limit: clause.amount,
                window_ms: clause.window_ms,
            };
            let d = approx::decide(&params, state, now, clause.cost);
            Ok(Checked {
                reply: d.reply(),
                commit: d.new_state.map(|s| {
                    (
                        Commit::Replace(codec::encode_approx(&s).to_vec()),
                        d.expires_at_ms,
                    )
                }),
            })
        }
        Algorithm::Sliding => {
            let log = stored(value, sliding_log::view, "an RL.SLIDING limiter")?;
            let params = SlidingParams {
                limit: clause.amount,
                window_ms: clause.window_ms,
            };
            let d = sliding::decide(&params, log.as_ref(), now, clause.cost);
            if log.as_ref().is_some_and(|l| l.is_corrupt()) {
                return Err(RlError::BadState(DecodeError::Corrupt));
            }
            Ok(Checked {
                reply: d.reply(),
                commit: d.new_state.map(|a| (Commit::Log(a), d.expires_at_ms)),
            })
        }
    }
}

/// Propagates the admitted call in canonical form: effective parameters,
/// no OVERRIDE (the replica needs no second read), and the primary's `now`.
fn replicate(ctx: &Context, clause: &Clause, key: &[u8], now: u64) {
    let amount = clause.amount.to_string();
    let window = format!("{}ms", clause.window_ms);
    let cost = clause.cost.to_string();
    let now = now.to_string();
    let mut argv: Vec<&[u8]> = vec![key, amount.as_bytes(), window.as_bytes()];
    if clause.aligned {
        argv.push(b"ALIGNED");
    }
    if clause.approx {
        argv.push(b"APPROX");
    }
    let burst = clause.burst.map(|b| b.to_string());
    if let Some(burst) = &burst {
        argv.extend([b"BURST".as_slice(), burst.as_bytes()]);
    }
    argv.extend([b"COST".as_slice(), cost.as_bytes(), b"NOW", now.as_bytes()]);
    store::replicate(ctx, clause.algorithm.command_name(), &argv);
}
