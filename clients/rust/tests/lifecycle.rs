//! The options of "a request's whole life" (REFUND, BLOCK, RESERVE, WAIT)
//! and the `RL.OVERRIDE SET|GET|DEL|LIST` container form, through the
//! builders, on each server flavor and in a cluster.

mod common;

use std::time::{Duration, Instant};

use common::*;
use librl_client::{
    slot, All, AsyncLimiter, Command, DenialCache, Fixed, Limiter, Override, OverrideDel,
    OverrideGet, OverrideList, OverrideSet, RetryAfter, Sliding, Token,
};
use redis::cluster::ClusterClient;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn retry_ms(r: RetryAfter) -> u64 {
    match r {
        RetryAfter::Ms(ms) => ms,
        RetryAfter::Never => panic!("retry_after is never"),
    }
}

#[test]
fn refund_gives_back_recorded_units() {
    on_each_server(|server| {
        let mut con = server.conn();
        let fixed = || Fixed::new("f", 5, "1m");
        fixed().cost(3).query(&mut con).unwrap();
        let d = fixed().refund(2).query(&mut con).unwrap();
        assert_eq!(
            (d.allowed, d.count, d.retry_after, d.remaining),
            (true, 1, RetryAfter::Ms(0), 4)
        );
        let d = fixed().refund(10).query(&mut con).unwrap();
        assert_eq!(d.count, 0, "never below zero");

        let sliding = || Sliding::new("s", 10, "1m");
        sliding().cost(4).query(&mut con).unwrap();
        sliding().cost(3).query(&mut con).unwrap();
        let d = sliding().refund(5).query(&mut con).unwrap();
        assert_eq!(d.count, 2, "newest units first");

        let token = || Token::new("t", 10, "1h");
        token().cost(6).query(&mut con).unwrap();
        let d = token().refund(4).query(&mut con).unwrap();
        assert_eq!((d.count, d.remaining), (2, 8));

        let all = All::new()
            .clause(Fixed::new("{a}:f", 5, "1m").refund(1))
            .clause(Sliding::new("{a}:s", 5, "1m"));
        Fixed::new("{a}:f", 5, "1m")
            .cost(2)
            .query(&mut con)
            .unwrap();
        let a = all.query(&mut con).unwrap();
        assert!(a.allowed);
        assert_eq!((a.decisions[0].count, a.decisions[1].count), (1, 1));
    });
}

/// Timings leave room for a loaded machine: a call may come hundreds of
/// milliseconds after the one before it.
#[test]
fn block_denies_every_call_until_it_ends() {
    on_each_server(|server| {
        let mut con = server.conn();
        let login = || Fixed::new("login", 1, ms(200)).block(ms(2000));
        assert!(login().query(&mut con).unwrap().allowed);
        let denied = login().query(&mut con).unwrap();
        let blocked_at = Instant::now();
        assert!(!denied.allowed);
        // The window alone would say at most 200 ms.
        let first_wait = retry_ms(denied.retry_after);
        assert!((1000..=2000).contains(&first_wait), "{denied:?}");
        // The window has ended, but the block has not.
        std::thread::sleep(ms(300));
        let d = login().query(&mut con).unwrap();
        assert!(!d.allowed, "{d:?}");
        assert!(
            retry_ms(d.retry_after) <= first_wait - 300,
            "calls do not extend the block: {d:?}"
        );
        let peek = login().peek().query(&mut con).unwrap();
        assert!(!peek.allowed, "PEEK shows the block");
        let refund = login().refund(1).query(&mut con).unwrap();
        assert!(refund.allowed);
        let still = login().query(&mut con).unwrap();
        assert!(!still.allowed, "REFUND does not lift it");
        std::thread::sleep(ms(first_wait).saturating_sub(blocked_at.elapsed()) + ms(20));
        assert!(
            login().query(&mut con).unwrap().allowed,
            "the block has ended"
        );

        // PEEK never starts a block.
        let peeker = || Fixed::new("peeker", 1, ms(200)).block("1h");
        peeker().query(&mut con).unwrap();
        assert!(!peeker().peek().query(&mut con).unwrap().allowed);
        std::thread::sleep(ms(250));
        assert!(peeker().query(&mut con).unwrap().allowed);
    });
}

