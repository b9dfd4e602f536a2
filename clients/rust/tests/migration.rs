//! While a populated slot migrates key by key, the cluster answers
//! `TRYAGAIN` to a call whose keys are partly on each side: an `OVERRIDE`
//! key that is never set, an `RL.ALL` whose per-second key expires between
//! calls while its per-hour key lives on (docs/operations.md, While a slot
//! moves). Such a call cannot run anywhere until the slot has moved. With
//! the limiter's retries (and redis-rs's waits shortened by
//! `short_cluster_retries`), calls of both kinds, async and blocking, and
//! leases taken with an unset override and released, go on
//! through a slow migration of thousands of keys: none fails, none waits
//! much longer than the migration, and afterwards every key counts exactly
//! the calls admitted. A migration stalled half-way fails a call after its
//! retry window, with the `TRYAGAIN`.
//!
//! `cargo test -p librl-client --test migration -- --ignored --nocapture`
//! measures the same run without either (redis-rs's own retries only), for
//! docs/clients/rust.md's figures.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use librl_client::{
    short_cluster_retries, slot, All, AsyncLimiter, Command, Fixed, Limiter, Sliding,
};
use librl_test_support::{command, Reply, SlotMove};
use redis::cluster::{ClusterClient, ClusterClientBuilder};

const TAG: &str = "{migrating}";
/// Keys in the slot besides the limiters', so that it takes seconds to move.
const FILL: usize = 3000;
const WORKERS: usize = 2;
/// The tally of the task taking and giving back leases.
const LEASES: usize = 2 * WORKERS + 1;

/// One caller's figures.
#[derive(Default)]
struct Tally {
    calls: AtomicU64,
    admitted: AtomicU64,
    errors: AtomicU64,
    max_latency_us: AtomicU64,
    first_error: Mutex<Option<String>>,
}

impl Tally {
    fn note(&self, took: Duration, outcome: redis::RedisResult<bool>) {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.max_latency_us.fetch_max(us, Ordering::SeqCst);
        match outcome {
            Ok(true) => {
                self.admitted.fetch_add(1, Ordering::SeqCst);
            }
            Ok(false) => {}
            Err(e) => {
                self.errors.fetch_add(1, Ordering::SeqCst);
                let mut first = self.first_error.lock().unwrap();
                first.get_or_insert_with(|| e.to_string());
            }
        }
    }
}

/// A call naming an override key that is never set.
fn with_unset_override(kind: &str, w: usize) -> Fixed {
    Fixed::new(format!("{TAG}:{kind}:{w}"), 1 << 40, "1h")
        .override_key(format!("{TAG}:no-override"))
}

/// An RL.ALL over a per-hour key and a 50 ms one, which expires between
/// calls.
fn over_keys_of_different_ages(w: usize) -> All {
    All::new()
        .clause(Fixed::new(format!("{TAG}:a:{w}:hour"), 1 << 40, "1h"))
        .clause(Sliding::new(format!("{TAG}:a:{w}:second"), 1 << 40, "50ms").approx())
}

/// The count of `key`, a fixed window of an hour (a `COST 0` read).
fn count(con: &mut impl librl_client::Connection, key: String) -> u64 {
    Fixed::new(key, 1 << 40, "1h")
        .cost(0)
        .query(con)
        .unwrap()
        .count
}

/// TRYAGAIN, ASK and MOVED replies, summed over the nodes.
fn redirects(cluster: &Cluster) -> (u64, u64, u64) {
    cluster
        .conns()
        .iter_mut()
        .fold((0, 0, 0), |(t, a, m), con| {
            (
                t + error_count(con, "TRYAGAIN"),
                a + error_count(con, "ASK"),
                m + error_count(con, "MOVED"),
            )
        })
}

/// What a run measured.
struct Figures {
    half_moved: Duration,
    calls: u64,
    errors: u64,
    max_latency: Duration,
    tryagain: u64,
    report: String,
}

