//! WAIT on RL.CONCURRENT: callers refused for want of a free slot wait,
//! their clients blocked (`RedisModule_BlockClient`, so they show in `INFO
//! clients` and other clients are served meanwhile), in one queue per key,
//! in arrival order. The command layer decides; this room keeps the
//! queues, blocks and unblocks, and keeps the timers, which are module
//! timers, precise to the millisecond (unlike blocked-client timeouts,
//! which fire at the server's `hz` tick):
//!
//! - a RELEASE serves the key's queue at once, inside its own call;
//! - a wake timer per queue fires when the leases its first waiter needs
//!   end by themselves;
//! - a deadline timer per waiter answers it when its `max_wait` is over.
//!
//! Serving a queue asks its first waiter's attempt ([`Try`], the command
//! layer's) until one is still refused: arrival order is kept, so a large
//! COST is never starved by smaller ones behind it. `CLIENT UNBLOCK` answers
//! a waiter at once (refused); a waiter whose client goes away leaves the
//! queue. Either way, if it was first, the queue is served again at once.

use super::wait::{reply_call, reply_held, HeldReply};
use super::{Arg, Call};
use redis_module::raw;
use std::collections::{HashMap, VecDeque};
use std::os::raw::{c_int, c_void};
use std::sync::Mutex;

/// Where a waiter stands when its attempt is asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    /// First in its queue: served if its cost fits, else it waits on.
    Head,
    /// Its `max_wait` is over: served if its cost fits, else refused.
    Deadline,
    /// `CLIENT UNBLOCK`: refused at once, taking nothing.
    Unblocked,
    /// Its client went away: nothing to answer (only counted).
    Gone,
    /// This node no longer serves its key (the key's slot moved, or is
    /// moving, to another node while it waited): answered with an error
    /// that sends it there, taking nothing.
    Moved,
}

/// A waiter's attempt.
pub enum Attempt {
    /// Its wait is over: the reply (or error) to send.
    Done(Result<HeldReply, String>),
    /// Still refused: its leases alone let it in at this time (None: only a
    /// release can).
    Wait(Option<u64>),
}

