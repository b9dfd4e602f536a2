//! Keys: open, read, write in place or replace, expire, delete, and signal
//! the change to WATCH and client-side caching.

use super::{Arg, Ctx};
use redis_module::raw;
use std::cell::Cell;
use std::os::raw::{c_char, c_int};

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

/// One in-place change to a string value: `bytes` written at `at`.
pub struct Patch<'p> {
    pub at: usize,
    pub bytes: &'p [u8],
}

/// An open key, closed on drop.
pub struct Key<'c> {
    ctx: Ctx<'c>,
    name: *mut raw::RedisModuleString,
    raw: *mut raw::RedisModuleKey,
    access: Access,
    /// What the key held when its value was first read: the call's later
    /// questions (would a write create it, is a rewrite the same length)
    /// are answered from it instead of reading the value again. Forgotten
    /// when the key is written.
    shape: Cell<Option<Shape>>,
}

/// A value's type and length.
#[derive(Clone, Copy)]
enum Shape {
    Empty,
    String(usize),
    Other,
}

impl Shape {
    fn of(value: &Value<'_>) -> Shape {
        match value {
            Value::Empty => Shape::Empty,
            Value::String(bytes) => Shape::String(bytes.len()),
            Value::OtherType => Shape::Other,
        }
    }
}

impl<'c> Key<'c> {
    pub fn open(ctx: Ctx<'c>, name: &'c Arg, access: Access) -> Self {
        Self::open_raw(ctx, name.raw(), access)
    }

    /// Opens a key by a name the caller keeps alive for `'c`.
    pub(super) fn open_raw(
        ctx: Ctx<'c>,
        name: *mut raw::RedisModuleString,
        access: Access,
    ) -> Self {
        let mode = match access {
            Access::Read => raw::REDISMODULE_READ,
            Access::ReadWrite => raw::REDISMODULE_READ | raw::REDISMODULE_WRITE,
        };
        // SAFETY: ctx and name are live for 'c; the handle is closed in Drop.
        let raw = unsafe {
            raw::RedisModule_OpenKey.map_or(std::ptr::null_mut(), |f| {
                f(ctx.raw(), name, mode as c_int).cast::<raw::RedisModuleKey>()
            })
        };
        Key {
            ctx,
            name,
            raw,
            access,
            shape: Cell::new(None),
        }
    }

