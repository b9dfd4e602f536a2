//! The module's only contact with Redis's keyspace, clock, replication
//! stream and raw replies. Every raw FFI call that redis-module 2.0.8 does
//! not wrap (or wraps at a cost the hot path should not pay) is made here,
//! once.

use crate::error::RlError;
use redis_module::{raw, CallOptionsBuilder, CallReply, CallResult, Context, RedisString};
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_longlong};

/// The server's clock in Unix milliseconds.
pub fn now_ms() -> u64 {
    // SAFETY: RedisModule_Milliseconds takes no arguments and is set by
    // RedisModule_Init before any command can run.
    let ms = unsafe { raw::RedisModule_Milliseconds.map_or(0, |f| f()) };
    u64::try_from(ms).unwrap_or(0)
}

/// True when this call arrives over the replication link or from the AOF:
/// then the primary has already decided and its timestamp must be used.
pub fn is_replayed(ctx: &Context) -> bool {
    let flags = ctx.get_flags().bits();
    let replayed = raw::REDISMODULE_CTX_FLAGS_REPLICATED | raw::REDISMODULE_CTX_FLAGS_LOADING;
    flags & replayed as c_int != 0
}

/// Propagates `command args...` to replicas and the AOF, in place of the
/// call that ran (module commands are never propagated implicitly).
pub fn replicate(ctx: &Context, command: &str, args: &[&[u8]]) {
    ctx.replicate(command, args);
}

/// Propagates the running call as it came, plus `NOW now`: the client's own
/// argument objects are passed by reference, so nothing is copied.
pub fn replicate_with_now(ctx: &Context, command: &CStr, argv: &[RedisString], now: u64) {
    let args: Vec<*mut raw::RedisModuleString> = argv.iter().skip(1).map(|a| a.inner).collect();
    let now = c_longlong::try_from(now).unwrap_or(c_longlong::MAX);
    // SAFETY: the format "vcl" takes (array, count), a C string and a long
    // long, matching the arguments; all live for the call.
    unsafe {
        if let Some(replicate) = raw::RedisModule_Replicate {
            replicate(
                ctx.ctx,
                command.as_ptr(),
                c"vcl".as_ptr(),
                args.as_ptr(),
                args.len(),
                c"NOW".as_ptr(),
                now,
            );
        }
    }
}

/// Propagates the running call exactly as it came (a replayed call already
/// carries the primary's NOW).
pub fn replicate_verbatim(ctx: &Context) {
    // SAFETY: ctx is the running command's context.
    unsafe {
        if let Some(verbatim) = raw::RedisModule_ReplicateVerbatim {
            verbatim(ctx.ctx);
        }
    }
}

/// Replies a limiter's six integers without building an intermediate value.
pub fn reply_integers(ctx: &Context, values: &[i64]) {
    // SAFETY: ctx is the running command's context; an array of n elements
    // is followed by exactly n replies.
    unsafe {
        let (Some(array), Some(int)) = (
            raw::RedisModule_ReplyWithArray,
            raw::RedisModule_ReplyWithLongLong,
        ) else {
            return;
        };
        array(ctx.ctx, values.len() as std::os::raw::c_long);
        for &v in values {
            int(ctx.ctx, v);
        }
    }
}

/// Opens an array reply of `len` elements, to be followed by `len` replies.
pub fn reply_array(ctx: &Context, len: usize) {
    // SAFETY: as above; the caller replies `len` elements next.
    unsafe {
        if let Some(array) = raw::RedisModule_ReplyWithArray {
            array(ctx.ctx, len as std::os::raw::c_long);
        }
    }
}

pub fn reply_integer(ctx: &Context, value: i64) {
    // SAFETY: ctx is the running command's context.
    unsafe {
        if let Some(int) = raw::RedisModule_ReplyWithLongLong {
            int(ctx.ctx, value);
        }
    }
}