/// The command layer's attempt for a waiter: the call (the server's context
/// of the moment, the waiter's own arguments), the time, its turn.
pub type Try = fn(Call<'_>, u64, Turn) -> Attempt;

/// A waiting call's arguments, copied out of its client: they live until
/// it is answered.
struct HeldArgs(Vec<Arg>);

// SAFETY: only the server's main thread creates, reads and frees them.
unsafe impl Send for HeldArgs {}

impl HeldArgs {
    fn copy(args: &[Arg]) -> HeldArgs {
        HeldArgs(
            args.iter()
                .map(|a| Arg {
                    // SAFETY: a NULL context makes a string that outlives
                    // the call; it is freed in Drop.
                    raw: unsafe {
                        raw::RedisModule_CreateStringFromString
                            .map_or(std::ptr::null_mut(), |f| f(std::ptr::null_mut(), a.raw()))
                    },
                })
                .collect(),
        )
    }
}

impl Drop for HeldArgs {
    fn drop(&mut self) {
        for a in &self.0 {
            if !a.raw.is_null() {
                // SAFETY: created with a NULL context in `copy`, freed once.
                unsafe {
                    if let Some(free) = raw::RedisModule_FreeString {
                        free(std::ptr::null_mut(), a.raw);
                    }
                }
            }
        }
    }
}

struct Waiter {
    /// The blocked-client handle (as an address: the handle is the server's).
    bc: usize,
    args: HeldArgs,
    attempt: Try,
    /// The deadline timer, until it fires (a timer must not be stopped from
    /// its own callback: the server frees it after the callback returns).
    deadline: Option<raw::RedisModuleTimerID>,
}

/// A key, in the database its callers use.
type QueueKey = (c_int, Vec<u8>);

#[derive(Default)]
struct Queue {
    waiters: VecDeque<Waiter>,
    /// The wake timer and when it fires.
    wake: Option<(raw::RedisModuleTimerID, u64)>,
}

/// The queues, by key. Only the server's main thread touches them.
static QUEUES: Mutex<Option<HashMap<QueueKey, Queue>>> = Mutex::new(None);

fn with_queues<T>(f: impl FnOnce(&mut HashMap<QueueKey, Queue>) -> T) -> Option<T> {
    let mut guard = QUEUES.lock().ok()?;
    Some(f(guard.get_or_insert_with(HashMap::new)))
}

/// How many callers wait (refuses module unload while any does).
pub fn queued() -> usize {
    with_queues(|q| q.values().map(|queue| queue.waiters.len()).sum()).unwrap_or(0)
}

fn selected_db(ctx: *mut raw::RedisModuleCtx) -> c_int {
    // SAFETY: a live context.
    unsafe { raw::RedisModule_GetSelectedDb.map_or(0, |f| f(ctx)) }
}

/// A deadline timer's data: which waiter's (its blocked-client handle).
struct Deadline(usize);

fn select_db(ctx: *mut raw::RedisModuleCtx, db: c_int) {
    // SAFETY: a live context; the database exists (its key's callers use it).
    unsafe {
        if let Some(select) = raw::RedisModule_SelectDb {
            select(ctx, db);
        }
    }
}

fn create_timer<T>(
    ctx: *mut raw::RedisModuleCtx,
    at_ms: u64,
    callback: unsafe extern "C" fn(*mut raw::RedisModuleCtx, *mut c_void),
    data: Box<T>,
) -> raw::RedisModuleTimerID {
    let period = at_ms.saturating_sub(super::now_ms());
    let period = raw::mstime_t::try_from(period).unwrap_or(raw::mstime_t::MAX);
    let data = Box::into_raw(data).cast::<c_void>();
    // SAFETY: the API pointers are set at load; the callback's data is the
    // box, freed by the callback or when the timer is stopped.
    unsafe { raw::RedisModule_CreateTimer.map_or(0, |f| f(ctx, period, Some(callback), data)) }
}

/// Stops a timer of this room, freeing its data.
fn stop_timer<T>(ctx: *mut raw::RedisModuleCtx, id: raw::RedisModuleTimerID) {
    let mut data: *mut c_void = std::ptr::null_mut();
    // SAFETY: on success the timer's data is handed back and no longer owned
    // by the timer (a timer that has fired is not found).
    let stopped = unsafe {
        raw::RedisModule_StopTimer
            .is_some_and(|f| f(ctx, id, &mut data) == raw::REDISMODULE_OK as c_int)
    };
    if stopped && !data.is_null() {
        // SAFETY: boxed as a T by `create_timer`.
        drop(unsafe { Box::from_raw(data.cast::<T>()) });
    }
}

/// Arms `key`'s wake timer for `at_ms` unless it fires earlier already.
fn arm(ctx: *mut raw::RedisModuleCtx, key: &QueueKey, at_ms: u64) {
    let old = with_queues(|q| {
        let queue = q.get_mut(key)?;
        match queue.wake {
            Some((_, at)) if at <= at_ms => None,
            other => {
                queue.wake = None;
                Some(other)
            }
        }
    })
    .flatten();
    let Some(old) = old else { return };
    if let Some((id, _)) = old {
        stop_timer::<QueueKey>(ctx, id);
    }
    let id = create_timer(ctx, at_ms, wake_fired, Box::new(key.clone()));
    with_queues(|q| match q.get_mut(key) {
        Some(queue) => queue.wake = Some((id, at_ms)),
        None => stop_timer::<QueueKey>(ctx, id),
    });
}

/// Whether this node serves `key` (in the selected database) as the
/// server routes a client's call: in a cluster, the slot is this node's and
/// the key is not on another node halfway through a move. Asked of the
/// server's own check, which `RM_Call` applies to a call from a module
/// (a timer's call has no client the server routed here); outside a
/// cluster, always.
fn served_here(ctx: *mut raw::RedisModuleCtx, key: &QueueKey) -> bool {
    // SAFETY: a live context.
    let flags = unsafe { raw::RedisModule_GetContextFlags.map_or(0, |f| f(ctx)) };
    if flags & raw::REDISMODULE_CTX_FLAGS_CLUSTER as c_int == 0 {
        return true;
    }
    // SAFETY: "b" takes a pointer and a length, which the key's bytes
    // provide for the call; a reply is freed at once.
    unsafe {
        let Some(call) = raw::RedisModule_Call else {
            return true;
        };
        let reply = call(
            ctx,
            c"EXISTS".as_ptr(),
            c"b".as_ptr(),
            key.1.as_ptr(),
            key.1.len(),
        );
        if reply.is_null() {
            return false;
        }
        if let Some(free) = raw::RedisModule_FreeCallReply {
            free(reply);
        }
    }
    true
}

/// Serves `key`'s queue: its first waiter's attempt, then the next's, until
/// one is still refused (the queue then waits for its wake timer or a
/// release) or the queue is empty (it goes). Where this node no longer
/// serves the key, every waiter is sent on (`Turn::Moved`) instead: a
/// lease taken here would be one the key's node does not count, in a key
/// no client can reach.
fn serve(ctx: *mut raw::RedisModuleCtx, key: &QueueKey) {
    let turn = if served_here(ctx, key) {
        Turn::Head
    } else {
        Turn::Moved
    };
    loop {
        let Some(waiter) = with_queues(|q| q.get_mut(key)?.waiters.pop_front()).flatten() else {
            break;
        };
        let call = Call {
            ctx: super::Ctx {
                raw: ctx,
                _call: std::marker::PhantomData,
            },
            args: &waiter.args.0,
        };
        match (waiter.attempt)(call, super::now_ms(), turn) {
            Attempt::Done(outcome) => answer(ctx, waiter, outcome),
            Attempt::Wait(at) => {
                with_queues(|q| q.entry(key.clone()).or_default().waiters.push_front(waiter));
                if let Some(at) = at {
                    arm(ctx, key, at);
                }
                return;
            }
        }
    }
    let gone = with_queues(|q| match q.get(key) {
        Some(queue) if queue.waiters.is_empty() => q.remove(key).and_then(|queue| queue.wake),
        _ => None,
    })
    .flatten();
    if let Some((id, _)) = gone {
        stop_timer::<QueueKey>(ctx, id);
    }
}

/// Ends a waiter's wait with `outcome`, replied by `reply_callback`.
fn answer(ctx: *mut raw::RedisModuleCtx, waiter: Waiter, outcome: Result<HeldReply, String>) {
    if let Some(id) = waiter.deadline {
        stop_timer::<Deadline>(ctx, id);
    }
    let data = Box::into_raw(Box::new(outcome)).cast::<c_void>();
    // SAFETY: bc is a blocked client of this module, unblocked once; the
    // server hands `data` to reply_callback and then free_outcome.
    unsafe {
        if let Some(unblock) = raw::RedisModule_UnblockClient {
            unblock(waiter.bc as *mut raw::RedisModuleBlockedClient, data);
        }
    }
}

/// Takes the waiter `bc` out of whichever queue holds it: the waiter, its
/// key, and whether it was first.
fn take(bc: usize) -> Option<(Waiter, QueueKey, bool)> {
    with_queues(|q| {
        let (key, queue) = q
            .iter_mut()
            .find(|(_, queue)| queue.waiters.iter().any(|w| w.bc == bc))?;
        let at = queue.waiters.iter().position(|w| w.bc == bc)?;
        let waiter = queue.waiters.remove(at)?;
        Some((waiter, key.clone(), at == 0))
    })
    .flatten()
}

/// A waiter leaves other than by its own turn (deadline, CLIENT UNBLOCK,
/// gone): the key's queue goes on at once if it was first.
fn left(ctx: *mut raw::RedisModuleCtx, key: &QueueKey, was_first: bool) {
    if was_first {
        arm(ctx, key, super::now_ms());
    }
}

impl Call<'_> {
    /// Whether callers wait on `key`.
    pub fn has_waiters(self, key: &[u8]) -> bool {
        let key = (selected_db(self.ctx.raw()), key.to_vec());
        with_queues(|q| q.get(&key).is_some_and(|queue| !queue.waiters.is_empty())).unwrap_or(false)
    }

    /// Blocks the client in `key`'s queue, at most `max_wait_ms`: its
    /// `attempt` is asked when a RELEASE serves the queue, when `retry_at`
    /// comes (the leases it needs have ended), and at its deadline. False
    /// when the client cannot be blocked (the caller then answers at once).
    pub fn wait_for_slot(
        self,
        key: &[u8],
        max_wait_ms: u64,
        retry_at: Option<u64>,
        attempt: Try,
    ) -> bool {
        let ctx = self.ctx.raw();
        // SAFETY: the API pointers are set at load; the context is the
        // running command's; the callbacks match the server's signatures.
        let bc = unsafe {
            let Some(block) = raw::RedisModule_BlockClient else {
                return false;
            };
            block(
                ctx,
                Some(reply_callback),
                Some(timeout_callback),
                Some(free_outcome),
                0,
            )
        };
        if bc.is_null() {
            return false;
        }
        // SAFETY: bc is the handle just made.
        unsafe {
            if let Some(on_disconnect) = raw::RedisModule_SetDisconnectCallback {
                on_disconnect(bc, Some(disconnected));
            }
        }
        let key = (selected_db(ctx), key.to_vec());
        let deadline_ms = super::now_ms().saturating_add(max_wait_ms);
        let deadline = Deadline(bc as usize);
        let waiter = Waiter {
            bc: bc as usize,
            args: HeldArgs::copy(self.args),
            attempt,
            deadline: Some(create_timer(
                ctx,
                deadline_ms,
                deadline_fired,
                Box::new(deadline),
            )),
        };
        with_queues(|q| q.entry(key.clone()).or_default().waiters.push_back(waiter));
        if let Some(at) = retry_at {
            arm(ctx, &key, at);
        }
        true
    }

    /// A lease on `key` was released: its waiters are served at once, in
    /// arrival order, inside this call (their leases replicated after it).
    pub fn serve_waiters(self, key: &[u8]) {
        let key = (selected_db(self.ctx.raw()), key.to_vec());
        if with_queues(|q| q.contains_key(&key)).unwrap_or(false) {
            serve(self.ctx.raw(), &key);
        }
    }
}

