//! `RL.OVERRIDE SET okey limit window [BURST capacity] [TTL duration]`
//! `RL.OVERRIDE GET okey`
//! `RL.OVERRIDE DEL okey [okey ...]`
//! `RL.OVERRIDE LIST cursor [MATCH pattern] [COUNT count]`
//!
//! Each as a subcommand of the `RL.OVERRIDE` container and under its dotted
//! alias (`RL.OVERRIDE.SET` ...), with identical behaviour: `CONTAINER`
//! says which form the server called, so messages name the form the client
//! wrote.

use super::guarded;
use crate::error::RlError;
use crate::request::{
    parse_override_del, parse_override_get, parse_override_list, parse_override_set, OverrideNames,
    CONTAINER, DOTTED,
};
use crate::server::{Access, Call, Entry};
use crate::state::overrides::{encode_override, load_override};
use crate::stats::Command;
use librl_core::overrides::Override;

pub struct Set<const CONTAINER: bool>;
pub struct Get<const CONTAINER: bool>;
pub struct Del<const CONTAINER: bool>;
pub struct List<const CONTAINER: bool>;
/// `RL.OVERRIDE HELP`: what the server's "Try RL.OVERRIDE HELP" points to.
pub struct Help;

const HELP: [&str; 10] = [
    "RL.OVERRIDE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "SET <okey> <limit> <window> [BURST <capacity>] [TTL <duration>]",
    "    Store an override whose limit, window and burst replace those of limiter calls naming it.",
    "GET <okey>",
    "    Return [limit, window_ms, burst, ttl_ms], or nil.",
    "DEL <okey> [<okey> ...]",
    "    Delete overrides; return how many were deleted.",
    "LIST <cursor> [MATCH <pattern>] [COUNT <count>]",
    "    Iterate this node's overrides with SCAN's cursor contract.",
    "HELP",
];

impl Entry for Help {
    fn run(call: Call<'_>) {
        call.reply_array(HELP.len() + 1);
        for line in HELP {
            call.reply_simple(line);
        }
        call.reply_simple("    Print this help.");
    }
}

/// The call as its handler reads it (argv[0] the command or subcommand
/// name), and the names its messages use.
fn form(call: Call<'_>, container: bool) -> (Call<'_>, &'static OverrideNames) {
    if container {
        (call.subcommand(), &CONTAINER)
    } else {
        (call, &DOTTED)
    }
}

impl<const C: bool> Entry for Set<C> {
    fn run(call: Call<'_>) {
        guarded(call, Command::OverrideSet, |replayed| {
            set(call, C, replayed.replayed())
        });
    }
}

impl<const C: bool> Entry for Get<C> {
    fn run(call: Call<'_>) {
        guarded(call, Command::OverrideGet, |replayed| {
            get(call, C, replayed.replayed())
        });
    }
}

impl<const C: bool> Entry for Del<C> {
    fn run(call: Call<'_>) {
        guarded(call, Command::OverrideDel, |replayed| {
            del(call, C, replayed.replayed())
        });
    }
}

impl<const C: bool> Entry for List<C> {
    fn run(call: Call<'_>) {
        guarded(call, Command::OverrideList, |replayed| {
            list(call, C, replayed.replayed())
        });
    }
}

fn set(call: Call<'_>, container: bool, replayed: bool) -> Result<(), RlError> {
    let (sub, names) = form(call, container);
    let request = parse_override_set(sub.args, replayed, names.set)?;
    let name = request.okey;
    let key = call.open(name, Access::ReadWrite);
    load_override(key.value())?;
    // A TTL is anchored to the primary's clock, so replicas and AOF replay
    // give the override the same absolute expiry.
    let now = request
        .replayed_now_ms
        .unwrap_or_else(crate::server::now_ms);
    let expire_at_ms = request.ttl_ms.map(|ttl| now.saturating_add(ttl));
    key.write(&encode_override(&request.value), expire_at_ms);
    replicate_set(call, name.as_ref(), &request.value, request.ttl_ms, now);
    call.reply_ok();
    Ok(())
}

/// Replicates SET in its dotted form, with the TTL anchored by NOW: both
/// forms reach replicas and the AOF as the same command.
fn replicate_set(call: Call<'_>, okey: &[u8], o: &Override, ttl_ms: Option<u64>, now: u64) {
    let limit = o.limit.to_string();
    let window = format!("{}ms", o.window_ms);
    let burst = o.burst.map(|b| b.to_string());
    let ttl = ttl_ms.map(|t| format!("{t}ms"));
    let now = now.to_string();
    let mut argv: Vec<&[u8]> = vec![okey, limit.as_bytes(), window.as_bytes()];
    if let Some(burst) = &burst {
        argv.extend([b"BURST".as_slice(), burst.as_bytes()]);
    }
    if let Some(ttl) = &ttl {
        argv.extend([b"TTL".as_slice(), ttl.as_bytes(), b"NOW", now.as_bytes()]);
    }
    call.replicate(DOTTED.set, &argv);
}

/// `[limit, window_ms, burst, ttl_ms]`: burst 0 when unset, ttl -1 when
/// none.
fn fields(o: &Override, ttl_ms: Option<u64>) -> [i64; 4] {
    let int = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    [
        int(o.limit),
        int(o.window_ms),
        int(o.burst.unwrap_or(0)),
        ttl_ms.map_or(-1, int),
    ]
}

fn get(call: Call<'_>, container: bool, _replayed: bool) -> Result<(), RlError> {
    let (sub, names) = form(call, container);
    let okey = parse_override_get(sub.args, names.get)?;
    let key = call.open(okey, Access::Read);
    match load_override(key.value())? {
        None => call.reply_null(),
        Some(o) => call.reply_integers(&fields(&o, key.ttl_ms())),
    }
    Ok(())
}

fn del(call: Call<'_>, container: bool, _replayed: bool) -> Result<(), RlError> {
    let (sub, names) = form(call, container);
    let okeys = parse_override_del(sub.args, names.del)?;
    // Check every key before deleting any, so a WRONGTYPE deletes nothing.
    let mut doomed: Vec<&crate::server::Arg> = Vec::new();
    for name in okeys {
        let key = call.open(name, Access::Read);
        let is_override = load_override(key.value())?.is_some();
        if is_override && !doomed.iter().any(|d| d.as_ref() == name.as_ref()) {
            doomed.push(name);
        }
    }
    for name in &doomed {
        call.open(name, Access::ReadWrite).delete();
    }
    if !doomed.is_empty() {
        let names: Vec<&[u8]> = doomed.iter().map(|n| n.as_ref()).collect();
        call.replicate("DEL", &names);
    }
    call.reply_integer(i64::try_from(doomed.len()).unwrap_or(i64::MAX));
    Ok(())
}

fn list(call: Call<'_>, container: bool, _replayed: bool) -> Result<(), RlError> {
    let (sub, names) = form(call, container);
    let request = parse_override_list(sub.args, names.list)?;
    let (next, keys) = call.scan_strings(request.cursor, request.pattern, request.count)?;
    let mut found = Vec::new();
    for name in &keys {
        let key = call.open_named(name, Access::Read);
        // Limiters and other strings are skipped: only overrides are listed.
        if let Ok(Some(o)) = load_override(key.value()) {
            found.push((name, o, key.ttl_ms()));
        }
    }
    call.reply_array(2);
    call.reply_bulk(next.to_string().as_bytes());
    call.reply_array(found.len());
    for (name, o, ttl_ms) in found {
        call.reply_array(5);
        call.reply_bulk(name.bytes());
        for v in fields(&o, ttl_ms) {
            call.reply_integer(v);
        }
    }
    Ok(())
}
