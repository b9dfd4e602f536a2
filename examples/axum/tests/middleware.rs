//! The middleware against a real redis-server with librl, over real HTTP.

mod common;

use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use common::{config, free_port, http, send, serve, Answer, Redis};
use librl_axum_example::identity::api_key_id;
use librl_axum_example::{AuthUser, Config, Cost, FailMode, Policy, RateLimiter, Scope};

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

async fn ok() -> &'static str {
    "ok"
}

async fn body_len(body: Bytes) -> String {
    body.len().to_string()
}

/// An app with `GET /x` behind `policies`.
async fn app_with(config: Config, policies: Vec<Policy>) -> String {
    let limiter = RateLimiter::new(config).unwrap();
    serve(Router::new().route("/x", get(ok).route_layer(limiter.layer(policies)))).await
}

#[tokio::test]
async fn admitted_requests_carry_ratelimit_headers() {
    let redis = Redis::start();
    let base = app_with(
        config(&redis.url()),
        vec![Policy::fixed("hello", 3, secs(60))],
    )
    .await;
    let client = http();
    let a = send(client.get(format!("{base}/x"))).await;
    assert_eq!((a.status, a.body.as_str()), (200, "ok"));
    assert_eq!(a.header("ratelimit-policy"), Some("\"hello\";q=3;w=60"));
    assert_eq!(a.header("ratelimit"), Some("\"hello\";r=2;t=60"));
    assert_eq!(a.int("x-ratelimit-limit"), 3);
    assert_eq!(a.int("x-ratelimit-remaining"), 2);
    assert_eq!(a.int("x-ratelimit-reset"), 60);
    assert_eq!(a.header("retry-after"), None);

    let b = send(client.get(format!("{base}/x"))).await;
    assert_eq!(b.header("ratelimit"), Some("\"hello\";r=1;t=60"));
    assert_eq!(b.int("x-ratelimit-remaining"), 1);
}

#[tokio::test]
async fn an_exceeded_limit_answers_429_with_retry_after_and_a_problem() {
    let redis = Redis::start();
    let base = app_with(
        config(&redis.url()),
        vec![Policy::sliding("hello", 2, secs(60))],
    )
    .await;
    let client = http();
    for _ in 0..2 {
        assert_eq!(send(client.get(format!("{base}/x"))).await.status, 200);
    }
    let denied = send(client.get(format!("{base}/x"))).await;
    assert_eq!(denied.status, 429);
    let retry = denied.int("retry-after");
    assert!((59..=60).contains(&retry), "{denied:?}");
    assert_eq!(
        denied.header("ratelimit"),
        Some(&*format!("\"hello\";r=0;t={retry}"))
    );
    assert_eq!(denied.int("x-ratelimit-remaining"), 0);
    let problem = denied.problem();
    assert_eq!(problem["title"], "Too Many Requests");
    assert_eq!(problem["policy"], "hello");
    assert_eq!(problem["limit"], 2);
    assert_eq!(problem["retry_after"], retry);
    assert!(
        problem["detail"].as_str().unwrap().contains("2 per 60s"),
        "{problem}"
    );

    // The denied request was not counted.
    let mut con = redis.conn();
    let peek: Vec<i64> = redis::cmd("RL.SLIDING")
        .arg("rl:{ip:127.0.0.1}:hello")
        .arg(2)
        .arg(60)
        .arg("PEEK")
        .query(&mut con)
        .unwrap();
    assert_eq!(peek[1], 2, "count after two admitted and one denied");
}

