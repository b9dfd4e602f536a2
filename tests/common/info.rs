//! What a server says about itself: INFO fields, the `INFO rl` counters,
//! the `rl.mode` config, loaded modules, and its clock.

use super::{cmd, error_line};
use redis::Value;
use std::collections::BTreeMap;

pub fn info_field(con: &mut redis::Connection, section: &str, field: &str) -> String {
    let info: String = redis::cmd("INFO").arg(section).query(con).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_default()
        .trim()
        .to_string()
}

pub fn info_i64(con: &mut redis::Connection, section: &str, field: &str) -> i64 {
    let value = info_field(con, section, field);
    value
        .parse()
        .unwrap_or_else(|_| panic!("INFO {section} {field} is {value:?}"))
}

/// The commands `INFO rl` counts, by their field names.
pub const COUNTED: [&str; 9] = [
    "fixed",
    "sliding",
    "token",
    "concurrent",
    "all",
    "override_set",
    "override_get",
    "override_del",
    "override_list",
];

/// `oom_refused`: calls refused above `maxmemory` because they would have
/// added to the dataset (docs/memory.md).
const LIMITER_COUNTERS: [&str; 6] = [
    "calls",
    "allowed",
    "denied",
    "monitor_would_deny",
    "errors",
    "oom_refused",
];
const OVERRIDE_COUNTERS: [&str; 2] = ["calls", "errors"];

/// Counters of a request's whole life, over all commands: refunds that
/// gave something back, denials that started a block, calls denied because
/// a block was in force, admitted RESERVE or WAIT calls that must wait,
/// WAIT calls whose reply the server held, and leases released and
/// renewed.
pub const LIFE_COUNTERS: [&str; 7] = [
    "rl_refunds",
    "rl_blocks_started",
    "rl_denied_by_block",
    "rl_reservations",
    "rl_waits",
    "rl_releases",
    "rl_renewals",
];

/// Error replies by class, all commands together: `rl_errors_<class>`.
pub const ERROR_CLASSES: [&str; 7] = [
    "argument",
    "wrongtype",
    "oom",
    "newer_version",
    "corrupt",
    "internal",
    "slot_moved",
];

/// Calls replayed from the replication link or the AOF that librl
/// refused, and the gauges of clients waiting in WAIT.
pub const NODE_FIELDS: [&str; 4] = [
    "rl_replayed_refused",
    "rl_clients_waiting",
    "rl_token_waiting",
    "rl_concurrent_waiting",
];

/// Every counter and gauge of `INFO rl`, checking that each is a plain
/// `name:integer` line and that exactly the expected fields are there.
pub fn counters(con: &mut redis::Connection) -> BTreeMap<String, i64> {
    let info: String = redis::cmd("INFO").arg("rl").query(con).unwrap();
    let mut found = BTreeMap::new();
    let mut mode = None;
    for line in info.lines() {
        let line = line.trim_end_matches('\r');
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, value) = line
            .split_once(':')
            .unwrap_or_else(|| panic!("not a field: {line:?}"));
        if name == "rl_mode" {
            mode = Some(value.to_string());
            continue;
        }
        assert!(
            name.bytes().all(|c| c.is_ascii_lowercase() || c == b'_'),
            "{line:?}"
        );
        let value: i64 = value
            .parse()
            .unwrap_or_else(|_| panic!("not a plain integer: {line:?}"));
        assert!(value >= 0, "{line:?}");
        assert!(found.insert(name.to_string(), value).is_none(), "{line:?}");
    }
    assert!(mode.is_some(), "no rl_mode in {info}");
    let mut expected: Vec<String> = Vec::new();
    for command in COUNTED {
        let names: &[&str] = if command.starts_with("override") {
            &OVERRIDE_COUNTERS
        } else {
            &LIMITER_COUNTERS
        };
        expected.extend(names.iter().map(|c| format!("rl_{command}_{c}")));
    }
    expected.extend(LIFE_COUNTERS.map(String::from));
    expected.extend(ERROR_CLASSES.map(|c| format!("rl_errors_{c}")));
    expected.extend(NODE_FIELDS.map(String::from));
    expected.sort();
    assert_eq!(
        found.keys().cloned().collect::<Vec<_>>(),
        expected,
        "INFO rl fields"
    );
    found
}

pub fn all_zero(counters: &BTreeMap<String, i64>) -> bool {
    counters.values().all(|&v| v == 0)
}

/// `CONFIG GET rl.mode`.
pub fn config_mode(con: &mut redis::Connection) -> String {
    let pair: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("rl.mode")
        .query(con)
        .unwrap();
    assert_eq!(pair.len(), 2, "CONFIG GET rl.mode: {pair:?}");
    assert_eq!(pair[0], "rl.mode");
    pair[1].clone()
}

/// `CONFIG SET rl.mode mode`, which must succeed.
pub fn set_mode(con: &mut redis::Connection, mode: &str) {
    cmd(con, &["CONFIG", "SET", "rl.mode", mode]).unwrap_or_else(|e| panic!("{mode}: {e}"));
}

/// The names in `MODULE LIST`.
pub fn module_names(con: &mut redis::Connection) -> Vec<String> {
    let modules: Vec<Vec<Value>> = redis::cmd("MODULE")
        .arg("LIST")
        .query(con)
        .unwrap_or_else(|e| panic!("MODULE LIST: {}", error_line(&e)));
    modules
        .iter()
        .filter_map(|fields| {
            fields.chunks(2).find_map(|pair| match pair {
                [Value::BulkString(k), Value::BulkString(v)] if k == b"name" => {
                    Some(String::from_utf8_lossy(v).into_owned())
                }
                _ => None,
            })
        })
        .collect()
}

/// The server's clock (`TIME`) in Unix milliseconds.
pub fn server_ms(con: &mut redis::Connection) -> i64 {
    let t: Vec<i64> = redis::cmd("TIME").query(con).unwrap();
    t[0] * 1000 + t[1] / 1000
}

/// This machine's wall clock in Unix milliseconds, which the servers on
/// loopback read too.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Aligned windows that do not end within the next ten minutes (by the
/// server's clock), so that no aligned window rolls over during a test.
pub fn aligned_windows(con: &mut redis::Connection) -> Vec<&'static str> {
    let now = server_ms(con);
    let windows: Vec<&str> = [
        ("1h", 3_600_000i64),
        ("1d", 86_400_000),
        ("7d", 7 * 86_400_000),
        ("365d", 365 * 86_400_000),
        ("3650d", 3650 * 86_400_000),
    ]
    .into_iter()
    .filter(|&(_, ms)| ms - now % ms > 600_000)
    .map(|(name, _)| name)
    .collect();
    assert!(!windows.is_empty(), "no aligned window is safe at {now}");
    windows
}
