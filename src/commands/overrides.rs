//! `RL.OVERRIDE.SET okey limit window [BURST capacity] [TTL duration]`
//! `RL.OVERRIDE.GET okey`
//! `RL.OVERRIDE.DEL okey [okey ...]`
//! `RL.OVERRIDE.LIST cursor [MATCH pattern] [COUNT count]`

use super::{byte_args, guarded, stored};
use crate::args::{
    parse_override_del, parse_override_get, parse_override_list, parse_override_set, OVERRIDE_SET,
};
use crate::cmdinfo::{Arg, ArgKind, CommandDoc, KeyAt, KeySpec};
use crate::codec;
use crate::error::RlError;
use crate::stats::Command;
use crate::store::{self, Access, Key};
use librl_core::overrides::Override;
use redis_module::{raw, Context, RedisResult, RedisString, RedisValue};

/// What a command that reads an okey accepts, for WRONGTYPE messages.
pub const OVERRIDE_EXPECTED: &str = "an RL.OVERRIDE value";

pub fn rl_override_set(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    guarded(ctx, Command::OverrideSet, || set(ctx, &args))
}

pub fn rl_override_get(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    guarded(ctx, Command::OverrideGet, || get(ctx, &args))
}

pub fn rl_override_del(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    guarded(ctx, Command::OverrideDel, || del(ctx, &args))
}

pub fn rl_override_list(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    guarded(ctx, Command::OverrideList, || list(ctx, &args))
}

