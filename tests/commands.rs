//! Command metadata: flags, key specs and docs that clients, cluster
//! routing and ACLs rely on.

mod common;

use common::*;
use redis::Value;

const LIMITERS: [&str; 2] = ["RL.FIXED", "RL.TOKEN"];

fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::Array(items) | Value::Set(items) => items.iter().flat_map(strings).collect(),
        Value::BulkString(b) => vec![String::from_utf8_lossy(b).into_owned()],
        Value::SimpleString(s) => vec![s.clone()],
        Value::Int(i) => vec![i.to_string()],
        Value::Map(pairs) => pairs
            .iter()
            .flat_map(|(k, v)| [strings(k), strings(v)].concat())
            .collect(),
        _ => vec![],
    }
}

#[test]
fn getkeys_reports_key_and_override_key() {
    on_each_server(|_, con| {
        let keys = cmd(
            con,
            &[
                "COMMAND", "GETKEYS", "RL.FIXED", "k", "10", "60", "OVERRIDE", "o",
            ],
        )
        .unwrap();
        assert_eq!(strings(&keys), ["k", "o"]);
        let keys = cmd(
            con,
            &[
                "COMMAND", "GETKEYS", "RL.FIXED", "k", "10", "60", "COST", "2", "PEEK",
            ],
        )
        .unwrap();
        assert_eq!(strings(&keys), ["k"]);
    });
}

#[test]
fn registered_as_write_denyoom_fast() {
    on_each_server(|_, con| {
        let info = strings(&cmd(con, &["COMMAND", "INFO", "RL.FIXED"]).unwrap());
        for flag in ["write", "denyoom", "fast"] {
            assert!(
                info.iter().any(|f| f == flag),
                "{flag} missing from {info:?}"
            );
        }
        assert!(
            info.iter().any(|f| f == "-4"),
            "arity -4 missing from {info:?}"
        );
    });
}

#[test]
fn docs_show_summary_complexity_and_arguments() {
    on_each_server(|_, con| {
        let docs = strings(&cmd(con, &["COMMAND", "DOCS", "RL.FIXED"]).unwrap());
        for want in [
            "summary",
            "complexity",
            "O(1)",
            "arguments",
            "key",
            "limit",
            "window",
            "ALIGNED",
            "COST",
            "OVERRIDE",
            "PEEK",
        ] {
            assert!(
                docs.iter().any(|d| d == want),
                "{want} missing from {docs:?}"
            );
        }
    });
}

#[test]
fn wrong_arity_is_refused_by_the_server() {
    on_each_server(|_, con| {
        for args in [
            &["RL.FIXED"][..],
            &["RL.FIXED", "k"],
            &["RL.FIXED", "k", "10"],
        ] {
            let err = cmd(con, args).unwrap_err();
            assert!(err.starts_with("ERR wrong number of arguments"), "{err}");
        }
    });
}
