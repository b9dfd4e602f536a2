//! `RL.OVERRIDE SET|GET|DEL|LIST` (grammar: their entries in docs.rs),
//! each as a subcommand of the `RL.OVERRIDE` container and under its dotted
//! alias (`RL.OVERRIDE.SET` ...), with identical behaviour; messages name
//! the form the client wrote. `SUBCOMMANDS` describes them once.

use super::guarded;
use crate::docs::{self, CommandDoc};
use crate::error::RlError;
use crate::request::{
    parse_override_del, parse_override_get, parse_override_list, parse_override_set,
};
use crate::server::{Access, Call, Entry};
use crate::state::overrides::{encode_override, load_override};
use crate::stats::Command;
use librl_core::overrides::Override;
use librl_core::units::Amount;
use std::ffi::CStr;

/// Which override subcommand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sub {
    Set,
    Get,
    Del,
    List,
}

/// One override subcommand, described once: registration (lib.rs), the
/// names its messages use, its `INFO rl` row, its HELP lines and its body
/// all read this table.
pub struct Subcommand {
    pub sub: Sub,
    /// Its word under the container, lower case as the server's own
    /// containers' (`config|get`): clients such as redis-py match
    /// subcommand names from COMMAND exactly.
    pub word: &'static CStr,
    /// The container form as messages name it.
    spaced: &'static str,
    pub flags: &'static CStr,
    /// Its metadata; `doc.name` is the dotted alias (`RL.OVERRIDE.SET`).
    pub doc: &'static CommandDoc,
    /// Its synopsis and description in `RL.OVERRIDE HELP`.
    help: [&'static str; 2],
    /// The body, given the call as it reads (argv[0] the subcommand's
    /// name), the name its messages use and whether the call is replayed.
    body: fn(Call<'_>, &'static str, bool) -> Result<(), RlError>,
}

/// Every override subcommand, in `Sub` order.
pub static SUBCOMMANDS: [Subcommand; 4] = [
    Subcommand {
        sub: Sub::Set,
        word: c"set",
        spaced: "RL.OVERRIDE SET",
        // Every SET stores a value, so the server's own refusal above
        // `maxmemory` is exactly right here.
        flags: c"write deny-oom fast",
        doc: &docs::OVERRIDE_SET,
        help: [
            "SET <okey> <limit> <window> [BURST <capacity>] [TTL <duration>]",
            "    Store an override whose limit, window and burst replace those of limiter calls naming it.",
        ],
        body: set,
    },
    Subcommand {
        sub: Sub::Get,
        word: c"get",
        spaced: "RL.OVERRIDE GET",
        flags: c"readonly fast",
        doc: &docs::OVERRIDE_GET,
        help: [
            "GET <okey>",
            "    Return [limit, window_ms, burst, ttl_ms], or nil.",
        ],
        body: get,
    },
    Subcommand {
        sub: Sub::Del,
        word: c"del",
        spaced: "RL.OVERRIDE DEL",
        flags: c"write fast",
        doc: &docs::OVERRIDE_DEL,
        help: [
            "DEL <okey> [<okey> ...]",
            "    Delete overrides; return how many were deleted.",
        ],
        body: del,
    },
    Subcommand {
        sub: Sub::List,
        word: c"list",
        spaced: "RL.OVERRIDE LIST",
        flags: c"readonly",
        doc: &docs::OVERRIDE_LIST,
        help: [
            "LIST <cursor> [MATCH <pattern>] [COUNT <count>]",
            "    Iterate this node's overrides with SCAN's cursor contract.",
        ],
        body: list,
    },
];

impl Sub {
    pub fn entry(self) -> &'static Subcommand {
        match self {
            Sub::Set => &SUBCOMMANDS[0],
            Sub::Get => &SUBCOMMANDS[1],
            Sub::Del => &SUBCOMMANDS[2],
            Sub::List => &SUBCOMMANDS[3],
        }
    }
}

