//! `RL.FIXED key limit window [ALIGNED] [COST n] [OVERRIDE okey] [PEEK]`

use super::{guarded, limiter};
use crate::args::Algorithm;
use crate::cmdinfo::{
    Arg, ArgKind, CommandDoc, COST_ARG, KEY_ARG, LIMITER_KEYS, OVERRIDE_ARG, PEEK_ARG, WINDOW_ARG,
};
use crate::stats::Command;
use redis_module::{Context, RedisResult, RedisString, RedisValue};

pub fn rl_fixed(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if ctx.is_keys_position_request() {
        limiter::limiter_keys(ctx, &args, Algorithm::Fixed);
        return Ok(RedisValue::NoReply);
    }
    guarded(ctx, Command::Fixed, || {
        limiter::run(ctx, &args, Algorithm::Fixed)
    })
}

pub const DOC: CommandDoc = CommandDoc {
    name: c"RL.FIXED",
    acl: "write fast",
    summary: c"Counts a call against a fixed-window limit and says whether it is admitted.",
    complexity: c"O(1)",
    arity: -4,
    keys: LIMITER_KEYS,
    args: &[
        KEY_ARG,
        Arg {
            name: c"limit",
            kind: ArgKind::Integer,
            token: None,
            optional: false,
            summary: c"Units admitted per window, 1 to 2^50.",
        },
        WINDOW_ARG,
        Arg {
            name: c"aligned",
            kind: ArgKind::Flag,
            token: Some(c"ALIGNED"),
            optional: true,
            summary: c"Windows start on multiples of the window in Unix time.",
        },
        COST_ARG,
        OVERRIDE_ARG,
        PEEK_ARG,
    ],
};
