//! Command metadata: flags, key specs and docs that clients, cluster
//! routing and ACLs rely on.

mod common;

use common::*;

const LIMITERS: [&str; 3] = ["RL.FIXED", "RL.SLIDING", "RL.TOKEN"];

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

#[test]
fn registered_as_write_denyoom_fast() {
    on_each_server(|_, con| {
        for command in LIMITERS {
            let info = strings(&cmd(con, &["COMMAND", "INFO", command]).unwrap());
            for want in ["write", "denyoom", "fast", "-4"] {
                assert!(info.iter().any(|f| f == want), "{want} missing: {info:?}");
            }
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
            "window",
            "COST",
            "OVERRIDE",
            "PEEK",
        ];
        for (command, own) in [
            ("RL.FIXED", ["limit", "ALIGNED"]),
            ("RL.SLIDING", ["limit", "APPROX"]),
            ("RL.TOKEN", ["rate", "BURST"]),
        ] {
            let docs = strings(&cmd(con, &["COMMAND", "DOCS", command]).unwrap());
            for want in shared.iter().chain(&own) {
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
