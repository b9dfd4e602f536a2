//! Registration: commands (on the raw API, with `entry` as the handler),
//! the RL.OVERRIDE container and its subcommands, and their metadata
//! (`COMMAND DOCS`, key specs, ACL categories) from `docs`, attached with
//! the raw `RedisModule_SetCommandInfo` because the crate's `#[command]`
//! attribute needs Redis 7.2 APIs and would not load on 7.0.

use crate::docs::{Arg, ArgKind, CommandDoc, KeyAt, KeySpec};
use redis_module::{raw, Context, Status};
use std::ffi::{CStr, CString};
use std::os::raw::c_int;
use std::ptr;

/// The server's signature for a command handler (`super::entry::<E>`).
pub type Handler = unsafe extern "C" fn(
    *mut raw::RedisModuleCtx,
    *mut *mut raw::RedisModuleString,
    c_int,
) -> c_int;

/// Legacy key positions `(first, last, step)`: `(0, 0, 0)` for none.
pub type KeyRange = (c_int, c_int, c_int);

fn status(code: c_int) -> Status {
    if code == raw::REDISMODULE_OK as c_int {
        Status::Ok
    } else {
        Status::Err
    }
}

/// Registers a top-level command.
pub fn command(
    ctx: &Context,
    name: &CStr,
    handler: Handler,
    flags: &CStr,
    keys: KeyRange,
) -> Status {
    // SAFETY: called during load with valid C strings and a handler of the
    // server's signature.
    let code = unsafe {
        raw::RedisModule_CreateCommand.map_or(raw::REDISMODULE_ERR as c_int, |f| {
            f(
                ctx.ctx,
                name.as_ptr(),
                Some(handler),
                flags.as_ptr(),
                keys.0,
                keys.1,
                keys.2,
            )
        })
    };
    status(code)
}

/// Registers a container command (no handler of its own): the server
/// dispatches to its subcommands and answers `HELP`-style errors itself.
pub fn container(ctx: &Context, name: &CStr) -> Status {
    // SAFETY: as above; a null handler is how the API declares a container.
    let code = unsafe {
        raw::RedisModule_CreateCommand.map_or(raw::REDISMODULE_ERR as c_int, |f| {
            f(ctx.ctx, name.as_ptr(), None, c"".as_ptr(), 0, 0, 0)
        })
    };
    status(code)
}

/// Registers `sub` under the container `parent` (Redis 7's subcommand API).
pub fn subcommand(
    ctx: &Context,
    parent: &CStr,
    sub: &CStr,
    handler: Handler,
    flags: &CStr,
    keys: KeyRange,
) -> Status {
    // SAFETY: read once, after RedisModule_Init; valid C strings.
    let (Some(get_command), Some(create_sub)) = (unsafe {
        (
            raw::RedisModule_GetCommand,
            raw::RedisModule_CreateSubcommand,
        )
    }) else {
        return Status::Err;
    };
    let parent = unsafe { get_command(ctx.ctx, parent.as_ptr()) };
    if parent.is_null() {
        return Status::Err;
    }
    // SAFETY: parent is this module's container command, during load.
    let code = unsafe {
        create_sub(
            parent,
            sub.as_ptr(),
            Some(handler),
            flags.as_ptr(),
            keys.0,
            keys.1,
            keys.2,
        )
    };
    status(code)
}

const SINCE: &CStr = c"0.1.0";

/// Valkey's `VALKEYMODULE_OPTIONS_HANDLE_ATOMIC_SLOT_MIGRATION` (Valkey 9):
/// a bit Redis does not define, so it is set only on Valkey.
const HANDLE_ATOMIC_SLOT_MIGRATION: c_int = 1 << 5;

/// Declares the module's options, all at once (the server replaces them):
///
/// - no implicit "modified" signal: writes signal WATCH and client-side
///   caching themselves, so a denied call that opened its key for writing
///   does not look like a change;
/// - on Valkey 9 and later, atomic slot migration (`CLUSTER
///   MIGRATESLOTS`), which Valkey refuses while any loaded module has not
///   declared it. librl keeps everything in plain string keys, which the
///   migration copies, and its writes reach the target as the replication
///   stream does (the primary's NOW included), so nothing of it is left
///   behind.
pub fn set_module_options(ctx: &Context) {
    let mut options = raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED as c_int;
    if valkey_major(ctx).is_some_and(|major| major >= 9) {
        options |= HANDLE_ATOMIC_SLOT_MIGRATION;
    }
    // SAFETY: called during load with the load context.
    unsafe {
        if let Some(set) = raw::RedisModule_SetModuleOptions {
            set(ctx.ctx, options);
        }
    }
}

/// Valkey's major version (`INFO server`'s `valkey_version`), or None on
/// Redis, which has no such field.
fn valkey_major(ctx: &Context) -> Option<u32> {
    // SAFETY: called during load; the info object is freed before return
    // and the field is read before that.
    unsafe {
        let (Some(get), Some(field), Some(free)) = (
            raw::RedisModule_GetServerInfo,
            raw::RedisModule_ServerInfoGetFieldC,
            raw::RedisModule_FreeServerInfo,
        ) else {
            return None;
        };
        let info = get(ctx.ctx, c"server".as_ptr());
        if info.is_null() {
            return None;
        }
        let value = field(info, c"valkey_version".as_ptr());
        let major = (!value.is_null())
            .then(|| CStr::from_ptr(value).to_str().ok())
            .flatten()
            .and_then(|v| v.split('.').next()?.parse().ok());
        free(ctx.ctx, info);
        major
    }
}

