//! Command metadata: flags, key specs and docs that clients, cluster
//! routing and ACLs rely on.

mod common;

use common::*;
use redis::Value;

const LIMITERS: [&str; 4] = ["RL.FIXED", "RL.SLIDING", "RL.TOKEN", "RL.CONCURRENT"];

#[test]
fn getkeys_reports_key_and_override_key() {
    on_each_server(|_, con| {
        for command in LIMITERS {
            let with_override = [
                "COMMAND", "GETKEYS", command, "k", "10", "60", "OVERRIDE", "o",
            ];
            assert_eq!(strings(&cmd(con, &with_override).unwrap()), ["k", "o"]);
            let without = [
                "COMMAND", "GETKEYS", command, "k", "10", "60", "COST", "2", "PEEK",
            ];
            assert_eq!(strings(&cmd(con, &without).unwrap()), ["k"]);
        }
    });
}

/// Without `denyoom`: above `maxmemory` the module itself refuses only the
/// calls that would add to the dataset (docs/memory.md).
#[test]
fn registered_as_write_fast_without_denyoom() {
    on_each_server(|_, con| {
        for command in LIMITERS.iter().chain(&["RL.ALL"]) {
            let info = strings(&cmd(con, &["COMMAND", "INFO", command]).unwrap());
            for want in ["write", "fast"] {
                assert!(info.iter().any(|f| f == want), "{want} missing: {info:?}");
            }
            assert!(!info.iter().any(|f| f == "denyoom"), "{info:?}");
        }
        for command in LIMITERS {
            let info = strings(&cmd(con, &["COMMAND", "INFO", command]).unwrap());
            assert!(info.iter().any(|f| f == "-4"), "{info:?}");
        }
    });
}

#[test]
fn docs_show_summary_complexity_and_arguments() {
    on_each_server(|_, con| {
        let shared = [
            "summary",
            "complexity",
            "arguments",
            "key",
            "COST",
            "OVERRIDE",
            "PEEK",
        ];
        for (command, own) in [
            ("RL.FIXED", &["limit", "window", "ALIGNED"][..]),
            ("RL.SLIDING", &["limit", "window", "APPROX"]),
            ("RL.TOKEN", &["rate", "window", "BURST"]),
            ("RL.CONCURRENT", &["limit", "lease", "RELEASE", "RENEW"]),
        ] {
            let docs = strings(&cmd(con, &["COMMAND", "DOCS", command]).unwrap());
            for want in shared.iter().chain(own) {
                assert!(docs.iter().any(|d| d == want), "{want} missing: {docs:?}");
            }
        }
    });
}

#[test]
fn wrong_arity_is_refused_by_the_server() {
    on_each_server(|_, con| {
        for command in LIMITERS {
            for args in [&[command][..], &[command, "k"], &[command, "k", "10"]] {
                let err = cmd(con, args).unwrap_err();
                assert!(err.starts_with("ERR wrong number of arguments"), "{err}");
            }
        }
    });
}

/// `COMMAND INFO name`'s entry: name, arity, flags, first, last, step, ACL
/// categories, tips, key specs, subcommands.
fn command_info(con: &mut redis::Connection, name: &str) -> Vec<Value> {
    match cmd(con, &["COMMAND", "INFO", name]) {
        Ok(Value::Array(mut entries)) if entries.len() == 1 => match entries.remove(0) {
            Value::Array(entry) => entry,
            other => panic!("COMMAND INFO {name}: {other:?}"),
        },
        other => panic!("COMMAND INFO {name}: {other:?}"),
    }
}

fn sorted(mut items: Vec<String>) -> Vec<String> {
    items.sort();
    items
}

