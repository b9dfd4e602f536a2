//! Builders for the override container command:
//!
//! ```text
//! RL.OVERRIDE SET  okey limit window [BURST capacity] [TTL duration]
//! RL.OVERRIDE GET  okey
//! RL.OVERRIDE DEL  okey [okey ...]
//! RL.OVERRIDE LIST cursor [MATCH pattern] [COUNT count]
//! ```
//!
//! The container form (not the dotted aliases) is what is sent. Its key is
//! the second argument, which redis-rs's cluster clients would not find by
//! themselves: these builders route by the override key's slot.

use redis::Cmd;

use crate::args::{amount, ms_word, ArgError, DurationArg};
use crate::reply::{Override, OverridePage};
use crate::slot::{common_slot, Target};
use crate::{Command, Effect, Prepared};

fn override_cmd(sub: &str) -> Cmd {
    let mut cmd = redis::cmd("RL.OVERRIDE");
    cmd.arg(sub);
    cmd
}

/// `RL.OVERRIDE SET okey limit window`: stores an override (replacing any).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OverrideSet {
    okey: Vec<u8>,
    limit: u64,
    window: DurationArg,
    burst: Option<u64>,
    ttl: Option<DurationArg>,
}

impl OverrideSet {
    pub fn new(okey: impl AsRef<[u8]>, limit: u64, window: impl Into<DurationArg>) -> OverrideSet {
        OverrideSet {
            okey: okey.as_ref().to_vec(),
            limit,
            window: window.into(),
            burst: None,
            ttl: None,
        }
    }

    /// The capacity TOKEN limiters get through this override.
    pub fn burst(mut self, capacity: u64) -> OverrideSet {
        self.burst = Some(capacity);
        self
    }

    /// The override is deleted after `ttl`; without it, it lives until deleted.
    pub fn ttl(mut self, ttl: impl Into<DurationArg>) -> OverrideSet {
        self.ttl = Some(ttl.into());
        self
    }
}

impl Command for OverrideSet {
    type Output = ();

    fn prepare(&self) -> Result<Prepared, ArgError> {
        let mut cmd = override_cmd("SET");
        cmd.arg(&self.okey[..])
            .arg(amount("limit", self.limit)?)
            .arg(ms_word(self.window.millis("window", false)?));
        if let Some(capacity) = self.burst {
            cmd.arg("BURST").arg(amount("BURST", capacity)?);
        }
        if let Some(ttl) = &self.ttl {
            cmd.arg("TTL").arg(ms_word(ttl.millis("TTL", false)?));
        }
        Ok(Prepared::for_key(cmd, &self.okey, Effect::ClearAll))
    }
}

/// `RL.OVERRIDE GET okey`: the override, or `None`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OverrideGet {
    okey: Vec<u8>,
}

impl OverrideGet {
    pub fn new(okey: impl AsRef<[u8]>) -> OverrideGet {
        OverrideGet {
            okey: okey.as_ref().to_vec(),
        }
    }
}

impl Command for OverrideGet {
    type Output = Option<Override>;

    fn prepare(&self) -> Result<Prepared, ArgError> {
        let mut cmd = override_cmd("GET");
        cmd.arg(&self.okey[..]);
        Ok(Prepared::for_key(cmd, &self.okey, Effect::None))
    }
}

/// `RL.OVERRIDE DEL okey [okey ...]`: how many overrides were deleted. In a
/// cluster the keys of one call must share a slot.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OverrideDel {
    okeys: Vec<Vec<u8>>,
}

impl OverrideDel {
    pub fn new<K: AsRef<[u8]>>(okeys: impl IntoIterator<Item = K>) -> OverrideDel {
        OverrideDel {
            okeys: okeys.into_iter().map(|k| k.as_ref().to_vec()).collect(),
        }
    }
}

impl Command for OverrideDel {
    type Output = u64;

    fn prepare(&self) -> Result<Prepared, ArgError> {
        if self.okeys.is_empty() {
            return Err(ArgError::new("RL.OVERRIDE DEL needs at least one okey"));
        }
        let mut cmd = override_cmd("DEL");
        for okey in &self.okeys {
            cmd.arg(&okey[..]);
        }
        let keys: Vec<&[u8]> = self.okeys.iter().map(Vec::as_slice).collect();
        Ok(Prepared {
            cmd,
            target: common_slot("RL.OVERRIDE DEL", &keys).map(Target::Slot),
            effect: Effect::ClearAll,
            keys: Vec::new(),
            held_ms: None,
        })
    }
}