/// The leases a queue's first waiter needs have ended (or the queue must go
/// on after a waiter left).
unsafe extern "C" fn wake_fired(ctx: *mut raw::RedisModuleCtx, data: *mut c_void) {
    if data.is_null() {
        return;
    }
    // SAFETY: boxed by `arm`; the timer has fired, so it is ours to free.
    let key = *unsafe { Box::from_raw(data.cast::<QueueKey>()) };
    with_queues(|q| {
        if let Some(queue) = q.get_mut(&key) {
            queue.wake = None;
        }
    });
    select_db(ctx, key.0);
    serve(ctx, &key);
}

/// A waiter's `max_wait` is over: its last attempt answers it.
unsafe extern "C" fn deadline_fired(ctx: *mut raw::RedisModuleCtx, data: *mut c_void) {
    if data.is_null() {
        return;
    }
    // SAFETY: boxed by `wait_for_slot`; the timer has fired.
    let Deadline(bc) = *unsafe { Box::from_raw(data.cast::<Deadline>()) };
    let Some((mut waiter, key, was_first)) = take(bc) else {
        return;
    };
    waiter.deadline = None;
    select_db(ctx, key.0);
    let call = Call {
        ctx: super::Ctx {
            raw: ctx,
            _call: std::marker::PhantomData,
        },
        args: &waiter.args.0,
    };
    let turn = if served_here(ctx, &key) {
        Turn::Deadline
    } else {
        Turn::Moved
    };
    let outcome = match (waiter.attempt)(call, super::now_ms(), turn) {
        Attempt::Done(outcome) => outcome,
        Attempt::Wait(_) => {
            Err(crate::error::RlError::Internal("a waiter past its deadline").to_string())
        }
    };
    answer(ctx, waiter, outcome);
    left(ctx, &key, was_first);
}

