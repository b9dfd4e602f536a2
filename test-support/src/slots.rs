//! Moving a slot between two primaries while a test calls into it, the two
//! ways operators do: key by key (`redis-cli --cluster reshard`: IMPORTING
//! and MIGRATING, then MIGRATE in batches, then SETSLOT NODE), during which
//! calls meet `ASK` and `TRYAGAIN`; or atomically (Valkey 9's `CLUSTER
//! MIGRATESLOTS`), during which the source keeps serving the slot until the
//! target takes it whole. Spoken in plain RESP, like the rest of the crate.

use crate::{command, Reply};
use std::time::{Duration, Instant};

/// A primary as the mover addresses it: its port and `CLUSTER MYID`.
#[derive(Clone, Copy, Debug)]
pub struct Node<'a> {
    pub port: u16,
    pub id: &'a str,
}

/// How a slot moves.
#[derive(Clone, Copy, Debug)]
pub enum SlotMove {
    /// Key by key, as `redis-cli --cluster reshard` does: `batch` keys per
    /// `MIGRATE`, `pause` after each, so that a populated slot takes as
    /// long to move as a test needs to watch calls meet the move.
    Keys { batch: usize, pause: Duration },
    /// `CLUSTER MIGRATESLOTS` (Valkey 9): the slot's keys and the writes
    /// made to them meanwhile are streamed to the target, which takes the
    /// slot in one step.
    Atomic,
}

/// What a move did, and when.
#[derive(Clone, Copy, Debug)]
pub struct Moved {
    /// Keys carried by `MIGRATE` (0 for an atomic move).
    pub keys: usize,
    /// `MIGRATE` calls made (0 for an atomic move).
    pub batches: usize,
    /// When the slot became half-moved: the source answered `MIGRATING`
    /// (for an atomic move, when `CLUSTER MIGRATESLOTS` was sent).
    pub opened: Instant,
    /// When it stopped being half-moved: just before the target was told
    /// it owns the slot (for an atomic move, when the target first named
    /// itself the owner).
    pub closed: Instant,
    /// When every node named the target as the owner.
    pub finished: Instant,
}

const T: Duration = Duration::from_secs(10);

/// Sends one command to `port` and panics, naming it, unless the reply is
/// not an error.
fn must(port: u16, args: &[&str]) -> Reply {
    match command(port, args, T) {
        Ok(Reply::Error(e)) => panic!("{args:?} on {port}: {e}"),
        Ok(reply) => reply,
        Err(e) => panic!("{args:?} on {port}: {e}"),
    }
}

/// Moves `slot` from `source` to `target`, telling every node in `all`
/// (their ports, source and target included) the new owner; returns once
/// each of them names the target as the slot's owner in `CLUSTER SLOTS`.
/// Panics if any step fails.
pub fn move_slot(slot: u16, source: Node, target: Node, all: &[u16], how: SlotMove) -> Moved {
    let slot_arg = slot.to_string();
    let (mut keys_moved, mut batches) = (0, 0);
    let (opened, closed) = match how {
        SlotMove::Keys { batch, pause } => {
            let setslot = |node: Node, state: &str, id: &str| {
                must(node.port, &["CLUSTER", "SETSLOT", &slot_arg, state, id]);
            };
            // The order redis-cli follows: the target imports before the
            // source starts redirecting to it.
            setslot(target, "IMPORTING", source.id);
            setslot(source, "MIGRATING", target.id);
            let opened = Instant::now();
            let (target_port, count) = (target.port.to_string(), batch.max(1).to_string());
            loop {
                let keys = match must(
                    source.port,
                    &["CLUSTER", "GETKEYSINSLOT", &slot_arg, &count],
                ) {
                    Reply::Array(keys) => keys,
                    other => panic!("CLUSTER GETKEYSINSLOT: {other:?}"),
                };
                if keys.is_empty() {
                    break;
                }
                let names: Vec<&str> = keys
                    .iter()
                    .map(|k| match k {
                        Reply::Text(name) => name.as_str(),
                        other => panic!("CLUSTER GETKEYSINSLOT gave {other:?}"),
                    })
                    .collect();
                let mut migrate = vec!["MIGRATE", "127.0.0.1", &target_port, "", "0", "5000"];
                migrate.push("KEYS");
                migrate.extend(&names);
                must(source.port, &migrate);
                keys_moved += names.len();
                batches += 1;
                std::thread::sleep(pause);
            }
            // The target first, then the source, then the others, as the
            // cluster specification orders it.
            let closed = Instant::now();
            setslot(target, "NODE", target.id);
            setslot(source, "NODE", target.id);
            for &port in all {
                if port != source.port && port != target.port {
                    must(port, &["CLUSTER", "SETSLOT", &slot_arg, "NODE", target.id]);
                }
            }
            (opened, closed)
        }
        SlotMove::Atomic => {
            let opened = Instant::now();
            let range = ["SLOTSRANGE", &slot_arg, &slot_arg, "NODE", target.id];
            let mut migrate = vec!["CLUSTER", "MIGRATESLOTS"];
            migrate.extend(range);
            must(source.port, &migrate);
            wait_for_owner(slot, target.port, &[target.port]);
            (opened, Instant::now())
        }
    };
    wait_for_owner(slot, target.port, all);
    Moved {
        keys: keys_moved,
        batches,
        opened,
        closed,
        finished: Instant::now(),
    }
}

/// Waits until every node in `all` names the node on `owner` as the owner
/// of `slot` in `CLUSTER SLOTS`.
pub fn wait_for_owner(slot: u16, owner: u16, all: &[u16]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !all
        .iter()
        .all(|&port| slot_owner(port, slot) == Some(owner))
    {
        assert!(
            Instant::now() < deadline,
            "slot {slot} never moved to the node on {owner}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The port of the primary that the node on `port` says serves `slot`.
pub fn slot_owner(port: u16, slot: u16) -> Option<u16> {
    let Ok(Reply::Array(ranges)) = command(port, &["CLUSTER", "SLOTS"], T) else {
        return None;
    };
    let number = |r: Option<&Reply>| match r {
        Some(Reply::Text(n)) => n.parse::<u32>().ok(),
        _ => None,
    };
    ranges.iter().find_map(|range| {
        let Reply::Array(parts) = range else {
            return None;
        };
        let (from, to) = (number(parts.first())?, number(parts.get(1))?);
        if !(from..=to).contains(&u32::from(slot)) {
            return None;
        }
        let Some(Reply::Array(primary)) = parts.get(2) else {
            return None;
        };
        number(primary.get(1)).and_then(|p| u16::try_from(p).ok())
    })
}