/// One SCAN step over this node's string keys (every librl value is a
/// string): the next cursor and the keys found. Delegating to SCAN keeps its
/// cursor contract exactly, including across rehashing.
pub fn scan_strings(
    ctx: &Context,
    cursor: u64,
    pattern: Option<&[u8]>,
    count: Option<u64>,
) -> Result<(u64, Vec<Vec<u8>>), RlError> {
    let cursor = cursor.to_string();
    let count = count.map(|c| c.to_string());
    let mut args: Vec<&[u8]> = vec![cursor.as_bytes()];
    if let Some(pattern) = pattern {
        args.extend([b"MATCH".as_slice(), pattern]);
    }
    if let Some(count) = &count {
        args.extend([b"COUNT".as_slice(), count.as_bytes()]);
    }
    args.extend([b"TYPE".as_slice(), b"string"]);
    let options = CallOptionsBuilder::new().build();
    let reply: CallResult = ctx.call_ext("SCAN", &options, args.as_slice());
    let Ok(CallReply::Array(parts)) = reply else {
        return Err(RlError::Internal);
    };
    let next = match parts.get(0) {
        Some(Ok(CallReply::String(s))) => s.to_string().and_then(|s| s.parse().ok()),
        _ => None,
    };
    let keys = match parts.get(1) {
        Some(Ok(CallReply::Array(keys))) => keys
            .iter()
            .filter_map(|k| match k {
                Ok(CallReply::String(s)) => Some(s.as_bytes().to_vec()),
                _ => None,
            })
            .collect(),
        _ => return Err(RlError::Internal),
    };
    Ok((next.ok_or(RlError::Internal)?, keys))
}

