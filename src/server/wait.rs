//! WAIT: holding a client's reply until its reserved millisecond. The
//! client is blocked (`RedisModule_BlockClient`, so it shows in `INFO
//! clients` and other clients are served meanwhile) and a module timer,
//! precise to the millisecond (unlike blocked-client timeouts, which fire
//! at the server's `hz` tick), unblocks it with the held reply.
//!
//! `CLIENT UNBLOCK` (timeout form) stops the timer, replies at once with
//! retry_after = the time still to wait and releases the blocked-client
//! handle; the reservation stands. A
//! client that disconnects keeps its reservation: the timer still fires and
//! releases the blocked-client handle.

use super::{Call, Reply};
use librl_core::decision::LimiterReply;
use redis_module::raw;
use std::os::raw::{c_int, c_void};
use std::sync::Mutex;

/// What a held call replies at its reserved time (its clause replies
/// owned, as the reply outlives the call).
pub type HeldReply = Reply<std::vec::IntoIter<LimiterReply>>;

struct Waiter {
    bc: *mut raw::RedisModuleBlockedClient,
    reply: HeldReply,
    reserved_at_ms: u64,
}

/// Timers of waiting clients, by blocked-client handle: the timeout
/// callback finds its timer here. Only the server's main thread touches it.
static WAITERS: Mutex<Vec<(usize, raw::RedisModuleTimerID)>> = Mutex::new(Vec::new());

/// Clients waiting now (module unload is refused while any is; `INFO rl`
/// shows them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Waiting {
    /// RL.TOKEN replies held until their reserved time (a client that
    /// disconnected meanwhile counts until then: its timer is still set).
    pub token: usize,
    /// RL.CONCURRENT callers queued for a slot.
    pub concurrent: usize,
}

impl Waiting {
    pub fn total(self) -> usize {
        self.token.saturating_add(self.concurrent)
    }
}

pub fn waiting() -> Waiting {
    Waiting {
        token: WAITERS.lock().map_or(0, |w| w.len()),
        concurrent: super::queue::queued(),
    }
}

fn forget(bc: *mut raw::RedisModuleBlockedClient) -> Option<raw::RedisModuleTimerID> {
    let mut waiters = WAITERS.lock().ok()?;
    let at = waiters.iter().position(|&(b, _)| b == bc as usize)?;
    Some(waiters.swap_remove(at).1)
}

impl Call<'_> {
    /// True when this client may be blocked: not inside MULTI or a script,
    /// not a replayed call, and not where the server denies blocking.
    pub fn can_block(self) -> bool {
        // SAFETY: the context is the running command's.
        let flags = unsafe { raw::RedisModule_GetContextFlags.map_or(0, |f| f(self.ctx.raw())) };
        let no = raw::REDISMODULE_CTX_FLAGS_MULTI
            | raw::REDISMODULE_CTX_FLAGS_LUA
            | raw::REDISMODULE_CTX_FLAGS_REPLICATED
            | raw::REDISMODULE_CTX_FLAGS_LOADING
            | raw::REDISMODULE_CTX_FLAGS_DENY_BLOCKING;
        flags & no as c_int == 0
    }

    /// Holds the reply for `wait_ms` (the reserved time is
    /// `reserved_at_ms`), then replies `reply`. False when the client could
    /// not be blocked: the caller then replies at once.
    pub fn hold(self, wait_ms: u64, reserved_at_ms: u64, reply: HeldReply) -> bool {
        // SAFETY: the API pointers are set at load; the context is the
        // running command's; the callbacks match the server's signatures.
        unsafe {
            let (Some(block), Some(create_timer)) =
                (raw::RedisModule_BlockClient, raw::RedisModule_CreateTimer)
            else {
                return false;
            };
            let bc = block(
                self.ctx.raw(),
                Some(reply_callback),
                Some(timeout_callback),
                Some(free_waiter),
                0,
            );
            if bc.is_null() {
                return false;
            }
            let waiter = Box::into_raw(Box::new(Waiter {
                bc,
                reply,
                reserved_at_ms,
            }));
            let period = raw::mstime_t::try_from(wait_ms).unwrap_or(raw::mstime_t::MAX);
            let id = create_timer(self.ctx.raw(), period, Some(timer_fired), waiter.cast());
            if let Ok(mut waiters) = WAITERS.lock() {
                waiters.push((bc as usize, id));
            }
        }
        true
    }
}

