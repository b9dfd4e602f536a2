//! ACL: key patterns apply to a limiter's key and its okey alike, read-
//! and write-only key permissions follow each command's key specs, and the
//! `ratelimit` category (where the server has module categories) holds
//! exactly librl's commands.

mod common;

use common::*;
use redis::Value;

fn user_conn(server: &Server, user: &str) -> redis::Connection {
    let mut con = server.conn();
    cmd(&mut con, &["AUTH", user, "pw"]).unwrap();
    con
}

/// Adds user `name`, password `pw`, with the ACL `rules`.
fn set_user(admin: &mut redis::Connection, name: &str, rules: &[&str]) {
    let args = [&["ACL", "SETUSER", name, "on", ">pw"][..], rules].concat();
    cmd(admin, &args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
}

fn assert_noperm(con: &mut redis::Connection, args: &[&str]) {
    let err = cmd(con, args).expect_err(&format!("{args:?} was allowed"));
    assert!(err.starts_with("NOPERM"), "{args:?}: {err}");
}

fn assert_allowed(con: &mut redis::Connection, args: &[&str]) {
    if let Err(e) = cmd(con, args) {
        panic!("{args:?}: {e}");
    }
}

/// One call of every command on `rl:` keys.
const EVERY_COMMAND_ON_RL_KEYS: [&[&str]; 14] = [
    &[
        "RL.OVERRIDE.SET",
        "rl:o",
        "9",
        "1h",
        "BURST",
        "9",
        "TTL",
        "2h",
    ],
    &["RL.FIXED", "rl:f", "5", "1h"],
    &["RL.FIXED", "rl:f", "5", "1h", "OVERRIDE", "rl:o", "PEEK"],
    &["RL.SLIDING", "rl:s", "5", "1h", "OVERRIDE", "rl:o"],
    &["RL.SLIDING", "rl:sa", "5", "1h", "APPROX"],
    &[
        "RL.TOKEN", "rl:t", "5", "1d", "BURST", "6", "OVERRIDE", "rl:o",
    ],
    &[
        "RL.ALL", "FIXED", "rl:a1", "5", "1h", "SLIDING", "rl:a2", "5", "1h", "OVERRIDE", "rl:o",
        "TOKEN", "rl:a3", "5", "1d",
    ],
    &["RL.ALL", "FIXED", "rl:a1", "5", "1h", "PEEK"],
    &["RL.CONCURRENT", "rl:c", "5", "1h", "OVERRIDE", "rl:o"],
    &["RL.CONCURRENT", "rl:c", "5", "1h", "RELEASE", "1"],
    &["RL.OVERRIDE.GET", "rl:o"],
    &["RL.OVERRIDE.LIST", "0"],
    &["RL.OVERRIDE.SET", "rl:o2", "1", "1h"],
    &["RL.OVERRIDE.DEL", "rl:o2", "rl:none"],
];

/// Calls naming a key outside `rl:*`, as key or as okey.
const FOREIGN: [&[&str]; 14] = [
    &["RL.FIXED", "other", "5", "1h"],
    &["RL.FIXED", "rl:f", "1", "1h", "OVERRIDE", "other"],
    &[
        "RL.SLIDING",
        "rl:s",
        "1",
        "1h",
        "APPROX",
        "OVERRIDE",
        "other",
    ],
    &["RL.SLIDING", "other", "1", "1h", "PEEK"],
    &["RL.TOKEN", "rl:t", "1", "1d", "OVERRIDE", "other", "PEEK"],
    &[
        "RL.ALL", "FIXED", "rl:a1", "1", "1h", "FIXED", "other", "1", "1h",
    ],
    &["RL.ALL", "FIXED", "rl:a1", "1", "1h", "OVERRIDE", "other"],
    &["RL.ALL", "TOKEN", "other", "1", "1d", "PEEK"],
    &["RL.CONCURRENT", "other", "1", "1h", "RELEASE", "5"],
    &["RL.CONCURRENT", "rl:c", "1", "1h", "OVERRIDE", "other"],
    &["RL.OVERRIDE.SET", "other", "1", "1h"],
    &["RL.OVERRIDE.GET", "other"],
    &["RL.OVERRIDE.DEL", "rl:o", "other"],
    &["RL.OVERRIDE.DEL", "other"],
];

#[test]
fn acl_key_patterns_apply_to_key_and_okey() {
    on_each_server(|server, admin| {
        cmd(admin, &["SET", "other", "x"]).unwrap();
        set_user(admin, "all", &["~rl:*", "+@all"]);
        set_user(
            admin,
            "named",
            &[
                "~rl:*",
                "+rl.fixed",
                "+rl.sliding",
                "+rl.token",
                "+rl.concurrent",
                "+rl.all",
                "+rl.override.set",
                "+rl.override.get",
                "+rl.override.del",
                "+rl.override.list",
            ],
        );
        for user in ["all", "named"] {
            let mut con = user_conn(server, user);
            for args in EVERY_COMMAND_ON_RL_KEYS {
                assert_allowed(&mut con, args);
            }
            let before = snapshot(admin);
            for args in FOREIGN {
                assert_noperm(&mut con, args);
            }
            assert_same_snapshot(
                &snapshot(admin),
                &before,
                &format!("{user}: a refused call wrote"),
            );
            // The named user has nothing but the RL commands.
            if user == "named" {
                assert_noperm(&mut con, &["GET", "rl:f"]);
            }
        }
        // A refused call never reached the module.
        let c = counters(admin);
        assert_eq!(c["rl_fixed_errors"] + c["rl_all_errors"], 0, "{c:?}");
    });
}

#[test]
fn acl_read_only_key_permission_allows_only_reads() {
    on_each_server(|server, admin| {
        cmd(admin, &["RL.OVERRIDE.SET", "rl:o", "3", "1h"]).unwrap();
        cmd(admin, &["RL.OVERRIDE.SET", "rl:ovr:1", "3", "1h"]).unwrap();
        set_user(admin, "reader", &["%R~rl:*", "+@all"]);
        let mut con = user_conn(server, "reader");
        assert_eq!(
            cmd(&mut con, &["RL.OVERRIDE.GET", "rl:o"]).unwrap(),
            Value::Array(vec![
                Value::Int(3),
                Value::Int(3_600_000),
                Value::Int(0),
                Value::Int(-1)
            ])
        );
        assert_allowed(&mut con, &["RL.OVERRIDE.LIST", "0", "MATCH", "rl:*"]);
        let before = snapshot(admin);
        for args in [
            &["RL.FIXED", "rl:f", "5", "1h"][..],
            &["RL.FIXED", "rl:f", "5", "1h", "PEEK"],
            &["RL.SLIDING", "rl:s", "5", "1h"],
            &["RL.TOKEN", "rl:t", "5", "1d", "PEEK"],
            &["RL.CONCURRENT", "rl:c", "5", "1d", "PEEK"],
            &["RL.ALL", "FIXED", "rl:f", "5", "1h", "PEEK"],
            &["RL.OVERRIDE.SET", "rl:o", "5", "1h"],
            &["RL.OVERRIDE.DEL", "rl:o"],
        ] {
            assert_noperm(&mut con, args);
        }
        assert_same_snapshot(&snapshot(admin), &before, "snapshot");

        // Write-only: storing and deleting overrides need no read; a
        // limiter reads its key, RL.OVERRIDE.GET reads.
        set_user(admin, "writer", &["%W~rl:*", "+@all"]);
        let mut con = user_conn(server, "writer");
        assert_allowed(
            &mut con,
            &["RL.OVERRIDE.SET", "rl:w", "5", "1h", "TTL", "1h"],
        );
        assert_allowed(&mut con, &["RL.OVERRIDE.DEL", "rl:w"]);
        for args in [
            &["RL.FIXED", "rl:f", "5", "1h"][..],
            &["RL.TOKEN", "rl:t", "5", "1d"],
            &["RL.CONCURRENT", "rl:c", "5", "1d", "RELEASE", "1"],
            &["RL.ALL", "SLIDING", "rl:s", "5", "1h"],
            &["RL.OVERRIDE.GET", "rl:o"],
        ] {
            assert_noperm(&mut con, args);
        }

        // Limiter keys writable, override keys only readable: an okey is
        // only read, so the limiters may name it.
        set_user(admin, "mixed", &["~rl:lim:*", "%R~rl:ovr:*", "+@all"]);
        let mut con = user_conn(server, "mixed");
        for args in [
            &["RL.FIXED", "rl:lim:f", "5", "1h", "OVERRIDE", "rl:ovr:1"][..],
            &["RL.SLIDING", "rl:lim:s", "5", "1h", "OVERRIDE", "rl:ovr:1"],
            &["RL.TOKEN", "rl:lim:t", "5", "1d", "OVERRIDE", "rl:ovr:1"],
            &[
                "RL.CONCURRENT",
                "rl:lim:c",
                "5",
                "1d",
                "OVERRIDE",
                "rl:ovr:1",
            ],
            &[
                "RL.ALL", "FIXED", "rl:lim:a", "5", "1h", "OVERRIDE", "rl:ovr:1", "TOKEN",
                "rl:lim:b", "5", "1d", "OVERRIDE", "rl:ovr:1",
            ],
            &["RL.OVERRIDE.GET", "rl:ovr:1"],
        ] {
            assert_allowed(&mut con, args);
        }
        assert_eq!(
            limiter(
                &mut con,
                &["RL.FIXED", "rl:lim:f", "5", "1h", "OVERRIDE", "rl:ovr:1"]
            )[..4],
            [1, 2, 0, 3],
            "the override applied"
        );
        for args in [
            &["RL.FIXED", "rl:ovr:1", "5", "1h"][..],
            &[
                "RL.ALL", "FIXED", "rl:lim:a", "5", "1h", "FIXED", "rl:ovr:2", "5", "1h",
            ],
            &["RL.OVERRIDE.SET", "rl:ovr:1", "5", "1h"],
            &["RL.OVERRIDE.DEL", "rl:ovr:1"],
        ] {
            assert_noperm(&mut con, args);
        }
    });
}

const ALL_COMMANDS: [&str; 9] = [
    "rl.fixed",
    "rl.sliding",
    "rl.token",
    "rl.concurrent",
    "rl.all",
    "rl.override.set",
    "rl.override.get",
    "rl.override.del",
    "rl.override.list",
];

fn category(con: &mut redis::Connection, name: &str) -> Result<Vec<String>, String> {
    let listed: Vec<String> = redis::cmd("ACL")
        .arg("CAT")
        .arg(name)
        .query(con)
        .map_err(|e| error_line(&e))?;
    Ok(listed.into_iter().map(|c| c.to_lowercase()).collect())
}

/// Whether the server has module ACL categories (`RM_AddACLCategory`):
/// Redis 7.0 has none; Redis 8 and Valkey 8 and 9 have them.
fn has_module_categories(flavor: Flavor) -> bool {
    match flavor {
        Flavor::Redis7 => false,
        Flavor::Redis8 | Flavor::Valkey8 | Flavor::Valkey9 => true,
    }
}

/// The container and its subcommands (`rl.override|set`), which
/// `acl_rules_apply_to_override_subcommands` checks.
fn is_container(command: &str) -> bool {
    command == "rl.override" || command.starts_with("rl.override|")
}

#[test]
fn acl_categories_where_the_server_supports_them() {
    on_each_server(|server, admin| {
        assert!(module_names(admin).contains(&"rl".to_string()));
        if !has_module_categories(server.flavor) {
            // Redis 7.0 has no module ACL categories: the module loads
            // without them and the category does not exist.
            let err = category(admin, "ratelimit").unwrap_err();
            assert!(err.starts_with("ERR"), "{err}");
            assert!(
                cmd(admin, &["ACL", "SETUSER", "u", "+@ratelimit"]).is_err(),
                "+@ratelimit accepted on Redis 7.0"
            );
            return;
        }
        let mut listed = category(admin, "ratelimit").unwrap();
        listed.retain(|c| !is_container(c));
        listed.sort();
        let mut want = ALL_COMMANDS.map(String::from).to_vec();
        want.sort();
        assert_eq!(listed, want);
        let write = category(admin, "write").unwrap();
        let read = category(admin, "read").unwrap();
        for c in [
            "rl.fixed",
            "rl.sliding",
            "rl.token",
            "rl.concurrent",
            "rl.all",
            "rl.override.set",
            "rl.override.del",
        ] {
            assert!(write.contains(&c.to_string()), "{c} is not @write");
            assert!(!read.contains(&c.to_string()), "{c} is @read");
        }
        for c in ["rl.override.get", "rl.override.list"] {
            assert!(read.contains(&c.to_string()), "{c} is not @read");
            assert!(!write.contains(&c.to_string()), "{c} is @write");
        }

        // The category grants and revokes exactly these commands.
        set_user(admin, "rlonly", &["~*", "+@ratelimit"]);
        set_user(admin, "norl", &["~*", "+@all", "-@ratelimit"]);
        set_user(admin, "nowrite", &["~*", "+@all", "-@write"]);
        let (mut rlonly, mut norl, mut nowrite) = (
            user_conn(server, "rlonly"),
            user_conn(server, "norl"),
            user_conn(server, "nowrite"),
        );
        for args in EVERY_COMMAND_ON_RL_KEYS {
            assert_allowed(&mut rlonly, args);
            assert_noperm(&mut norl, args);
            let command = args[0].to_lowercase();
            if command == "rl.override.get" || command == "rl.override.list" {
                assert_allowed(&mut nowrite, args);
            } else {
                assert_noperm(&mut nowrite, args);
            }
        }
        assert_noperm(&mut rlonly, &["GET", "rl:f"]);
        assert_allowed(&mut norl, &["GET", "rl:f"]);
    });
}

/// ACL rules name the container's subcommands (`-rl.override|set`,
/// `+rl.override|get`) and the container as a whole (`+rl.override`), key
/// patterns and read/write key permissions apply to the container form's
/// okeys, and the categories hold the subcommands with the flags of their
/// dotted aliases. A refused call writes nothing.
#[test]
fn acl_rules_apply_to_override_subcommands() {
    on_each_server(|server, admin| {
        let flavor = server.flavor;
        cmd(admin, &["RL.OVERRIDE.SET", "rl:o", "3", "1h"]).unwrap();
        cmd(admin, &["SET", "other", "x"]).unwrap();
        let users: [&[&str]; 5] = [
            &["nosetsub", "~*", "+@all", "-rl.override|set"],
            &["onlyget", "~rl:*", "+rl.override|get", "+rl.override|list"],
            &["container", "~rl:*", "+rl.override"],
            &["reader", "%R~rl:*", "+@all"],
            &["nowrite", "~*", "+@all", "-@write"],
        ];
        for user in users {
            set_user(admin, user[0], &user[1..]);
        }
        let set = ["RL.OVERRIDE", "SET", "rl:n", "5", "1h"];
        let set_lower = ["rl.override", "set", "rl:n", "5", "1h"];
        let get = ["RL.OVERRIDE", "GET", "rl:o"];
        let del = ["RL.OVERRIDE", "DEL", "rl:none"];
        let list = ["RL.OVERRIDE", "LIST", "0"];
        let before = snapshot(admin);

        // -rl.override|set: that subcommand alone; its dotted alias is a
        // command of its own, which the rule does not name.
        let mut con = user_conn(server, "nosetsub");
        assert_noperm(&mut con, &set);
        assert_noperm(&mut con, &set_lower);
        for args in [&get[..], &del, &list, &["RL.OVERRIDE.GET", "rl:o"]] {
            assert_allowed(&mut con, args);
        }
        assert_allowed(&mut con, &["RL.OVERRIDE.SET", "rl:dotted", "5", "1h"]);
        cmd(admin, &["DEL", "rl:dotted"]).unwrap();

        // +rl.override|get and |list: nothing else.
        let mut con = user_conn(server, "onlyget");
        assert_allowed(&mut con, &get);
        assert_allowed(&mut con, &["rl.override", "get", "rl:o"]);
        assert_allowed(&mut con, &list);
        for args in [
            &set[..],
            &del,
            &["RL.OVERRIDE.GET", "rl:o"],
            &["GET", "rl:o"],
        ] {
            assert_noperm(&mut con, args);
        }
        // Key patterns apply to the container form's okeys.
        assert_noperm(&mut con, &["RL.OVERRIDE", "GET", "other"]);

        // +rl.override: every subcommand, on rl: keys only.
        let mut con = user_conn(server, "container");
        for args in [&get[..], &list, &del] {
            assert_allowed(&mut con, args);
        }
        assert_allowed(&mut con, &["RL.OVERRIDE", "SET", "rl:c", "5", "1h"]);
        assert_allowed(&mut con, &["RL.OVERRIDE", "DEL", "rl:c"]);
        for args in [
            &["RL.OVERRIDE", "SET", "other", "5", "1h"][..],
            &["RL.OVERRIDE", "DEL", "rl:o", "other"],
            &["RL.OVERRIDE", "GET", "other"],
            &["RL.OVERRIDE.GET", "rl:o"],
            &["RL.FIXED", "rl:f", "5", "1h"],
        ] {
            assert_noperm(&mut con, args);
        }

        // Read-only keys: GET and LIST read, SET and DEL write.
        let mut con = user_conn(server, "reader");
        assert_allowed(&mut con, &get);
        assert_allowed(&mut con, &list);
        assert_noperm(&mut con, &set);
        assert_noperm(&mut con, &["RL.OVERRIDE", "DEL", "rl:o"]);

        // -@write: GET and LIST are not writes, SET and DEL are, as their
        // dotted aliases. Redis 7.0 gives module commands no ACL category
        // at all (not even @write from the write flag), so there the rule
        // reaches none of them, dotted or not.
        let mut con = user_conn(server, "nowrite");
        assert_allowed(&mut con, &get);
        assert_allowed(&mut con, &list);
        let writes = [
            &set[..],
            &["RL.OVERRIDE", "DEL", "rl:n"],
            &["RL.OVERRIDE.SET", "rl:n", "5", "1h"],
            &["RL.OVERRIDE.DEL", "rl:n"],
        ];
        for args in writes {
            if has_module_categories(flavor) {
                assert_noperm(&mut con, args);
            } else {
                assert_allowed(&mut con, args);
            }
        }

        assert_same_snapshot(
            &snapshot(admin),
            &before,
            &format!("{flavor:?}: a refused call wrote"),
        );

        if has_module_categories(flavor) {
            // The category holds the four subcommands and HELP (and perhaps
            // the container itself), with the read/write split of the
            // aliases.
            let listed = category(admin, "ratelimit").unwrap();
            let mut subcommands: Vec<&String> = listed
                .iter()
                .filter(|c| c.starts_with("rl.override|"))
                .collect();
            subcommands.sort();
            assert_eq!(
                subcommands,
                [
                    "rl.override|del",
                    "rl.override|get",
                    "rl.override|help",
                    "rl.override|list",
                    "rl.override|set"
                ],
                "{flavor:?}: {listed:?}"
            );
            let (write, read) = (
                category(admin, "write").unwrap(),
                category(admin, "read").unwrap(),
            );
            for sub in ["set", "del"] {
                let c = format!("rl.override|{sub}");
                assert!(write.contains(&c) && !read.contains(&c), "{flavor:?}: {c}");
            }
            for sub in ["get", "list"] {
                let c = format!("rl.override|{sub}");
                assert!(read.contains(&c) && !write.contains(&c), "{flavor:?}: {c}");
            }
            set_user(admin, "rlonly", &["~*", "+@ratelimit"]);
            set_user(admin, "norl", &["~*", "+@all", "-@ratelimit"]);
            let (mut rlonly, mut norl) = (user_conn(server, "rlonly"), user_conn(server, "norl"));
            for args in [&get[..], &list, &del, &set] {
                assert_allowed(&mut rlonly, args);
                assert_noperm(&mut norl, args);
            }
        }
    });
}

/// Every okey `list` (a LIST command up to its cursor, e.g. `["RL.OVERRIDE",
/// "LIST"]`) returns from cursor 0 back to 0, a key at a time.
fn listed(con: &mut redis::Connection, list: &[&str]) -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::new();
    let mut cursor = "0".to_string();
    loop {
        let args = [list, &[cursor.as_str(), "COUNT", "1"]].concat();
        let reply = cmd(con, &args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        let (next, found) = list_page(&reply);
        names.extend(found);
        cursor = next;
        if cursor == "0" {
            return names;
        }
    }
}

/// A LIST reply's next cursor and the okeys it lists.
fn list_page(reply: &Value) -> (String, Vec<String>) {
    let Value::Array(parts) = reply else {
        panic!("{reply:?}")
    };
    let cursor: String = redis::from_redis_value(&parts[0]).unwrap();
    let Value::Array(entries) = &parts[1] else {
        panic!("{parts:?}")
    };
    (
        cursor,
        entries.iter().map(|e| strings(e)[0].clone()).collect(),
    )
}

/// `RL.OVERRIDE LIST` finds its keys with SCAN, which declares none, so
/// the server checks none: the module checks each with the server's own
/// key-permission check (read access) and lists only those the caller may
/// read, in both spellings, in MULTI and from a script (which runs as its
/// caller), selectors included. Regression: a `~t1:*` user could not `GET t2:secret` but saw
/// it, limit and window, in `LIST 0`.
#[test]
fn override_list_shows_only_the_overrides_the_caller_may_read() {
    on_each_server(|server, admin| {
        let flavor = server.flavor;
        for okey in ["t1:a", "t1:b", "t2:secret", "t2:other"] {
            ok(admin, &["RL.OVERRIDE.SET", okey, "5", "1h"]);
        }
        // Other strings are never listed, readable or not.
        ok(admin, &["SET", "t1:plain", "x"]);
        set_user(admin, "t1", &["~t1:*", "+@all"]);
        set_user(admin, "t1reader", &["%R~t1:*", "%W~t2:*", "+@all"]);
        set_user(
            admin,
            "secret",
            &[
                "~t2:secret",
                "+rl.override|list",
                "+rl.override.list",
                "+multi",
                "+exec",
            ],
        );
        // A selector that may read one more key, with its own commands:
        // the server's key check asks whether any selector may read a key.
        set_user(
            admin,
            "selector",
            &[
                "~t1:*",
                "+@all",
                "(%R~t2:secret +rl.override|get +rl.override.get)",
            ],
        );
        let set = |names: &[&str]| -> std::collections::BTreeSet<String> {
            names.iter().map(|n| n.to_string()).collect()
        };
        let container = ["RL.OVERRIDE", "LIST"];
        let dotted = ["RL.OVERRIDE.LIST"];
        let everything = set(&["t1:a", "t1:b", "t2:secret", "t2:other"]);
        assert_eq!(listed(admin, &container), everything, "{flavor:?}");
        assert_eq!(listed(admin, &dotted), everything, "{flavor:?}");
        for (user, want) in [
            ("t1", set(&["t1:a", "t1:b"])),
            // Write-only keys are not readable: not listed.
            ("t1reader", set(&["t1:a", "t1:b"])),
            ("secret", set(&["t2:secret"])),
            ("selector", set(&["t1:a", "t1:b", "t2:secret"])),
        ] {
            let mut con = user_conn(server, user);
            let log_before = cmd(admin, &["ACL", "LOG"]).map(|v| strings(&v).len());
            let auth_before = info_field(admin, "commandstats", "cmdstat_auth");
            for form in [&container[..], &dotted] {
                assert_eq!(listed(&mut con, form), want, "{flavor:?} {user} {form:?}");
            }
            // One page holding every override: the unreadable ones are
            // left out of it, not replaced.
            let (_, page) =
                list_page(&cmd(&mut con, &["RL.OVERRIDE", "LIST", "0", "COUNT", "1000"]).unwrap());
            assert_eq!(page.len(), want.len(), "{flavor:?} {user}: {page:?}");
            // MULTI, and a script, which runs as its caller.
            let Value::Array(exec) = redis::pipe()
                .atomic()
                .cmd("RL.OVERRIDE")
                .arg("LIST")
                .arg(0)
                .arg("COUNT")
                .arg(1000)
                .query::<Value>(&mut con)
                .unwrap()
            else {
                panic!("EXEC")
            };
            assert_eq!(
                list_page(&exec[0]).1.len(),
                want.len(),
                "{flavor:?} {user}: MULTI"
            );
            if user != "secret" {
                for script in [
                    "return redis.call('RL.OVERRIDE', 'LIST', '0', 'COUNT', '1000')",
                    "return redis.call('RL.OVERRIDE.LIST', '0', 'COUNT', '1000')",
                ] {
                    let reply = cmd(&mut con, &["EVAL", script, "0"]).unwrap();
                    let got: std::collections::BTreeSet<String> =
                        list_page(&reply).1.into_iter().collect();
                    assert_eq!(got, want, "{flavor:?} {user}: {script}");
                }
            }
            // The check leaves no trace: no ACL LOG entry, no AUTH counted.
            assert_eq!(
                cmd(admin, &["ACL", "LOG"]).map(|v| strings(&v).len()),
                log_before
            );
            assert_eq!(
                info_field(admin, "commandstats", "cmdstat_auth"),
                auth_before
            );
            // What was left out stays out of reach otherwise too.
            if user == "t1" || user == "selector" {
                assert_noperm(&mut con, &["RL.OVERRIDE", "GET", "t2:other"]);
                assert_noperm(&mut con, &["RL.OVERRIDE.GET", "t2:other"]);
            }
            if user == "t1" {
                assert_noperm(&mut con, &["RL.OVERRIDE", "GET", "t2:secret"]);
                assert_noperm(&mut con, &["RL.OVERRIDE.GET", "t2:secret"]);
            }
            // What is listed can be read by some command the user has.
            if user == "selector" {
                assert_allowed(&mut con, &["RL.OVERRIDE", "GET", "t2:secret"]);
                assert_allowed(&mut con, &["RL.OVERRIDE.GET", "t2:secret"]);
            }
        }
        // A script run by an unrestricted user lists everything.
        let reply = cmd(
            admin,
            &[
                "EVAL",
                "return redis.call('RL.OVERRIDE', 'LIST', '0', 'COUNT', '1000')",
                "0",
            ],
        )
        .unwrap();
        assert_eq!(list_page(&reply).1.len(), everything.len(), "{flavor:?}");
    });
}
