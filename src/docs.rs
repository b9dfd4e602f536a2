//! Redis 7 command metadata as data: what `COMMAND DOCS` and `COMMAND
//! INFO` show (summary, complexity, arguments) and each command's key
//! specs. The server shim attaches it at load.

use crate::request::Algorithm;
use redis_module::raw;
use std::ffi::CStr;
use std::os::raw::c_int;
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
    summary:
        c"Units this call consumes, 0 to 2^50, default 1; 0 reads the limiter and changes nothing.",
};

pub const OVERRIDE_ARG: Arg = Arg {
    name: c"okey",
    kind: ArgKind::Key(1),
    token: Some(c"OVERRIDE"),
    optional: true,
    summary: c"Key of an override whose values replace this call's.",
};

pub const REFUND_ARG: Arg = Arg {
    name: c"refund",
    kind: ArgKind::Integer,
    token: Some(c"REFUND"),
    optional: true,
    summary: c"Instead of COST: give back up to n units this limiter recorded, newest first.",
};

pub const BLOCK_ARG: Arg = Arg {
    name: c"block",
    kind: ArgKind::String,
    token: Some(c"BLOCK"),
    optional: true,
    summary: c"A denial starts a block this long (a duration): every call is denied until it ends.",
};

pub const RESERVE_ARG: Arg = Arg {
    name: c"reserve",
    kind: ArgKind::String,
    token: Some(c"RESERVE"),
    optional: true,
    summary: c"Admit now if the tokens exist within this max wait (0 or a duration), queued first come first served; retry_after is the wait.",
};

pub const WAIT_ARG: Arg = Arg {
    name: c"wait",
    kind: ArgKind::String,
    token: Some(c"WAIT"),
    optional: true,
    summary: c"RESERVE, and the server holds the reply until the reserved time.",
};

pub const PEEK_ARG: Arg = Arg {
    name: c"peek",
    kind: ArgKind::Flag,
    token: Some(c"PEEK"),
    optional: true,
    summary: c"Answer as if the call were made, changing nothing.",
};

pub const FIXED: CommandDoc = CommandDoc {
    name: c"RL.FIXED",
    acl: "write fast",
    summary: c"Counts a call against a fixed-window limit and says whether it is admitted.",
    complexity: c"O(1)",
    arity: -4,
    keys: LIMITER_KEYS,
    args: &[
        KEY_ARG,
        Arg {
            name: c"limit",
            kind: ArgKind::Integer,
            token: None,
            optional: false,
            summary: c"Units admitted per window, 1 to 2^50.",
        },
        WINDOW_ARG,
        Arg {
            name: c"aligned",
            kind: ArgKind::Flag,
            token: Some(c"ALIGNED"),
            optional: true,
            summary: c"Windows start on multiples of the window in Unix time.",
        },
        COST_ARG,
        REFUND_ARG,
        BLOCK_ARG,
        OVERRIDE_ARG,
        PEEK_ARG,
    ],
};

pub const SLIDING: CommandDoc = CommandDoc {
    name: c"RL.SLIDING",
    acl: "write fast",
    summary: c"Counts a call against a sliding-window limit (an exact log, or APPROX's two-window counter).",
    complexity: c"O(1) amortized for an admitted call; a denied call reads the entries that must leave the window before it fits.",
    arity: -4,
    keys: LIMITER_KEYS,
    args: &[
        KEY_ARG,
        Arg {
            name: c"limit",
            kind: ArgKind::Integer,
            token: None,
            optional: false,
            summary: c"Units admitted in any window, 1 to 2^50.",
        },
        WINDOW_ARG,
        Arg {
            name: c"approx",
            kind: ArgKind::Flag,
            token: Some(c"APPROX"),
            optional: true,
            summary: c"Use the weighted two-window counter: constant memory, approximate.",
        },
        COST_ARG,
        REFUND_ARG,
        BLOCK_ARG,
        OVERRIDE_ARG,
        PEEK_ARG,
    ],
};

pub const TOKEN: CommandDoc = CommandDoc {
    name: c"RL.TOKEN",
    acl: "write fast",
    summary:
        c"Takes tokens from a continuously refilling bucket and says whether the call is admitted.",
    complexity: c"O(1)",
    arity: -4,
    keys: LIMITER_KEYS,
    args: &[
        KEY_ARG,
        Arg {
            name: c"rate",
            kind: ArgKind::Integer,
            token: None,
            optional: false,
            summary: c"Tokens refilled per window, 1 to 2^50.",
        },
        WINDOW_ARG,
        Arg {
            name: c"capacity",
            kind: ArgKind::Integer,
            token: Some(c"BURST"),
            optional: true,
            summary: c"Bucket size, 1 to 2^50; default the rate. The bucket starts full.",
        },
        COST_ARG,
        REFUND_ARG,
        RESERVE_ARG,
        WAIT_ARG,
        BLOCK_ARG,
        OVERRIDE_ARG,
        PEEK_ARG,
    ],
};

