//! A REFERENCE, NOT SHIPPED: the floor of what the Redis module API allows
//! for a rate limiter's key work, for `make bench` to measure librl against
//! (bench/README.md, "The floor").
//!
//! `FLOOR.WRITE key [arg ...]` does exactly what an admitted librl call
//! must do, and nothing else: open the key for writing, write a 29-byte
//! string value, set an absolute expiry, replicate the call with the
//! primary's time appended (`RedisModule_Replicate(ctx, name, "vcl", argv,
//! argc, "NOW", now)`, deterministic replication as librl's), and reply an
//! array of six integers. It parses nothing (any further arguments are
//! ignored), allocates nothing itself and keeps no statistics: each of
//! those is overhead librl adds above this floor.
//!
//! `FLOOR.VERBATIM key [arg ...]` is the same with
//! `RedisModule_ReplicateVerbatim` (not deterministic: a replica would
//! read its own clock), to show what deterministic replication costs, and
//! `FLOOR.EMPTY` does nothing but reply `1`: what any module command costs.
//!
//! Registered through the raw API with `extern "C"` handlers that read
//! `argv` as a slice: no `Context`, no `Vec<RedisString>`.

use redis_module::raw;
use std::os::raw::{c_char, c_int, c_longlong};

/// The value's size: librl's FIXED and APPROX states are 29 bytes.
const VALUE_LEN: usize = 29;
/// The expiry set on each call, from now (a 60 s window).
const WINDOW_MS: c_longlong = 60_000;

type Ctx = raw::RedisModuleCtx;
type Str = raw::RedisModuleString;

#[derive(Clone, Copy, PartialEq)]
enum Replication {
    WithNow,
    Verbatim,
}

/// The one command body, with the replication style as a constant.
///
/// # Safety
/// Called by Redis with a valid context and `argc` strings at `argv`.
unsafe fn floor(
    ctx: *mut Ctx,
    argv: *mut *mut Str,
    argc: c_int,
    replication: Replication,
) -> c_int {
    let Ok(argc) = usize::try_from(argc) else {
        return raw::REDISMODULE_ERR as c_int;
    };
    if argc < 2 || argv.is_null() {
        return raw::RedisModule_WrongArity.map_or(raw::REDISMODULE_ERR as c_int, |f| f(ctx));
    }
    let args = std::slice::from_raw_parts(argv, argc);
    let (
        Some(milliseconds),
        Some(open_key),
        Some(set_abs_expire),
        Some(close_key),
        Some(reply_array),
        Some(reply_int),
    ) = (
        raw::RedisModule_Milliseconds,
        raw::RedisModule_OpenKey,
        raw::RedisModule_SetAbsExpire,
        raw::RedisModule_CloseKey,
        raw::RedisModule_ReplyWithArray,
        raw::RedisModule_ReplyWithLongLong,
    )
    else {
        return raw::REDISMODULE_ERR as c_int;
    };
    let now = milliseconds();
    let key = open_key(
        ctx,
        args[1],
        (raw::REDISMODULE_READ | raw::REDISMODULE_WRITE) as c_int,
    );
    if key.is_null() || !write_value(ctx, key, now) {
        if !key.is_null() {
            close_key(key);
        }
        return raw::RedisModule_ReplyWithError.map_or(raw::REDISMODULE_ERR as c_int, |f| {
            f(ctx, c"WRONGTYPE floor: the key holds another type".as_ptr())
        });
    }
    set_abs_expire(key, now + WINDOW_MS);
    close_key(key);
    match replication {
        Replication::WithNow => {
            if let Some(replicate) = raw::RedisModule_Replicate {
                replicate(
                    ctx,
                    c"FLOOR.WRITE".as_ptr(),
                    c"vcl".as_ptr(),
                    argv.add(1),
                    argc - 1,
                    c"NOW".as_ptr(),
                    now,
                );
            }
        }
        Replication::Verbatim => {
            if let Some(verbatim) = raw::RedisModule_ReplicateVerbatim {
                verbatim(ctx);
            }
        }
    }
    reply_array(ctx, 6);
    for v in [1, 1, 0, 100, 99, WINDOW_MS] {
        reply_int(ctx, v);
    }
    raw::REDISMODULE_OK as c_int
}

/// The 29 bytes: a version byte and three little-endian u64s, as a fixed
/// window's start, end and count would be (the last 4 bytes stay zero).
fn fill(value: &mut [u8; VALUE_LEN], now: c_longlong) {
    value[0] = 1;
    value[1..9].copy_from_slice(&now.to_le_bytes());
    value[9..17].copy_from_slice(&(now + WINDOW_MS).to_le_bytes());
    value[17..25].copy_from_slice(&1u64.to_le_bytes());
}