/// `RL.OVERRIDE LIST cursor`: one page of one node's overrides, SCAN-style
/// (start at 0, stop when the returned cursor is 0). In a cluster, name the
/// node with [`OverrideList::node`]; without it the page comes from any
/// primary, which only makes sense with a single shard.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OverrideList {
    cursor: u64,
    pattern: Option<Vec<u8>>,
    count: Option<u64>,
    node: Option<(String, u16)>,
}

impl OverrideList {
    pub fn new(cursor: u64) -> OverrideList {
        OverrideList {
            cursor,
            pattern: None,
            count: None,
            node: None,
        }
    }

    /// Only override keys matching this glob pattern (`MATCH`).
    pub fn pattern(mut self, pattern: impl AsRef<[u8]>) -> OverrideList {
        self.pattern = Some(pattern.as_ref().to_vec());
        self
    }

    /// About how many keys to look at for this page (`COUNT`).
    pub fn count(mut self, count: u64) -> OverrideList {
        self.count = Some(count);
        self
    }

    /// The cluster node to list (a standalone connection ignores it).
    pub fn node(mut self, host: impl Into<String>, port: u16) -> OverrideList {
        self.node = Some((host.into(), port));
        self
    }
}

impl Command for OverrideList {
    type Output = OverridePage;

    fn prepare(&self) -> Result<Prepared, ArgError> {
        let mut cmd = override_cmd("LIST");
        cmd.arg(self.cursor);
        if let Some(pattern) = &self.pattern {
            cmd.arg("MATCH").arg(&pattern[..]);
        }
        if let Some(count) = self.count {
            cmd.arg("COUNT").arg(amount("COUNT", count)?);
        }
        let target = match &self.node {
            Some((host, port)) => Target::Node {
                host: host.clone(),
                port: *port,
            },
            None => Target::AnyPrimary,
        };
        Ok(Prepared {
            cmd,
            target: Ok(target),
            effect: Effect::None,
            keys: Vec::new(),
            held_ms: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slot::slot;
    use std::time::Duration;

    use crate::argv_text as argv;

    #[test]
    fn set_argv() {
        assert_eq!(
            argv(&OverrideSet::new("o", 100, "1m")),
            ["RL.OVERRIDE", "SET", "o", "100", "60000ms"]
        );
        assert_eq!(
            argv(
                &OverrideSet::new("o", 100, Duration::from_secs(1))
                    .burst(300)
                    .ttl("1d")
            ),
            [
                "RL.OVERRIDE",
                "SET",
                "o",
                "100",
                "1000ms",
                "BURST",
                "300",
                "TTL",
                "86400000ms"
            ]
        );
        let err = OverrideSet::new("o", 1, "1s")
            .ttl(Duration::ZERO)
            .prepare()
            .unwrap_err();
        assert!(err.message().starts_with("TTL must be"), "{err}");
        assert!(OverrideSet::new("o", 0, "1s").prepare().is_err());
        assert!(OverrideSet::new("o", 1, "1s").burst(0).prepare().is_err());
    }

    #[test]
    fn get_del_list_argv() {
        assert_eq!(argv(&OverrideGet::new("o")), ["RL.OVERRIDE", "GET", "o"]);
        assert_eq!(
            argv(&OverrideDel::new(["{t}a", "{t}b"])),
            ["RL.OVERRIDE", "DEL", "{t}a", "{t}b"]
        );
        assert_eq!(argv(&OverrideList::new(0)), ["RL.OVERRIDE", "LIST", "0"]);
        assert_eq!(
            argv(&OverrideList::new(42).pattern("rl:*").count(500)),
            ["RL.OVERRIDE", "LIST", "42", "MATCH", "rl:*", "COUNT", "500"]
        );
        assert!(OverrideDel::new(Vec::<&str>::new()).prepare().is_err());
        assert!(OverrideList::new(0).count(0).prepare().is_err());
    }

    #[test]
    fn routes_by_the_override_key_not_the_subcommand() {
        let p = OverrideSet::new("{t}o", 1, "1s").prepare().unwrap();
        assert_eq!(p.target, Ok(Target::Slot(slot(b"t"))));
        assert_eq!(p.effect, Effect::ClearAll);
        let p = OverrideGet::new("{t}o").prepare().unwrap();
        assert_eq!(
            (p.target, p.effect),
            (Ok(Target::Slot(slot(b"t"))), Effect::None)
        );
        let p = OverrideDel::new(["a", "b"]).prepare().unwrap();
        assert!(p.target.unwrap_err().message().contains("hash tag"));
        let p = OverrideList::new(0)
            .node("127.0.0.1", 7000)
            .prepare()
            .unwrap();
        assert_eq!(
            p.target,
            Ok(Target::Node {
                host: "127.0.0.1".into(),
                port: 7000
            })
        );
        assert_eq!(
            OverrideList::new(0).prepare().unwrap().target,
            Ok(Target::AnyPrimary)
        );
    }
}