pub const CONCURRENT: CommandDoc = CommandDoc {
    name: c"RL.CONCURRENT",
    acl: "write fast",
    summary: c"Takes slots of a concurrency limit as a lease that ends by itself unless released or renewed; replies the lease id.",
    complexity: c"O(L) where L is the number of leases the key holds (at most the limit).",
    arity: -4,
    keys: LIMITER_KEYS,
    args: &[
        KEY_ARG,
        Arg {
            name: c"limit",
            kind: ArgKind::Integer,
            token: None,
            optional: false,
            summary: c"Slots that may be held at once, 1 to 2^50.",
        },
        Arg {
            name: c"lease",
            kind: ArgKind::String,
            token: None,
            optional: false,
            summary: c"How long a lease lasts unless released or renewed: an integer with an optional unit ms, s, m, h or d (bare is seconds), 1ms to 3650d.",
        },
        Arg {
            name: c"cost",
            kind: ArgKind::Integer,
            token: Some(c"COST"),
            optional: true,
            summary: c"Slots this lease takes, 0 to 2^50, default 1; 0 reads the limiter and changes nothing.",
        },
        Arg {
            name: c"wait",
            kind: ArgKind::String,
            token: Some(c"WAIT"),
            optional: true,
            summary: c"Refused for want of a free slot: wait up to this long (0 or a duration), in arrival order, for a RELEASE or a lease's end.",
        },
        Arg {
            name: c"release",
            kind: ArgKind::Integer,
            token: Some(c"RELEASE"),
            optional: true,
            summary: c"Instead of taking a lease: free the lease with this id at once.",
        },
        Arg {
            name: c"renew",
            kind: ArgKind::Integer,
            token: Some(c"RENEW"),
            optional: true,
            summary: c"Instead of taking a lease: the lease with this id now lasts the lease duration from now.",
        },
        OVERRIDE_ARG,
        PEEK_ARG,
    ],
};

pub const ALL: CommandDoc = CommandDoc {
    name: c"RL.ALL",
    acl: "write fast",
    summary: c"Checks several limits in one atomic step: admitted only if all admit, and then all record the call.",
    complexity: c"O(N) where N is the number of clauses (each clause as its own command).",
    arity: -2,
    // Keys are reported through the getkeys API: clauses vary in length.
    keys: &[],
    args: &[Arg {
        name: c"clause",
        kind: ArgKind::String,
        token: None,
        optional: false,
        summary: c"FIXED|SLIDING|TOKEN|CONCURRENT key amount window [options], repeatable; then optional PEEK.",
    }],
};

const OKEY_ARG: Arg = Arg {
    name: c"okey",
    kind: ArgKind::Key(0),
    token: None,
    optional: false,
    summary: c"The override's key.",
};

pub const OVERRIDE_SET: CommandDoc = CommandDoc {
    name: c"RL.OVERRIDE.SET",
    acl: "write fast",
    summary: c"Stores an override whose limit, window and burst replace those of limiter calls naming it.",
    complexity: c"O(1)",
    arity: -4,
    keys: &[KeySpec {
        at: KeyAt::Index(1),
        flags: raw::REDISMODULE_CMD_KEY_OW | raw::REDISMODULE_CMD_KEY_UPDATE,
    }],
    args: &[
        OKEY_ARG,
        Arg {
            name: c"limit",
            kind: ArgKind::Integer,
            token: None,
            optional: false,
            summary: c"The limit (TOKEN: rate), 1 to 2^50.",
        },
        Arg {
            name: c"window",
            kind: ArgKind::String,
            token: None,
            optional: false,
            summary: c"An integer with an optional unit ms, s, m, h or d (bare is seconds), 1ms to 3650d.",
        },
        Arg {
            name: c"capacity",
            kind: ArgKind::Integer,
            token: Some(c"BURST"),
            optional: true,
            summary: c"TOKEN's bucket size; default the limit.",
        },
        Arg {
            name: c"duration",
            kind: ArgKind::String,
            token: Some(c"TTL"),
            optional: true,
            summary: c"How long the override lives; without it, until deleted.",
        },
    ],
};

pub const OVERRIDE_GET: CommandDoc = CommandDoc {
    name: c"RL.OVERRIDE.GET",
    acl: "read fast",
    summary: c"Returns an override as [limit, window_ms, burst, ttl_ms], or nil.",
    complexity: c"O(1)",
    arity: 2,
    keys: &[KeySpec {
        at: KeyAt::Index(1),
        flags: raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS,
    }],
    args: &[OKEY_ARG],
};

pub const OVERRIDE_DEL: CommandDoc = CommandDoc {
    name: c"RL.OVERRIDE.DEL",
    acl: "write fast",
    summary: c"Deletes overrides and returns how many were deleted.",
    complexity: c"O(N) where N is the number of keys",
    arity: -2,
    keys: &[KeySpec {
        at: KeyAt::AllFrom(1),
        flags: raw::REDISMODULE_CMD_KEY_RM | raw::REDISMODULE_CMD_KEY_DELETE,
    }],
    args: &[Arg {
        name: c"okey",
        kind: ArgKind::Key(0),
        token: None,
        optional: false,
        summary: c"Override keys; repeatable.",
    }],
};