/// Adds the `ratelimit` ACL category where the server supports module
/// categories (Valkey, Redis 7.4+). A server that kept it from an earlier
/// load of the module refuses to add it again, which is fine: it exists.
pub fn add_acl_category(ctx: &Context) {
    // SAFETY: called during load; the name is a valid C string.
    unsafe {
        if let Some(add) = raw::RedisModule_AddACLCategory {
            add(ctx.ctx, c"ratelimit".as_ptr());
        }
    }
}

/// Attaches `doc` to its already-registered command, named `name` (a
/// subcommand as `parent|sub`). The server copies everything it is given,
/// so the arrays only live for the call.
/// A subcommand's arguments start one later than its doc's positions say
/// (argv[1] is the subcommand's name): `key_offset` shifts its key specs.
pub fn attach(ctx: &Context, name: &CStr, doc: &CommandDoc, key_offset: c_int) -> Status {
    // SAFETY: the API pointers are written once by RedisModule_Init, before init runs.
    let (Some(get_command), Some(set_info)) =
        (unsafe { (raw::RedisModule_GetCommand, raw::RedisModule_SetCommandInfo) })
    else {
        // Redis older than 7.0: no key specs to attach; the legacy key
        // positions given at registration still apply.
        return Status::Ok;
    };
    // SAFETY: ctx is the load context; name is a valid C string.
    let command = unsafe { get_command(ctx.ctx, name.as_ptr()) };
    if command.is_null() {
        return Status::Err;
    }
    let mut key_specs: Vec<raw::RedisModuleCommandKeySpec> = doc
        .keys
        .iter()
        .map(|spec| key_spec(spec, key_offset))
        .chain(std::iter::once(zeroed_key_spec()))
        .collect();
    let mut args: Vec<raw::RedisModuleCommandArg> = doc
        .args
        .iter()
        .map(command_arg)
        .chain(std::iter::once(zeroed_arg()))
        .collect();
    let version = raw::RedisModuleCommandInfoVersion {
        version: 1,
        sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
        sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
        sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
    };
    let info = raw::RedisModuleCommandInfo {
        version: &version,
        summary: doc.summary.as_ptr(),
        complexity: doc.complexity.as_ptr(),
        since: SINCE.as_ptr(),
        history: ptr::null_mut(),
        tips: ptr::null(),
        // A subcommand counts the container's name too; its own handler
        // checks the rest, so both forms reply the same messages.
        arity: if key_offset > 0 { -2 } else { doc.arity },
        key_specs: key_specs.as_mut_ptr(),
        args: args.as_mut_ptr(),
    };
    // SAFETY: every pointer in info is valid and the arrays are terminated
    // by zeroed entries, as the API requires.
    if unsafe { set_info(command, &info) } != raw::REDISMODULE_OK as c_int {
        return Status::Err;
    }
    set_acl_categories(command, doc.acl);
    Status::Ok
}

/// Sets the command's ACL categories where the server lets modules do so
/// (Redis 7.2+, Valkey): those its flags imply plus `ratelimit` when the
/// module category exists (Redis 7.4+, Valkey), else just the implied ones.
/// Redis 7.0 assigns no categories to module commands and has no API for it.
fn set_acl_categories(command: *mut raw::RedisModuleCommand, implied: &str) {
    // SAFETY: read once, after RedisModule_Init.
    let Some(set_acl) = (unsafe { raw::RedisModule_SetCommandACLCategories }) else {
        return;
    };
    for categories in [format!("{implied} ratelimit"), implied.to_string()] {
        let Ok(categories) = CString::new(categories) else {
            continue;
        };
        // SAFETY: command is a live command of this module during load.
        if unsafe { set_acl(command, categories.as_ptr()) } == raw::REDISMODULE_OK as c_int {
            return;
        }
    }
}

fn key_spec(spec: &KeySpec, offset: c_int) -> raw::RedisModuleCommandKeySpec {
    let mut out = zeroed_key_spec();
    out.flags = u64::from(spec.flags);
    let mut lastkey = 0;
    match spec.at {
        KeyAt::AllFrom(pos) => {
            out.begin_search_type =
                raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
            out.bs.index.pos = pos + offset;
            lastkey = -1;
        }
        KeyAt::Index(pos) => {
            out.begin_search_type =
                raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
            out.bs.index.pos = pos + offset;
        }
        KeyAt::AfterKeyword(keyword, from) => {
            out.begin_search_type =
                raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_KEYWORD;
            out.bs.keyword.keyword = keyword.as_ptr();
            out.bs.keyword.startfrom = from + offset;
        }
    }
    out.find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
    out.fk.range.lastkey = lastkey;
    out.fk.range.keystep = 1;
    out.fk.range.limit = 0;
    out
}

fn command_arg(arg: &Arg) -> raw::RedisModuleCommandArg {
    let mut out = zeroed_arg();
    out.name = arg.name.as_ptr();
    (out.type_, out.key_spec_index) = match arg.kind {
        ArgKind::Key(index) => (
            raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
            index,
        ),
        ArgKind::Integer => (
            raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
            -1,
        ),
        ArgKind::String => (
            raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
            -1,
        ),
        ArgKind::Flag => (
            raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
            -1,
        ),
    };
    out.token = arg.token.map_or(ptr::null(), CStr::as_ptr);
    out.summary = arg.summary.as_ptr();
    if arg.optional {
        out.flags = raw::REDISMODULE_CMD_ARG_OPTIONAL as c_int;
    }
    out
}

fn zeroed_key_spec() -> raw::RedisModuleCommandKeySpec {
    // SAFETY: the struct is plain C data for which all-zero is the
    // documented terminator and a valid starting value.
    unsafe { std::mem::zeroed() }
}

fn zeroed_arg() -> raw::RedisModuleCommandArg {
    // SAFETY: as above; null pointers and zero integers are valid here.
    unsafe { std::mem::zeroed() }
}