#[tokio::test]
async fn each_route_has_its_own_policies_and_reports_the_tightest() {
    let redis = Redis::start();
    let limiter = RateLimiter::new(config(&redis.url())).unwrap();
    let app = Router::new()
        .route(
            "/one",
            get(ok).route_layer(limiter.layer([Policy::fixed("one", 1, secs(60))])),
        )
        .route(
            "/two",
            get(ok).route_layer(limiter.layer([Policy::token("two", 2, secs(60))])),
        )
        .route(
            "/both",
            get(ok).route_layer(limiter.layer([
                Policy::sliding("hourly", 100, secs(3600)).approx(),
                Policy::fixed("burst", 2, secs(10)).aligned(),
            ])),
        )
        .route("/free", get(ok));
    let base = serve(app).await;
    let client = http();
    let get = |path: &str| client.get(format!("{base}{path}"));

    assert_eq!(send(get("/one")).await.status, 200);
    assert_eq!(send(get("/one")).await.status, 429);
    let two = send(get("/two")).await;
    assert_eq!(two.status, 200, "/one's counter is not /two's");
    assert_eq!(two.header("ratelimit-policy"), Some("\"two\";q=2;w=60"));
    assert_eq!(two.int("x-ratelimit-remaining"), 1);

    let free = send(get("/free")).await;
    assert_eq!(free.status, 200);
    assert_eq!(free.header("ratelimit"), None);
    assert_eq!(free.header("x-ratelimit-limit"), None);

    // Both policies advertised; the one with the least share left reported.
    let both = send(get("/both")).await;
    assert_eq!(both.status, 200);
    assert_eq!(
        both.header("ratelimit-policy"),
        Some("\"hourly\";q=100;w=3600, \"burst\";q=2;w=10")
    );
    assert!(
        both.header("ratelimit")
            .unwrap()
            .starts_with("\"burst\";r=1;t="),
        "{both:?}"
    );
    assert_eq!(both.int("x-ratelimit-limit"), 2);
    assert_eq!(both.int("x-ratelimit-remaining"), 1);
}

/// A stand-in for an auth layer: `X-User` becomes the authenticated user.
async fn test_auth(mut req: Request, next: Next) -> Response {
    let user = req
        .headers()
        .get("x-user")
        .map(|v| v.to_str().unwrap().to_string());
    if let Some(user) = user {
        req.extensions_mut().insert(AuthUser(user));
    }
    next.run(req).await
}

#[tokio::test]
async fn clients_are_counted_by_api_key_then_user_then_ip() {
    let redis = Redis::start();
    let limiter = RateLimiter::new(config(&redis.url())).unwrap();
    let app = Router::new()
        .route(
            "/x",
            get(ok).route_layer(limiter.layer([Policy::fixed("client", 1, secs(60))])),
        )
        .layer(middleware::from_fn(test_auth));
    let base = serve(app).await;
    let client = http();
    let get = |headers: &[(&str, &str)]| {
        let mut request = client.get(format!("{base}/x"));
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        request
    };
    let status = |a: Answer| a.status;

    assert_eq!(status(send(get(&[("x-api-key", "key-a")])).await), 200);
    assert_eq!(status(send(get(&[("x-api-key", "key-a")])).await), 429);
    assert_eq!(status(send(get(&[("x-api-key", "key-b")])).await), 200);
    assert_eq!(status(send(get(&[("x-user", "alice")])).await), 200);
    assert_eq!(status(send(get(&[("x-user", "alice")])).await), 429);
    // An API key wins over the user.
    let both = [("x-user", "alice"), ("x-api-key", "key-c")];
    assert_eq!(status(send(get(&both)).await), 200);
    // Without credentials, the IP (loopback is not exempt here).
    assert_eq!(status(send(get(&[])).await), 200);
    assert_eq!(status(send(get(&[])).await), 429);

    let mut con = redis.conn();
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut con).unwrap();
    keys.sort();
    let mut expected = vec![
        format!("rl:{{key:{}}}:client", api_key_id(b"key-a")),
        format!("rl:{{key:{}}}:client", api_key_id(b"key-b")),
        format!("rl:{{key:{}}}:client", api_key_id(b"key-c")),
        "rl:{user:alice}:client".to_string(),
        "rl:{ip:127.0.0.1}:client".to_string(),
    ];
    expected.sort();
    assert_eq!(keys, expected, "API keys are stored as ids, never verbatim");
}

