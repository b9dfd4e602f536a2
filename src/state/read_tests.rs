//! COST 0 reads and what a commit adds to the dataset, decided against
//! keys held in memory with an explicit `now` (no server).

use super::sliding::COMPACT_MAX;
use super::{Checked, Held, Step, Write};
use crate::request::{Action, Reserve};
use librl_core::approx::ApproxParams;
use librl_core::concurrent::ConcurrentParams;
use librl_core::fixed::FixedParams;
use librl_core::limit::Limit;
use librl_core::sliding::SlidingParams;
use librl_core::token::TokenParams;

fn take(cost: u64) -> Action {
    Action::Take {
        cost,
        reserve: None,
    }
}

fn step(now: u64, action: Action) -> Step {
    Step {
        now,
        action,
        block_ms: None,
        peek: false,
    }
}

fn run(limit: &Limit, key: &Held, s: &Step) -> Checked {
    key.check(limit, s).expect("a value we built decides")
}

/// Runs admitted calls of cost 1 at `times`, returning the key.
fn calls(limit: &Limit, times: &[u64]) -> Held {
    let mut key = Held::default();
    for &now in times {
        let c = run(limit, &key, &step(now, take(1)));
        assert_eq!(c.denied, None, "call at {now}");
        key.commit(c.commit.as_ref().expect("admitted calls write"));
    }
    key
}

fn limits() -> [Limit; 6] {
    [
        Limit::Fixed(FixedParams::new(10, 1000, false).unwrap()),
        Limit::Fixed(FixedParams::new(10, 1000, true).unwrap()),
        Limit::Sliding(SlidingParams::new(10, 1000).unwrap()),
        Limit::Approx(ApproxParams::new(10, 1000).unwrap()),
        Limit::Token(TokenParams::new(10, 1000, 10).unwrap()),
        Limit::Concurrent(ConcurrentParams::new(10, 1000).unwrap()),
    ]
}

/// A read writes nothing, waits for nothing and is never denied.
fn assert_read(c: &Checked) {
    assert!(c.commit.is_none());
    assert_eq!(c.denied, None);
    assert_eq!(c.wait_ms, 0);
    assert!(c.event.is_none());
    assert_eq!(c.held, c.reply);
}

#[test]
fn cost_zero_on_an_empty_key_reads_an_empty_limiter() {
    for limit in limits() {
        let c = run(&limit, &Held::default(), &step(5_000, take(0)));
        assert_read(&c);
        assert_eq!(c.reply.six(), [1, 0, 0, 10, 10, 0], "{limit:?}");
    }
}

#[test]
fn cost_zero_reads_the_counts_as_stored() {
    // Three calls in one window, read 500 ms after the first: the count
    // does not include the read (a PEEK of cost 1 would say 4).
    let times = [10_000, 10_100, 10_200];
    let want = |limit: &Limit| -> [i64; 6] {
        match limit {
            // The window opened at 10000 (aligned: also 10000).
            Limit::Fixed(_) => [1, 3, 0, 10, 7, 500],
            // The newest entry leaves at 10200 + 1000.
            Limit::Sliding(_) => [1, 3, 0, 10, 7, 700],
            // The current aligned window [10000, 11000) holds 3.
            Limit::Approx(_) => [1, 3, 0, 10, 7, 1500],
            // One token back per 100 ms: each call's token was back within
            // 100 ms, so the bucket is full at 10500.
            Limit::Token(_) => [1, 0, 0, 10, 10, 0],
            // Three leases of a second each: the last ends at 11200.
            Limit::Concurrent(_) => [1, 3, 0, 10, 7, 700],
        }
    };
    for limit in limits() {
        let key = calls(&limit, &times);
        let c = run(&limit, &key, &step(10_500, take(0)));
        assert_read(&c);
        assert_eq!(c.reply.six(), want(&limit), "{limit:?}");
        let peek = run(
            &limit,
            &key,
            &Step {
                peek: true,
                ..step(10_500, take(1))
            },
        );
        assert_eq!(peek.reply.six()[1], c.reply.six()[1] + 1, "{limit:?}");
    }
}

#[test]
fn cost_zero_reads_a_token_bucket_mid_refill() {
    let limit = limits()[4];
    let key = calls(&limit, &[20_000, 20_000, 20_000]);
    // One token per 100 ms: at 20150 one is back, two are missing, and the
    // bucket is full again at 20300.
    let c = run(&limit, &key, &step(20_150, take(0)));
    assert_read(&c);
    assert_eq!(c.reply.six(), [1, 2, 0, 10, 8, 150]);
}

