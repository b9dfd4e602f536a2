//! `RL.SLIDING key limit window [APPROX] [COST n] [OVERRIDE okey] [PEEK]`

use super::limiter;
use crate::args::Algorithm;
use crate::cmdinfo::{
    Arg, ArgKind, CommandDoc, COST_ARG, KEY_ARG, LIMITER_KEYS, OVERRIDE_ARG, PEEK_ARG, WINDOW_ARG,
};
use redis_module::{Context, RedisResult, RedisString};

pub fn rl_sliding(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    limiter::handle(ctx, &args, Algorithm::Sliding)
}

pub const DOC: CommandDoc = CommandDoc {
    name: c"RL.SLIDING",
    acl: "write fast",
    summary: c"Counts a call against a sliding-window limit (an exact log, or APPROX's two-window counter).",
    complexity: c"O(1) amortized for an admitted call; a denied call reads the entries that must leave the window before it fits.",
    arity: -4,
    keys: LIMITER_KEYS,
    args: &[
        KEY_ARG,
        Arg {
            name: c"limit",
            kind: ArgKind::Integer,
            token: None,
            optional: false,
            summary: c"Units admitted in any window, 1 to 2^50.",
        },
        WINDOW_ARG,
        Arg {
            name: c"approx",
            kind: ArgKind::Flag,
            token: Some(c"APPROX"),
            optional: true,
            summary: c"Use the weighted two-window counter: constant memory, approximate.",
        },
        COST_ARG,
        OVERRIDE_ARG,
        PEEK_ARG,
    ],
};
