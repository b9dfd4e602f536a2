//! The breaker against a Redis that hangs (docs/http.md, Fail modes: the
//! black-box cases `breaker-hanging-redis-costs-one-timeout` and
//! `breaker-recovers-when-redis-answers-again`), in process: a listener
//! that accepts and holds every byte until told to join its connections to
//! a real `redis-server`, its held bytes first. Counted through the
//! decision hook (which request waited on Redis, which the open breaker
//! answered), not timed: the machine may be loaded.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use librl_tower::{Config, DecisionEvent, FailMode, Policy, RateLimiter};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// Accepts connections and holds what they send until `forward` turns
/// true, then joins each to `real` (held bytes first).
struct Hanging {
    port: u16,
    forward: watch::Sender<bool>,
}

impl Hanging {
    async fn start(real: u16) -> Hanging {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (forward, watching) = watch::channel(false);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(hold_then_join(client, real, watching.clone()));
            }
        });
        Hanging { port, forward }
    }

    fn answer(&self) {
        self.forward.send_replace(true);
    }
}

async fn hold_then_join(mut client: TcpStream, real: u16, mut forward: watch::Receiver<bool>) {
    let mut held = Vec::new();
    let mut buf = [0u8; 4096];
    while !*forward.borrow() {
        tokio::select! {
            read = client.read(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => held.extend_from_slice(&buf[..n]),
            },
            changed = forward.changed() => if changed.is_err() { return },
        }
    }
    let Ok(mut server) = TcpStream::connect(("127.0.0.1", real)).await else {
        return;
    };
    if server.write_all(&held).await.is_ok() {
        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
    }
}

type Errors = Arc<Mutex<Vec<Option<String>>>>;

/// Policy `p` (fixed, 100 a minute) on the hanging listener, each
/// decision's error kept.
async fn served(
    hanging: &Hanging,
    fail: FailMode,
    timeout: Duration,
    prefix: &str,
) -> (common::Served, Errors) {
    let errors: Errors = Arc::default();
    let seen = errors.clone();
    let limiter = RateLimiter::builder(Config {
        prefix: prefix.into(),
        fail,
        timeout,
        policies: vec![Policy::fixed("p", 100, Duration::from_secs(60))],
        ..common::config()
    })
    .redis_url(format!("redis://127.0.0.1:{}", hanging.port))
    .hook(move |e: &DecisionEvent<'_>| seen.lock().unwrap().push(e.error.clone()))
    .build()
    .unwrap();
    let app = common::serve_ok(&limiter).await;
    (app, errors)
}

fn waited_on_redis(error: &Option<String>) -> bool {
    error
        .as_deref()
        .is_some_and(|e| e.starts_with("redis gave no answer"))
}

fn breaker_open(error: &Option<String>) -> bool {
    error
        .as_deref()
        .is_some_and(|e| e.starts_with("redis failed lately"))
}

/// 20 requests in turn: one waits out the timeout, then the breaker
/// answers at once except for one probe per back-off (1 s, 2 s, 4 s, ...),
/// however long the requests take on a loaded machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_redis_costs_one_timeout_per_back_off() {
    let redis = common::redis();
    let hanging = Hanging::start(redis.port).await;
    let timeout = Duration::from_millis(250);
    let (app, errors) = served(&hanging, FailMode::Open, timeout, "hang:").await;
    let http = common::http();
    let started = Instant::now();
    for _ in 0..20 {
        let response = http.get(format!("{}/", app.base)).send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert!(response.headers().get("x-ratelimit-limit").is_none());
    }
    let elapsed = started.elapsed();
    let errors = errors.lock().unwrap().clone();
    assert_eq!(errors.len(), 20);
    let waited = errors.iter().filter(|e| waited_on_redis(e)).count();
    let skipped = errors.iter().filter(|e| breaker_open(e)).count();
    assert_eq!(waited + skipped, 20, "{errors:?}");
    assert!(waited_on_redis(&errors[0]), "{errors:?}");
    // Probes possible in that time: back-offs of 1, 2, 4, ... s, each
    // after a timeout.
    let mut probes = 0;
    let mut at = timeout;
    let mut backoff = Duration::from_secs(1);
    while at + backoff < elapsed {
        probes += 1;
        at += backoff + timeout;
        backoff *= 2;
    }
    assert!(
        waited <= 1 + probes,
        "{waited} requests waited on Redis in {elapsed:?} (at most {} may): {errors:?}",
        1 + probes
    );
}

/// Redis answers again after a hang: the probe after the back-off is
/// checked, and gets its own reply, not the late one of the request that
/// timed out (which Redis counted when it came back: the probe is the
/// second count).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_after_a_hang_reads_its_own_reply() {
    let redis = common::redis();
    let hanging = Hanging::start(redis.port).await;
    // The probe's round trip gets a budget a loaded machine keeps.
    let timeout = Duration::from_millis(1000);
    let (app, errors) = served(&hanging, FailMode::Closed, timeout, "recover:").await;
    let http = common::http();
    let get = || http.get(format!("{}/", app.base)).send();
    assert_eq!(get().await.unwrap().status(), 503);
    hanging.answer();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let probe = get().await.unwrap();
    let errors = errors.lock().unwrap().clone();
    assert_eq!(probe.status(), 200, "{errors:?}");
    assert_eq!(probe.headers()["x-ratelimit-limit"], "100");
    assert_eq!(probe.headers()["x-ratelimit-remaining"], "98");
    let next = get().await.unwrap();
    assert_eq!(next.status(), 200);
    assert_eq!(next.headers()["x-ratelimit-remaining"], "97");
    assert!(waited_on_redis(&errors[0]), "{errors:?}");
}
