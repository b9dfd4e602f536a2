//! Redis 7 command metadata (`COMMAND DOCS`, `COMMAND INFO`, key specs),
//! attached with the raw `RedisModule_SetCommandInfo` because the crate's
//! `#[command]` attribute needs Redis 7.2 APIs and would not load on 7.0.

use redis_module::{raw, Context, Status};
use std::ffi::CStr;
use std::os::raw::c_int;
use std::ptr;

/// How a command finds one of its keys.
#[derive(Clone, Copy)]
pub enum KeyAt {
    /// A fixed argv index.
    Index(c_int),
    /// The argument after the first `keyword` at or after argv index `from`.
    AfterKeyword(&'static CStr, c_int),
    /// Every argument from this argv index to the end.
    AllFrom(c_int),
}

/// A key the command touches, with Redis's access flags for it.
#[derive(Clone, Copy)]
pub struct KeySpec {
    pub at: KeyAt,
    pub flags: u32,
}

pub const LIMITER_KEY: u32 =
    raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_ACCESS | raw::REDISMODULE_CMD_KEY_UPDATE;
pub const OVERRIDE_KEY: u32 = raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS;

#[derive(Clone, Copy)]
pub enum ArgKind {
    Key(c_int),
    Integer,
    String,
    /// A bare option word such as PEEK.
    Flag,
}

#[derive(Clone, Copy)]
pub struct Arg {
    pub name: &'static CStr,
    pub kind: ArgKind,
    pub token: Option<&'static CStr>,
    pub optional: bool,
    pub summary: &'static CStr,
}

pub struct CommandDoc {
    pub name: &'static CStr,
    /// The ACL categories its flags imply; `ratelimit` is added where the
    /// server supports module categories.
    pub acl: &'static str,
    pub summary: &'static CStr,
    pub complexity: &'static CStr,
    pub arity: c_int,
    pub keys: &'static [KeySpec],
    pub args: &'static [Arg],
}

const SINCE: &CStr = c"0.1.0";

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

/// Attaches `doc` to its already-registered command. The server copies
/// everything it is given, so the arrays only live for the call.
pub fn attach(ctx: &Context, doc: &CommandDoc) -> Status {
    // SAFETY: the API pointers are written once by RedisModule_Init, before init runs.
    let (Some(get_command), Some(set_info)) =
        (unsafe { (raw::RedisModule_GetCommand, raw::RedisModule_SetCommandInfo) })
    else {
        // Redis older than 7.0: no key specs to attach; the legacy key
        // positions given at registration still apply.
        return Status::Ok;
    };
    // SAFETY: ctx is the load context; doc.name is a valid C string.
    let command = unsafe { get_command(ctx.ctx, doc.name.as_ptr()) };
    if command.is_null() {
        return Status::Err;
    }
    let mut key_specs: Vec<raw::RedisModuleCommandKeySpec> = doc
        .keys
        .iter()
        .map(key_spec)
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
        arity: doc.arity,
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
        let Ok(categories) = std::ffi::CString::new(categories) else {
            continue;
        };
        // SAFETY: command is a live command of this module during load.
        if unsafe { set_acl(command, categories.as_ptr()) } == raw::REDISMODULE_OK as c_int {
            return;
        }
    }
}

fn key_spec(spec: &KeySpec) -> raw::RedisModuleCommandKeySpec {
    let mut out = zeroed_key_spec();
    out.flags = u64::from(spec.flags);
    let mut lastkey = 0;
    match spec.at {
        KeyAt::AllFrom(pos) => {
            out.begin_search_type =
                raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
            out.bs.index.pos = pos;
            lastkey = -1;
        }
        KeyAt::Index(pos) => {
            out.begin_search_type =
                raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
            out.bs.index.pos = pos;
        }
        KeyAt::AfterKeyword(keyword, from) => {
            out.begin_search_type =
                raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_KEYWORD;
            out.bs.keyword.keyword = keyword.as_ptr();
            out.bs.keyword.startfrom = from;
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

/// The key specs every single-limiter command shares: its key at argv 1
/// and an optional override key after the OVERRIDE keyword.
pub const LIMITER_KEYS: &[KeySpec] = &[
    KeySpec {
        at: KeyAt::Index(1),
        flags: LIMITER_KEY,
    },
    KeySpec {
        at: KeyAt::AfterKeyword(c"OVERRIDE", 4),
        flags: OVERRIDE_KEY,
    },
];

pub const KEY_ARG: Arg = Arg {
    name: c"key",
    kind: ArgKind::Key(0),
    token: None,
    optional: false,
    summary: c"The limiter's key.",
};

pub const WINDOW_ARG: Arg = Arg {
    name: c"window",
    kind: ArgKind::String,
    token: None,
    optional: false,
    summary: c"An integer with an optional unit ms, s, m, h or d (bare is seconds), 1ms to 3650d.",
};

pub const COST_ARG: Arg = Arg {
    name: c"cost",
    kind: ArgKind::Integer,
    token: Some(c"COST"),
    optional: true,
    summary: c"Units this call consumes, 1 to 2^50, default 1.",
};

pub const OVERRIDE_ARG: Arg = Arg {
    name: c"okey",
    kind: ArgKind::Key(1),
    token: Some(c"OVERRIDE"),
    optional: true,
    summary: c"Key of an override whose values replace this call's.",
};

pub const PEEK_ARG: Arg = Arg {
    name: c"peek",
    kind: ArgKind::Flag,
    token: Some(c"PEEK"),
    optional: true,
    summary: c"Answer as if the call were made, changing nothing.",
};