/// docs/commands.md, Commands: RL.OVERRIDE is a container command. COMMAND INFO lists
/// `rl.override|set`, `|get`, `|del` and `|list` as its subcommands, each
/// with the flags, ACL categories and key-spec flags of its dotted alias
/// (SET and DEL write, GET and LIST read-only); COMMAND DOCS gives each a
/// summary, complexity and arguments; COMMAND GETKEYS finds each one's
/// okeys where they stand.
#[test]
fn override_container_lists_subcommands_with_flags_keys_and_docs() {
    on_each_server(|server, con| {
        let flavor = server.flavor;
        let container = command_info(con, "RL.OVERRIDE");
        assert!(
            strings(&container[0])
                .concat()
                .eq_ignore_ascii_case("rl.override"),
            "{flavor:?}: {container:?}"
        );
        let Some(Value::Array(subcommands)) = container.get(9) else {
            panic!("{flavor:?}: RL.OVERRIDE has no subcommands: {container:?}");
        };
        let mut names: Vec<String> = Vec::new();
        for entry in subcommands {
            let Value::Array(entry) = entry else {
                panic!("{entry:?}")
            };
            let name = strings(&entry[0]).concat().to_lowercase();
            let sub = name
                .strip_prefix("rl.override|")
                .unwrap_or_else(|| panic!("{flavor:?}: {name} is not an rl.override subcommand"));
            if sub == "help" {
                // HELP has no dotted alias: read-only, no keys.
                let flags = sorted(strings(&entry[2]));
                assert!(
                    flags.iter().any(|f| f == "readonly"),
                    "{flavor:?}: {flags:?}"
                );
                names.push(name);
                continue;
            }
            let dotted = command_info(con, &format!("RL.OVERRIDE.{sub}"));
            let flags = sorted(strings(&entry[2]));
            assert_eq!(
                flags,
                sorted(strings(&dotted[2])),
                "{flavor:?}: {name} flags"
            );
            let (write, readonly) = (
                flags.iter().any(|f| f == "write"),
                flags.iter().any(|f| f == "readonly"),
            );
            match sub {
                "set" | "del" => assert!(write && !readonly, "{flavor:?} {name}: {flags:?}"),
                "get" | "list" => assert!(readonly && !write, "{flavor:?} {name}: {flags:?}"),
                other => panic!("{flavor:?}: unexpected subcommand {other}"),
            }
            assert_eq!(
                sorted(strings(&entry[6])),
                sorted(strings(&dotted[6])),
                "{flavor:?}: {name} ACL categories"
            );
            // Key specs: the same access flags (their positions are one
            // further on, after the subcommand's name).
            let spec_flags = |v: &Value| -> Vec<Vec<String>> {
                let Value::Array(specs) = v else {
                    return vec![];
                };
                specs
                    .iter()
                    .map(|spec| {
                        let words = strings(spec);
                        let at = words.iter().position(|w| w == "flags");
                        let after = at.map(|i| &words[i + 1..]).unwrap_or(&[]);
                        let end = after
                            .iter()
                            .position(|w| w == "begin_search")
                            .unwrap_or(after.len());
                        sorted(after[..end].to_vec())
                    })
                    .collect()
            };
            assert_eq!(
                spec_flags(&entry[8]),
                spec_flags(&dotted[8]),
                "{flavor:?}: {name} key specs"
            );
            names.push(name);
        }
        assert_eq!(
            sorted(names),
            [
                "rl.override|del",
                "rl.override|get",
                "rl.override|help",
                "rl.override|list",
                "rl.override|set"
            ],
            "{flavor:?}"
        );

        let docs = cmd(con, &["COMMAND", "DOCS", "RL.OVERRIDE"]).unwrap();
        let words = strings(&docs);
        assert!(words.iter().any(|w| w == "subcommands"), "{words:?}");
        for (sub, arguments) in [
            ("set", &["okey", "limit", "window", "BURST", "TTL"][..]),
            ("get", &["okey"]),
            ("del", &["okey"]),
            ("list", &["cursor", "MATCH", "COUNT"]),
        ] {
            let at = words
                .iter()
                .position(|w| w.eq_ignore_ascii_case(&format!("rl.override|{sub}")))
                .unwrap_or_else(|| panic!("{flavor:?}: no docs for rl.override|{sub}: {words:?}"));
            let end = words[at + 1..]
                .iter()
                .position(|w| w.to_lowercase().starts_with("rl.override|"))
                .map_or(words.len(), |n| at + 1 + n);
            let own = &words[at..end];
            for want in ["summary", "complexity", "arguments"]
                .iter()
                .chain(arguments)
            {
                assert!(
                    own.iter().any(|w| w == want),
                    "{flavor:?}: rl.override|{sub} docs lack {want}: {own:?}"
                );
            }
        }

        let getkeys = |con: &mut redis::Connection, args: &[&str]| {
            let mut full = vec!["COMMAND", "GETKEYS", "RL.OVERRIDE"];
            full.extend(args);
            cmd(con, &full).map(|v| strings(&v))
        };
        assert_eq!(
            getkeys(con, &["SET", "okey", "5", "60"]),
            Ok(vec!["okey".into()])
        );
        assert_eq!(
            getkeys(con, &["set", "o", "5", "60", "BURST", "2", "TTL", "1h"]),
            Ok(vec!["o".into()])
        );
        assert_eq!(getkeys(con, &["GET", "o"]), Ok(vec!["o".into()]));
        assert_eq!(
            getkeys(con, &["Del", "a", "b", "c"]),
            Ok(["a", "b", "c"].map(String::from).to_vec())
        );
        // LIST has no keys, as RL.OVERRIDE.LIST has none.
        assert_eq!(
            getkeys(con, &["LIST", "0"]),
            cmd(con, &["COMMAND", "GETKEYS", "RL.OVERRIDE.LIST", "0"]).map(|v| strings(&v)),
            "{flavor:?}"
        );
    });
}