impl Subcommand {
    /// The dotted alias, as messages and replication name it.
    fn dotted(&self) -> &'static str {
        self.doc.name.to_str().unwrap_or_default()
    }

    /// `INFO rl`'s name for its row: `override_set`.
    pub fn stat_name(&self) -> String {
        format!("override_{}", self.word.to_string_lossy())
    }
}

/// The subcommand named `word` (any case), by its container word or its
/// dotted alias.
fn named(word: &[u8], dotted: bool) -> Option<&'static Subcommand> {
    SUBCOMMANDS.iter().find(|s| {
        let name = if dotted {
            s.doc.name.to_bytes()
        } else {
            s.word.to_bytes()
        };
        name.eq_ignore_ascii_case(word)
    })
}

/// Every subcommand under the container (`RL.OVERRIDE SET ...`): which one
/// is argv[1].
pub struct Container;
/// Every dotted alias (`RL.OVERRIDE.SET ...`): which one is argv[0].
pub struct Dotted;

impl Entry for Container {
    fn run(call: Call<'_>) {
        let word = call.args.get(1).map(AsRef::as_ref).unwrap_or_default();
        run(call, named(word, false), true);
    }
}

impl Entry for Dotted {
    fn run(call: Call<'_>) {
        let word = call.args.first().map(AsRef::as_ref).unwrap_or_default();
        run(call, named(word, true), false);
    }
}

/// Runs the subcommand's body behind the panic boundary, reading the call
/// as the form the client wrote (argv[0] the subcommand's name) and naming
/// that form in its messages.
fn run(call: Call<'_>, sub: Option<&'static Subcommand>, container: bool) {
    // (The server only routes the registered names here.)
    let Some(sub) = sub else {
        call.reply_error("ERR unknown RL.OVERRIDE subcommand");
        return;
    };
    let (form, name) = if container {
        (call.subcommand(), sub.spaced)
    } else {
        (call, sub.dotted())
    };
    guarded(call, Command::Override(sub.sub), |origin| {
        (sub.body)(form, name, origin.replayed())
    });
}

/// `RL.OVERRIDE HELP`: what the server's "Try RL.OVERRIDE HELP" points to.
pub struct Help;

impl Entry for Help {
    fn run(call: Call<'_>) {
        call.reply_array(2 * SUBCOMMANDS.len() + 3);
        call.reply_simple("RL.OVERRIDE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:");
        for line in SUBCOMMANDS.iter().flat_map(|s| s.help) {
            call.reply_simple(line);
        }
        call.reply_simple("HELP");
        call.reply_simple("    Print this help.");
    }
}

fn set(call: Call<'_>, name: &'static str, replayed: bool) -> Result<(), RlError> {
    let request = parse_override_set(call.args, replayed, name)?;
    let okey = request.okey;
    let key = call.open(okey, Access::ReadWrite);
    load_override(key.value())?;
    // A TTL is anchored to the primary's clock, so replicas and AOF replay
    // give the override the same absolute expiry.
    let now = request
        .replayed_now_ms
        .unwrap_or_else(crate::server::now_ms);
    let expire_at_ms = request.ttl_ms.map(|ttl| now.saturating_add(ttl));
    key.write(&encode_override(&request.value), expire_at_ms);
    replicate_set(call, okey.as_ref(), &request.value, request.ttl_ms, now);
    call.reply_ok();
    Ok(())
}

/// Replicates SET in its dotted form, with the TTL anchored by NOW: both
/// forms reach replicas and the AOF as the same command.
fn replicate_set(call: Call<'_>, okey: &[u8], o: &Override, ttl_ms: Option<u64>, now: u64) {
    let limit = o.limit.get().to_string();
    let window = format!("{}ms", o.window_ms.ms());
    let burst = o.burst.map(|b| b.get().to_string());
    let ttl = ttl_ms.map(|t| format!("{t}ms"));
    let now = now.to_string();
    let mut argv: Vec<&[u8]> = vec![okey, limit.as_bytes(), window.as_bytes()];
    if let Some(burst) = &burst {
        argv.extend([b"BURST".as_slice(), burst.as_bytes()]);
    }
    if let Some(ttl) = &ttl {
        argv.extend([b"TTL".as_slice(), ttl.as_bytes(), b"NOW", now.as_bytes()]);
    }
    call.replicate(Sub::Set.entry().dotted(), &argv);
}

