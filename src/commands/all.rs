//! `RL.ALL FIXED key limit window [ALIGNED] [COST n] [OVERRIDE okey]
//!         [SLIDING key limit window [APPROX] [COST n] [OVERRIDE okey]]
//!         [TOKEN key rate window [BURST capacity] [COST n] [OVERRIDE okey]]
//!         ... [PEEK]`

use super::{guarded, limiter};
use crate::cmdinfo::{Arg, ArgKind, CommandDoc};
use crate::stats::Command;
use redis_module::{Context, RedisResult, RedisString, RedisValue};

pub fn rl_all(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if ctx.is_keys_position_request() {
        limiter::all_keys(ctx, &args);
        return Ok(RedisValue::NoReply);
    }
    guarded(ctx, Command::All, || limiter::run_all(ctx, &args))
}

pub const DOC: CommandDoc = CommandDoc {
    name: c"RL.ALL",
    acl: "write fast",
    summary: c"Checks several limits in one atomic step: admitted only if all admit, and then all record the call.",
    complexity: c"O(N) where N is the number of clauses (each clause as its own command).",
    arity: -2,
    // Keys are reported through the getkeys API: clauses vary in length.
    keys: &[],
    args: &[Arg {
        name: c"clause",
        kind: ArgKind::String,
        token: None,
        optional: false,
        summary: c"FIXED|SLIDING|TOKEN key amount window [options], repeatable; then optional PEEK.",
    }],
};
