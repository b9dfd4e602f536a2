//! `RL.FIXED key limit window [ALIGNED] [COST n] [OVERRIDE okey] [PEEK]`

use super::limiter;
use crate::args::Algorithm;
use crate::cmdinfo::{
    Arg, ArgKind, CommandDoc, COST_ARG, KEY_ARG, LIMITER_KEYS, OVERRIDE_ARG, PEEK_ARG, WINDOW_ARG,
};
use redis_module::{Context, RedisResult, RedisString};

pub fn rl_fixed(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    limiter::handle(ctx, &args, Algorithm::Fixed)
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