#[test]
fn reserve_admits_now_and_says_when_to_act() {
    on_each_server(|server| {
        let mut con = server.conn();
        // One token a second, a bucket of one.
        let bucket = || Token::new("queue", 1, "1s").burst(1);
        assert!(bucket().query(&mut con).unwrap().allowed);
        let first = bucket().reserve("5s").query(&mut con).unwrap();
        assert!(first.allowed, "{first:?}");
        let first_wait = retry_ms(first.retry_after);
        assert!((1..=1000).contains(&first_wait), "{first:?}");
        let second = bucket().reserve("5s").query(&mut con).unwrap();
        assert!(second.allowed);
        let second_wait = retry_ms(second.retry_after);
        assert!(
            second_wait > first_wait && second_wait <= first_wait + 1000,
            "queued one token behind: {second:?} after {first:?}"
        );
        assert_eq!(second.remaining, 0);
        // The next turn is about 3 s away: more than a 1.5 s max_wait.
        let too_long = bucket().reserve(ms(1500)).query(&mut con).unwrap();
        assert!(!too_long.allowed, "{too_long:?}");
        let extra = retry_ms(too_long.retry_after);
        assert!(extra <= second_wait + 1000 - 1500 + 1, "{too_long:?}");
        let none = bucket().reserve(Duration::ZERO).query(&mut con).unwrap();
        assert!(!none.allowed);

        let all = All::new()
            .clause(Fixed::new("{q}:day", 100, "1d"))
            .clause(Token::new("{q}:pace", 1, "1s").burst(1).reserve("5s"));
        assert_eq!(all.query(&mut con).unwrap().retry_after, RetryAfter::Ms(0));
        let paced = all.query(&mut con).unwrap();
        assert!(paced.allowed);
        assert!(
            (1..=1000).contains(&retry_ms(paced.retry_after)),
            "{paced:?}"
        );
        assert_eq!(paced.decisions[0].count, 2);
    });
}

#[test]
fn wait_returns_when_the_caller_may_act() {
    on_each_server(|server| {
        let mut con = server.conn();
        let bucket = || Token::new("paced", 10, "1s").burst(1);
        // The reserved time is 100 ms after the first call, which is after
        // `started`: the held reply cannot come sooner.
        let started = Instant::now();
        assert!(bucket().query(&mut con).unwrap().allowed);
        let d = bucket().wait("1s").query(&mut con).unwrap();
        let took = started.elapsed();
        assert!(d.allowed, "{d:?}");
        assert_eq!(d.retry_after, RetryAfter::Ms(0));
        assert!(took >= ms(99) && took < ms(2000), "held {took:?}");
    });
}

#[tokio::test]
async fn wait_holds_an_async_call_without_blocking_others() {
    let server = server(Flavor::Redis);
    let client = redis::Client::open(server.url()).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let bucket = || Token::new("paced", 5, "1s").burst(1);
    let started = Instant::now();
    assert!(bucket().query_async(&mut con).await.unwrap().allowed);
    let mut waiting = con.clone();
    let held = tokio::spawn(async move {
        let d = bucket().wait("1s").query_async(&mut waiting).await.unwrap();
        (d, started.elapsed())
    });
    let mut other = client.get_multiplexed_async_connection().await.unwrap();
    let quick = Fixed::new("other", 1, "1m")
        .query_async(&mut other)
        .await
        .unwrap();
    assert!(quick.allowed);
    let (d, took) = held.await.unwrap();
    assert!(d.allowed && took >= ms(199), "{d:?} after {took:?}");
}

#[test]
fn overrides_through_the_container_command() {
    on_each_server(|server| {
        let mut con = server.conn();
        OverrideSet::new("plan:gold", 5, "1m")
            .burst(9)
            .ttl("1h")
            .query(&mut con)
            .unwrap();
        let o = OverrideGet::new("plan:gold")
            .query(&mut con)
            .unwrap()
            .expect("stored");
        assert_eq!((o.limit, o.window_ms, o.burst), (5, 60_000, Some(9)));
        assert!(
            o.ttl_ms.is_some_and(|t| t > 3_590_000 && t <= 3_600_000),
            "{o:?}"
        );
        OverrideSet::new("plan:plain", 2, "1s")
            .query(&mut con)
            .unwrap();
        let plain = OverrideGet::new("plan:plain").query(&mut con).unwrap();
        assert_eq!(
            plain,
            Some(Override {
                limit: 2,
                window_ms: 1000,
                burst: None,
                ttl_ms: None
            })
        );
        let d = Fixed::new("u", 1, "1h")
            .override_key("plan:gold")
            .query(&mut con)
            .unwrap();
        assert_eq!((d.limit, d.reset_after_ms), (5, 60_000));

        let mut found = Vec::new();
        let mut cursor = 0;
        loop {
            let page = OverrideList::new(cursor)
                .pattern("plan:*")
                .count(10)
                .query(&mut con)
                .unwrap();
            found.extend(page.overrides.into_iter().map(|(k, _)| k));
            cursor = page.cursor;
            if cursor == 0 {
                break;
            }
        }
        found.sort();
        assert_eq!(found, [b"plan:gold".to_vec(), b"plan:plain".to_vec()]);
        assert_eq!(
            OverrideDel::new(["plan:gold", "plan:plain", "plan:none"])
                .query(&mut con)
                .unwrap(),
            2
        );
        assert_eq!(OverrideGet::new("plan:gold").query(&mut con).unwrap(), None);
    });
}