#[tokio::test]
async fn forwarded_addresses_count_only_from_a_trusted_proxy() {
    let redis = Redis::start();
    let per_ip = || vec![Policy::fixed("ip", 1, secs(60)).scope(Scope::Ip)];
    let trusting = app_with(
        Config {
            trusted_proxies: vec!["127.0.0.1/32".parse().unwrap()],
            ..config(&redis.url())
        },
        per_ip(),
    )
    .await;
    let untrusting = app_with(
        Config {
            key_prefix: "direct:".into(),
            ..config(&redis.url())
        },
        per_ip(),
    )
    .await;
    let client = http();
    let via = |base: &str, header: &str, value: &str| {
        client.get(format!("{base}/x")).header(header, value)
    };
    let xff = "x-forwarded-for";

    // Behind a trusted proxy, each forwarded client has its own counter.
    assert_eq!(send(via(&trusting, xff, "203.0.113.1")).await.status, 200);
    assert_eq!(send(via(&trusting, xff, "203.0.113.1")).await.status, 429);
    assert_eq!(send(via(&trusting, xff, "203.0.113.2")).await.status, 200);
    // A hop the client forged to the left changes nothing.
    let forged = "198.51.100.9, 203.0.113.1";
    assert_eq!(send(via(&trusting, xff, forged)).await.status, 429);
    assert_eq!(
        send(via(&trusting, "x-real-ip", "203.0.113.3"))
            .await
            .status,
        200
    );
    assert_eq!(
        send(via(&trusting, "x-real-ip", "203.0.113.3"))
            .await
            .status,
        429
    );

    // From an untrusted peer the headers are ignored: one counter, the peer's.
    assert_eq!(send(via(&untrusting, xff, "203.0.113.1")).await.status, 200);
    assert_eq!(send(via(&untrusting, xff, "203.0.113.2")).await.status, 429);
    assert_eq!(
        send(via(&untrusting, "x-real-ip", "203.0.113.3"))
            .await
            .status,
        429
    );

    let mut con = redis.conn();
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut con).unwrap();
    keys.sort();
    assert_eq!(
        keys,
        [
            "direct:{ip:127.0.0.1}:ip",
            "rl:{ip:203.0.113.1}:ip",
            "rl:{ip:203.0.113.2}:ip",
            "rl:{ip:203.0.113.3}:ip",
        ]
    );
}

#[tokio::test]
async fn loopback_clients_skip_ip_policies_when_exempt() {
    let redis = Redis::start();
    let exempt = Config {
        exempt_loopback: true,
        ..config(&redis.url())
    };
    let policies = || {
        vec![
            Policy::fixed("ip", 1, secs(60)).scope(Scope::Ip),
            Policy::fixed("client", 1, secs(60)),
        ]
    };
    let direct = app_with(exempt.clone(), policies()).await;
    let proxied = app_with(
        Config {
            trusted_proxies: vec!["127.0.0.1/32".parse().unwrap()],
            key_prefix: "proxied:".into(),
            ..exempt
        },
        policies(),
    )
    .await;
    let client = http();

    // Loopback without credentials: both policies count the IP, both skip.
    for _ in 0..3 {
        let a = send(client.get(format!("{direct}/x"))).await;
        assert_eq!(a.status, 200);
        assert_eq!(a.header("ratelimit"), None, "no policy was checked");
    }
    // An API key is still limited from loopback; only the client policy applies.
    let keyed = || client.get(format!("{direct}/x")).header("x-api-key", "k");
    let a = send(keyed()).await;
    assert_eq!(a.status, 200);
    assert_eq!(a.header("ratelimit-policy"), Some("\"client\";q=1;w=60"));
    assert_eq!(send(keyed()).await.status, 429);

    // Behind a loopback proxy, the forwarded client is what counts...
    let forwarded = |ip: &str| {
        client
            .get(format!("{proxied}/x"))
            .header("x-forwarded-for", ip.to_string())
    };
    assert_eq!(send(forwarded("203.0.113.5")).await.status, 200);
    assert_eq!(send(forwarded("203.0.113.5")).await.status, 429);
    // ...and a forwarded loopback client is exempt.
    for _ in 0..3 {
        assert_eq!(send(forwarded("127.0.0.1")).await.status, 200);
    }
}

#[tokio::test]
async fn body_size_is_the_cost_of_an_upload() {
    let redis = Redis::start();
    let limiter = RateLimiter::new(config(&redis.url())).unwrap();
    let app = Router::new().route(
        "/upload",
        post(body_len).route_layer(
            limiter.layer([Policy::token("bytes", 1000, secs(60)).cost(Cost::BodyBytes)]),
        ),
    );
    let base = serve(app).await;
    let client = http();
    let upload = |body: reqwest::Body| client.post(format!("{base}/upload")).body(body);

    let a = send(upload(vec![b'x'; 600].into())).await;
    assert_eq!((a.status, a.body.as_str()), (200, "600"));
    assert_eq!(
        a.header("ratelimit-policy"),
        Some("\"bytes\";q=1000;w=60;qu=\"content-bytes\"")
    );
    assert_eq!(a.int("x-ratelimit-remaining"), 400);

    // 600 more do not fit: 200 bytes short at 1000 per 60 s is 12 s.
    let denied = send(upload(vec![b'x'; 600].into())).await;
    assert_eq!(denied.status, 429);
    assert!((11..=12).contains(&denied.int("retry-after")), "{denied:?}");

    // A chunked body has no Content-Length: it is read to be measured, and
    // the handler still gets all of it.
    let chunks = (0..3).map(|_| Ok::<_, std::io::Error>(vec![b'y'; 100]));
    let stream = reqwest::Body::wrap_stream(futures_util::stream::iter(chunks));
    let chunked = send(upload(stream)).await;
    assert_eq!((chunked.status, chunked.body.as_str()), (200, "300"));
    assert!(chunked.int("x-ratelimit-remaining") <= 100, "{chunked:?}");

    // More than the bucket holds: no wait helps, so no Retry-After.
    let never = send(upload(vec![b'x'; 5000].into())).await;
    assert_eq!(never.status, 429);
    assert_eq!(never.header("retry-after"), None);
    let problem = never.problem();
    assert_eq!(problem.get("retry_after"), None);
    assert!(
        problem["detail"].as_str().unwrap().contains("costs 5000"),
        "{problem}"
    );
}