/// Answers a getkeys request: argv[`pos`] is a key, written too if
/// `written`, else only read (so ACL read-only key patterns apply).
pub fn declare_key(ctx: &Context, pos: usize, written: bool) {
    let Ok(pos) = c_int::try_from(pos) else {
        return;
    };
    let flags = if written {
        raw::REDISMODULE_CMD_KEY_RW
            | raw::REDISMODULE_CMD_KEY_ACCESS
            | raw::REDISMODULE_CMD_KEY_UPDATE
    } else {
        raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS
    };
    // SAFETY: ctx is a getkeys request context and pos indexes its argv.
    unsafe {
        if let Some(with_flags) = raw::RedisModule_KeyAtPosWithFlags {
            with_flags(ctx.ctx, pos, flags as c_int);
        } else if let Some(plain) = raw::RedisModule_KeyAtPos {
            plain(ctx.ctx, pos);
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    ReadWrite,
}

/// What a key holds, as far as librl cares.
pub enum Value<'a> {
    Empty,
    String(&'a [u8]),
    /// A list, hash, set, zset, stream or module value.
    OtherType,
}

/// An open key, closed on drop.
pub struct Key<'c> {
    ctx: &'c Context,
    name: &'c RedisString,
    raw: *mut raw::RedisModuleKey,
    access: Access,
}

impl<'c> Key<'c> {
    pub fn open(ctx: &'c Context, name: &'c RedisString, access: Access) -> Self {
        let mode = match access {
            Access::Read => raw::REDISMODULE_READ,
            Access::ReadWrite => raw::REDISMODULE_READ | raw::REDISMODULE_WRITE,
        };
        // SAFETY: ctx and name are live for 'c; the handle is closed in Drop.
        let raw = unsafe {
            raw::RedisModule_OpenKey.map_or(std::ptr::null_mut(), |f| {
                f(ctx.ctx, name.inner, mode as c_int).cast::<raw::RedisModuleKey>()
            })
        };
        Key {
            ctx,
            name,
            raw,
            access,
        }
    }

    pub fn value(&self) -> Value<'_> {
        if self.raw.is_null() {
            return Value::Empty;
        }
        // SAFETY: self.raw is an open key handle.
        let key_type = unsafe { raw::RedisModule_KeyType.map_or(0, |f| f(self.raw)) };
        match key_type as isize {
            raw::REDISMODULE_KEYTYPE_EMPTY => Value::Empty,
            raw::REDISMODULE_KEYTYPE_STRING => {
                let mut len = 0usize;
                // SAFETY: the key is a string; DMA in read mode yields its
                // bytes, valid until the key is modified or closed, which the
                // borrow of self prevents.
                let ptr = unsafe {
                    raw::RedisModule_StringDMA.map_or(std::ptr::null_mut(), |f| {
                        f(self.raw, &mut len, raw::REDISMODULE_READ as c_int)
                    })
                };
                if ptr.is_null() {
                    Value::String(&[])
                } else {
                    // SAFETY: Redis guarantees `len` readable bytes at `ptr`.
                    Value::String(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) })
                }
            }
            _ => Value::OtherType,
        }
    }

    /// Stores `bytes` as the key's string value expiring at `expire_at_ms`
    /// (absolute Unix ms; None: never), then signals the change to WATCH and
    /// client-side caching. Rewrites in place when the length is unchanged.
    pub fn write(&self, bytes: &[u8], expire_at_ms: Option<u64>) {
        self.modify(expire_at_ms, |existing| match existing {
            Some(old) if old.len() == bytes.len() => {
                old.copy_from_slice(bytes);
                None
            }
            _ => Some(bytes.to_vec()),
        });
    }

    /// Lets `edit` change the key's string bytes in place (None when the key
    /// is empty); if it returns new bytes, they become the value. Then sets
    /// the expiry and signals the change.
    pub fn modify(
        &self,
        expire_at_ms: Option<u64>,
        edit: impl FnOnce(Option<&mut [u8]>) -> Option<Vec<u8>>,
    ) {
        if self.access != Access::ReadWrite || self.raw.is_null() {
            return;
        }
        // SAFETY: self.raw is open for writing; the DMA slice is used only
        // inside `edit`, before any other call on the key.
        unsafe {
            let existing = match self.value() {
                Value::String(_) => {
                    let mut len = 0usize;
                    let ptr = raw::RedisModule_StringDMA.map_or(std::ptr::null_mut(), |f| {
                        f(self.raw, &mut len, raw::REDISMODULE_WRITE as c_int)
                    });
                    (!ptr.is_null()).then(|| std::slice::from_raw_parts_mut(ptr.cast::<u8>(), len))
                }
                _ => None,
            };
            if let Some(bytes) = edit(existing) {
                self.set_string(&bytes);
            }
            self.set_expiry(expire_at_ms);
        }
        self.signal_modified();
    }

    /// # Safety
    /// `self.raw` must be a key open for writing.
    unsafe fn set_string(&self, bytes: &[u8]) {
        let s = raw::RedisModule_CreateString.map_or(std::ptr::null_mut(), |f| {
            f(self.ctx.ctx, bytes.as_ptr().cast::<c_char>(), bytes.len())
        });
        if s.is_null() {
            return;
        }
        if let Some(set) = raw::RedisModule_StringSet {
            set(self.raw, s);
        }
        if let Some(free) = raw::RedisModule_FreeString {
            free(self.ctx.ctx, s);
        }
    }

    /// # Safety
    /// `self.raw` must be a key open for writing.
    unsafe fn set_expiry(&self, expire_at_ms: Option<u64>) {
        match expire_at_ms {
            Some(at) => {
                if let Some(set_expire) = raw::RedisModule_SetAbsExpire {
                    set_expire(self.raw, i64::try_from(at).unwrap_or(i64::MAX));
                }
            }
            None => {
                if let Some(set_expire) = raw::RedisModule_SetExpire {
                    set_expire(self.raw, raw::REDISMODULE_NO_EXPIRE.into());
                }
            }
        }
    }

    /// Deletes the key (if it exists) and signals the change.
    pub fn delete(&self) {
        if self.access != Access::ReadWrite || self.raw.is_null() {
            return;
        }
        // SAFETY: self.raw is open for writing.
        unsafe {
            if let Some(delete) = raw::RedisModule_DeleteKey {
                delete(self.raw);
            }
        }
        self.signal_modified();
    }

    /// Milliseconds the key has left, or None when it has no expiry.
    pub fn ttl_ms(&self) -> Option<u64> {
        if self.raw.is_null() {
            return None;
        }
        // SAFETY: self.raw is an open key handle.
        let ttl = unsafe { raw::RedisModule_GetExpire.map_or(-1, |f| f(self.raw)) };
        u64::try_from(ttl).ok()
    }

    fn signal_modified(&self) {
        // SAFETY: ctx and name outlive self.
        unsafe {
            if let Some(signal) = raw::RedisModule_SignalModifiedKey {
                signal(self.ctx.ctx, self.name.inner);
            }
        }
    }
}

impl Drop for Key<'_> {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            // SAFETY: the handle was opened by us and is closed once.
            unsafe {
                if let Some(close) = raw::RedisModule_CloseKey {
                    close(self.raw);
                }
            }
        }
    }
}