fn set(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, RlError> {
    let request = parse_override_set(&byte_args(args), store::is_replayed(ctx))?;
    let name = args.get(1).ok_or(RlError::Internal)?;
    let key = Key::open(ctx, name, Access::ReadWrite);
    stored(key.value(), codec::decode_override, OVERRIDE_EXPECTED)?;
    // A TTL is anchored to the primary's clock, so replicas and AOF replay
    // give the override the same absolute expiry.
    let now = request.replayed_now_ms.unwrap_or_else(store::now_ms);
    let expire_at_ms = request.ttl_ms.map(|ttl| now.saturating_add(ttl));
    key.write(&codec::encode_override(&request.value), expire_at_ms);
    replicate_set(ctx, name.as_slice(), &request.value, request.ttl_ms, now);
    Ok(RedisValue::SimpleStringStatic("OK"))
}

fn replicate_set(ctx: &Context, okey: &[u8], o: &Override, ttl_ms: Option<u64>, now: u64) {
    let limit = o.limit.to_string();
    let window = format!("{}ms", o.window_ms);
    let burst = o.burst.map(|b| b.to_string());
    let ttl = ttl_ms.map(|t| format!("{t}ms"));
    let now = now.to_string();
    let mut argv: Vec<&[u8]> = vec![okey, limit.as_bytes(), window.as_bytes()];
    if let Some(burst) = &burst {
        argv.extend([b"BURST".as_slice(), burst.as_bytes()]);
    }
    if let Some(ttl) = &ttl {
        argv.extend([b"TTL".as_slice(), ttl.as_bytes(), b"NOW", now.as_bytes()]);
    }
    store::replicate(ctx, OVERRIDE_SET, &argv);
}

/// `[limit, window_ms, burst, ttl_ms]`: burst 0 when unset, ttl -1 when none.
fn describe(o: &Override, ttl_ms: Option<u64>) -> Vec<RedisValue> {
    let int = |v: u64| RedisValue::Integer(i64::try_from(v).unwrap_or(i64::MAX));
    vec![
        int(o.limit),
        int(o.window_ms),
        int(o.burst.unwrap_or(0)),
        ttl_ms.map_or(RedisValue::Integer(-1), int),
    ]
}

fn get(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, RlError> {
    parse_override_get(&byte_args(args))?;
    let key = Key::open(ctx, args.get(1).ok_or(RlError::Internal)?, Access::Read);
    match stored(key.value(), codec::decode_override, OVERRIDE_EXPECTED)? {
        None => Ok(RedisValue::Null),
        Some(o) => Ok(RedisValue::Array(describe(&o, key.ttl_ms()))),
    }
}

fn del(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, RlError> {
    parse_override_del(&byte_args(args))?;
    // Check every key before deleting any, so a WRONGTYPE deletes nothing.
    let mut doomed: Vec<&RedisString> = Vec::new();
    for name in args.iter().skip(1) {
        let key = Key::open(ctx, name, Access::Read);
        let is_override = stored(key.value(), codec::decode_override, OVERRIDE_EXPECTED)?;
        if is_override.is_some() && !doomed.iter().any(|d| d.as_slice() == name.as_slice()) {
            doomed.push(name);
        }
    }
    for name in &doomed {
        Key::open(ctx, name, Access::ReadWrite).delete();
    }
    if !doomed.is_empty() {
        let names: Vec<&[u8]> = doomed.iter().map(|n| n.as_slice()).collect();
        store::replicate(ctx, "DEL", &names);
    }
    Ok(RedisValue::Integer(doomed.len() as i64))
}

fn list(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, RlError> {
    let request = parse_override_list(&byte_args(args))?;
    let (next, keys) = store::scan_strings(ctx, request.cursor, request.pattern, request.count)?;
    let mut found = Vec::new();
    for name in keys {
        // (Key names may hold NUL bytes, which create_string refuses.)
        let name = RedisString::create_from_slice(ctx.ctx, &name);
        let key = Key::open(ctx, &name, Access::Read);
        // Limiters and other strings are skipped: only overrides are listed.
        if let Ok(Some(o)) = stored(key.value(), codec::decode_override, OVERRIDE_EXPECTED) {
            let mut entry = vec![RedisValue::StringBuffer(name.as_slice().to_vec())];
            entry.extend(describe(&o, key.ttl_ms()));
            found.push(RedisValue::Array(entry));
        }
    }
    Ok(RedisValue::Array(vec![
        RedisValue::BulkString(next.to_string()),
        RedisValue::Array(found),
    ]))
}

const OKEY_ARG: Arg = Arg {
    name: c"okey",
    kind: ArgKind::Key(0),
    token: None,
    optional: false,
    summary: c"The override's key.",
};

pub const SET_DOC: CommandDoc = CommandDoc {
    name: c"RL.OVERRIDE.SET",
    acl: "write fast",
    summary: c"Stores an override whose limit, window and burst replace those of limiter calls naming it.",
    complexity: c"O(1)",
    arity: -4,
    keys: &[KeySpec {
        at: KeyAt::Index(1),
        flags: raw::REDISMODULE_CMD_KEY_OW | raw::REDISMODULE_CMD_KEY_UPDATE,
    }],
    args: &[
        OKEY_ARG,
        Arg {
            name: c"limit",
            kind: ArgKind::Integer,
            token: None,
            optional: false,
            summary: c"The limit (TOKEN: rate), 1 to 2^50.",
        },
        Arg {
            name: c"window",
            kind: ArgKind::String,
            token: None,
            optional: false,
            summary: c"An integer with an optional unit ms, s, m, h or d (bare is seconds), 1ms to 3650d.",
        },
        Arg {
            name: c"capacity",
            kind: ArgKind::Integer,
            token: Some(c"BURST"),
            optional: true,
            summary: c"TOKEN's bucket size; default the limit.",
        },
        Arg {
            name: c"duration",
            kind: ArgKind::String,
            token: Some(c"TTL"),
            optional: true,
            summary: c"How long the override lives; without it, until deleted.",
        },
    ],
};

pub const GET_DOC: CommandDoc = CommandDoc {
    name: c"RL.OVERRIDE.GET",
    acl: "read fast",
    summary: c"Returns an override as [limit, window_ms, burst, ttl_ms], or nil.",
    complexity: c"O(1)",
    arity: 2,
    keys: &[KeySpec {
        at: KeyAt::Index(1),
        flags: raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS,
    }],
    args: &[OKEY_ARG],
};

pub const DEL_DOC: CommandDoc = CommandDoc {
    name: c"RL.OVERRIDE.DEL",
    acl: "write fast",
    summary: c"Deletes overrides and returns how many were deleted.",
    complexity: c"O(N) where N is the number of keys",
    arity: -2,
    keys: &[KeySpec {
        at: KeyAt::AllFrom(1),
        flags: raw::REDISMODULE_CMD_KEY_RM | raw::REDISMODULE_CMD_KEY_DELETE,
    }],
    args: &[Arg {
        name: c"okey",
        kind: ArgKind::Key(0),
        token: None,
        optional: false,
        summary: c"Override keys; repeatable.",
    }],
};

pub const LIST_DOC: CommandDoc = CommandDoc {
    name: c"RL.OVERRIDE.LIST",
    acl: "read slow",
    summary: c"Iterates this node's overrides with SCAN's cursor contract.",
    complexity: c"O(1) for every call. O(N) for a complete iteration, N the number of keys.",
    arity: -2,
    keys: &[],
    args: &[
        Arg {
            name: c"cursor",
            kind: ArgKind::Integer,
            token: None,
            optional: false,
            summary: c"0 to start; then the cursor the previous call returned.",
        },
        Arg {
            name: c"pattern",
            kind: ArgKind::String,
            token: Some(c"MATCH"),
            optional: true,
            summary: c"Only keys matching this glob pattern.",
        },
        Arg {
            name: c"count",
            kind: ArgKind::Integer,
            token: Some(c"COUNT"),
            optional: true,
            summary: c"How many keys to examine per call (a hint, as in SCAN).",
        },
    ],
};