/// Moves the slot of `TAG`, filled with `FILL` keys, in batches of 50
/// keys 20 ms apart, while two async callers per kind and one blocking
/// caller call in it through limiters on `client` retrying for `window`.
async fn migrate_while_calling(
    flavor: Flavor,
    build: impl Fn(Vec<String>) -> ClusterClient,
    window: Duration,
) -> (Cluster, Figures, Vec<(String, u64, u64)>) {
    let cluster = cluster(flavor);
    let slot = slot(TAG.as_bytes());
    let from = cluster.owner(slot);
    let to = (from + 1) % 3;
    {
        let mut owner = cluster.nodes[from].conn();
        let mut fill = redis::pipe();
        for i in 0..FILL {
            fill.cmd("SET")
                .arg(format!("{TAG}:fill:{i}"))
                .arg("x")
                .ignore();
        }
        let () = fill.query(&mut owner).unwrap();
    }
    let client = build(cluster.urls());
    let limiter =
        AsyncLimiter::new(client.get_async_connection().await.unwrap()).with_try_again_wait(window);
    let mut blocking = Limiter::new(client.get_connection().unwrap()).with_try_again_wait(window);

    // Every key exists before the slot starts moving.
    let tallies: Arc<Vec<Tally>> = Arc::new((0..=LEASES).map(|_| Tally::default()).collect());
    for w in 0..WORKERS {
        let d = limiter.run(&with_unset_override("o", w)).await.unwrap();
        tallies[w].note(Duration::ZERO, Ok(d.allowed));
        let a = limiter.run(&over_keys_of_different_ages(w)).await.unwrap();
        tallies[WORKERS + w].note(Duration::ZERO, Ok(a.allowed));
    }
    let d = blocking.run(&with_unset_override("b", 0)).unwrap();
    tallies[2 * WORKERS].note(Duration::ZERO, Ok(d.allowed));
    cluster.reset_stats();

    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for w in 0..WORKERS {
        for all in [false, true] {
            let (limiter, stop, tallies) = (limiter.clone(), stop.clone(), tallies.clone());
            tasks.push(tokio::spawn(async move {
                let tally = &tallies[if all { WORKERS + w } else { w }];
                while !stop.load(Ordering::SeqCst) {
                    let started = Instant::now();
                    let outcome = if all {
                        limiter
                            .run(&over_keys_of_different_ages(w))
                            .await
                            .map(|a| a.allowed)
                    } else {
                        limiter
                            .run(&with_unset_override("o", w))
                            .await
                            .map(|d| d.allowed)
                    };
                    tally.note(started.elapsed(), outcome);
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }));
        }
    }
    // A lease with an unset override, taken and given back.
    tasks.push({
        let (limiter, stop, tallies) = (limiter.clone(), stop.clone(), tallies.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let started = Instant::now();
                let outcome = match limiter
                    .acquire(format!("{TAG}:c"), 1 << 40, "1m")
                    .override_key(format!("{TAG}:no-override"))
                    .await
                {
                    Ok(Ok(lease)) => lease.release().await,
                    Ok(Err(_)) => Ok(false),
                    Err(e) => Err(e),
                };
                tallies[LEASES].note(started.elapsed(), outcome);
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    });
    let blocking_caller = {
        let (stop, tallies) = (stop.clone(), tallies.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let started = Instant::now();
                let outcome = blocking
                    .run(&with_unset_override("b", 0))
                    .map(|d| d.allowed);
                tallies[2 * WORKERS].note(started.elapsed(), outcome);
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let (cluster, moved) = tokio::task::spawn_blocking(move || {
        // Calls in the slot before it starts to move.
        std::thread::sleep(Duration::from_millis(100));
        let moved = cluster.move_slot(
            slot,
            from,
            to,
            SlotMove::Keys {
                batch: 50,
                pause: Duration::from_millis(20),
            },
        );
        std::thread::sleep(Duration::from_millis(100));
        (cluster, moved)
    })
    .await
    .unwrap();
    stop.store(true, Ordering::SeqCst);
    for task in tasks {
        task.await.unwrap();
    }
    blocking_caller.join().unwrap();

    let (tryagain, ask, moved_errors) = redirects(&cluster);
    let names = [
        "unset override",
        "RL.ALL, keys of different ages",
        "blocking, unset override",
        "a lease, unset override, taken and released",
    ];
    let mut report = Vec::new();
    let (mut calls, mut errors, mut max_us) = (0, 0, 0);
    for (k, name) in names.iter().enumerate() {
        let range = match k {
            0 => 0..WORKERS,
            1 => WORKERS..2 * WORKERS,
            2 => 2 * WORKERS..LEASES,
            _ => LEASES..LEASES + 1,
        };
        let (mut kc, mut ke, mut kmax) = (0, 0, 0);
        for t in &tallies[range.clone()] {
            kc += t.calls.load(Ordering::SeqCst);
            ke += t.errors.load(Ordering::SeqCst);
            kmax = kmax.max(t.max_latency_us.load(Ordering::SeqCst));
        }
        let first = tallies[range.start].first_error.lock().unwrap().clone();
        report.push(format!(
            "{name}: {kc} calls, {ke} errors, longest {:?}{}",
            Duration::from_micros(kmax),
            first
                .map(|e| format!(" (first error: {e})"))
                .unwrap_or_default()
        ));
        calls += kc;
        errors += ke;
        max_us = max_us.max(kmax);
    }
    let half_moved = moved.closed - moved.opened;
    let figures = Figures {
        half_moved,
        calls,
        errors,
        max_latency: Duration::from_micros(max_us),
        tryagain,
        report: format!(
            "{flavor:?}: slot {slot} ({} keys) half-moved for {half_moved:?}; servers replied \
             TRYAGAIN {tryagain}, ASK {ask}, MOVED {moved_errors}; {calls} calls, {errors} \
             errors, longest {:?}\n  {}",
            moved.keys,
            Duration::from_micros(max_us),
            report.join("\n  ")
        ),
    };
    // What each key counts, and the calls it admitted.
    let mut con = client.get_connection().unwrap();
    let mut counts = Vec::new();
    for w in 0..WORKERS {
        counts.push((
            format!("unset override, worker {w}"),
            count(&mut con, format!("{TAG}:o:{w}")),
            tallies[w].admitted.load(Ordering::SeqCst),
        ));
        counts.push((
            format!("RL.ALL, worker {w}"),
            count(&mut con, format!("{TAG}:a:{w}:hour")),
            tallies[WORKERS + w].admitted.load(Ordering::SeqCst),
        ));
    }
    // Every lease taken was given back: none is held.
    let leases = librl_client::Concurrent::new(format!("{TAG}:c"), 1 << 40, "1m")
        .cost(0)
        .query(&mut con)
        .unwrap();
    counts.push(("leases held".to_string(), leases.count, 0));
    counts.push((
        "blocking".to_string(),
        count(&mut con, format!("{TAG}:b:0")),
        tallies[2 * WORKERS].admitted.load(Ordering::SeqCst),
    ));
    (cluster, figures, counts)
}

/// Three servers at a time are plenty on a small machine.
static ONE_CLUSTER_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn short_retries(cluster_urls: Vec<String>) -> ClusterClient {
    short_cluster_retries(ClusterClientBuilder::new(cluster_urls))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_keep_working_while_their_slot_migrates() {
    let _turn = ONE_CLUSTER_AT_A_TIME.lock().await;
    for flavor in CLUSTER_FLAVORS {
        let (cluster, figures, counts) = migrate_with(flavor, true).await;
        eprintln!("{}", figures.report);
        assert_eq!(figures.errors, 0, "{}", figures.report);
        assert!(
            figures.tryagain > 0,
            "the calls met the move: {}",
            figures.report
        );
        // Past the move's end a call may still sleep out one pause of the
        // limiter's and one of redis-rs's (100 ms at most each), on a
        // loaded machine.
        assert!(
            figures.max_latency < figures.half_moved + Duration::from_millis(1000),
            "{}",
            figures.report
        );
        for (who, counted, admitted) in counts {
            assert_eq!(
                counted, admitted,
                "{who}: counted {counted}, admitted {admitted}"
            );
        }
        assert!(figures.calls > 0);

        // A migration left half-way: the call gives up after its window,
        // with the TRYAGAIN.
        let slot = slot(TAG.as_bytes());
        let source = cluster.owner(slot);
        let target = (source + 2) % 3;
        let setslot = |node: usize, state: &str, id: Option<&str>| {
            let (slot, port) = (slot.to_string(), cluster.nodes[node].port);
            let mut args = vec!["CLUSTER", "SETSLOT", slot.as_str(), state];
            args.extend(id);
            let reply = command(port, &args, Duration::from_secs(5)).unwrap();
            assert!(!matches!(reply, Reply::Error(_)), "{args:?}: {reply:?}");
        };
        // The slot moved to the next node; it is now owned there.
        let owner = (source + 1) % 3;
        setslot(target, "IMPORTING", Some(&cluster.ids[owner]));
        setslot(owner, "MIGRATING", Some(&cluster.ids[target]));
        let client = short_retries(cluster.urls());
        let limiter = AsyncLimiter::new(client.get_async_connection().await.unwrap())
            .with_try_again_wait(Duration::from_millis(300));
        let started = Instant::now();
        let e = limiter.run(&with_unset_override("o", 0)).await.unwrap_err();
        let took = started.elapsed();
        assert_eq!(e.code(), Some("TRYAGAIN"), "{e}");
        assert!(
            took >= Duration::from_millis(200) && took < Duration::from_millis(3000),
            "gave up after {took:?}"
        );
        setslot(target, "STABLE", None);
        setslot(owner, "STABLE", None);
    }
}

/// Runs the migration with the package's retries and redis-rs's waits
/// shortened (`retrying`), or with redis-rs's own retries only, as before
/// the package retried.
async fn migrate_with(
    flavor: Flavor,
    retrying: bool,
) -> (Cluster, Figures, Vec<(String, u64, u64)>) {
    if retrying {
        // A window no loaded test machine reaches: the bound checked is
        // the migration's own length.
        migrate_while_calling(flavor, short_retries, Duration::from_secs(60)).await
    } else {
        let plain = |urls: Vec<String>| ClusterClient::new(urls).unwrap();
        migrate_while_calling(flavor, plain, Duration::ZERO).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measures redis-rs's own retries for the docs; run by hand"]
async fn before_the_package_retried_tryagain() {
    let _turn = ONE_CLUSTER_AT_A_TIME.lock().await;
    for flavor in CLUSTER_FLAVORS {
        let (_cluster, figures, counts) = migrate_with(flavor, false).await;
        eprintln!("{}\n  counts: {counts:?}", figures.report);
    }
}