/// Writes the value the cheapest way the API has for each case (measured
/// under callgrind): a new key gets a string object made in one allocation
/// (`RedisModule_CreateString` of 29 bytes is an embedded string) set with
/// `RedisModule_StringSet`; an existing string of that size is overwritten
/// in place through `RedisModule_StringDMA`. False if the key holds
/// another type.
///
/// # Safety
/// `key` is open for writing in `ctx`.
unsafe fn write_value(ctx: *mut Ctx, key: *mut raw::RedisModuleKey, now: c_longlong) -> bool {
    let (Some(key_type), Some(create), Some(set), Some(free), Some(truncate), Some(dma)) = (
        raw::RedisModule_KeyType,
        raw::RedisModule_CreateString,
        raw::RedisModule_StringSet,
        raw::RedisModule_FreeString,
        raw::RedisModule_StringTruncate,
        raw::RedisModule_StringDMA,
    ) else {
        return false;
    };
    let mut value = [0u8; VALUE_LEN];
    fill(&mut value, now);
    match key_type(key) as isize {
        raw::REDISMODULE_KEYTYPE_EMPTY => {
            let s = create(ctx, value.as_ptr().cast::<c_char>(), VALUE_LEN);
            let ok = set(key, s) == raw::REDISMODULE_OK as c_int;
            free(ctx, s);
            ok
        }
        raw::REDISMODULE_KEYTYPE_STRING => {
            if truncate(key, VALUE_LEN) != raw::REDISMODULE_OK as c_int {
                return false;
            }
            let mut len = 0usize;
            let ptr = dma(key, &mut len, raw::REDISMODULE_WRITE as c_int);
            if ptr.is_null() || len != VALUE_LEN {
                return false;
            }
            std::slice::from_raw_parts_mut(ptr.cast::<u8>(), len).copy_from_slice(&value);
            true
        }
        _ => false,
    }
}

/// `FLOOR.EMPTY [arg ...]`: no key, no replication, the reply `1`: what any
/// module command costs before it does anything.
extern "C" fn floor_empty(ctx: *mut Ctx, _argv: *mut *mut Str, _argc: c_int) -> c_int {
    // SAFETY: Redis calls a command handler with its context.
    unsafe {
        raw::RedisModule_ReplyWithLongLong.map_or(raw::REDISMODULE_ERR as c_int, |f| f(ctx, 1))
    }
}

extern "C" fn floor_write(ctx: *mut Ctx, argv: *mut *mut Str, argc: c_int) -> c_int {
    // SAFETY: Redis calls a command handler with its context and argv.
    unsafe { floor(ctx, argv, argc, Replication::WithNow) }
}

extern "C" fn floor_verbatim(ctx: *mut Ctx, argv: *mut *mut Str, argc: c_int) -> c_int {
    // SAFETY: as above.
    unsafe { floor(ctx, argv, argc, Replication::Verbatim) }
}

/// Loads the module: `--loadmodule librlfloor.so`.
///
/// # Safety
/// Called once by Redis with a valid context.
#[no_mangle]
pub unsafe extern "C" fn RedisModule_OnLoad(
    ctx: *mut Ctx,
    _argv: *mut *mut Str,
    _argc: c_int,
) -> c_int {
    let err = raw::REDISMODULE_ERR as c_int;
    if raw::Export_RedisModule_Init(
        ctx,
        c"rlfloor".as_ptr(),
        1,
        raw::REDISMODULE_APIVER_1 as c_int,
    ) == err
    {
        return err;
    }
    let Some(create) = raw::RedisModule_CreateCommand else {
        return err;
    };
    let commands: [(
        &std::ffi::CStr,
        raw::RedisModuleCmdFunc,
        &std::ffi::CStr,
        c_int,
    ); 3] = [
        (c"FLOOR.WRITE", Some(floor_write), c"write deny-oom fast", 1),
        (
            c"FLOOR.VERBATIM",
            Some(floor_verbatim),
            c"write deny-oom fast",
            1,
        ),
        (c"FLOOR.EMPTY", Some(floor_empty), c"readonly fast", 0),
    ];
    for (name, handler, flags, first_key) in commands {
        let flags: *const c_char = flags.as_ptr();
        if create(
            ctx,
            name.as_ptr(),
            handler,
            flags,
            first_key,
            first_key,
            first_key,
        ) == err
        {
            return err;
        }
    }
    raw::REDISMODULE_OK as c_int
}
