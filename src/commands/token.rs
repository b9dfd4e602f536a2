//! `RL.TOKEN key rate window [BURST capacity] [COST n] [OVERRIDE okey] [PEEK]`

use super::limiter;
use crate::args::Algorithm;
use crate::cmdinfo::{
    Arg, ArgKind, CommandDoc, COST_ARG, KEY_ARG, LIMITER_KEYS, OVERRIDE_ARG, PEEK_ARG, WINDOW_ARG,
};
use redis_module::{Context, RedisResult, RedisString};

pub fn rl_token(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    limiter::handle(ctx, &args, Algorithm::Token)
}

pub const DOC: CommandDoc = CommandDoc {
    name: c"RL.TOKEN",
    acl: "write fast",
    summary:
        c"Takes tokens from a continuously refilling bucket and says whether the call is admitted.",
    complexity: c"O(1)",
    arity: -4,
    keys: LIMITER_KEYS,
    args: &[
        KEY_ARG,
        Arg {
            name: c"rate",
            kind: ArgKind::Integer,
            token: None,
            optional: false,
            summary: c"Tokens refilled per window, 1 to 2^50.",
        },
        WINDOW_ARG,
        Arg {
            name: c"capacity",
            kind: ArgKind::Integer,
            token: Some(c"BURST"),
            optional: true,
            summary: c"Bucket size, 1 to 2^50; default the rate. The bucket starts full.",
        },
        COST_ARG,
        OVERRIDE_ARG,
        PEEK_ARG,
    ],
};