/// Writes a waiter's answer (`UnblockClient`'s data).
unsafe extern "C" fn reply_callback(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    // SAFETY: the private data is the outcome passed to UnblockClient.
    let outcome = unsafe {
        raw::RedisModule_GetBlockedClientPrivateData
            .map_or(std::ptr::null_mut(), |f| f(ctx))
            .cast::<Result<HeldReply, String>>()
    };
    // SAFETY: non-null, owned by the server until free_outcome.
    match unsafe { outcome.as_ref() } {
        Some(Ok(reply)) => reply_held(reply_call(ctx), reply, 0),
        Some(Err(e)) => reply_call(ctx).reply_error(e),
        None => {}
    }
    raw::REDISMODULE_OK as c_int
}

/// `CLIENT UNBLOCK`: the waiter is answered at once, refused.
unsafe extern "C" fn timeout_callback(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    // SAFETY: the context is a blocked client's timeout request.
    let bc =
        unsafe { raw::RedisModule_GetBlockedClientHandle.map_or(std::ptr::null_mut(), |f| f(ctx)) };
    let Some((waiter, key, was_first)) = take(bc as usize) else {
        return raw::REDISMODULE_OK as c_int;
    };
    if let Some(id) = waiter.deadline {
        stop_timer::<Deadline>(ctx, id);
    }
    let call = Call {
        ctx: super::Ctx {
            raw: ctx,
            _call: std::marker::PhantomData,
        },
        args: &waiter.args.0,
    };
    match (waiter.attempt)(call, super::now_ms(), Turn::Unblocked) {
        Attempt::Done(Ok(reply)) => reply_held(reply_call(ctx), &reply, 0),
        Attempt::Done(Err(e)) => reply_call(ctx).reply_error(&e),
        Attempt::Wait(_) => {}
    }
    // The handle is the module's to release: nothing more to reply.
    // SAFETY: bc is this module's blocked client, unblocked once.
    unsafe {
        if let Some(unblock) = raw::RedisModule_UnblockClient {
            unblock(bc, std::ptr::null_mut());
        }
    }
    left(ctx, &key, was_first);
    raw::REDISMODULE_OK as c_int
}

