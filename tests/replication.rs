//! Replication: a real replica of every server flavor. The primary
//! decides; the replica applies its decisions with its timestamps and ends
//! with the same bytes and the same absolute expiry times, and a call that
//! changes nothing propagates nothing.
//!
//! Windows are long (an hour or more, aligned ones chosen so that they do
//! not end for at least ten minutes) so nothing expires while a test runs.

mod common;

use common::*;

#[test]
fn replica_dataset_equals_primary_after_mixed_workload() {
    for_each_flavor(|flavor| {
        let (primary, replica) = primary_and_replica(flavor, &[]);
        let (mut pcon, mut rcon) = (primary.conn(), replica.conn());
        fixed_workload(&mut pcon, "wl", 1, 600);
        // Keys moved on the primary keep counting there and on the replica.
        cmd(&mut pcon, &["COPY", "wl:1", "wl:copied"]).unwrap();
        cmd(&mut pcon, &["RENAME", "wl:2", "wl:renamed"]).unwrap();
        fixed_workload(&mut pcon, "wl2", 2, 300);
        for key in ["wl:copied", "wl:renamed"] {
            for _ in 0..3 {
                limiter(&mut pcon, &["RL.FIXED", key, "4", "1h"]);
            }
        }
        wait_in_sync(&mut pcon, &mut rcon);
        let snap = assert_same_dataset(&format!("{flavor:?} replica"), &mut pcon, &mut rcon);
        assert!(snap.len() > 20, "{flavor:?}: only {} keys", snap.len());
    });
}

#[test]
fn replica_equals_primary_after_every_command() {
    for_each_flavor(|flavor| {
        let (primary, replica) = primary_and_replica(flavor, &[]);
        let (mut pcon, mut rcon) = (primary.conn(), replica.conn());
        workload(&mut pcon, "w", 41, 800);
        // Keys moved on the primary keep counting there and on the replica.
        cmd(&mut pcon, &["COPY", "w:k:0", "w:k:copied"]).unwrap();
        cmd(&mut pcon, &["RENAME", "w:k:4", "w:k:renamed"]).unwrap();
        workload(&mut pcon, "w", 42, 400);
        limiter(&mut pcon, &["RL.FIXED", "w:k:copied", "9", "1h"]);
        limiter(
            &mut pcon,
            &["RL.TOKEN", "w:k:renamed", "9", "1d", "BURST", "9"],
        );
        wait_in_sync(&mut pcon, &mut rcon);
        assert_same_mixed_dataset(&format!("{flavor:?} replica"), &mut pcon, &mut rcon);
    });
}

#[test]
fn late_replica_applies_the_primarys_clock() {
    for_each_flavor(|flavor| {
        assert_late_replica_agrees(flavor, 200, |p| {
            for i in 0..20 {
                let key = format!("late:{i}");
                limiter(p, &["RL.FIXED", &key, "3", "1h"]);
                limiter(p, &["RL.FIXED", &key, "3", "2h", "COST", "2"]);
            }
        });
    });
}

/// Leases taken, refused, released, renewed and ended by themselves: the
/// replica holds the same leases, byte for byte, with the same expiry; a
/// replica that applies the calls late (so its own clock would have ended
/// other leases) agrees too.
#[test]
fn replica_holds_the_same_leases() {
    for_each_flavor(|flavor| {
        let (primary, replica) = primary_and_replica(flavor, &[]);
        let (mut pcon, mut rcon) = (primary.conn(), replica.conn());
        lease_workload(&mut pcon, "l", 61, 400);
        wait_in_sync(&mut pcon, &mut rcon);
        let snap = assert_same_dataset(&format!("{flavor:?} replica"), &mut pcon, &mut rcon);
        assert_eq!(snap.len() as u64, LEASE_WORKLOAD_KEYS, "{flavor:?}");
        drop((primary, replica));
        assert_late_replica_agrees(flavor, 200, |p| {
            lease_workload(p, "late", 62, 200);
        });
    });
}

#[test]
fn denied_calls_and_peek_replicate_nothing() {
    for_each_flavor(|flavor| {
        let (primary, replica) = quiet_primary_and_replica(flavor);
        let (mut pcon, mut rcon) = (primary.conn(), replica.conn());
        let aligned = aligned_windows(&mut pcon)[0];
        limiter(&mut pcon, &["RL.FIXED", "full", "2", "1h", "COST", "2"]);
        limiter(
            &mut pcon,
            &["RL.FIXED", "al", "1", aligned, "ALIGNED", "COST", "1"],
        );
        wait_in_sync(&mut pcon, &mut rcon);
        let offset = info_i64(&mut pcon, "replication", "master_repl_offset");
        let replica_before = snapshot(&mut rcon);

        let denied: [&[&str]; 6] = [
            &["RL.FIXED", "full", "2", "1h"],
            &["RL.FIXED", "full", "2", "1h", "COST", "3"],
            &["RL.FIXED", "full", "9", "1h", "COST", "10"],
            &["RL.FIXED", "al", "1", aligned, "ALIGNED"],
            &["RL.FIXED", "missing", "2", "1h", "COST", "3"],
            &["RL.FIXED", "missing", "1", aligned, "ALIGNED", "COST", "2"],
        ];
        for args in denied {
            assert_eq!(limiter(&mut pcon, args)[0], 0, "{args:?}");
        }
        let peeks: [(&[&str], i64); 4] = [
            (&["RL.FIXED", "full", "2", "1h", "PEEK"], 0),
            (&["RL.FIXED", "full", "5", "1h", "PEEK"], 1),
            (&["RL.FIXED", "al", "1", aligned, "ALIGNED", "PEEK"], 0),
            (&["RL.FIXED", "missing", "2", "1h", "COST", "2", "PEEK"], 1),
        ];
        for (args, allowed) in peeks {
            assert_eq!(limiter(&mut pcon, args)[0], allowed, "{args:?}");
        }
        assert_eq!(
            info_i64(&mut pcon, "replication", "master_repl_offset"),
            offset,
            "{flavor:?}: a denied call or PEEK was propagated"
        );
        assert_eq!(snapshot(&mut rcon), replica_before);

        assert_eq!(
            limiter(&mut pcon, &["RL.FIXED", "missing", "2", "1h"])[0],
            1
        );
        assert!(
            info_i64(&mut pcon, "replication", "master_repl_offset") > offset,
            "{flavor:?}: an admitted call was not propagated"
        );
        wait_in_sync(&mut pcon, &mut rcon);
        assert_same_dataset(&format!("{flavor:?} replica"), &mut pcon, &mut rcon);
    });
}