/// `[limit, window_ms, burst, ttl_ms]`: burst 0 when unset, ttl -1 when
/// none.
fn fields(o: &Override, ttl_ms: Option<u64>) -> [i64; 4] {
    let int = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    [
        int(o.limit.get()),
        int(o.window_ms.ms()),
        int(o.burst.map_or(0, Amount::get)),
        ttl_ms.map_or(-1, int),
    ]
}

fn get(call: Call<'_>, name: &'static str, _replayed: bool) -> Result<(), RlError> {
    let okey = parse_override_get(call.args, name)?;
    let key = call.open(okey, Access::Read);
    match load_override(key.value())? {
        None => call.reply_null(),
        Some(o) => call.reply_integers(&fields(&o, key.ttl_ms())),
    }
    Ok(())
}

fn del(call: Call<'_>, name: &'static str, _replayed: bool) -> Result<(), RlError> {
    let okeys = parse_override_del(call.args, name)?;
    // Check every key before deleting any, so a WRONGTYPE deletes nothing.
    let mut doomed: Vec<&crate::server::Arg> = Vec::new();
    for okey in okeys {
        let key = call.open(okey, Access::Read);
        let is_override = load_override(key.value())?.is_some();
        if is_override && !doomed.iter().any(|d| d.as_ref() == okey.as_ref()) {
            doomed.push(okey);
        }
    }
    for okey in &doomed {
        call.open(okey, Access::ReadWrite).delete();
    }
    if !doomed.is_empty() {
        let names: Vec<&[u8]> = doomed.iter().map(|n| n.as_ref()).collect();
        call.replicate("DEL", &names);
    }
    call.reply_integer(i64::try_from(doomed.len()).unwrap_or(i64::MAX));
    Ok(())
}

fn list(call: Call<'_>, name: &'static str, _replayed: bool) -> Result<(), RlError> {
    let request = parse_override_list(call.args, name)?;
    let (next, keys) = call.scan_strings(request.cursor, request.pattern, request.count)?;
    // SCAN declares no keys, so the server checked none: each is checked
    // here as the server checks a key a command reads, before it is read.
    let caller = (!keys.is_empty()).then(|| call.caller());
    let mut found = Vec::new();
    for okey in &keys {
        if !caller.as_ref().is_some_and(|c| c.may_read(okey)) {
            continue;
        }
        let key = call.open_named(okey, Access::Read);
        // Limiters and other strings are skipped: only overrides are listed.
        if let Ok(Some(o)) = load_override(key.value()) {
            found.push((okey, o, key.ttl_ms()));
        }
    }
    call.reply_array(2);
    call.reply_bulk(next.to_string().as_bytes());
    call.reply_array(found.len());
    for (okey, o, ttl_ms) in found {
        call.reply_array(5);
        call.reply_bulk(okey.bytes());
        for v in fields(&o, ttl_ms) {
            call.reply_integer(v);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Sub::entry` and the stats rows rely on the table's order.
    #[test]
    fn the_table_is_in_sub_order_and_each_name_finds_its_entry() {
        for (i, s) in SUBCOMMANDS.iter().enumerate() {
            assert_eq!(s.sub as usize, i);
            assert!(std::ptr::eq(s.sub.entry(), s));
            let word = s.word.to_bytes().to_ascii_uppercase();
            assert!(named(&word, false).is_some_and(|n| std::ptr::eq(n, s)));
            let dotted = s.doc.name.to_bytes().to_ascii_lowercase();
            assert!(named(&dotted, true).is_some_and(|n| std::ptr::eq(n, s)));
            assert_eq!(
                s.dotted(),
                format!(
                    "RL.OVERRIDE.{}",
                    s.spaced.trim_start_matches("RL.OVERRIDE ")
                )
            );
        }
        assert!(named(b"help", false).is_none());
    }
}
