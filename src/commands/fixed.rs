//! `RL.FIXED key limit window [ALIGNED] [COST n] [OVERRIDE okey] [PEEK]`

use super::{guarded, limiter};
use crate::args::Algorithm;
use crate::cmdinfo::{Arg, ArgKind, CommandDoc, KeyAt, KeySpec, LIMITER_KEY, OVERRIDE_KEY};
use redis_module::{Context, RedisResult, RedisString};

pub fn rl_fixed(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    guarded(ctx, || limiter::run(ctx, &args, Algorithm::Fixed))
}

pub const DOC: CommandDoc = CommandDoc {
    name: c"RL.FIXED",
    summary: c"Counts a call against a fixed-window limit and says whether it is admitted.",
    complexity: c"O(1)",
    arity: -4,
    keys: &[
        KeySpec {
            at: KeyAt::Index(1),
            flags: LIMITER_KEY,
        },
        KeySpec {
            at: KeyAt::AfterKeyword(c"OVERRIDE", 4),
            flags: OVERRIDE_KEY,
        },
    ],
    args: &[
        Arg {
            name: c"key",
            kind: ArgKind::Key(0),
            token: None,
            optional: false,
            summary: c"The limiter's key.",
        },
        Arg {
            name: c"limit",
            kind: ArgKind::Integer,
            token: None,
            optional: false,
            summary: c"Units admitted per window, 1 to 2^50.",
        },
        Arg {
            name: c"window",
            kind: ArgKind::String,
            token: None,
            optional: false,
            summary: c"Window length: an integer with an optional unit ms, s, m, h or d (bare is seconds).",
        },
        Arg {
            name: c"aligned",
            kind: ArgKind::Flag,
            token: Some(c"ALIGNED"),
            optional: true,
            summary: c"Windows start on multiples of the window in Unix time.",
        },
        Arg {
            name: c"cost",
            kind: ArgKind::Integer,
            token: Some(c"COST"),
            optional: true,
            summary: c"Units this call consumes, default 1.",
        },
        Arg {
            name: c"okey",
            kind: ArgKind::Key(1),
            token: Some(c"OVERRIDE"),
            optional: true,
            summary: c"Key of an override whose limit and window replace this call's.",
        },
        Arg {
            name: c"peek",
            kind: ArgKind::Flag,
            token: Some(c"PEEK"),
            optional: true,
            summary: c"Answer as if the call were made, changing nothing.",
        },
    ],
};
