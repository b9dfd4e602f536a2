//! Per-command counters, reported by `INFO rl` as `rl_<command>_<counter>`
//! fields (plain integers, so exporters scrape them unchanged).

use crate::commands::overrides::{Sub, SUBCOMMANDS};
use crate::error::{ErrorClass, RlError};
use crate::mode::MODE;
use crate::request::Algorithm;
use crate::server::waiting;
use redis_module::{InfoContext, RedisResult};
use redis_module_macros::info_command_handler;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    Fixed,
    Sliding,
    Token,
    Concurrent,
    All,
    /// An override subcommand (its table: commands/overrides.rs).
    Override(Sub),
}

const LIMITERS: [Command; 5] = [
    Command::Fixed,
    Command::Sliding,
    Command::Token,
    Command::Concurrent,
    Command::All,
];

/// Every command with a row of counters: the limiters, then the override
/// subcommands.
const ROWS: usize = LIMITERS.len() + SUBCOMMANDS.len();

impl Command {
    fn name(self) -> String {
        match self {
            Command::Fixed => "fixed".to_string(),
            Command::Sliding => "sliding".to_string(),
            Command::Token => "token".to_string(),
            Command::Concurrent => "concurrent".to_string(),
            Command::All => "all".to_string(),
            Command::Override(sub) => sub.entry().stat_name(),
        }
    }

    /// Its row in the counters.
    fn row(self) -> usize {
        match self {
            Command::Fixed => 0,
            Command::Sliding => 1,
            Command::Token => 2,
            Command::Concurrent => 3,
            Command::All => 4,
            Command::Override(sub) => LIMITERS.len() + sub as usize,
        }
    }

    fn is_limiter(self) -> bool {
        !matches!(self, Command::Override(_))
    }
}

impl From<Algorithm> for Command {
    fn from(algorithm: Algorithm) -> Command {
        match algorithm {
            Algorithm::Fixed => Command::Fixed,
            Algorithm::Sliding => Command::Sliding,
            Algorithm::Token => Command::Token,
            Algorithm::Concurrent => Command::Concurrent,
        }
    }
}

#[derive(Clone, Copy)]
pub enum Counter {
    Calls,
    Allowed,
    Denied,
    /// Calls that `on` would have denied, admitted in monitor mode.
    MonitorWouldDeny,
    Errors,
    /// Calls refused because used memory is above `maxmemory` and they
    /// would have added to the dataset.
    OomRefused,
}

const COUNTERS: [(Counter, &str); 6] = [
    (Counter::Calls, "calls"),
    (Counter::Allowed, "allowed"),
    (Counter::Denied, "denied"),
    (Counter::MonitorWouldDeny, "monitor_would_deny"),
    (Counter::Errors, "errors"),
    (Counter::OomRefused, "oom_refused"),
];

/// What calls did beyond admitting or denying (all commands together).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A refund that gave units back.
    Refunded,
    BlockStarted,
    DeniedByBlock,
    /// An admitted RESERVE or WAIT that must wait.
    Reserved,
    /// A WAIT whose reply the server held.
    Waited,
    /// A RELEASE that freed a lease.
    Released,
    /// A RENEW that extended a lease.
    Renewed,
}

const EVENTS: [(Event, &str); 7] = [
    (Event::Refunded, "refunds"),
    (Event::BlockStarted, "blocks_started"),
    (Event::DeniedByBlock, "denied_by_block"),
    (Event::Reserved, "reservations"),
    (Event::Waited, "waits"),
    (Event::Released, "releases"),
    (Event::Renewed, "renewals"),
];

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicU64 = AtomicU64::new(0);
static EVENT_COUNTS: [AtomicU64; EVENTS.len()] = [ZERO; EVENTS.len()];

pub fn count_event(event: Event) {
    if let Some(c) = EVENT_COUNTS.get(event as usize) {
        c.fetch_add(1, Ordering::Relaxed);
    }
}
#[allow(clippy::declare_interior_mutable_const)]
const ZERO_ROW: [AtomicU64; COUNTERS.len()] = [ZERO; COUNTERS.len()];
static COUNTS: [[AtomicU64; COUNTERS.len()]; ROWS] = [ZERO_ROW; ROWS];

