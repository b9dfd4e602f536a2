//! Failover: a steady load of limiter calls through a primary with a
//! replica; the primary is killed (SIGKILL) mid-run, the replica promoted
//! (REPLICAOF NO ONE) and the load continues against it. Replication is
//! asynchronous, so the new primary has not seen the calls the old one
//! acknowledged in its last moments: the calls admitted beyond the limit
//! are at most those (the replication lag at the kill). With `WAIT 1
//! timeout` after each call, an admission counts only once a replica holds
//! it, and nothing is admitted beyond the limit (docs/memory.md, Failover).
//! Run with `--nocapture` to see the figures.

mod common;

use common::*;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

const LIMIT: i64 = 3000;
const CLIENTS: usize = 4;
/// Admissions acknowledged by the primary before it is killed.
const KILL_AFTER: i64 = 1000;
const CALL: [&str; 4] = ["RL.FIXED", "failover:subject", "3000", "1h"];

/// What one run measured.
struct Figures {
    /// Admissions the old primary acknowledged.
    acked: i64,
    /// Of those, what the replica held when promoted.
    on_replica: i64,
    /// Admissions acknowledged but lost with the old primary.
    lag: i64,
    /// Admissions by the new primary until its first denial.
    after: i64,
    /// Admissions beyond the limit, over both primaries.
    over: i64,
}

/// One limiter call, and with `durable` a `WAIT 1 1000` in the same round
/// trip: admitted when the limiter admits and (durable) a replica holds it.
fn admitted(con: &mut redis::Connection, durable: bool) -> redis::RedisResult<bool> {
    let mut pipe = redis::pipe();
    pipe.cmd(CALL[0]).arg(&CALL[1..]);
    if durable {
        pipe.cmd("WAIT").arg(1).arg(1000);
        let (reply, replicas): (Vec<i64>, i64) = pipe.query(con)?;
        Ok(reply[0] == 1 && replicas >= 1)
    } else {
        let (reply,): (Vec<i64>,) = pipe.query(con)?;
        Ok(reply[0] == 1)
    }
}

impl std::fmt::Display for Figures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "acked by the old primary {}, on the replica {}, lag {}, admitted after {}, \
             over the limit {}",
            self.acked, self.on_replica, self.lag, self.after, self.over
        )
    }
}

fn run(flavor: Flavor, durable: bool) -> Figures {
    let (mut primary, replica) = primary_and_replica(flavor, &[]);
    // Steady state first: after a full sync the primary holds its stream
    // until the replica's first acknowledgement (up to a second), and a
    // failover then loses everything admitted meanwhile
    // (docs/memory.md, Failover).
    let (mut pcon, mut rcon) = (primary.conn(), replica.conn());
    limiter(&mut pcon, &["RL.FIXED", "failover:warm-up", "1", "1h"]);
    wait_in_sync(&mut pcon, &mut rcon);
    let acked = AtomicI64::new(0);
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for _ in 0..CLIENTS {
            let mut con = primary.conn();
            let (acked, stop) = (&acked, &stop);
            scope.spawn(move || {
                // Until the primary is gone (the call fails) or told to stop.
                while !stop.load(Ordering::Relaxed) {
                    match admitted(&mut con, durable) {
                        Ok(true) => {
                            acked.fetch_add(1, Ordering::SeqCst);
                        }
                        Ok(false) => {}
                        Err(_) => break,
                    }
                }
            });
        }
        wait_until("the load to reach the kill point", || {
            acked.load(Ordering::SeqCst) >= KILL_AFTER
        });
        primary.kill();
        stop.store(true, Ordering::Relaxed);
    });
    let acked = acked.load(Ordering::SeqCst);

    let mut con = rcon;
    ok(&mut con, &["REPLICAOF", "NO", "ONE"]);
    let on_replica = limiter(&mut con, &[&CALL[..], &["COST", "0"]].concat())[1];
    // A call the old primary ran but never acknowledged may be on the
    // replica: that only lowers what is admitted.
    let lag = (acked - on_replica).max(0);
    let mut after = 0;
    while admitted(&mut con, false).expect("the new primary answers") {
        after += 1;
        assert!(after <= LIMIT, "the new primary never denied");
    }
    Figures {
        acked,
        on_replica,
        lag,
        after,
        over: (acked + after - LIMIT).max(0),
    }
}

#[test]
fn over_admission_after_a_failover_is_at_most_the_replication_lag() {
    for_each_flavor(|flavor| {
        let f = run(flavor, false);
        println!("{flavor:?}, asynchronous: {f}");
        assert!(f.over <= f.lag, "{flavor:?}: {f}");
        assert_eq!(
            f.over, f.lag,
            "{flavor:?}: the limit counts from the replica's state"
        );
    });
}

#[test]
fn with_wait_after_each_call_nothing_is_admitted_beyond_the_limit() {
    for_each_flavor(|flavor| {
        let f = run(flavor, true);
        println!("{flavor:?}, WAIT 1 1000 after each call: {f}");
        assert_eq!(f.lag, 0, "{flavor:?}: {f}");
        assert_eq!(f.over, 0, "{flavor:?}: {f}");
    });
}
