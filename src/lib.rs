//! librl: native rate-limiting commands for Redis and Valkey.
//!
//! Registration lives here; the algorithms are in `core`, argument parsing
//! in `args`, key layout in `codec`, key I/O in `store`, handlers in
//! `commands`, command metadata in `cmdinfo`.

mod args;
mod cmdinfo;
mod codec;
mod commands;
mod error;
#[cfg(test)]
mod fuzz;
mod mode;
mod stats;
mod store;

use redis_module::configuration::ConfigurationFlags;
use redis_module::{redis_module, Context, RedisString, Status};

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

const COMMAND_DOCS: [&cmdinfo::CommandDoc; 8] = [
    &commands::fixed::DOC,
    &commands::all::DOC,
    &commands::sliding::DOC,
    &commands::token::DOC,
    &commands::overrides::SET_DOC,
    &commands::overrides::GET_DOC,
    &commands::overrides::DEL_DOC,
    &commands::overrides::LIST_DOC,
];

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

fn init(ctx: &Context, args: &[RedisString]) -> Status {
    if check_module_args(ctx, args) == Status::Err {
        return Status::Err;
    }
    // Writes signal WATCH and client-side caching explicitly, so a denied
    // call that opened its key for writing does not look like a change.
    ctx.set_module_options(redis_module::raw::ModuleOptions::NO_IMPLICIT_SIGNAL_MODIFIED);
    cmdinfo::add_acl_category(ctx);
    for doc in COMMAND_DOCS {
        if cmdinfo::attach(ctx, doc) == Status::Err {
            ctx.log_warning(&format!(
                "librl: could not attach command info to {}",
                doc.name.to_string_lossy()
            ));
            return Status::Err;
        }
    }
    Status::Ok
}

redis_module! {
    name: "rl",
    version: 1,
    allocator: (Allocator, ALLOCATOR),
    data_types: [],
    init: init,
    commands: [
        ["RL.FIXED", commands::fixed::rl_fixed, "write deny-oom fast getkeys-api", 0, 0, 0, ""],
        ["RL.SLIDING", commands::sliding::rl_sliding, "write deny-oom fast getkeys-api", 0, 0, 0, ""],
        ["RL.TOKEN", commands::token::rl_token, "write deny-oom fast getkeys-api", 0, 0, 0, ""],
        ["RL.ALL", commands::all::rl_all, "write deny-oom fast getkeys-api", 0, 0, 0, ""],
        ["RL.OVERRIDE.SET", commands::overrides::rl_override_set, "write deny-oom fast", 0, 0, 0, ""],
        ["RL.OVERRIDE.GET", commands::overrides::rl_override_get, "readonly fast", 0, 0, 0, ""],
        ["RL.OVERRIDE.DEL", commands::overrides::rl_override_del, "write fast", 0, 0, 0, ""],
        ["RL.OVERRIDE.LIST", commands::overrides::rl_override_list, "readonly", 0, 0, 0, ""],
    ],
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