#[tokio::test]
async fn a_header_can_carry_the_cost() {
    let redis = Redis::start();
    let base = app_with(
        config(&redis.url()),
        vec![Policy::fixed("items", 10, secs(60))
            .cost(Cost::Header("x-batch-size".parse().unwrap()))],
    )
    .await;
    let client = http();
    let batch = |size: Option<&str>| {
        let request = client.get(format!("{base}/x"));
        match size {
            Some(size) => request.header("x-batch-size", size),
            None => request,
        }
    };
    assert_eq!(send(batch(Some("7"))).await.int("x-ratelimit-remaining"), 3);
    assert_eq!(send(batch(Some("4"))).await.status, 429);
    assert_eq!(send(batch(None)).await.int("x-ratelimit-remaining"), 2);
    for bad in ["lots", "0", "-3", "1125899906842625"] {
        let refused = send(batch(Some(bad))).await;
        assert_eq!(refused.status, 400, "{bad}: {refused:?}");
        assert!(refused.problem()["detail"]
            .as_str()
            .unwrap()
            .contains("x-batch-size"));
    }
}

#[tokio::test]
async fn an_override_gives_one_client_its_own_limit() {
    let redis = Redis::start();
    let base = app_with(
        config(&redis.url()),
        vec![Policy::fixed("plan", 1, secs(60)).overridable()],
    )
    .await;
    let okey = format!("rl:{{key:{}}}:override:plan", api_key_id(b"gold"));
    let mut con = redis.conn();
    let () = redis::cmd("RL.OVERRIDE.SET")
        .arg(&okey)
        .arg(3)
        .arg("1m")
        .query(&mut con)
        .unwrap();
    let client = http();
    let with_key = |key: &str| {
        client
            .get(format!("{base}/x"))
            .header("x-api-key", key.to_string())
    };

    let gold = send(with_key("gold")).await;
    assert_eq!(gold.header("ratelimit-policy"), Some("\"plan\";q=3;w=60"));
    assert_eq!(gold.int("x-ratelimit-remaining"), 2);
    let plain = send(with_key("plain")).await;
    assert_eq!(plain.header("ratelimit-policy"), Some("\"plan\";q=1;w=60"));
    assert_eq!(send(with_key("plain")).await.status, 429);
    assert_eq!(send(with_key("gold")).await.status, 200);
}