pub fn count(command: Command, counter: Counter) {
    if let Some(row) = COUNTS.get(command.row()) {
        row[counter as usize].fetch_add(1, Ordering::Relaxed);
    }
}

/// Error replies by class, all commands together (`rl_errors_<class>`).
const ERROR_CLASSES: [(ErrorClass, &str); 7] = [
    (ErrorClass::Argument, "argument"),
    (ErrorClass::WrongType, "wrongtype"),
    (ErrorClass::OutOfMemory, "oom"),
    (ErrorClass::NewerVersion, "newer_version"),
    (ErrorClass::Corrupt, "corrupt"),
    (ErrorClass::Internal, "internal"),
    (ErrorClass::SlotMoved, "slot_moved"),
];
static ERROR_COUNTS: [AtomicU64; ERROR_CLASSES.len()] = [ZERO; ERROR_CLASSES.len()];

/// Calls replayed from the replication link or the AOF that this node's
/// librl refused: writes of the primary this node does not have.
static REPLAYED_REFUSED: AtomicU64 = AtomicU64::new(0);

/// Counts an error replied to a client: in its command's row (memory
/// refusals apart from the caller's own errors) and by its class.
pub fn count_error(command: Command, e: &RlError) {
    let counter = match e {
        RlError::OutOfMemory => Counter::OomRefused,
        _ => Counter::Errors,
    };
    count(command, counter);
    let class = e.class();
    if let Some(at) = ERROR_CLASSES.iter().position(|&(c, _)| c == class) {
        ERROR_COUNTS[at].fetch_add(1, Ordering::Relaxed);
    }
}

/// Counts a replayed call this node refused.
pub fn count_replayed_refused() {
    REPLAYED_REFUSED.fetch_add(1, Ordering::Relaxed);
}

fn get(command: Command, counter: Counter) -> u64 {
    COUNTS
        .get(command.row())
        .map_or(0, |row| row[counter as usize].load(Ordering::Relaxed))
}

fn int(value: impl TryInto<i64>) -> i64 {
    value.try_into().unwrap_or(i64::MAX)
}

#[info_command_handler]
fn info(ctx: &InfoContext, for_crash_report: bool) -> RedisResult<()> {
    let mut section = ctx
        .builder()
        .add_section("stats")
        .field("mode", MODE.current().name())?;
    let overrides = SUBCOMMANDS.iter().map(|s| Command::Override(s.sub));
    for command in LIMITERS.into_iter().chain(overrides) {
        for (counter, counter_name) in COUNTERS {
            let limiter_only = !matches!(counter, Counter::Calls | Counter::Errors);
            if limiter_only && !command.is_limiter() {
                continue;
            }
            let value = int(get(command, counter));
            section = section.field(&format!("{}_{counter_name}", command.name()), value)?;
        }
    }
    for (event, name) in EVENTS {
        let value = EVENT_COUNTS
            .get(event as usize)
            .map_or(0, |c| c.load(Ordering::Relaxed));
        section = section.field(name, int(value))?;
    }
    for ((_, name), count) in ERROR_CLASSES.iter().zip(&ERROR_COUNTS) {
        section = section.field(
            &format!("errors_{name}"),
            int(count.load(Ordering::Relaxed)),
        )?;
    }
    section = section.field(
        "replayed_refused",
        int(REPLAYED_REFUSED.load(Ordering::Relaxed)),
    )?;
    // Gauges read the waiters' tables, which a crash report (written
    // from a signal handler, perhaps inside them) must not lock.
    if !for_crash_report {
        let now = waiting();
        section = section
            .field("clients_waiting", int(now.total()))?
            .field("token_waiting", int(now.token))?
            .field("concurrent_waiting", int(now.concurrent))?;
    }
    section.build_section()?.build_info()?;
    Ok(())
}
