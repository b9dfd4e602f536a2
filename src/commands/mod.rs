//! Command handlers: one short function per command, over a shared limiter
//! flow (parse, read, decide, write, replicate, reply).

pub mod all;
pub mod fixed;
mod limiter;
pub mod overrides;
pub mod sliding;
pub mod token;

use crate::codec::DecodeError;
use crate::error::RlError;
use crate::stats::{self, Command, Counter};
use crate::store::{self, Value};
use redis_module::{Context, RedisResult, RedisString, RedisValue};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs a handler body behind a panic boundary: a bug must cost one error
/// reply, never the user's server. Every write happens last in a handler,
/// so a panic before it leaves the dataset unchanged.
/// Calls and errors are counted for `INFO rl`, except calls replayed from
/// the replication link or the AOF, which no client made here.
fn guarded(
    ctx: &Context,
    command: Command,
    body: impl FnOnce() -> Result<RedisValue, RlError>,
) -> RedisResult {
    let counted = !store::is_replayed(ctx);
    if counted {
        stats::count(command, Counter::Calls);
    }
    let result = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(result) => result,
        Err(_) => {
            ctx.log_warning("librl: a command handler panicked; replied an error instead");
            Err(RlError::Internal)
        }
    };
    if counted && result.is_err() {
        stats::count(command, Counter::Errors);
    }
    result.map_err(Into::into)
}

fn byte_args(args: &[RedisString]) -> Vec<&[u8]> {
    args.iter().map(RedisString::as_slice).collect()
}

/// Decodes a key's value with `decode`, mapping every foreign or broken
/// value to the error its user should see; `expected` names what the
/// command accepts, for the WRONGTYPE message.
fn stored<'v, S>(
    value: Value<'v>,
    decode: fn(&'v [u8]) -> Result<S, DecodeError>,
    expected: &'static str,
) -> Result<Option<S>, RlError> {
    match value {
        Value::Empty => Ok(None),
        Value::OtherType => Err(RlError::WrongType { expected }),
        Value::String(bytes) => match decode(bytes) {
            Ok(s) => Ok(Some(s)),
            Err(DecodeError::Foreign | DecodeError::OtherTag) => {
                Err(RlError::WrongType { expected })
            }
            Err(e) => Err(RlError::BadState(e)),
        },
    }
}
