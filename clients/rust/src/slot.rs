//! Redis Cluster key slots (CRC16/XMODEM of the key's hash tag, mod 16384)
//! and where a command goes.

use crate::args::ArgError;

pub const SLOTS: u16 = 16384;

/// The slot of `key`: its hash tag (the bytes between the first `{` and the
/// next `}`, when not empty) decides, else the whole key.
pub fn slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key).unwrap_or(key)) % SLOTS
}

fn hash_tag(key: &[u8]) -> Option<&[u8]> {
    let open = key.iter().position(|&b| b == b'{')?;
    let rest = &key[open + 1..];
    let close = rest.iter().position(|&b| b == b'}')?;
    (close > 0).then(|| &rest[..close])
}

/// CRC16/XMODEM (polynomial 0x1021, initial 0), as Redis Cluster uses.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// Where a command goes in a cluster. A standalone connection ignores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// The primary owning this slot (every limiter and override command).
    Slot(u16),
    /// Any primary (`RL.OVERRIDE LIST` when no node is named).
    AnyPrimary,
    /// This node (`RL.OVERRIDE LIST` of one node).
    Node { host: String, port: u16 },
}

impl Target {
    /// The routing redis-rs's cluster clients take.
    pub fn routing_info(&self) -> redis::cluster_routing::RoutingInfo {
        use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
        RoutingInfo::SingleNode(match self {
            Target::Slot(slot) => {
                SingleNodeRoutingInfo::SpecificNode(Route::new(*slot, SlotAddr::Master))
            }
            Target::AnyPrimary => SingleNodeRoutingInfo::RandomPrimary,
            Target::Node { host, port } => SingleNodeRoutingInfo::ByAddress {
                host: host.clone(),
                port: *port,
            },
        })
    }
}

/// The one slot all `keys` hash to (`keys` is not empty), or an error that
/// names two keys that differ and says how to make them meet.
pub(crate) fn common_slot(command: &str, keys: &[&[u8]]) -> Result<u16, ArgError> {
    let first = keys.first().copied().unwrap_or_default();
    let want = slot(first);
    match keys.iter().find(|k| slot(k) != want) {
        None => Ok(want),
        Some(other) => Err(ArgError::new(format!(
            "{command}: keys '{}' (slot {want}) and '{}' (slot {}) are in different \
             cluster slots; give every key of one call the same hash tag, e.g. \
             '{{user:42}}:minute' and '{{user:42}}:day'",
            first.escape_ascii(),
            other.escape_ascii(),
            slot(other)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::cluster_routing::{Route, SlotAddr};

    #[test]
    fn crc16_matches_the_cluster_specification() {
        // The Redis Cluster specification's check value.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"bar"), 5061);
    }

    #[test]
    fn hash_tags_follow_the_first_brace_pair() {
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
        assert_eq!(slot(b"foo{}{bar}"), slot(b"foo{}{bar}"));
        assert_ne!(
            slot(b"foo{}{bar}"),
            slot(b"bar"),
            "an empty tag hashes the key"
        );
        assert_eq!(slot(b"foo{{bar}}zap"), slot(b"{bar"));
        assert_eq!(slot(b"foo{bar}{zap}"), slot(b"bar"));
        assert_eq!(slot(b"no close {brace"), crc16(b"no close {brace") % SLOTS);
    }

    #[test]
    fn agrees_with_redis_rs() {
        for key in [
            &b"rl:{ip:203.0.113.7}:minute"[..],
            b"a",
            b"{}",
            b"{",
            b"}{x}",
            b"\xff\x00{\x01}",
            b"",
        ] {
            assert_eq!(
                Route::new(slot(key), SlotAddr::Master),
                Route::with_key(key, SlotAddr::Master),
                "{}",
                key.escape_ascii()
            );
        }
    }

    #[test]
    fn common_slot_suggests_a_hash_tag() {
        assert_eq!(common_slot("RL.ALL", &[b"{u}:a", b"{u}:b"]), Ok(slot(b"u")));
        let err = common_slot("RL.ALL", &[b"a", b"a", b"b"]).unwrap_err();
        assert!(err.message().contains("'a' (slot 15495) and 'b'"), "{err}");
        assert!(err.message().contains("hash tag"), "{err}");
    }
}
