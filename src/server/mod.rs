//! The server shim: librl's only contact with the server. Every raw FFI
//! call lives in this room, made once: the clock, the command entry point
//! and its arguments, replies, replication, the getkeys API, SCAN, keys
//! (`key.rs`), the calling user's key permissions (`user.rs`),
//! registration with command metadata (`register.rs`), and blocked
//! clients: RL.TOKEN's held replies (`wait.rs`) and RL.CONCURRENT's queues
//! of waiting callers (`queue.rs`).

mod key;
mod queue;
pub mod register;
mod reply;
mod user;
mod wait;

pub use key::{Access, Key, Patch, Value};
pub use queue::{Attempt, Turn};
pub use reply::Reply;
pub use wait::{waiting, HeldReply};

use crate::error::RlError;
use redis_module::{raw, CallOptionsBuilder, CallReply, CallResult, Context};
use std::ffi::{CStr, CString};
use std::marker::PhantomData;
use std::os::raw::{c_int, c_long, c_longlong};
use std::sync::atomic::{AtomicPtr, Ordering};

/// The running command's context, valid for `'a`.
#[derive(Clone, Copy)]
pub struct Ctx<'a> {
    raw: *mut raw::RedisModuleCtx,
    _call: PhantomData<&'a ()>,
}

impl Ctx<'_> {
    fn raw(self) -> *mut raw::RedisModuleCtx {
        self.raw
    }

    /// The crate's safe wrapper, for the few calls made through it.
    fn context(self) -> Context {
        Context::new(self.raw)
    }

    /// True when this call arrives over the replication link or from the
    /// AOF: then the primary has already decided, with its own clock.
    pub fn is_replayed(self) -> bool {
        // SAFETY: the context is the running command's.
        let flags = unsafe { raw::RedisModule_GetContextFlags.map_or(0, |f| f(self.raw)) };
        let replayed = raw::REDISMODULE_CTX_FLAGS_REPLICATED | raw::REDISMODULE_CTX_FLAGS_LOADING;
        flags & replayed as c_int != 0
    }

    /// True when used memory has reached `maxmemory` (the state in which
    /// the server refuses its own growing writes): the module then refuses
    /// only what would add to the dataset, instead of every call as the
    /// `deny-oom` flag would. The server's used-memory ratio is the same
    /// test as its OOM context flag (both come from its maxmemory state)
    /// without computing every other flag: a third of the cost, and next
    /// to nothing without `maxmemory`. As a float it can call a server
    /// within one part in 2^24 of `maxmemory` full a little early.
    pub fn is_oom(self) -> bool {
        // SAFETY: a plain query of the server's memory state.
        let ratio = unsafe { raw::RedisModule_GetUsedMemoryRatio.map_or(0.0, |f| f()) };
        ratio >= 1.0
    }

    /// True when the server asks only which arguments are keys.
    pub fn is_keys_request(self) -> bool {
        // SAFETY: as above.
        unsafe { raw::RedisModule_IsKeysPositionRequest.is_some_and(|f| f(self.raw) != 0) }
    }

    pub fn log_warning(self, message: &str) {
        self.context().log_warning(message);
    }
}

/// The word NOW of propagated calls: one module string, created on the
/// first call that replicates (on the main thread, where every command
/// runs) and kept for the life of the process. Null if it could not be
/// created; the caller then passes the C string.
fn now_word() -> *mut raw::RedisModuleString {
    static WORD: AtomicPtr<raw::RedisModuleString> = AtomicPtr::new(std::ptr::null_mut());
    let word = WORD.load(Ordering::Relaxed);
    if !word.is_null() {
        return word;
    }
    // SAFETY: a null context makes a string no context frees, which is
    // what a string kept for the process needs.
    let word = unsafe {
        raw::RedisModule_CreateString.map_or(std::ptr::null_mut(), |f| {
            f(std::ptr::null_mut(), c"NOW".as_ptr(), 3)
        })
    };
    WORD.store(word, Ordering::Relaxed);
    word
}

