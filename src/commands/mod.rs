//! Command handlers: one short body per command, each run behind the panic
//! boundary. The shared limiter flow is in `limiter.rs`.

pub mod all;
pub mod limiter;
pub mod overrides;

use crate::error::RlError;
use crate::server::Call;
use crate::stats::{self, Command, Counter};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs a handler body behind the panic boundary and replies its error: a
/// bug must cost one error reply, never the user's server. Every write
/// happens last in a handler, after everything it writes is prepared, so a
/// panic before it leaves the dataset unchanged. (The panic's message and
/// location reach the server log through the hook `lib.rs` installs.)
/// Calls and errors are counted for `INFO rl`, except calls replayed from
/// the replication link or the AOF, which no client made here.
///
/// The body is told whether the call is replayed (asked of the server once
/// per call: it is on the hot path).
pub fn guarded(call: Call<'_>, command: Command, body: impl FnOnce(bool) -> Result<(), RlError>) {
    let replayed = call.ctx.is_replayed();
    let counted = !replayed;
    if counted {
        stats::count(command, Counter::Calls);
    }
    let result = catch_unwind(AssertUnwindSafe(|| body(replayed)))
        .unwrap_or(Err(RlError::Internal("a command handler panicked")));
    if let Err(e) = result {
        if let RlError::Internal(what) = e {
            call.ctx
                .log_warning(&format!("librl: internal error ({what}); replied an error"));
        }
        if counted {
            stats::count(command, Counter::Errors);
        }
        call.reply_error(&e.to_string());
    }
}
