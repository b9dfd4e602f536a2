//! The builders and replies against a real standalone server of each
//! flavor: sync RESP2, async RESP3 (multiplexed and connection manager).

mod common;

use std::time::Duration;

use common::*;
use librl_client::{
    All, AsyncLimiter, Command, Decision, DenialCache, Fixed, Limiter, OverrideSet, RetryAfter,
    Sliding, Token,
};
use redis::ErrorKind;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn six(d: &Decision) -> [i64; 6] {
    d.to_reply()
}

/// The limiters' replies, read through the typed `Decision`.
fn limiter_replies(con: &mut impl librl_client::Connection) {
    let fixed = || Fixed::new("f", 3, secs(60));
    assert_eq!(six(&fixed().query(con).unwrap()), [1, 1, 0, 3, 2, 60000]);
    let d = fixed().cost(2).query(con).unwrap();
    assert_eq!((d.allowed, d.count, d.remaining), (true, 3, 0));
    let denied = fixed().query(con).unwrap();
    assert!(!denied.allowed);
    assert!(matches!(denied.retry_after, RetryAfter::Ms(ms) if ms > 59_000 && ms <= 60_000));
    let never = fixed().cost(4).query(con).unwrap();
    assert_eq!(never.retry_after, RetryAfter::Never);
    assert_eq!(never.retry_after_ms(), -1);

    let sliding = Sliding::new("s", 2, "1m").query(con).unwrap();
    assert_eq!(six(&sliding), [1, 1, 0, 2, 1, 60000]);
    let approx = Sliding::new("a", 2, "1m")
        .approx()
        .peek()
        .query(con)
        .unwrap();
    assert!(approx.allowed && approx.count == 1);
    let token = Token::new("t", 10, secs(1))
        .burst(50)
        .cost(50)
        .query(con)
        .unwrap();
    assert_eq!(six(&token), [1, 50, 0, 50, 0, 5000]);
    let token = Token::new("t", 10, secs(1)).burst(50).query(con).unwrap();
    assert!(!token.allowed);
    assert!(matches!(token.retry_after, RetryAfter::Ms(ms) if ms <= 100));
}

/// RL.ALL: a call one clause refuses is recorded by none.
fn all_or_nothing(con: &mut impl librl_client::Connection) {
    let all = |cost: u64| {
        All::new()
            .clause(Fixed::new("{u}:minute", 10, "1m").cost(cost))
            .clause(Sliding::new("{u}:second", 3, "1s").cost(cost))
    };
    let a = all(2).query(con).unwrap();
    assert!(a.allowed);
    assert_eq!(a.retry_after, RetryAfter::Ms(0));
    assert_eq!(a.decisions.len(), 2);
    assert_eq!((a.decisions[0].count, a.decisions[1].count), (2, 2));
    let denied = all(2).query(con).unwrap();
    assert!(!denied.allowed);
    assert!(denied.decisions[0].allowed, "the minute limit alone admits");
    assert!(!denied.decisions[1].allowed, "the second limit refuses");
    assert_eq!(denied.denied_by().map(|(i, _)| i).collect::<Vec<_>>(), [1]);
    assert_eq!(denied.retry_after, denied.decisions[1].retry_after);
    // Nothing was recorded by the minute limit for the refused call.
    let peek = Fixed::new("{u}:minute", 10, "1m")
        .peek()
        .query(con)
        .unwrap();
    assert_eq!(
        peek.count, 3,
        "PEEK of cost 1 after one admitted call of cost 2"
    );
    let peeked = all(1).peek().query(con).unwrap();
    assert!(peeked.allowed);
    let after = Fixed::new("{u}:minute", 10, "1m")
        .peek()
        .query(con)
        .unwrap();
    assert_eq!(after.count, 3, "PEEK recorded nothing");
}

#[test]
fn sync_resp2_replies_on_each_server() {
    on_each_server(|server| {
        let mut con = server.conn();
        limiter_replies(&mut con);
        all_or_nothing(&mut con);
        assert_server_errors_come_back(&mut con);
        let e = Fixed::new("f", 0, "1m").query(&mut con).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Client);
        assert!(e.to_string().contains("limit must be"), "{e}");
        // Keys in different slots are fine on a standalone server.
        let spread = All::new()
            .clause(Fixed::new("x", 1, "1m"))
            .clause(Fixed::new("y", 1, "1m"))
            .query(&mut con)
            .unwrap();
        assert!(spread.allowed);
    });
}

#[tokio::test]
async fn async_resp3_replies_on_each_server() {
    for flavor in FLAVORS {
        let server = server(flavor);
        let client = redis::Client::open(server.url_resp3()).unwrap();
        let mut con = client.get_multiplexed_async_connection().await.unwrap();
        let d = Fixed::new("f", 2, "1m")
            .cost(2)
            .query_async(&mut con)
            .await
            .unwrap();
        assert_eq!(d.to_reply(), [1, 2, 0, 2, 0, 60000]);
        let all = All::new()
            .clause(Fixed::new("f", 2, "1m"))
            .clause(Token::new("t", 5, "1s"))
            .query_async(&mut con)
            .await
            .unwrap();
        assert!(!all.allowed);
        assert_eq!(all.decisions[1].to_reply(), [1, 1, 0, 5, 4, 200]);

        let mut manager = client.get_connection_manager().await.unwrap();
        let d = Sliding::new("s", 1, "1m")
            .query_async(&mut manager)
            .await
            .unwrap();
        assert!(d.allowed);
        let d = Sliding::new("s", 1, "1m")
            .query_async(&mut manager)
            .await
            .unwrap();
        assert!(!d.allowed);

        let limiter = AsyncLimiter::new(manager);
        let d = limiter
            .run(&Sliding::new("s", 1, "1m").peek())
            .await
            .unwrap();
        assert_eq!(d.count, 1);
        let e = limiter.run(&All::new()).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Client);
    }
}

