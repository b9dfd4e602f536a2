//! Command handlers: one short body per command, each run behind the panic
//! boundary. The shared limiter flow is in `limiter.rs`; RL.CONCURRENT's
//! WAIT and release wake-ups in `concurrent.rs`.

pub mod all;
pub mod concurrent;
pub mod limiter;
pub mod overrides;

use crate::error::RlError;
use crate::request::Trust;
use crate::server::Call;
use crate::stats::{self, Command, Counter};
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Whether the running call is replayed from the replication link or the
/// AOF, asked of the server at most once, and only if needed: a limiter
/// call without `NOW` is a client's (a replayed one always carries the
/// primary's NOW), which saves the question on the hot path.
pub struct Origin<'a> {
    call: Call<'a>,
    known: Cell<Option<bool>>,
}

impl Origin<'_> {
    pub fn replayed(&self) -> bool {
        if let Some(known) = self.known.get() {
            return known;
        }
        let replayed = self.call.ctx.is_replayed();
        self.known.set(Some(replayed));
        replayed
    }

    /// The call is known to come from a client.
    pub fn mark_client(&self) {
        self.known.set(Some(false));
    }
}

/// The parser asks whether NOW is allowed only when it meets the word.
impl Trust for &Origin<'_> {
    fn trusted(&mut self) -> bool {
        self.replayed()
    }
}

/// Runs a handler body behind the panic boundary and replies its error: a
/// bug must cost one error reply, never the user's server. Every write
/// happens last in a handler, after everything it writes is prepared, so a
/// panic before it leaves the dataset unchanged. (The panic's message and
/// location reach the server log through the hook `lib.rs` installs.)
/// Calls, errors and refusals for memory are counted for `INFO rl`, except calls replayed from
/// the replication link or the AOF, which no client made here: of those,
/// only the ones refused are counted, apart.
pub fn guarded<'a>(
    call: Call<'a>,
    command: Command,
    body: impl FnOnce(&Origin<'a>) -> Result<(), RlError>,
) {
    let origin = Origin {
        call,
        known: Cell::new(None),
    };
    let result = catch_unwind(AssertUnwindSafe(|| body(&origin)))
        .unwrap_or(Err(RlError::Internal("a command handler panicked")));
    let replayed = origin.replayed();
    if !replayed {
        stats::count(command, Counter::Calls);
    }
    if let Err(e) = result {
        if let RlError::Internal(what) = e {
            call.ctx
                .log_warning(&format!("librl: internal error ({what}); replied an error"));
        }
        if replayed {
            // A write of the primary (or of the AOF) this node does not
            // apply: its dataset now differs.
            stats::count_replayed_refused();
        } else {
            stats::count_error(command, &e);
        }
        call.reply_error(&e.to_string());
    }
}