/// The waiter's client went away (or `CLIENT UNBLOCK ... ERROR`): it leaves
/// the queue.
unsafe extern "C" fn disconnected(
    ctx: *mut raw::RedisModuleCtx,
    bc: *mut raw::RedisModuleBlockedClient,
) {
    let Some((waiter, key, was_first)) = take(bc as usize) else {
        return;
    };
    if let Some(id) = waiter.deadline {
        stop_timer::<Deadline>(ctx, id);
    }
    let call = Call {
        ctx: super::Ctx {
            raw: ctx,
            _call: std::marker::PhantomData,
        },
        args: &[],
    };
    let _ = (waiter.attempt)(call, super::now_ms(), Turn::Gone);
    // SAFETY: bc is this module's blocked client, unblocked once.
    unsafe {
        if let Some(unblock) = raw::RedisModule_UnblockClient {
            unblock(bc, std::ptr::null_mut());
        }
    }
    left(ctx, &key, was_first);
}

unsafe extern "C" fn free_outcome(_ctx: *mut raw::RedisModuleCtx, data: *mut c_void) {
    if !data.is_null() {
        // SAFETY: the outcome boxed in `answer`, freed once by the server.
        drop(unsafe { Box::from_raw(data.cast::<Result<HeldReply, String>>()) });
    }
}
