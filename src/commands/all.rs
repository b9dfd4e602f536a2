//! `RL.ALL`: its grammar is [`crate::docs::ALL`], each clause a limiter
//! command's own (FIXED, SLIDING, TOKEN or CONCURRENT and its arguments;
//! a CONCURRENT clause takes a lease, without WAIT, RELEASE or RENEW).
//!
//! The limiter flow (limiter.rs) over every clause: each is decided, and
//! its commit prepared, before any key is written; admitted only if all
//! admit, and then all record the call.

use super::guarded;
use super::limiter::{declare_keys, run, Shape};
use crate::server::{Call, Entry};

pub struct All;

impl Entry for All {
    fn run(call: Call<'_>) {
        if call.ctx.is_keys_request() {
            declare_keys(call, Shape::All);
            return;
        }
        guarded(call, Shape::All.command(), |origin| {
            run(call, Shape::All, origin)
        });
    }
}