#[test]
fn cost_zero_with_reserve_or_wait_reads_and_never_waits() {
    let limit = Limit::Token(TokenParams::new(1, 1000, 1).unwrap());
    let mut key = calls(&limit, &[30_000]);
    // A reservation puts the bucket in debt: the next token is 1 s away.
    let reserve = |wait| Action::Take {
        cost: 1,
        reserve: Some(Reserve {
            max_wait_ms: 5_000,
            wait,
        }),
    };
    let c = run(&limit, &key, &step(30_000, reserve(false)));
    assert_eq!(c.wait_ms, 1000);
    key.commit(c.commit.as_ref().expect("a reservation writes"));
    for wait in [false, true] {
        let read = Action::Take {
            cost: 0,
            reserve: Some(Reserve {
                max_wait_ms: 5_000,
                wait,
            }),
        };
        let c = run(&limit, &key, &step(30_000, read));
        assert_read(&c);
        // Two tokens owed on a bucket of one: count 2, remaining 0, full
        // again in 2 s.
        assert_eq!(c.reply.six(), [1, 2, 0, 1, 0, 2000]);
    }
}

#[test]
fn cost_zero_during_a_block_is_admitted_and_shows_the_block_in_reset_after() {
    let limit = Limit::Fixed(FixedParams::new(1, 1000, false).unwrap());
    let mut key = calls(&limit, &[40_000]);
    let blocking = Step {
        block_ms: Some(60_000),
        ..step(40_100, take(1))
    };
    let c = run(&limit, &key, &blocking);
    assert!(c.denied.is_some());
    key.commit(c.commit.as_ref().expect("a block is written"));
    let c = run(&limit, &key, &step(40_200, take(0)));
    assert_read(&c);
    assert_eq!(c.reply.six(), [1, 1, 0, 1, 0, 59_900]);
}

#[test]
fn only_a_log_rebuilt_larger_is_growth() {
    let limit = Limit::Sliding(SlidingParams::new(1_000_000, 3_600_000).unwrap());
    let mut key = Held::default();
    let (mut grown, mut in_place, mut extended) = (0, 0, 0);
    for i in 0..2_000u64 {
        let c = run(&limit, &key, &step(50_000 + i, take(1)));
        let commit = c.commit.as_ref().expect("admitted");
        let before = key.bytes.as_ref().map_or(0, Vec::len);
        match &commit.write {
            Write::Grown(b) => {
                assert!(b.len() > before);
                grown += 1;
            }
            Write::Log(_) => in_place += 1,
            // A compact log grows by its new entry, within its bound.
            Write::Extend(x) => {
                assert!(x.at == before && before + x.entry().len() <= COMPACT_MAX);
                extended += 1;
            }
            Write::Small { .. } => assert_eq!(before, 0, "only the first call"),
            Write::Replace(b) => assert!(b.len() <= before),
            Write::Delete => panic!("an admitted call deletes nothing"),
        }
        key.commit(commit);
    }
    assert!(extended > 0, "a small log is extended");
    assert!(grown > 0 && in_place > grown * 4, "{grown} {in_place}");
}

#[test]
fn fixed_size_updates_never_grow() {
    for limit in limits() {
        if matches!(limit, Limit::Sliding(_)) {
            continue;
        }
        let mut key = calls(&limit, &[60_000]);
        for now in 60_001..60_009 {
            let c = run(&limit, &key, &step(now, take(1)));
            let commit = c.commit.as_ref().expect("admitted");
            assert!(!matches!(commit.write, Write::Grown(_)), "{limit:?}");
            key.commit(commit);
        }
    }
}

/// A TOKEN bucket in debt is another kind's key to every other reader,
/// the exact sliding log's included: WRONGTYPE, as a bucket without debt
/// is (the prefix is read in one place).
#[test]
fn a_bucket_in_debt_is_another_kinds_value_to_every_other_reader() {
    let token = Limit::Token(TokenParams::new(1, 1000, 1).unwrap());
    let reserve = Action::Take {
        cost: 1,
        reserve: Some(Reserve {
            max_wait_ms: 10_000,
            wait: false,
        }),
    };
    // The one token, then one reserved beyond an empty bucket.
    let mut key = calls(&token, &[1_000]);
    let c = run(&token, &key, &step(1_000, reserve));
    key.commit(c.commit.as_ref().expect("a reservation writes"));
    let bytes = key.bytes.clone().expect("a bucket");
    assert_eq!(&bytes[..5], b"\x00rl\x03T", "a bucket in debt is version 3");
    for limit in limits().iter().filter(|l| !matches!(l, Limit::Token(_))) {
        let err = key.check(limit, &step(1_000, take(1))).err();
        assert!(
            matches!(err, Some(crate::error::RlError::WrongType { .. })),
            "{limit:?}: {err:?}"
        );
    }
}