/// A denied call is answered locally until its retry_after, then the
/// server decides again; its times shrink as they would on the server.
#[test]
fn the_denial_cache_keeps_a_refused_client_off_the_server() {
    let server = server(Flavor::Redis);
    let mut stats = server.conn();
    let mut limiter = Limiter::new(server.conn()).with_cache(DenialCache::new());
    // A window long enough that a loaded machine does not end it mid-test.
    let call = Fixed::new("busy", 1, Duration::from_millis(2000));
    assert!(limiter.run(&call).unwrap().allowed);
    let first = limiter.run(&call).unwrap();
    assert!(!first.allowed);
    let calls = command_calls(&mut stats, "rl.fixed");
    assert_eq!(calls, 2);
    std::thread::sleep(Duration::from_millis(100));
    let mut last = first;
    for _ in 0..100 {
        let d = limiter.run(&call).unwrap();
        assert!(!d.allowed);
        assert!(d.retry_after <= last.retry_after && d.reset_after_ms <= last.reset_after_ms);
        last = d;
    }
    assert_eq!(
        command_calls(&mut stats, "rl.fixed"),
        calls,
        "answered locally"
    );
    assert!(
        last.retry_after < first.retry_after,
        "{last:?} after {first:?}"
    );
    // A different call on the same key goes to the server.
    assert!(!limiter.run(&call.clone().cost(1).peek()).unwrap().allowed);
    assert_eq!(command_calls(&mut stats, "rl.fixed"), calls + 1);
    // After retry_after, the server admits again: never early, never stuck.
    std::thread::sleep(last.retry_after.duration().unwrap());
    assert!(limiter.run(&call).unwrap().allowed);
    assert_eq!(command_calls(&mut stats, "rl.fixed"), calls + 2);
}

#[tokio::test]
async fn the_async_denial_cache_answers_rl_all_locally() {
    let server = server(Flavor::Valkey);
    let mut stats = server.conn();
    let client = redis::Client::open(server.url()).unwrap();
    let con = client.get_multiplexed_async_connection().await.unwrap();
    let limiter = AsyncLimiter::new(con).with_cache(DenialCache::new());
    let all = All::new()
        .clause(Fixed::new("{c}:a", 1, "1m"))
        .clause(Token::new("{c}:b", 100, "1s"));
    assert!(limiter.run(&all).await.unwrap().allowed);
    let denied = limiter.run(&all).await.unwrap();
    assert!(!denied.allowed);
    for _ in 0..20 {
        let again = limiter.run(&all).await.unwrap();
        assert!(!again.allowed);
        assert_eq!(again.decisions.len(), 2);
    }
    assert_eq!(command_calls(&mut stats, "rl.all"), 2);
    assert_eq!(limiter.cache().map(DenialCache::len), Some(1));
}

/// An operator's change made elsewhere reaches a running process's cache
/// within its max age, however long the cached denial (a `BLOCK 1h`), and
/// at once through `forget_key` or `clear`.
#[test]
fn a_block_lifted_elsewhere_is_honoured_within_the_cache_s_max_age() {
    on_each_server(|server| {
        let mut operator = server.conn();
        let cache = DenialCache::new().with_max_age(Duration::from_millis(300));
        let mut limiter = Limiter::new(server.conn()).with_cache(cache.clone());
        let login = Fixed::new("login:ip", 1, "1h").block("1h");
        assert!(limiter.run(&login).unwrap().allowed);
        let blocked = limiter.run(&login).unwrap();
        assert!(!blocked.allowed && blocked.retry_after > RetryAfter::Ms(3_000_000));
        let lifted_at = std::time::Instant::now();
        let () = redis::cmd("DEL")
            .arg("login:ip")
            .query(&mut operator)
            .unwrap();
        // Answered from the cache until the max age, then by the server
        // (timed from before each call: a loaded machine may pause the
        // test between a call's answer and its check).
        loop {
            let asked = lifted_at.elapsed();
            if limiter.run(&login).unwrap().allowed {
                break;
            }
            assert!(
                asked < Duration::from_millis(300),
                "denied when asked {asked:?} after the block was lifted"
            );
        }
        // At once, by hand: a key deleted elsewhere, an override raised.
        assert!(!limiter.run(&login).unwrap().allowed);
        let () = redis::cmd("DEL")
            .arg("login:ip")
            .query(&mut operator)
            .unwrap();
        cache.forget_key(b"login:ip");
        assert!(limiter.run(&login).unwrap().allowed);
        let plan = Fixed::new("api:key", 1, "1h").override_key("plan:key");
        assert!(limiter.run(&plan).unwrap().allowed);
        assert!(!limiter.run(&plan).unwrap().allowed);
        OverrideSet::new("plan:key", 10, "1h")
            .query(&mut operator)
            .unwrap();
        assert!(!limiter.run(&plan).unwrap().allowed, "cached");
        cache.clear();
        assert!(limiter.run(&plan).unwrap().allowed);
    });
}