/// The server's clock in Unix milliseconds. The only clock librl reads.
pub fn now_ms() -> u64 {
    // SAFETY: RedisModule_Milliseconds takes no arguments and is set by
    // RedisModule_Init before any command can run.
    let ms = unsafe { raw::RedisModule_Milliseconds.map_or(0, |f| f()) };
    u64::try_from(ms).unwrap_or(0)
}

/// One argument of the running command: the server's object, whose bytes
/// are asked for only when read (a key is opened by its object, never
/// read as bytes). The same layout as the server's argv entry, so the
/// call's arguments are its argv, not a copy.
#[repr(transparent)]
pub struct Arg {
    raw: *mut raw::RedisModuleString,
}

impl Arg {
    fn raw(&self) -> *mut raw::RedisModuleString {
        self.raw
    }
}

impl AsRef<[u8]> for Arg {
    fn as_ref(&self) -> &[u8] {
        let mut len = 0usize;
        // SAFETY: raw is an argument of the running command; the server
        // guarantees `len` bytes at the pointer for as long as the argument
        // lives, which outlives every borrow of `self`.
        unsafe {
            let ptr =
                raw::RedisModule_StringPtrLen.map_or(std::ptr::null(), |f| f(self.raw, &mut len));
            if ptr.is_null() {
                return &[];
            }
            std::slice::from_raw_parts(ptr.cast::<u8>(), len)
        }
    }
}

/// One running command: its context and arguments (argv[0] is its name).
#[derive(Clone, Copy)]
pub struct Call<'a> {
    pub ctx: Ctx<'a>,
    pub args: &'a [Arg],
}

/// A command's body, run by `entry`.
pub trait Entry {
    fn run(call: Call<'_>);
}

/// The `extern "C"` function the server calls for command `E`: reads argv
/// as a slice (no copies of the arguments) and runs `E` on it.
///
/// # Safety
/// Called by the server with a live context and `argc` arguments at `argv`.
pub unsafe extern "C" fn entry<E: Entry>(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    let argc = usize::try_from(argc).unwrap_or(0);
    let args: &[Arg] = if argv.is_null() || argc == 0 {
        &[]
    } else {
        // SAFETY: the server passes argc valid argument pointers, alive for
        // the call; an Arg is one such pointer (repr(transparent)).
        unsafe { std::slice::from_raw_parts(argv.cast::<Arg>(), argc) }
    };
    let ctx = Ctx {
        raw: ctx,
        _call: PhantomData,
    };
    E::run(Call { ctx, args });
    raw::REDISMODULE_OK as c_int
}

impl<'a> Call<'a> {
    /// The same call seen from its subcommand: argv[0] becomes the
    /// subcommand's name (`RL.OVERRIDE SET okey ...` reads as `SET okey ...`).
    pub fn subcommand(self) -> Call<'a> {
        Call {
            ctx: self.ctx,
            args: self.args.get(1..).unwrap_or_default(),
        }
    }

    /// Propagates the running call as it came, plus `NOW now`: the client's
    /// own argument objects are passed, so nothing is copied. NOW and the
    /// time go as module strings ("s"), which the server takes a reference
    /// to, rather than as a C string and a long long ("c", "l"), which it
    /// copies into new objects on every call: the word is one string for
    /// the process ([`now_word`]), the time one allocation instead of two.
    /// The replicated words are the same.
    pub fn replicate_with_now(self, command: &CStr, now: u64) {
        let args = self.args.get(1..).unwrap_or_default();
        let now = c_longlong::try_from(now).unwrap_or(c_longlong::MAX);
        let (vector, count) = (
            args.as_ptr().cast::<*mut raw::RedisModuleString>(),
            args.len(),
        );
        let word = now_word();
        // SAFETY: each format's arguments match it: (array, count), then
        // two module strings ("vss") or a C string and a long long
        // ("vcl"); all live for the call. The time is made without a
        // context, so freeing it here drops only our reference.
        unsafe {
            let Some(replicate) = raw::RedisModule_Replicate else {
                return;
            };
            let time = raw::RedisModule_CreateStringFromLongLong
                .map_or(std::ptr::null_mut(), |f| f(std::ptr::null_mut(), now));
            if word.is_null() || time.is_null() {
                let vcl = c"vcl".as_ptr();
                replicate(
                    self.ctx.raw(),
                    command.as_ptr(),
                    vcl,
                    vector,
                    count,
                    c"NOW".as_ptr(),
                    now,
                );
            } else {
                let vss = c"vss".as_ptr();
                replicate(
                    self.ctx.raw(),
                    command.as_ptr(),
                    vss,
                    vector,
                    count,
                    word,
                    time,
                );
            }
            if let (false, Some(free)) = (time.is_null(), raw::RedisModule_FreeString) {
                free(std::ptr::null_mut(), time);
            }
        }
    }

