//! Command handlers: one short function per command, over a shared limiter
//! flow (parse, read, decide, write, replicate, reply).

pub mod fixed;
mod limiter;
pub mod token;

use crate::error::RlError;
use redis_module::{Context, RedisResult, RedisValue};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs a handler body behind a panic boundary: a bug must cost one error
/// reply, never the user's server. Every write happens last in a handler,
/// so a panic before it leaves the dataset unchanged.
fn guarded(ctx: &Context, body: impl FnOnce() -> Result<RedisValue, RlError>) -> RedisResult {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(result) => result.map_err(Into::into),
        Err(_) => {
            ctx.log_warning("librl: a command handler panicked; replied an error instead");
            Err(RlError::Internal.into())
        }
    }
}