/// A refund or an override change made through the limiter forgets the
/// denials it could make wrong.
#[test]
fn the_denial_cache_forgets_after_a_refund_or_an_override_change() {
    let server = server(Flavor::Redis);
    let mut limiter = Limiter::new(server.conn()).with_cache(DenialCache::new());
    let call = Fixed::new("{k}:f", 1, "1h").override_key("{k}:plan");
    assert!(limiter.run(&call).unwrap().allowed);
    assert!(!limiter.run(&call).unwrap().allowed);
    assert_eq!(limiter.cache().map(DenialCache::len), Some(1));
    let refund = limiter
        .run(&Fixed::new("{k}:f", 1, "1h").refund(1))
        .unwrap();
    assert_eq!(refund.count, 0);
    assert_eq!(limiter.cache().map(DenialCache::len), Some(0));
    assert!(
        limiter.run(&call).unwrap().allowed,
        "the server decides again"
    );
    assert!(!limiter.run(&call).unwrap().allowed);
    assert_eq!(limiter.cache().map(DenialCache::len), Some(1));
    limiter
        .run(&OverrideSet::new("{k}:plan", 10, "1h"))
        .unwrap();
    assert_eq!(limiter.cache().map(DenialCache::len), Some(0));
    let d = limiter.run(&call).unwrap();
    assert!(d.allowed && d.limit == 10, "{d:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overrides_in_a_cluster_go_to_their_key_and_list_per_node() {
    let cluster = cluster(Flavor::Redis);
    let client = ClusterClient::new(cluster.urls()).unwrap();
    let limiter = AsyncLimiter::new(client.get_async_connection().await.unwrap());
    cluster.reset_stats();
    let okeys: Vec<String> = (0..30).map(|i| format!("{{tenant:{i}}}:plan")).collect();
    for okey in &okeys {
        limiter.run(&OverrideSet::new(okey, 7, "1m")).await.unwrap();
        let o = limiter.run(&OverrideGet::new(okey)).await.unwrap();
        assert_eq!(o.map(|o| o.limit), Some(7));
        let tag = &okey[..okey.len() - ":plan".len()];
        let d = limiter
            .run(
                &All::new()
                    .clause(Sliding::new(format!("{tag}:minute"), 1, "1m").override_key(okey)),
            )
            .await
            .unwrap();
        assert_eq!(d.decisions[0].limit, 7);
    }
    let stats = cluster.stats("rl.override|set");
    for (node, (calls, getkeys, moved)) in stats.iter().enumerate() {
        assert!(*calls > 0, "node {node}: {stats:?}");
        assert_eq!((*getkeys, *moved), (0, 0), "node {node}: {stats:?}");
    }
    // Each node lists its own overrides.
    let mut listed = Vec::new();
    for (i, node) in cluster.nodes.iter().enumerate() {
        let mut cursor = 0;
        loop {
            let page = limiter
                .run(&OverrideList::new(cursor).node("127.0.0.1", node.port))
                .await
                .unwrap();
            for (okey, _) in &page.overrides {
                assert_eq!(cluster.owner(slot(okey)), i);
            }
            listed.extend(page.overrides.into_iter().map(|(k, _)| k));
            cursor = page.cursor;
            if cursor == 0 {
                break;
            }
        }
    }
    assert_eq!(listed.len(), okeys.len());
    for okey in &okeys {
        assert_eq!(limiter.run(&OverrideDel::new([okey])).await.unwrap(), 1);
    }
}
