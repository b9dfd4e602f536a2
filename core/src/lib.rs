//! The pure rate-limiting core: no Redis, no clock, no unsafe. Every
//! algorithm is a function of its parameters, its stored state, an explicit
//! `now` in milliseconds and the call's cost, so it is tested without a server
//! and replayed identically on replicas.
//!
//! Each algorithm module has `decide` (a call that consumes units), `refund`
//! (REFUND: units given back, as a [`decision::Refunded`] whose "nothing
//! changed" cannot be written) and `status` (the counts without a call);
//! `token` adds `reserve` (RESERVE and WAIT: the bucket as a queue, which
//! may go into debt) over its debt-aware [`token::Bucket`]; [`concurrent`]
//! holds leases (a call takes slots until it releases them or its lease
//! ends) and adds `release` and `renew`, by lease id. [`block`] is
//! BLOCK's penalty, a layer over any algorithm's decision.
//! [`algorithm::Algorithm`] is the shape all five share (state type,
//! decide, refund, status), so a caller is written once for every
//! algorithm; [`algorithm::InMemory`] adds how a state kept as a plain
//! value commits. [`units`] holds the amounts and durations a caller gives,
//! with their bounds and grammar, for the module's parser and the client;
//! every algorithm's parameters (and an override's values) are made of
//! them, so a limit or window of 0 or out of range cannot reach an
//! algorithm, which therefore divides by a window or rate unguarded.
#![forbid(unsafe_code)]

pub mod algorithm;
pub mod approx;
pub mod block;
#[cfg(test)]
mod clock_tests;
pub mod concurrent;
pub mod decision;
pub mod fixed;
pub mod limit;
pub mod overrides;
pub mod sliding;
pub mod token;
pub mod units;

/// The largest limit, rate, capacity or cost a caller may give (2^50).
pub const MAX_AMOUNT: u64 = 1 << 50;

/// The longest window or duration a caller may give: 3650 days in ms.
pub const MAX_WINDOW_MS: u64 = 3650 * 24 * 60 * 60 * 1000;