/// The reserved time has come: hand the waiter to the server, which calls
/// `reply_callback` (if the client is still there) and then `free_waiter`.
unsafe extern "C" fn timer_fired(_ctx: *mut raw::RedisModuleCtx, data: *mut c_void) {
    let waiter = data.cast::<Waiter>();
    if waiter.is_null() {
        return;
    }
    // SAFETY: data is the Waiter this module boxed in `hold`, still owned
    // by the timer.
    let bc = unsafe { (*waiter).bc };
    forget(bc);
    // SAFETY: bc is a blocked client of this module, unblocked once.
    unsafe {
        if let Some(unblock) = raw::RedisModule_UnblockClient {
            unblock(bc, data);
        }
    }
}

/// Writes a held reply, `left_ms` before its reserved time (0 when the
/// time has come).
pub(super) fn reply_held(call: Call<'_>, reply: &HeldReply, left_ms: u64) {
    let reply = match reply {
        Reply::One(r) => Reply::One(*r),
        Reply::All {
            allowed,
            retry_after,
            clauses,
        } => Reply::All {
            allowed: *allowed,
            retry_after: *retry_after,
            clauses: clauses.as_slice().iter().copied(),
        },
    };
    call.reply_limiter(if left_ms > 0 {
        reply.released_early(left_ms)
    } else {
        reply
    });
}

pub(super) fn reply_call(ctx: *mut raw::RedisModuleCtx) -> Call<'static> {
    Call {
        ctx: super::Ctx {
            raw: ctx,
            _call: std::marker::PhantomData,
        },
        args: &[],
    }
}

unsafe extern "C" fn reply_callback(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    // SAFETY: the private data is the Waiter passed to UnblockClient.
    let waiter = unsafe {
        raw::RedisModule_GetBlockedClientPrivateData
            .map_or(std::ptr::null_mut(), |f| f(ctx))
            .cast::<Waiter>()
    };
    // SAFETY: non-null, owned by the server until free_waiter.
    if let Some(waiter) = unsafe { waiter.as_ref() } {
        reply_held(reply_call(ctx), &waiter.reply, 0);
    }
    raw::REDISMODULE_OK as c_int
}

/// `CLIENT UNBLOCK`: stop the timer and reply now, with the time still to
/// wait as retry_after.
unsafe extern "C" fn timeout_callback(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    // SAFETY: the context is a blocked client's timeout request.
    let bc =
        unsafe { raw::RedisModule_GetBlockedClientHandle.map_or(std::ptr::null_mut(), |f| f(ctx)) };
    let Some(id) = forget(bc) else {
        return raw::REDISMODULE_OK as c_int;
    };
    let mut data: *mut c_void = std::ptr::null_mut();
    // SAFETY: id is this module's live timer; on success data is its Waiter,
    // which the timer no longer owns.
    let stopped = unsafe {
        raw::RedisModule_StopTimer
            .is_some_and(|f| f(ctx, id, &mut data) == raw::REDISMODULE_OK as c_int)
    };
    if stopped && !data.is_null() {
        // SAFETY: boxed in `hold`, released by the stopped timer.
        let waiter = unsafe { Box::from_raw(data.cast::<Waiter>()) };
        let left = waiter.reserved_at_ms.saturating_sub(super::now_ms());
        reply_held(reply_call(ctx), &waiter.reply, left);
        // The stopped timer would have released the handle: release it
        // here (with nothing more to reply), or the server counts the
        // module's blocked client for ever and refuses to unload it.
        // SAFETY: bc is this module's blocked client, unblocked once.
        unsafe {
            if let Some(unblock) = raw::RedisModule_UnblockClient {
                unblock(bc, std::ptr::null_mut());
            }
        }
    }
    raw::REDISMODULE_OK as c_int
}

unsafe extern "C" fn free_waiter(_ctx: *mut raw::RedisModuleCtx, data: *mut c_void) {
    if !data.is_null() {
        // SAFETY: the Waiter boxed in `hold`, freed once by the server.
        drop(unsafe { Box::from_raw(data.cast::<Waiter>()) });
    }
}