    /// Propagates the running call exactly as it came (a replayed call
    /// already carries the primary's NOW).
    pub fn replicate_verbatim(self) {
        // SAFETY: the context is the running command's.
        unsafe {
            if let Some(verbatim) = raw::RedisModule_ReplicateVerbatim {
                verbatim(self.ctx.raw());
            }
        }
    }

    /// Propagates `command args...` in place of the call that ran.
    pub fn replicate(self, command: &str, args: &[&[u8]]) {
        self.ctx.context().replicate(command, args);
    }

    /// Answers a getkeys request: argv[`pos`] is a key, written too if
    /// `written`, else only read (so ACL read-only key patterns apply).
    pub fn declare_key(self, pos: usize, written: bool) {
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
        // SAFETY: the context is a getkeys request and pos indexes its argv.
        unsafe {
            if let Some(with_flags) = raw::RedisModule_KeyAtPosWithFlags {
                with_flags(self.ctx.raw(), pos, flags as c_int);
            } else if let Some(plain) = raw::RedisModule_KeyAtPos {
                plain(self.ctx.raw(), pos);
            }
        }
    }

    pub fn open(self, name: &'a Arg, access: Access) -> Key<'a> {
        Key::open(self.ctx, name, access)
    }

    /// Opens a key named by bytes the server did not pass as an argument
    /// (SCAN's results).
    pub fn open_named(self, name: &'a OwnedName, access: Access) -> Key<'a> {
        Key::open_raw(self.ctx, name.raw, access)
    }

    /// Replies a limiter's integers without building an intermediate value.
    #[inline(always)]
    pub fn reply_integers(self, values: &[i64]) {
        self.reply_array(values.len());
        // SAFETY: the server fills in its API before loading the module.
        if let Some(int) = unsafe { raw::RedisModule_ReplyWithLongLong } {
            for &v in values {
                // SAFETY: the context is the running command's.
                unsafe { int(self.ctx.raw(), v) };
            }
        }
    }

    /// Opens an array reply of `len` elements, to be followed by `len` replies.
    pub fn reply_array(self, len: usize) {
        // SAFETY: the context is the running command's; the caller replies
        // `len` elements next.
        unsafe {
            if let Some(array) = raw::RedisModule_ReplyWithArray {
                array(self.ctx.raw(), c_long::try_from(len).unwrap_or(c_long::MAX));
            }
        }
    }

    pub fn reply_integer(self, value: i64) {
        // SAFETY: the context is the running command's.
        unsafe {
            if let Some(int) = raw::RedisModule_ReplyWithLongLong {
                int(self.ctx.raw(), value);
            }
        }
    }

    pub fn reply_null(self) {
        // SAFETY: as above.
        unsafe {
            if let Some(null) = raw::RedisModule_ReplyWithNull {
                null(self.ctx.raw());
            }
        }
    }

    pub fn reply_ok(self) {
        // SAFETY: as above; the string is a valid C string.
        unsafe {
            if let Some(simple) = raw::RedisModule_ReplyWithSimpleString {
                simple(self.ctx.raw(), c"OK".as_ptr());
            }
        }
    }

    /// A status line (help text: no CR or LF inside).
    pub fn reply_simple(self, line: &str) {
        let text = CString::new(line.replace(['\r', '\n', '\0'], " ")).unwrap_or_default();
        // SAFETY: as above; text is a valid C string.
        unsafe {
            if let Some(simple) = raw::RedisModule_ReplyWithSimpleString {
                simple(self.ctx.raw(), text.as_ptr());
            }
        }
    }

    pub fn reply_bulk(self, bytes: &[u8]) {
        // SAFETY: as above; `bytes` is valid for its length.
        unsafe {
            if let Some(bulk) = raw::RedisModule_ReplyWithStringBuffer {
                bulk(self.ctx.raw(), bytes.as_ptr().cast(), bytes.len());
            }
        }
    }

    /// Replies an error; `message` starts with its code (`ERR`, `WRONGTYPE`).
    pub fn reply_error(self, message: &str) {
        // Messages are built from printable renderings, but a NUL would cut
        // the C string: replace rather than fail.
        let text = CString::new(message.replace('\0', "?")).unwrap_or_default();
        // SAFETY: as above; text is a valid C string.
        unsafe {
            if let Some(error) = raw::RedisModule_ReplyWithError {
                error(self.ctx.raw(), text.as_ptr());
            }
        }
    }

    /// One SCAN step over this node's string keys (every librl value is a
    /// string): the next cursor and the keys found. Delegating to SCAN keeps
    /// its cursor contract exactly, including across rehashing.
    pub fn scan_strings(
        self,
        cursor: u64,
        pattern: Option<&[u8]>,
        count: Option<u64>,
    ) -> Result<(u64, Vec<OwnedName>), RlError> {
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
        let ctx = self.ctx.context();
        let reply: CallResult = ctx.call_ext("SCAN", &options, args.as_slice());
        let Ok(CallReply::Array(parts)) = reply else {
            return Err(RlError::Internal("SCAN did not reply an array"));
        };
        let next = match parts.get(0) {
            Some(Ok(CallReply::String(s))) => s.to_string().and_then(|s| s.parse().ok()),
            _ => None,
        };
        let keys = match parts.get(1) {
            Some(Ok(CallReply::Array(keys))) => keys
                .iter()
                .filter_map(|k| match k {
                    Ok(CallReply::String(s)) => Some(OwnedName::new(self.ctx, s.as_bytes())),
                    _ => None,
                })
                .collect(),
            _ => return Err(RlError::Internal("SCAN's reply has no key array")),
        };
        let next = next.ok_or(RlError::Internal("SCAN's reply has no cursor"))?;
        Ok((next, keys))
    }
}

/// A key name the module created (from SCAN's reply), freed on drop.
pub struct OwnedName {
    ctx: *mut raw::RedisModuleCtx,
    raw: *mut raw::RedisModuleString,
    bytes: Vec<u8>,
}

impl OwnedName {
    fn new(ctx: Ctx<'_>, bytes: &[u8]) -> OwnedName {
        // SAFETY: the context is live; the bytes are copied by the server
        // (names may hold NUL bytes: the length is explicit).
        let raw = unsafe {
            raw::RedisModule_CreateString.map_or(std::ptr::null_mut(), |f| {
                f(ctx.raw(), bytes.as_ptr().cast(), bytes.len())
            })
        };
        OwnedName {
            ctx: ctx.raw(),
            raw,
            bytes: bytes.to_vec(),
        }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

impl Drop for OwnedName {
    fn drop(&mut self) {
        if self.raw.is_null() {
            return;
        }
        // SAFETY: created by us with this context, freed once.
        unsafe {
            if let Some(free) = raw::RedisModule_FreeString {
                free(self.ctx, self.raw);
            }
        }
    }
}

/// Logs to the server log without a command context (panic hook).
pub fn log_warning(message: &str) {
    redis_module::logging::log_warning(message);
}
