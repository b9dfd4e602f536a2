//! librl: native rate-limiting commands for Redis and Valkey.
//!
//! Registration lives here. The algorithms are the `librl-core` crate;
//! `request` turns argv into typed requests, `state` keeps each limiter in
//! its key, `server` is the only contact with the server's API, `commands`
//! holds one short handler per command, `docs` their metadata.

mod commands;
mod docs;
mod error;
#[cfg(test)]
mod fuzz;
mod mode;
mod request;
mod server;
mod state;
mod stats;

use commands::{all, limiter, overrides};
use redis_module::configuration::ConfigurationFlags;
use redis_module::{redis_module, Context, RedisString, Status};
use request::Algorithm;
use server::entry;
use server::register::{self, Handler};
use std::ffi::CStr;

// Redis's allocator in the server; the system one in unit tests, which run
// without a server to provide it.
#[cfg(not(test))]
type Allocator = redis_module::alloc::RedisAlloc;
#[cfg(not(test))]
const ALLOCATOR: Allocator = redis_module::alloc::RedisAlloc;
#[cfg(test)]
type Allocator = std::alloc::System;
#[cfg(test)]
const ALLOCATOR: Allocator = std::alloc::System;

/// Flags every limiter command (and RL.ALL) is registered with. No
/// `deny-oom`: above `maxmemory` the server would refuse every call before
/// the module runs, and limits would vanish exactly when the server is
/// under stress; the handlers refuse only calls that would add to the
/// dataset (see `commands::limiter`).
const LIMITER_FLAGS: &CStr = c"write fast getkeys-api";

fn limiter_handler(algorithm: Algorithm) -> Handler {
    match algorithm {
        Algorithm::Fixed => entry::<limiter::Fixed>,
        Algorithm::Sliding => entry::<limiter::Sliding>,
        Algorithm::Token => entry::<limiter::Token>,
        Algorithm::Concurrent => entry::<limiter::Concurrent>,
    }
}

/// Registers every command on the raw API (the handlers read argv as a
/// slice, with no per-call conversion) and attaches its metadata.
fn register_commands(ctx: &Context) -> Result<(), String> {
    let no_keys = (0, 0, 0);
    let ok = |status: Status, what: &CStr| {
        if status == Status::Ok {
            Ok(())
        } else {
            Err(format!("could not register {}", what.to_string_lossy()))
        }
    };
    for algorithm in Algorithm::ALL {
        let name = algorithm.command_cstr();
        let handler = limiter_handler(algorithm);
        ok(
            register::command(ctx, name, handler, LIMITER_FLAGS, no_keys),
            name,
        )?;
        ok(register::attach(ctx, name, algorithm.doc(), 0), name)?;
    }
    ok(
        register::command(ctx, c"RL.ALL", entry::<all::All>, LIMITER_FLAGS, no_keys),
        c"RL.ALL",
    )?;
    ok(register::attach(ctx, c"RL.ALL", &docs::ALL, 0), c"RL.ALL")?;
    // Lower case, as the server's own containers (`config|get`): clients
    // such as redis-py match subcommand names from COMMAND exactly.
    ok(register::container(ctx, c"rl.override"), c"rl.override")?;
    ok(
        register::attach(ctx, c"rl.override", &docs::OVERRIDE, 0),
        c"rl.override",
    )?;
    for sub in &overrides::SUBCOMMANDS {
        ok(
            register::subcommand(
                ctx,
                c"rl.override",
                sub.word,
                entry::<overrides::Container>,
                sub.flags,
                no_keys,
            ),
            sub.word,
        )?;
        let full = format!("rl.override|{}", sub.word.to_string_lossy());
        let full = std::ffi::CString::new(full).map_err(|e| e.to_string())?;
        ok(register::attach(ctx, &full, sub.doc, 1), &full)?;
        let dotted = sub.doc.name;
        ok(
            register::command(ctx, dotted, entry::<overrides::Dotted>, sub.flags, no_keys),
            dotted,
        )?;
        ok(register::attach(ctx, dotted, sub.doc, 0), dotted)?;
    }
    ok(
        register::subcommand(
            ctx,
            c"rl.override",
            c"help",
            entry::<overrides::Help>,
            c"readonly fast",
            no_keys,
        ),
        c"help",
    )?;
    ok(
        register::attach(ctx, c"rl.override|help", &docs::OVERRIDE_HELP, 1),
        c"rl.override|help",
    )?;
    Ok(())
}

/// Module arguments are `name value` pairs of the module's configs (the
/// crate applies them); anything else would be silently ignored, so a typo
/// such as `mod monitor` would start in `on`: refuse to load instead.
fn check_module_args(ctx: &Context, args: &[RedisString]) -> Status {
    const CONFIGS: [&[u8]; 1] = [b"mode"];
    let names_ok = args.chunks(2).all(|pair| match pair {
        [name, _value] => CONFIGS.contains(&name.as_slice()),
        _ => false,
    });
    if names_ok {
        Status::Ok
    } else {
        ctx.log_warning("librl: module arguments must be `mode on|off|monitor`; refusing to load");
        Status::Err
    }
}

/// Logs a panic's message and location to the server log before the
/// handler's boundary turns it into an error reply, then lets any earlier
/// hook (another module's, or the default) see it too.
fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".to_string());
        let location = info
            .location()
            .map_or_else(|| "unknown location".to_string(), |l| l.to_string());
        server::log_warning(&format!("librl: panic at {location}: {message}"));
        previous(info);
    }));
}

/// Unloading while clients wait would leave their timers pointing at
/// freed code: refuse until every WAIT has replied.
fn deinit(ctx: &Context) -> Status {
    if server::waiting().total() > 0 {
        ctx.log_warning("librl: clients are waiting on WAIT; refusing to unload");
        return Status::Err;
    }
    Status::Ok
}

fn init(ctx: &Context, args: &[RedisString]) -> Status {
    if check_module_args(ctx, args) == Status::Err {
        return Status::Err;
    }
    register::set_module_options(ctx);
    register::add_acl_category(ctx);
    if let Err(what) = register_commands(ctx) {
        ctx.log_warning(&format!("librl: {what}; refusing to load"));
        return Status::Err;
    }
    install_panic_hook();
    Status::Ok
}

redis_module! {
    name: "rl",
    version: 1,
    allocator: (Allocator, ALLOCATOR),
    data_types: [],
    init: init,
    deinit: deinit,
    commands: [],
    configurations: [
        i64: [],
        string: [],
        bool: [],
        enum: [
            ["mode", &mode::MODE, mode::Mode::on, ConfigurationFlags::DEFAULT, None],
        ],
        module_args_as_configuration: true,
    ]
}
