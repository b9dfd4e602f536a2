//! Redis Cluster: a real cluster of three primaries with one replica each,
//! on loopback, the module loaded on every node, on every server flavor.
//! Through the `redis` crate's cluster client, every command runs on keys
//! in every slot without an error, the override commands in the container
//! form (`RL.OVERRIDE SET|GET|DEL|LIST`) and by their dotted aliases; a
//! limiter key and its override key must hash to one slot (CROSSSLOT
//! otherwise, hash tags make them meet), RL.ALL too; a malformed RL.ALL
//! reaches a node and gets librl's own error; a manual failover of every
//! shard keeps every limiter's state exactly; and redis-py's RedisCluster
//! (tests/python/redis_py_cluster.py) drives the same commands.
//!
//! Windows are long (aligned ones chosen so that they do not end for at
//! least ten minutes) so that nothing expires or rolls over while a test
//! runs; every wait is for a condition.

mod common;

use common::*;
use redis::cluster::{cluster_pipe, ClusterClient, ClusterConnection};
use redis::cluster_routing::{get_slot, Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

const SLOTS: u16 = 16384;
const SHARDS: usize = 3;

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// A line of `CLUSTER NODES`: id, flags, primary id, link state, slots.
struct NodeLine {
    id: String,
    flags: String,
    primary: String,
    connected: bool,
    slots: bool,
}

fn cluster_nodes(con: &mut redis::Connection) -> Vec<NodeLine> {
    cmd_string(con, &["CLUSTER", "NODES"])
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            NodeLine {
                id: f[0].to_string(),
                flags: f[2].to_string(),
                primary: f[3].to_string(),
                connected: f[7] == "connected",
                slots: f.len() > 8,
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------
// The cluster
// ---------------------------------------------------------------------------

struct Cluster {
    flavor: Flavor,
    /// Nodes 0..3 start as primaries, node 3 + i as node i's replica.
    nodes: Vec<Server>,
    ids: Vec<String>,
}

/// Slots of shard `i`: three ranges covering 0..16383.
fn slot_range(i: usize) -> (u16, u16) {
    let per = SLOTS / SHARDS as u16;
    let start = per * i as u16;
    let end = if i == SHARDS - 1 {
        SLOTS - 1
    } else {
        start + per - 1
    };
    (start, end)
}

impl Cluster {
    fn start(flavor: Flavor) -> Cluster {
        let extra = [
            // Relative to --dir: each node's file in its own directory.
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            "2000",
            "--repl-diskless-sync-delay",
            "0",
            // Redis 7.0 leaves a replica out of CLUSTER SLOTS until its
            // replication offset is not 0: ping it soon.
            "--repl-ping-replica-period",
            "1",
        ];
        let nodes: Vec<Server> = (0..2 * SHARDS)
            .map(|_| Server::builder(flavor).args(&extra).cluster_node().start())
            .collect();
        let mut cons: Vec<redis::Connection> = nodes.iter().map(Server::conn).collect();
        let ids: Vec<String> = cons
            .iter_mut()
            .map(|c| cmd_string(c, &["CLUSTER", "MYID"]))
            .collect();
        for (i, con) in cons.iter_mut().enumerate() {
            // Distinct epochs from the start: no collisions to resolve.
            cmd(con, &["CLUSTER", "SET-CONFIG-EPOCH", &(i + 1).to_string()]).unwrap();
        }
        for (i, con) in cons.iter_mut().enumerate().take(SHARDS) {
            let (start, end) = slot_range(i);
            cmd(
                con,
                &[
                    "CLUSTER",
                    "ADDSLOTSRANGE",
                    &start.to_string(),
                    &end.to_string(),
                ],
            )
            .unwrap();
        }
        for node in &nodes[1..] {
            cmd(
                &mut cons[0],
                &[
                    "CLUSTER",
                    "MEET",
                    "127.0.0.1",
                    &node.port.to_string(),
                    &node.bus_port.to_string(),
                ],
            )
            .unwrap();
        }
        wait_until("every node to know every other", || {
            cons.iter_mut().all(|c| {
                let lines = cluster_nodes(c);
                lines.len() == 2 * SHARDS
                    && lines.iter().all(|l| {
                        l.connected
                            && !l.flags.contains("handshake")
                            && !l.flags.contains("noaddr")
                            && !l.flags.contains("fail")
                    })
            })
        });
        for i in 0..SHARDS {
            cmd(&mut cons[SHARDS + i], &["CLUSTER", "REPLICATE", &ids[i]]).unwrap();
        }
        let cluster = Cluster { flavor, nodes, ids };
        let primaries: Vec<usize> = (0..SHARDS).collect();
        cluster.wait_stable(&primaries);
        cluster
    }

    fn conn(&self, node: usize) -> redis::Connection {
        self.nodes[node].conn()
    }

    fn client(&self) -> ClusterConnection {
        let urls: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("redis://127.0.0.1:{}/", n.port))
            .collect();
        ClusterClient::new(urls)
            .unwrap()
            .get_connection()
            .expect("cannot connect to the cluster")
    }

    /// Waits until shard `i`'s primary is node `primaries[i]` (the other
    /// node of the shard its replica) in every node's view, every node
    /// reports cluster_state ok, every replica's link is up, and
    /// CLUSTER SLOTS everywhere names the new primaries.
    fn wait_stable(&self, primaries: &[usize]) {
        let mut cons: Vec<redis::Connection> =
            (0..self.nodes.len()).map(|n| self.conn(n)).collect();
        let replica_of = |p: usize| if p < SHARDS { p + SHARDS } else { p - SHARDS };
        wait_until("the cluster to settle", || {
            cons.iter_mut().all(|c| {
                let lines = cluster_nodes(c);
                let view_ok = primaries.iter().all(|&p| {
                    let r = replica_of(p);
                    let primary = lines.iter().find(|l| l.id == self.ids[p]);
                    let replica = lines.iter().find(|l| l.id == self.ids[r]);
                    matches!((primary, replica), (Some(pl), Some(rl))
                        if pl.flags.contains("master") && pl.slots
                            && rl.flags.contains("slave") && rl.primary == self.ids[p]
                            && !rl.slots)
                });
                view_ok && info_field_cluster(c, "cluster_state") == "ok"
            })
        });
        for &p in primaries {
            let mut r = self.conn(replica_of(p));
            wait_until("the replica link", || {
                info_field(&mut r, "replication", "master_link_status") == "up"
                    && info_field(&mut r, "replication", "master_sync_in_progress") == "0"
            });
        }
        let want: BTreeSet<(u16, u16, u16, u16)> = primaries
            .iter()
            .enumerate()
            .map(|(shard, &p)| {
                let (start, end) = slot_range(shard);
                (
                    start,
                    end,
                    self.nodes[p].port,
                    self.nodes[replica_of(p)].port,
                )
            })
            .collect();
        wait_until("CLUSTER SLOTS to agree", || {
            cons.iter_mut().all(|c| cluster_slots(c) == want)
        });
    }

    /// Node indices of the current primaries, by shard.
    fn primaries(&self) -> Vec<usize> {
        let mut con = self.conn(0);
        let lines = cluster_nodes(&mut con);
        (0..SHARDS)
            .map(|shard| {
                [shard, shard + SHARDS]
                    .into_iter()
                    .find(|&n| {
                        lines
                            .iter()
                            .any(|l| l.id == self.ids[n] && l.flags.contains("master"))
                    })
                    .unwrap()
            })
            .collect()
    }

    /// Every key of the cluster, from its primaries.
    fn snapshot(&self) -> Snapshot {
        let mut all: Snapshot = self
            .primaries()
            .into_iter()
            .flat_map(|p| snapshot(&mut self.conn(p)))
            .collect();
        all.sort();
        all
    }
}

fn info_field_cluster(con: &mut redis::Connection, field: &str) -> String {
    cmd_string(con, &["CLUSTER", "INFO"])
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// CLUSTER SLOTS as (start, end, primary port, replica port) per range.
fn cluster_slots(con: &mut redis::Connection) -> BTreeSet<(u16, u16, u16, u16)> {
    let Value::Array(ranges) = cmd(con, &["CLUSTER", "SLOTS"]).unwrap() else {
        panic!("CLUSTER SLOTS is not an array")
    };
    ranges
        .iter()
        .filter_map(|range| {
            let Value::Array(parts) = range else {
                return None;
            };
            let port = |v: &Value| match v {
                Value::Array(node) => node.get(1).map(int).unwrap_or(0) as u16,
                _ => 0,
            };
            if parts.len() != 4 {
                // A range without its replica (yet) does not match.
                return Some((0, 0, 0, 0));
            }
            Some((
                int(&parts[0]) as u16,
                int(&parts[1]) as u16,
                port(&parts[2]),
                port(&parts[3]),
            ))
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Keys over every slot
// ---------------------------------------------------------------------------

/// A hash tag for every slot: `tags[s]` hashes to slot `s`.
fn tag_per_slot() -> Vec<String> {
    let mut tags: Vec<Option<String>> = vec![None; SLOTS as usize];
    let mut missing = SLOTS as usize;
    let mut j = 0u64;
    while missing > 0 {
        let tag = format!("u{j}");
        let slot = get_slot(tag.as_bytes()) as usize;
        if tags[slot].is_none() {
            tags[slot] = Some(tag);
            missing -= 1;
        }
        j += 1;
    }
    tags.into_iter().map(Option::unwrap).collect()
}

/// Runs commands through the cluster client as cluster pipelines (one
/// pipeline per node per chunk); any error reply fails the test.
fn cluster_run(con: &mut ClusterConnection, commands: &[redis::Cmd]) -> Vec<Value> {
    let mut out = Vec::with_capacity(commands.len());
    for chunk in commands.chunks(4000) {
        let mut pipe = cluster_pipe();
        for c in chunk {
            pipe.add_command(c.clone());
        }
        let replies: Vec<Value> = pipe
            .query(con)
            .unwrap_or_else(|e| panic!("a cluster pipeline failed: {}", error_line(&e)));
        out.extend(replies);
    }
    out
}

fn command(args: &[&str]) -> redis::Cmd {
    let mut c = redis::cmd(args[0]);
    c.arg(&args[1..]);
    c
}

/// Routes to the primary of `key`'s slot. The cluster client routes an
/// unknown command by its first argument, which for RL.ALL is the word
/// FIXED, SLIDING or TOKEN, not a key (the server declares RL.ALL's keys
/// through the getkeys API, which the client does not ask): so RL.ALL is
/// sent explicitly to the slot of its first key.
fn route_to(key: &str) -> RoutingInfo {
    RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::new(
        get_slot(key.as_bytes()),
        SlotAddr::Master,
    )))
}

/// A limiter and its override in one slot (user 1's).
const OVERRIDDEN_USER: [&str; 6] = [
    "RL.FIXED",
    "{user:1}",
    "5",
    "1h",
    "OVERRIDE",
    "{user:1}:override",
];

fn routed(con: &mut ClusterConnection, key: &str, args: &[&str]) -> Result<Value, String> {
    con.route_command(&command(args), route_to(key))
        .map_err(|e| error_line(&e))
}

/// The key names one tag gets, one per kind of call.
struct Keys {
    fixed: String,
    sliding: String,
    approx: String,
    token: String,
    okey: String,
    all: [String; 3],
}

fn keys(tag: &str) -> Keys {
    Keys {
        fixed: format!("{{{tag}}}:f"),
        sliding: format!("{{{tag}}}:s"),
        approx: format!("{{{tag}}}:a"),
        token: format!("{{{tag}}}:t"),
        okey: format!("{{{tag}}}:o"),
        all: [
            format!("{{{tag}}}:x"),
            format!("{{{tag}}}:y"),
            format!("{{{tag}}}:z"),
        ],
    }
}

/// The calls every sampled tag gets, all of one COST: FIXED with an
/// override (limit 50 a day), SLIDING, SLIDING APPROX and TOKEN at a
/// limit of 10, each admitted.
fn limiter_calls(k: &Keys, aligned: &str, cost: i64, peek: bool) -> Vec<redis::Cmd> {
    let cost = cost.to_string();
    let mut calls = vec![
        vec![
            "RL.FIXED", &k.fixed, "10", "1h", "COST", &cost, "OVERRIDE", &k.okey,
        ],
        vec!["RL.SLIDING", &k.sliding, "10", "1h", "COST", &cost],
        vec![
            "RL.SLIDING",
            &k.approx,
            "10",
            aligned,
            "APPROX",
            "COST",
            &cost,
        ],
        vec![
            "RL.TOKEN", &k.token, "10", "1d", "BURST", "20", "COST", &cost,
        ],
    ];
    if peek {
        for c in &mut calls {
            c.push("PEEK");
        }
    }
    calls.iter().map(|c| command(c)).collect()
}

/// Limits of the calls above: FIXED's comes from the override.
const LIMITS: [i64; 4] = [50, 10, 10, 20];

fn all_call<'a>(k: &'a Keys, aligned: &'a str) -> Vec<&'a str> {
    vec![
        "RL.ALL", "FIXED", &k.all[0], "5", "1h", "SLIDING", &k.all[1], "5", aligned, "APPROX",
        "TOKEN", &k.all[2], "5", "1d", "OVERRIDE", &k.okey,
    ]
}

fn run_cluster_test(flavor: Flavor) {
    if !flavors().contains(&flavor) {
        eprintln!("{flavor:?} is not in LIBRL_SERVERS: skipped");
        return;
    }
    let _turn = ClusterTurn::take();
    let started = Instant::now();
    let cluster = Cluster::start(flavor);
    eprintln!("{flavor:?}: cluster up in {:?}", started.elapsed());
    let mut con = cluster.client();
    let aligned = aligned_windows(&mut cluster.conn(0))[0];

    // Every slot: one FIXED limiter per slot, through the client.
    let tags = tag_per_slot();
    let every_slot: Vec<redis::Cmd> = tags
        .iter()
        .map(|t| command(&["RL.FIXED", &format!("{{{t}}}:every"), "3", "1h"]))
        .collect();
    for reply in cluster_run(&mut con, &every_slot) {
        assert_eq!(six(&reply)[..5], [1, 1, 0, 3, 2]);
    }

    // Every command on a sample of tags spread evenly over the slots.
    let sample: Vec<&String> = tags.iter().step_by(8).collect();
    let mut setup = Vec::new();
    for (n, tag) in sample.iter().enumerate() {
        let k = keys(tag);
        let mut set = vec!["RL.OVERRIDE.SET", &k.okey, "50", "1d", "BURST", "60"];
        if n % 2 == 0 {
            set.extend(["TTL", "2h"]);
        }
        setup.push(command(&set));
        setup.push(command(&[
            "RL.OVERRIDE.SET",
            &format!("{{{tag}}}:gone"),
            "1",
            "1h",
        ]));
    }
    for reply in cluster_run(&mut con, &setup) {
        assert_eq!(reply, Value::Okay);
    }
    let mut calls = Vec::new();
    for (n, tag) in sample.iter().enumerate() {
        let k = keys(tag);
        calls.extend(limiter_calls(&k, aligned, 1 + n as i64 % 3, false));
        calls.push(command(&["RL.OVERRIDE.GET", &k.okey]));
        calls.push(command(&[
            "RL.OVERRIDE.DEL",
            &format!("{{{tag}}}:gone"),
            &format!("{{{tag}}}:never"),
        ]));
    }
    let replies = cluster_run(&mut con, &calls);
    for (n, per_tag) in replies.chunks(6).enumerate() {
        let cost = 1 + n as i64 % 3;
        for (reply, limit) in per_tag[..4].iter().zip(LIMITS) {
            let r = six(reply);
            assert_eq!(r[..5], [1, cost, 0, limit, limit - cost], "tag {n}");
        }
        let ttl = if n % 2 == 0 { 7_200_000 } else { -1 };
        let Value::Array(get) = &per_tag[4] else {
            panic!("{:?}", per_tag[4])
        };
        let get: Vec<i64> = get.iter().map(int).collect();
        assert_eq!(get[..3], [50, 86_400_000, 60], "tag {n}");
        assert!(
            (ttl == -1 && get[3] == -1) || (get[3] > ttl - 60_000 && get[3] <= ttl),
            "tag {n}: {get:?}"
        );
        assert_eq!(per_tag[5], Value::Int(1), "tag {n}");
    }
    for tag in &sample {
        let k = keys(tag);
        let reply = routed(&mut con, &k.all[0], &all_call(&k, aligned))
            .unwrap_or_else(|e| panic!("RL.ALL on {tag}: {e}"));
        let Value::Array(parts) = reply else {
            panic!("{reply:?}")
        };
        assert_eq!((int(&parts[0]), int(&parts[1])), (1, 0), "{tag}");
        // TOKEN's capacity is the override's burst.
        assert_eq!(six(&parts[4])[..5], [1, 1, 0, 60, 59], "{tag}");
    }

    // RL.OVERRIDE.LIST is per node: each primary lists its own overrides,
    // and together they list all of them.
    let mut listed = BTreeSet::new();
    for p in cluster.primaries() {
        let mut node = cluster.conn(p);
        let mut cursor = "0".to_string();
        let mut here = 0;
        loop {
            let Value::Array(parts) = cmd(
                &mut node,
                &["RL.OVERRIDE.LIST", &cursor, "MATCH", "*:o", "COUNT", "500"],
            )
            .unwrap() else {
                panic!("RL.OVERRIDE.LIST")
            };
            cursor = redis::from_redis_value(&parts[0]).unwrap();
            let Value::Array(entries) = &parts[1] else {
                panic!("{parts:?}")
            };
            for entry in entries {
                let Value::Array(fields) = entry else {
                    panic!("{entry:?}")
                };
                let name: String = redis::from_redis_value(&fields[0]).unwrap();
                assert!(listed.insert(name), "listed twice");
                here += 1;
            }
            if cursor == "0" {
                break;
            }
        }
        assert!(here > sample.len() / 5, "node {p} lists {here}");
    }
    let want: BTreeSet<String> = sample.iter().map(|t| keys(t).okey).collect();
    assert_eq!(listed, want);

    // CROSSSLOT: a key and an okey in different slots, and RL.ALL across
    // slots. Hash tags put them in one slot.
    for (a, b) in [
        ("user:1", "user:1:override"),
        ("user:1", "user:2"),
        ("{user:1}", "{user:2}"),
    ] {
        assert_ne!(get_slot(a.as_bytes()), get_slot(b.as_bytes()), "{a} {b}");
    }
    cmd_cluster(
        &mut con,
        &["RL.OVERRIDE.SET", "{user:1}:override", "7", "1h"],
    )
    .unwrap();
    // (A limiter whose okey is in another slot is left to
    // `limiter_okey_in_another_slot_is_crossslot`, which fails today.)
    let crossslot: [(&str, &str); 4] = [
        (
            "{user:1}:a",
            "RL.ALL FIXED {user:1}:a 5 1h SLIDING {user:2}:b 5 1h",
        ),
        (
            "{user:1}:a",
            "RL.ALL FIXED {user:1}:a 5 1h OVERRIDE {user:2}:override PEEK",
        ),
        (
            "{user:1}:override",
            "RL.OVERRIDE.DEL {user:1}:override {user:2}:override",
        ),
        (
            "{user:1}:a",
            "RL.ALL TOKEN {user:1}:a 5 1h FIXED {user:1}:b 5 1h OVERRIDE user:1:override",
        ),
    ];
    for (key, call) in crossslot {
        let args: Vec<&str> = call.split(' ').collect();
        let err = routed(&mut con, key, &args).expect_err(&format!("{args:?} was accepted"));
        assert!(err.starts_with("CROSSSLOT"), "{flavor:?} {args:?}: {err}");
    }
    let r = six(&cmd_cluster(&mut con, &OVERRIDDEN_USER).unwrap());
    assert_eq!(r[..5], [1, 1, 0, 7, 6], "the override applies in its slot");
    // Two limiters of one user, the second overridden, in one slot.
    let both = [
        "RL.ALL",
        "FIXED",
        "{user:1}:a",
        "5",
        "1h",
        "SLIDING",
        "{user:1}:b",
        "5",
        "1h",
        "OVERRIDE",
        "{user:1}:override",
    ];
    let with_token = [&both[..], &["TOKEN", "{user:1}", "5", "1h"]].concat();
    let reply = routed(&mut con, "{user:1}:a", &with_token);
    // `{user:1}` is a FIXED limiter: WRONGTYPE, decided in the right slot.
    assert!(reply.unwrap_err().starts_with("WRONGTYPE"));
    let reply = routed(&mut con, "{user:1}:a", &both).unwrap();
    let Value::Array(parts) = reply else {
        panic!("{reply:?}")
    };
    assert_eq!(int(&parts[0]), 1);
    assert_eq!(six(&parts[3])[..5], [1, 1, 0, 7, 6]);

    eprintln!("{flavor:?}: workload done at {:?}", started.elapsed());

    // ---- Failover of every shard -----------------------------------------
    let peeks: Vec<redis::Cmd> = sample
        .iter()
        .flat_map(|t| limiter_calls(&keys(t), aligned, 1, true))
        .collect();
    let mut probe = cluster.conn(0);
    let before_ms = server_ms(&mut probe);
    let peeks_before = cluster_run(&mut con, &peeks);
    let before = cluster.snapshot();
    assert!(
        before.len() > SLOTS as usize + 6 * sample.len(),
        "{} keys",
        before.len()
    );
    for (p, replica) in (0..SHARDS).map(|i| (i, i + SHARDS)) {
        let mut rcon = cluster.conn(replica);
        cmd(&mut rcon, &["CLUSTER", "FAILOVER"]).unwrap();
        wait_until("the replica to take over", || {
            info_field(&mut rcon, "replication", "role") == "master"
        });
        let mut pcon = cluster.conn(p);
        wait_until("the old primary to follow", || {
            info_field(&mut pcon, "replication", "role") == "slave"
        });
    }
    let promoted: Vec<usize> = (SHARDS..2 * SHARDS).collect();
    cluster.wait_stable(&promoted);
    assert_eq!(cluster.primaries(), promoted);
    eprintln!("{flavor:?}: failed over at {:?}", started.elapsed());

    // The same state, with the same absolute expiry times.
    assert_same_snapshot(
        &cluster.snapshot(),
        &before,
        &format!("{flavor:?}: after failover"),
    );
    // A fresh client finds the new primaries; PEEK answers as before, only
    // later: counts unchanged, times shorter by at most the time passed.
    let mut con = cluster.client();
    let peeks_after = cluster_run(&mut con, &peeks);
    let passed = server_ms(&mut probe) - before_ms + 2;
    for ((a, b), call) in peeks_before.iter().zip(&peeks_after).zip(&peeks) {
        let call = String::from_utf8_lossy(&call.get_packed_command()).into_owned();
        let (a, b) = (six(a), six(b));
        assert_eq!(
            [a[0], a[1], a[3], a[4]],
            [b[0], b[1], b[3], b[4]],
            "{call:?}"
        );
        assert!(
            b[5] <= a[5] && a[5] - b[5] <= passed,
            "{call:?}: {a:?} {b:?}"
        );
    }
    // Counts continue; fixed windows do not restart.
    let mut next = Vec::new();
    for t in &sample {
        next.extend(limiter_calls(&keys(t), aligned, 1, false));
    }
    let replies = cluster_run(&mut con, &next);
    for (n, (per_tag, tag)) in replies.chunks(4).zip(&sample).enumerate() {
        let cost = 1 + n as i64 % 3;
        for (reply, limit) in per_tag.iter().zip(LIMITS) {
            let r = six(reply);
            assert_eq!(r[..5], [1, cost + 1, 0, limit, limit - cost - 1], "{tag}");
        }
    }
    let fixed_keys: Vec<String> = sample
        .iter()
        .map(|t| keys(t).fixed)
        .chain(tags.iter().step_by(97).map(|t| format!("{{{t}}}:every")))
        .collect();
    let ends: Vec<redis::Cmd> = fixed_keys
        .iter()
        .map(|k| command(&["PEXPIRETIME", k]))
        .collect();
    let ends_now: Vec<i64> = cluster_run(&mut con, &ends).iter().map(int).collect();
    let ends_before: BTreeMap<&[u8], i64> = before
        .iter()
        .map(|(k, _, at)| (k.as_slice(), *at))
        .collect();
    for (key, end) in fixed_keys.iter().zip(ends_now) {
        assert_eq!(
            ends_before.get(key.as_bytes()),
            Some(&end),
            "{key}: the window moved"
        );
    }
    let r = six(&cmd_cluster(&mut con, &OVERRIDDEN_USER).unwrap());
    assert_eq!(r[..5], [1, 2, 0, 7, 5]);

    // No module error anywhere but the one WRONGTYPE above: CROSSSLOT
    // is the server's refusal, before the module runs.
    let mut errors = BTreeMap::new();
    for n in 0..cluster.nodes.len() {
        let mut c = cluster.conn(n);
        for command in ["fixed", "sliding", "token", "all", "override_set"] {
            *errors.entry(command).or_insert(0) +=
                info_i64(&mut c, "rl", &format!("rl_{command}_errors"));
        }
    }
    assert_eq!(
        errors,
        BTreeMap::from([
            ("all", 1),
            ("fixed", 0),
            ("override_set", 0),
            ("sliding", 0),
            ("token", 0)
        ])
    );
    eprintln!(
        "{flavor:?}: checked after failover at {:?}",
        started.elapsed()
    );

    // ---- The container form, a malformed RL.ALL, redis-py -------------
    // The container form RL.OVERRIDE SET|GET|DEL|LIST and its dotted
    // aliases, on okeys all over the slots, each call routed to its okey.
    for (n, tag) in sample.iter().enumerate().step_by(7) {
        let okey = format!("{{{tag}}}:co");
        let spell = |sub: &str| {
            if n % 2 == 0 {
                sub.to_string()
            } else {
                sub.to_lowercase()
            }
        };
        let (set, get, del) = (spell("SET"), spell("GET"), spell("DEL"));
        let ok = routed(
            &mut con,
            &okey,
            &["RL.OVERRIDE", &set, &okey, "9", "1h", "BURST", "11"],
        );
        assert_eq!(ok, Ok(Value::Okay), "{flavor:?} {okey}");
        let want: Vec<Value> = [9, 3_600_000, 11, -1].map(Value::Int).to_vec();
        for args in [
            &["RL.OVERRIDE", &get, &okey][..],
            &["RL.OVERRIDE.GET", &okey],
        ] {
            let got = routed(&mut con, &okey, args);
            assert_eq!(got, Ok(Value::Array(want.clone())), "{flavor:?} {args:?}");
        }
        let limited = format!("{{{tag}}}:cf");
        let r = routed(
            &mut con,
            &okey,
            &["RL.FIXED", &limited, "100", "1s", "OVERRIDE", &okey],
        );
        assert_eq!(r.map(|v| six(&v)[..5].to_vec()), Ok(vec![1, 1, 0, 9, 8]));
        let none = format!("{{{tag}}}:none");
        let deleted = routed(&mut con, &okey, &["RL.OVERRIDE", &del, &okey, &none]);
        assert_eq!(deleted, Ok(Value::Int(1)), "{flavor:?} {okey}");
        let gone = routed(&mut con, &okey, &["RL.OVERRIDE.GET", &okey]);
        assert_eq!(gone, Ok(Value::Nil), "{flavor:?} {okey}");
        // One left in place, for LIST.
        routed(&mut con, &okey, &["RL.OVERRIDE", "SET", &okey, "4", "1h"]).unwrap();
    }
    // LIST per node: the container form lists what the dotted name lists.
    for p in cluster.primaries() {
        let mut node = cluster.conn(p);
        let mut full_list = |command: &[&str]| -> BTreeSet<String> {
            let mut cursor = "0".to_string();
            let mut names = BTreeSet::new();
            loop {
                let mut args = command.to_vec();
                args.extend([cursor.as_str(), "MATCH", "*:co", "COUNT", "500"]);
                let Value::Array(parts) = cmd(&mut node, &args).unwrap() else {
                    panic!("{args:?}")
                };
                cursor = redis::from_redis_value(&parts[0]).unwrap();
                let Value::Array(entries) = &parts[1] else {
                    panic!("{parts:?}")
                };
                for entry in entries {
                    names.insert(strings(entry)[0].clone());
                }
                if cursor == "0" {
                    return names;
                }
            }
        };
        let dotted = full_list(&["RL.OVERRIDE.LIST"]);
        assert!(!dotted.is_empty(), "{flavor:?}: node {p} lists no *:co");
        assert_eq!(full_list(&["RL.OVERRIDE", "list"]), dotted, "{flavor:?}");
    }
    // Through the client's own routing, which takes argv[1] (the
    // subcommand) for a key: the node it picks answers MOVED unless it owns
    // the okey, and the client follows.
    for (sub, args, want) in [
        ("SET", &["{user:3}:co", "2", "1m"][..], Value::Okay),
        (
            "GET",
            &["{user:3}:co"],
            Value::Array([2, 60_000, 0, -1].map(Value::Int).to_vec()),
        ),
        ("DEL", &["{user:3}:co"], Value::Int(1)),
    ] {
        let argv = [&["RL.OVERRIDE", sub][..], args].concat();
        assert_eq!(
            cmd_cluster(&mut con, &argv),
            Ok(want),
            "{flavor:?} {argv:?}"
        );
    }
    // CROSSSLOT for the container form as for the dotted name.
    let err = routed(
        &mut con,
        "{user:1}:override",
        &[
            "RL.OVERRIDE",
            "DEL",
            "{user:1}:override",
            "{user:2}:override",
        ],
    )
    .unwrap_err();
    assert!(err.starts_with("CROSSSLOT"), "{flavor:?}: {err}");

    // A malformed RL.ALL reaches a node and returns librl's own error:
    // its getkeys reports the keys it can find, so COMMAND GETKEYS (what
    // redis-py asks before routing) names the key, and the slot check
    // sends the call to the key's node.
    let malformed = ["RL.ALL", "FIXED", "{a}k", "notanumber", "60"];
    let librl_error = "ERR limit must be an integer from 1 to 1125899906842624 (2^50)";
    assert_eq!(
        cmd(
            &mut cluster.conn(0),
            &[&["COMMAND", "GETKEYS"][..], &malformed].concat()
        )
        .map(|v| strings(&v)),
        Ok(vec!["{a}k".to_string()]),
        "{flavor:?}"
    );
    assert_eq!(
        routed(&mut con, "{a}k", &malformed),
        Err(librl_error.to_string()),
        "{flavor:?}"
    );
    assert_eq!(
        cmd_cluster(&mut con, &malformed),
        Err(librl_error.to_string()),
        "{flavor:?}: through the client's own routing"
    );
    // Again no module error but the WRONGTYPE and the two malformed RL.ALL
    // calls: MOVED, like CROSSSLOT, is the server's refusal.
    let mut errors = BTreeMap::new();
    for n in 0..cluster.nodes.len() {
        let mut c = cluster.conn(n);
        for command in COUNTED {
            *errors.entry(command).or_insert(0) +=
                info_i64(&mut c, "rl", &format!("rl_{command}_errors"));
        }
    }
    let mut want: BTreeMap<&str, i64> = COUNTED.iter().map(|&c| (c, 0)).collect();
    want.insert("all", 3);
    assert_eq!(errors, want, "{flavor:?}");

    run_redis_py(&cluster);
    eprintln!("{:?}: done in {:?}", cluster.flavor, started.elapsed());
}

/// tests/python/redis_py_cluster.py (redis-py's RedisCluster, sync,
/// asyncio and pipelines) against the running cluster.
fn run_redis_py(cluster: &Cluster) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = root.join(".deps/venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/install-deps.sh test (make test does), which installs \
         redis-py into the project's virtualenv",
        python.display()
    );
    let out = std::process::Command::new(&python)
        .arg(root.join("tests/python/redis_py_cluster.py"))
        .args(cluster.nodes.iter().map(|n| n.port.to_string()))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "{:?}: redis-py's RedisCluster failed ({}):\n{stdout}\n{stderr}",
        cluster.flavor,
        out.status
    );
    eprintln!("{:?}: redis-py\n{stdout}", cluster.flavor);
}

/// A command through the cluster client's own routing (first key).
fn cmd_cluster(con: &mut ClusterConnection, args: &[&str]) -> Result<Value, String> {
    command(args)
        .query::<Value>(con)
        .map_err(|e| error_line(&e))
}

/// One cluster-enabled node that owns every slot: enough for CROSSSLOT,
/// which the server checks before it looks at who owns the slot.
fn single_node_cluster(flavor: Flavor) -> Server {
    let node = Server::builder(flavor)
        .args(&["--cluster-config-file", "nodes.conf"])
        .cluster_node()
        .start();
    let mut con = node.conn();
    cmd(&mut con, &["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]).unwrap();
    wait_until("cluster_state ok", || {
        info_field_cluster(&mut con, "cluster_state") == "ok"
    });
    node
}

#[test]
fn cross_slot_calls_are_refused_before_the_module_runs() {
    for_each_flavor(|flavor| {
        let node = single_node_cluster(flavor);
        let mut con = node.conn();
        for args in [
            &[
                "RL.ALL", "FIXED", "{a}1", "5", "1h", "TOKEN", "{b}1", "5", "1h",
            ][..],
            &[
                "RL.ALL", "FIXED", "{a}1", "5", "1h", "OVERRIDE", "{b}o", "PEEK",
            ],
            &["RL.OVERRIDE.DEL", "{a}o", "{b}o"],
        ] {
            let err = cmd(&mut con, args).unwrap_err();
            assert!(err.starts_with("CROSSSLOT"), "{flavor:?} {args:?}: {err}");
        }
        for args in [
            &["RL.FIXED", "{a}1", "5", "1h", "OVERRIDE", "{a}o"][..],
            &[
                "RL.ALL", "FIXED", "{a}2", "5", "1h", "TOKEN", "{a}3", "5", "1h",
            ],
            &["RL.OVERRIDE.DEL", "{a}o", "{a}p"],
        ] {
            cmd(&mut con, args).unwrap_or_else(|e| panic!("{flavor:?} {args:?}: {e}"));
        }
        assert!(all_zero_errors(&mut con));
    });
}

/// The container form is refused across slots as its dotted alias is; a
/// malformed RL.ALL still declares the keys it can find, so across slots
/// it is CROSSSLOT, and within one slot it gets librl's own error.
#[test]
fn container_and_malformed_all_in_a_cluster_node() {
    for_each_flavor(|flavor| {
        let node = single_node_cluster(flavor);
        let mut con = node.conn();
        for args in [
            &["RL.OVERRIDE", "DEL", "{a}o", "{b}o"][..],
            &["rl.override", "del", "{a}o", "{a}p", "{b}o"],
            &[
                "RL.ALL", "FIXED", "{a}1", "x", "1h", "TOKEN", "{b}1", "5", "1h",
            ],
            &[
                "RL.ALL", "FIXED", "{a}1", "5", "1h", "OVERRIDE", "{b}o", "BOGUS",
            ],
        ] {
            let err = cmd(&mut con, args).unwrap_err();
            assert!(err.starts_with("CROSSSLOT"), "{flavor:?} {args:?}: {err}");
        }
        for args in [
            &["RL.OVERRIDE", "SET", "{a}o", "5", "1h"][..],
            &["RL.OVERRIDE", "GET", "{a}o"],
            &["RL.OVERRIDE", "DEL", "{a}o", "{a}p"],
        ] {
            cmd(&mut con, args).unwrap_or_else(|e| panic!("{flavor:?} {args:?}: {e}"));
        }
        assert!(all_zero_errors(&mut con), "{flavor:?}");
        assert_eq!(
            cmd(&mut con, &["RL.ALL", "FIXED", "{a}k", "notanumber", "60"]),
            Err("ERR limit must be an integer from 1 to 1125899906842624 (2^50)".into()),
            "{flavor:?}"
        );
    });
}

/// No error of any command or class reached librl (CROSSSLOT is the
/// server's own, before the module runs).
fn all_zero_errors(con: &mut redis::Connection) -> bool {
    let c = counters(con);
    COUNTED.iter().all(|n| c[&format!("rl_{n}_errors")] == 0)
        && ERROR_CLASSES
            .iter()
            .all(|n| c[&format!("rl_errors_{n}")] == 0)
}

/// Regression: the server finds a command's keys for its cluster slot
/// check with the getkeys API or the legacy (first, last, step) range, not
/// with key specs; RL.FIXED, RL.SLIDING and RL.TOKEN used to declare `okey`
/// only in a key spec, so a call whose okey hashed to another slot ran on
/// the key's node, read no override there, and silently applied its own
/// limit. They now use the getkeys API, as RL.ALL does.
#[test]
fn limiter_okey_in_another_slot_is_crossslot() {
    for_each_flavor(|flavor| {
        let node = single_node_cluster(flavor);
        let mut con = node.conn();
        for args in [
            &["RL.FIXED", "{a}1", "5", "1h", "OVERRIDE", "{b}o"][..],
            &[
                "RL.SLIDING",
                "{a}2",
                "5",
                "1h",
                "APPROX",
                "OVERRIDE",
                "{b}o",
            ],
            &["RL.TOKEN", "{a}3", "5", "1h", "OVERRIDE", "{b}o", "PEEK"],
            &["RL.CONCURRENT", "{a}4", "5", "1h", "OVERRIDE", "{b}o"],
            &[
                "RL.CONCURRENT",
                "{a}4",
                "5",
                "1h",
                "RELEASE",
                "1",
                "OVERRIDE",
                "{b}o",
            ],
            &[
                "RL.FIXED",
                "user:1",
                "5",
                "1h",
                "COST",
                "2",
                "OVERRIDE",
                "user:1:override",
            ],
        ] {
            let reply = cmd(&mut con, args);
            assert!(
                matches!(&reply, Err(e) if e.starts_with("CROSSSLOT")),
                "{flavor:?} {args:?}: {reply:?}"
            );
        }
    });
}

/// One test per flavor, so that each cluster runs (and fails) on its own.
macro_rules! cluster_tests {
    ($($name:ident: $flavor:ident),*) => {$(
        #[test]
        fn $name() {
            run_cluster_test(Flavor::$flavor);
        }
    )*};
}

cluster_tests!(
    cluster_on_redis7: Redis7,
    cluster_on_redis8: Redis8,
    cluster_on_valkey8: Valkey8,
    cluster_on_valkey9: Valkey9
);