/// Redis down when the app starts, then up, hung, killed, and back: the fail
/// mode decides while it cannot answer, and limits apply again once it can.
async fn redis_outage(mode: FailMode, check_down: fn(&Answer)) {
    let port = free_port();
    let base = app_with(
        Config {
            fail_mode: mode,
            ..config(&format!("redis://127.0.0.1:{port}/"))
        },
        vec![Policy::fixed("hello", 100, secs(60))],
    )
    .await;
    let client = http();
    let get = || send(client.get(format!("{base}/x")));

    check_down(&get().await);
    let mut redis = Redis::start_on(port);
    let up = get().await;
    assert_eq!(up.status, 200);
    assert_eq!(up.int("x-ratelimit-remaining"), 99);

    // Hung: the request waits the configured 500 ms, not for ever.
    redis.pause();
    let started = Instant::now();
    check_down(&get().await);
    assert!(
        started.elapsed() < secs(3),
        "waited {:?}",
        started.elapsed()
    );
    redis.resume();
    let resumed = get().await;
    assert_eq!(resumed.status, 200);
    // The call that timed out may still have been counted once Redis woke.
    assert!(resumed.int("x-ratelimit-remaining") >= 97, "{resumed:?}");

    redis.kill();
    check_down(&get().await);

    // The connection is remade after the loss.
    let _redis = Redis::start_on(port);
    let deadline = Instant::now() + secs(10);
    loop {
        let again = get().await;
        if again.header("ratelimit").is_some() {
            // A new server: its counter starts afresh.
            assert_eq!(
                (again.status, again.int("x-ratelimit-remaining")),
                (200, 99)
            );
            break;
        }
        check_down(&again);
        assert!(Instant::now() < deadline, "no reconnection after 10 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn fail_open_admits_unlimited_while_redis_is_down() {
    redis_outage(FailMode::Open, |a| {
        assert_eq!((a.status, a.body.as_str()), (200, "ok"));
        assert_eq!(a.header("ratelimit"), None, "{a:?}");
    })
    .await;
}

#[tokio::test]
async fn fail_closed_answers_503_while_redis_is_down() {
    redis_outage(FailMode::Closed, |a| {
        assert_eq!(a.status, 503, "{a:?}");
        assert_eq!(a.problem()["title"], "Service Unavailable");
        assert_eq!(a.header("ratelimit"), None);
    })
    .await;
}

/// Regression (Forja's bug): policies checked one call each counted a
/// request that a later policy refused. In one RL.ALL, a refused request is
/// counted by none.
#[tokio::test]
async fn a_request_refused_by_a_later_policy_is_not_counted_by_earlier_ones() {
    let redis = Redis::start();
    let base = app_with(
        config(&redis.url()),
        vec![
            Policy::fixed("minute", 10, secs(60)),
            Policy::sliding("burst", 1, secs(60)),
        ],
    )
    .await;
    let client = http();
    let first = send(client.get(format!("{base}/x"))).await;
    assert_eq!(first.status, 200);
    for _ in 0..3 {
        let refused = send(client.get(format!("{base}/x"))).await;
        assert_eq!(refused.status, 429);
        assert_eq!(refused.problem()["policy"], "burst");
        // Both policies are advertised, with their replies from the one call.
        assert_eq!(
            refused.header("ratelimit-policy"),
            Some("\"minute\";q=10;w=60, \"burst\";q=1;w=60")
        );
    }
    let mut con = redis.conn();
    let peek: Vec<i64> = redis::cmd("RL.FIXED")
        .arg("rl:{ip:127.0.0.1}:minute")
        .arg(10)
        .arg(60)
        .arg("PEEK")
        .query(&mut con)
        .unwrap();
    assert_eq!(peek[1], 2, "one admitted request, plus the PEEK's own unit");
}

/// `FailMode::Local`: with Redis down the process keeps enforcing the
/// route's policies itself (all-or-nothing too), and Redis decides again
/// once it is back.
#[tokio::test]
async fn fail_local_keeps_limiting_in_the_process_while_redis_is_down() {
    let port = free_port();
    let base = app_with(
        Config {
            fail_mode: FailMode::Local,
            ..config(&format!("redis://127.0.0.1:{port}/"))
        },
        vec![
            Policy::fixed("minute", 3, secs(60)),
            Policy::token("burst", 2, secs(60)),
        ],
    )
    .await;
    let client = http();
    let get = || send(client.get(format!("{base}/x")));

    // No Redis yet: limited in the process, with the usual headers.
    let a = get().await;
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(
        a.header("ratelimit-policy"),
        Some("\"minute\";q=3;w=60, \"burst\";q=2;w=60")
    );
    assert_eq!(a.header("ratelimit"), Some("\"burst\";r=1;t=30"));
    assert_eq!(get().await.int("x-ratelimit-remaining"), 0);
    let refused = get().await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.problem()["policy"], "burst");
    assert!(
        (29..=30).contains(&refused.int("retry-after")),
        "{refused:?}"
    );
    // Redis is back: it decides, from its own (empty) counters.
    let mut redis = Redis::start_on(port);
    let deadline = Instant::now() + secs(10);
    loop {
        let up = get().await;
        if up.status == 200 {
            assert_eq!(up.header("ratelimit"), Some("\"burst\";r=1;t=30"));
            break;
        }
        assert!(Instant::now() < deadline, "Redis never answered: {up:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut con = redis.conn();
    let peek: Vec<i64> = redis::cmd("RL.FIXED")
        .arg("rl:{ip:127.0.0.1}:minute")
        .arg(3)
        .arg(60)
        .arg("PEEK")
        .query(&mut con)
        .unwrap();
    assert_eq!(peek[1], 2, "one request counted in Redis");

    // Down again: the process's own counters carry on where they were.
    redis.kill();
    let refused = get().await;
    assert_eq!(refused.status, 429, "{refused:?}");
    assert_eq!(refused.problem()["policy"], "burst");
}