    pub fn value(&self) -> Value<'_> {
        let value = self.read();
        self.shape.set(Some(Shape::of(&value)));
        value
    }

    /// The value's type and length, as first read this call.
    fn shape(&self) -> Shape {
        self.shape.get().unwrap_or_else(|| Shape::of(&self.value()))
    }

    fn read(&self) -> Value<'_> {
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

    /// True when the key does not exist (a write would create it).
    pub fn is_empty(&self) -> bool {
        matches!(self.shape(), Shape::Empty)
    }

    /// Stores `bytes` as the key's string value expiring at `expire_at_ms`
    /// (absolute Unix ms; None: never), then signals the change. Rewrites in
    /// place when the length is unchanged.
    pub fn write(&self, bytes: &[u8], expire_at_ms: Option<u64>) {
        if !self.writable() {
            return;
        }
        let same_length = matches!(self.shape(), Shape::String(len) if len == bytes.len());
        if same_length {
            self.patch(&[Patch { at: 0, bytes }]);
        } else {
            // SAFETY: the key is open for writing.
            unsafe { self.set_string(bytes) };
        }
        self.finish_write(expire_at_ms);
    }

    /// Applies `patches` to the key's existing string bytes in place (each
    /// inside the value, or skipped), sets the expiry and signals the change.
    pub fn write_patches(&self, patches: &[Patch<'_>], expire_at_ms: Option<u64>) {
        if !self.writable() {
            return;
        }
        self.patch(patches);
        self.finish_write(expire_at_ms);
    }

    /// Writes `bytes` at `at`, the end of the key's string value, which
    /// grows to hold them (the server's string keeps room for a few more
    /// such appends), then sets the expiry and signals the change.
    pub fn extend(&self, at: usize, bytes: &[u8], expire_at_ms: Option<u64>) {
        if !self.writable() || !matches!(self.shape(), Shape::String(len) if len == at) {
            return;
        }
        let len = at.saturating_add(bytes.len());
        // SAFETY: the key is open for writing and holds a string.
        let grown = unsafe {
            raw::RedisModule_StringTruncate
                .is_some_and(|f| f(self.raw, len) == raw::REDISMODULE_OK as c_int)
        };
        if grown {
            self.shape.set(Some(Shape::String(len)));
            self.patch(&[Patch { at, bytes }]);
        }
        self.finish_write(expire_at_ms);
    }

    fn writable(&self) -> bool {
        self.access == Access::ReadWrite && !self.raw.is_null()
    }

    fn patch(&self, patches: &[Patch<'_>]) {
        if !matches!(self.shape(), Shape::String(_)) {
            return;
        }
        let mut len = 0usize;
        // SAFETY: the key is an open string key; DMA in write mode yields its
        // bytes for writing, used only inside this function, before any other
        // call on the key.
        let data = unsafe {
            let ptr = raw::RedisModule_StringDMA.map_or(std::ptr::null_mut(), |f| {
                f(self.raw, &mut len, raw::REDISMODULE_WRITE as c_int)
            });
            if ptr.is_null() {
                return;
            }
            std::slice::from_raw_parts_mut(ptr.cast::<u8>(), len)
        };
        for p in patches {
            if let Some(dst) = data.get_mut(p.at..p.at.saturating_add(p.bytes.len())) {
                dst.copy_from_slice(p.bytes);
            }
        }
    }

    fn finish_write(&self, expire_at_ms: Option<u64>) {
        self.shape.set(None);
        // SAFETY: the key is open for writing.
        unsafe { self.set_expiry(expire_at_ms) };
        self.signal_modified();
    }

    /// # Safety
    /// `self.raw` must be a key open for writing.
    unsafe fn set_string(&self, bytes: &[u8]) {
        let s = raw::RedisModule_CreateString.map_or(std::ptr::null_mut(), |f| {
            f(self.ctx.raw(), bytes.as_ptr().cast::<c_char>(), bytes.len())
        });
        if s.is_null() {
            return;
        }
        if let Some(set) = raw::RedisModule_StringSet {
            set(self.raw, s);
        }
        if let Some(free) = raw::RedisModule_FreeString {
            free(self.ctx.raw(), s);
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
        if !self.writable() {
            return;
        }
        // SAFETY: self.raw is open for writing.
        unsafe {
            if let Some(delete) = raw::RedisModule_DeleteKey {
                delete(self.raw);
            }
        }
        self.shape.set(None);
        self.signal_modified();
    }

    /// Milliseconds the key has left, or None when it has no expiry.
    pub fn ttl_ms(&self) -> Option<u64> {
        if self.raw.is_null() || self.is_empty() {
            return None;
        }
        // SAFETY: self.raw is an open key handle.
        let ttl = unsafe { raw::RedisModule_GetExpire.map_or(-1, |f| f(self.raw)) };
        u64::try_from(ttl).ok()
    }

    /// The key's absolute expiry in Unix ms, or None when it has none.
    /// Exact on every server: stored values count their times from it.
    pub fn expires_at_ms(&self) -> Option<u64> {
        // (Redis 8.2's GetAbsExpire dereferences the value: never ask it of
        // an empty key.)
        if self.raw.is_null() || self.is_empty() {
            return None;
        }
        // SAFETY: self.raw is an open key handle; the API pointer is set at
        // load when the server has it (Redis 7.2+, Valkey).
        if let Some(absolute) = unsafe { raw::RedisModule_GetAbsExpire } {
            // SAFETY: as above.
            return u64::try_from(unsafe { absolute(self.raw) }).ok();
        }
        // Redis 7.0 gives the time to live, counted from the clock as it
        // reads it: exact when the clock reads the same millisecond before
        // and after. A TTL of 0 may be one clamped from the past (a key
        // this replica's clock has passed, still applied for its primary).
        for _ in 0..2 {
            let before = super::now_ms();
            // SAFETY: self.raw is an open key handle.
            let ttl = unsafe { raw::RedisModule_GetExpire.map_or(-1, |f| f(self.raw)) };
            let Ok(ttl) = u64::try_from(ttl) else {
                return None;
            };
            if ttl > 0 && super::now_ms() == before {
                return Some(before.saturating_add(ttl));
            }
        }
        self.asked_expiry()
    }

    /// The key's absolute expiry by `PEXPIRETIME`, for when the time to
    /// live cannot give it: a command call, so only on that rare path.
    fn asked_expiry(&self) -> Option<u64> {
        // SAFETY: ctx and name are live for the call; the format "s" takes
        // one RedisModuleString; the reply is freed here.
        unsafe {
            let call = raw::RedisModule_Call?;
            let reply = call(
                self.ctx.raw(),
                c"PEXPIRETIME".as_ptr(),
                c"s".as_ptr(),
                self.name,
            );
            if reply.is_null() {
                return None;
            }
            let at = raw::RedisModule_CallReplyInteger.map_or(-1, |f| f(reply));
            if let Some(free) = raw::RedisModule_FreeCallReply {
                free(reply);
            }
            u64::try_from(at).ok()
        }
    }

    fn signal_modified(&self) {
        // SAFETY: ctx and name outlive self.
        unsafe {
            if let Some(signal) = raw::RedisModule_SignalModifiedKey {
                signal(self.ctx.raw(), self.name);
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