pub const OVERRIDE_LIST: CommandDoc = CommandDoc {
    name: c"RL.OVERRIDE.LIST",
    acl: "read slow",
    summary:
        c"Iterates this node's overrides that the caller may read, with SCAN's cursor contract.",
    complexity: c"O(1) for every call. O(N) for a complete iteration, N the number of keys.",
    arity: -2,
    keys: &[],
    args: &[
        Arg {
            name: c"cursor",
            kind: ArgKind::Integer,
            token: None,
            optional: false,
            summary: c"0 to start; then the cursor the previous call returned.",
        },
        Arg {
            name: c"pattern",
            kind: ArgKind::String,
            token: Some(c"MATCH"),
            optional: true,
            summary: c"Only keys matching this glob pattern.",
        },
        Arg {
            name: c"count",
            kind: ArgKind::Integer,
            token: Some(c"COUNT"),
            optional: true,
            summary: c"How many keys to examine per call (a hint, as in SCAN).",
        },
    ],
};

/// The container `RL.OVERRIDE` itself: its subcommands carry the details.
pub const OVERRIDE: CommandDoc = CommandDoc {
    name: c"RL.OVERRIDE",
    acl: "",
    summary: c"Manages overrides: SET, GET, DEL and LIST.",
    complexity: c"Depends on the subcommand.",
    arity: -2,
    keys: &[],
    args: &[],
};

impl Algorithm {
    /// This limiter command's metadata.
    pub fn doc(self) -> &'static CommandDoc {
        match self {
            Algorithm::Fixed => &FIXED,
            Algorithm::Sliding => &SLIDING,
            Algorithm::Token => &TOKEN,
            Algorithm::Concurrent => &CONCURRENT,
        }
    }
}

pub const OVERRIDE_HELP: CommandDoc = CommandDoc {
    name: c"RL.OVERRIDE HELP",
    acl: "read fast",
    summary: c"Shows the RL.OVERRIDE subcommands.",
    complexity: c"O(1)",
    arity: 2,
    keys: &[],
    args: &[],
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{parse_limiter, Algorithm, ArgError};

    /// The reference (docs/commands.md), whose synopses must agree with
    /// the entries here.
    const REFERENCE: &str = include_str!("../docs/commands.md");

    /// The synopsis of `command` in the reference: the code block under
    /// its heading.
    fn synopsis(command: &str) -> String {
        let heading = format!("## {command}\n");
        let at = REFERENCE
            .find(&heading)
            .unwrap_or_else(|| panic!("docs/commands.md has no section {command}"));
        let block = REFERENCE[at..].split("```").nth(1).unwrap_or_default();
        block.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    fn tokens(doc: &CommandDoc) -> Vec<&'static str> {
        doc.args
            .iter()
            .filter_map(|a| a.token)
            .map(|t| t.to_str().unwrap_or_default())
            .collect()
    }

    /// Every option a limiter command's entry names is in its synopsis in
    /// the reference, and the parser takes it (no "unknown option", no
    /// "not an option of"); and every option word of the synopsis is in
    /// the entry. So the grammar is written once, in the entry, and the
    /// reference and the parser cannot drift from it unnoticed.
    #[test]
    fn the_reference_and_the_parser_agree_with_each_entry() {
        for algorithm in Algorithm::ALL {
            let doc = algorithm.doc();
            let name = doc.name.to_str().unwrap_or_default();
            let shown = synopsis(name);
            let words: Vec<&str> = shown
                .split(' ')
                .map(|w| w.trim_matches(|c| c == '[' || c == ']'))
                .collect();
            let entry = tokens(doc);
            for token in &entry {
                assert!(
                    words.contains(token),
                    "{name}: {token} missing from the reference: {shown}"
                );
                let value: &[&str] = match *token {
                    "ALIGNED" | "APPROX" | "PEEK" => &[],
                    "OVERRIDE" => &["okey"],
                    "COST" | "REFUND" | "BURST" | "RELEASE" | "RENEW" => &["2"],
                    _ => &["1s"],
                };
                let mut argv = vec![name, "key", "10", "60", token];
                argv.extend(value);
                match parse_limiter(algorithm, &argv, false) {
                    Ok(_) => {}
                    Err(e @ (ArgError::UnknownOption { .. } | ArgError::OptionNotFor { .. })) => {
                        panic!("{name}: the parser refuses {token}: {e}")
                    }
                    Err(e) => panic!("{name} {argv:?}: {e}"),
                }
            }
            for word in words
                .iter()
                .map(|w| w.trim_matches(|c| c == '[' || c == ']'))
            {
                let is_option = word.len() > 1 && word.chars().all(|c| c.is_ascii_uppercase());
                if is_option && !name.ends_with(word) {
                    assert!(
                        entry.contains(&word),
                        "{name}: the reference's {word} is not in its entry"
                    );
                }
            }
        }
    }
}
