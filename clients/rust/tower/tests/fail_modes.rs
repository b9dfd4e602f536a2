//! Redis failing in the middle of a request's exchange (docs/http.md, One
//! decision per request): the first subject's group is admitted, the
//! second's `RL.ALL` fails (a plain string at its key: WRONGTYPE). A
//! request that is served stays counted, one that is refused is counted
//! by no policy: `open` keeps the first group, `closed` refunds it before
//! the 503, `local` keeps it when the local decision serves the request
//! and refunds it when it refuses. Each mode on its own prefix, one server.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use librl_tower::{Config, DecisionEvent, FailMode, KeyKind, Outcome, Policy, RateLimiter};
use redis::Commands;

/// `a` counts the client's address, `b` one global counter (limit `b_limit`):
/// two subjects, so two groups, `a`'s first.
fn config(prefix: &str, fail: FailMode, b_limit: u64) -> Config {
    let minute = Duration::from_secs(60);
    Config {
        prefix: prefix.into(),
        fail,
        policies: vec![
            Policy::fixed("a", 5, minute),
            Policy::fixed("b", b_limit, minute).key(KeyKind::Global),
        ],
        ..common::config()
    }
}

/// The count `a`'s key holds for 127.0.0.1 (PEEK's count includes the
/// call it answers for).
fn count_a(con: &mut redis::Connection, prefix: &str) -> i64 {
    let key = format!("{prefix}{{ip:127.0.0.1}}:a");
    let reply: Vec<i64> = redis::cmd("RL.FIXED")
        .arg(&key)
        .arg(5)
        .arg("60s")
        .arg("PEEK")
        .query(con)
        .unwrap();
    reply[1] - 1
}

type Seen = Arc<Mutex<Vec<(Outcome, bool)>>>;

/// Sets the second subject's key to a plain string (its `RL.ALL` fails),
/// serves the mode's limiter and sends `times` requests: their statuses.
async fn requests(
    redis: &common::Redis,
    seen: &Seen,
    prefix: &str,
    fail: FailMode,
    b_limit: u64,
    times: usize,
) -> Vec<u16> {
    let _: () = common::conn(redis)
        .set(format!("{prefix}{{global}}:b"), "not a limiter")
        .unwrap();
    let seen = seen.clone();
    let limiter = RateLimiter::builder(config(prefix, fail, b_limit))
        .redis_url(redis.url())
        .hook(move |e: &DecisionEvent<'_>| seen.lock().unwrap().push((e.outcome, e.local)))
        .build()
        .unwrap();
    let app = common::serve_ok(&limiter).await;
    let http = common::http();
    let mut statuses = Vec::new();
    for _ in 0..times {
        let response = http.get(format!("{}/", app.base)).send().await.unwrap();
        statuses.push(response.status().as_u16());
    }
    statuses
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_request_stays_counted_and_a_refused_one_is_refunded() {
    let redis = common::redis();
    let mut con = common::conn(&redis);
    let seen = Seen::default();

    let open = requests(&redis, &seen, "open:", FailMode::Open, 5, 1).await;
    assert_eq!(open, [200]);
    assert_eq!(
        count_a(&mut con, "open:"),
        1,
        "open serves: a stays counted"
    );

    let closed = requests(&redis, &seen, "closed:", FailMode::Closed, 5, 1).await;
    assert_eq!(closed, [503]);
    assert_eq!(
        count_a(&mut con, "closed:"),
        0,
        "closed refuses: a refunded"
    );

    // Local, b limited to 1 in this process: the first request is served
    // (a kept in Redis), the second refused locally (a refunded).
    let local = requests(&redis, &seen, "local:", FailMode::Local, 1, 2).await;
    assert_eq!(local, [200, 429]);
    assert_eq!(
        count_a(&mut con, "local:"),
        1,
        "only the served request counts"
    );

    assert_eq!(
        *seen.lock().unwrap(),
        [
            (Outcome::FailOpen, false),
            (Outcome::FailClosed, false),
            (Outcome::Allowed, true),
            (Outcome::Denied, true),
        ]
    );
}
