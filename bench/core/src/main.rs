//! Nanoseconds per decision of librl's pure algorithms (the `librl-core`
//! crate), outside Redis: each algorithm's `decide` (one generic loop over
//! `librl_core::algorithm::Algorithm`), with `now` advancing
//! 1 ms per call and every admitted call's new state kept (in a plain
//! in-memory value, not the module's byte layout: the whole call's cost,
//! layout included, is what the in-server measurements show).
//! Prints a Markdown table; `make bench` puts it in the results.

use librl_core::algorithm::{Algorithm, Exact, InMemory, Leasing, OwnedLog};
use librl_core::approx::ApproxParams;
use librl_core::concurrent::{ConcurrentParams, VecLeases};
use librl_core::fixed::FixedParams;
use librl_core::sliding::{Append, CorruptLog, Log, Refund, SlidingParams};
use librl_core::token::TokenParams;
use librl_core::MAX_AMOUNT;
use std::collections::VecDeque;
use std::hint::black_box;
use std::time::Instant;

const DAY_MS: u64 = 86_400_000;
const BASE_MS: u64 = 1_700_000_000_000;
const SAMPLES: usize = 7;

/// Median ns per call of `f(i)` over `SAMPLES` runs of `iters` calls each,
/// after a warm-up run. `i` keeps increasing across runs.
fn measure(iters: u64, mut f: impl FnMut(u64)) -> f64 {
    let mut i = 0u64;
    let mut run = |n: u64| {
        let start = Instant::now();
        for _ in 0..n {
            f(black_box(i));
            i += 1;
        }
        start.elapsed().as_nanos() as f64 / n as f64
    };
    run(iters / 4);
    let mut samples: Vec<f64> = (0..SAMPLES).map(|_| run(iters)).collect();
    samples.sort_by(f64::total_cmp);
    samples[SAMPLES / 2]
}

struct Row {
    core: &'static str,
    state: String,
    ns: f64,
}

/// One call of cost 1 per ms through `algorithm` from `state`, every
/// admitted call's state kept.
fn row<A: InMemory>(
    core: &'static str,
    state: String,
    algorithm: &A,
    mut kept: Option<A::State>,
    start_ms: u64,
    iters: u64,
) -> (Row, Option<A::State>)
where
    A::Error: std::fmt::Debug,
{
    let ns = measure(iters, |i| {
        let d = algorithm
            .decide(kept.as_ref(), start_ms + i, 1)
            .expect("a well-formed state");
        black_box(d.reply());
        if let Some(admit) = d.into_state() {
            kept = Some(A::admit(kept.take(), admit));
        }
    });
    (Row { core, state, ns }, kept)
}

/// A state of `algorithm` after one call at `BASE_MS`.
fn first<A: InMemory>(algorithm: &A) -> Option<A::State>
where
    A::Error: std::fmt::Debug,
{
    let d = algorithm.decide(None, BASE_MS, 1).expect("an empty state");
    d.into_state().map(|admit| A::admit(None, admit))
}

fn fixed_row(iters: u64) -> Row {
    let p = FixedParams::new(MAX_AMOUNT, DAY_MS, false).unwrap();
    row("FIXED", "one window".into(), &p, first(&p), BASE_MS, iters).0
}

fn approx_row(iters: u64) -> Row {
    let p = ApproxParams::new(MAX_AMOUNT, DAY_MS).unwrap();
    let state = "two counters".into();
    row("SLIDING APPROX", state, &p, first(&p), BASE_MS, iters).0
}

fn token_row(iters: u64) -> Row {
    let p = TokenParams::new(1_000_000, 1000, 1_000_000).unwrap();
    row("TOKEN", "a bucket".into(), &p, first(&p), BASE_MS, iters).0
}

/// CONCURRENT at a steady 10 leases held: a lease of 10 ms taken each ms
/// (the oldest has just ended), a limit of 10.
fn concurrent_row(iters: u64) -> Row {
    let leasing = Leasing::<VecLeases>::new(ConcurrentParams::new(10, 10).unwrap());
    let mut leases = None;
    for i in 0..10 {
        let d = leasing
            .decide(leases.as_ref(), BASE_MS + i, 1)
            .expect("leases in memory");
        leases = d
            .into_state()
            .map(|edit| Leasing::admit(leases.take(), edit));
    }
    let (row, leases) = row(
        "CONCURRENT",
        "10 leases".into(),
        &leasing,
        leases,
        BASE_MS + 10,
        iters,
    );
    assert_eq!(
        leases.map(|l| l.leases.len()),
        Some(10),
        "the leases stayed at 10"
    );
    row
}

/// The exact log as a plain queue of (ms, cost) with its running total:
/// the algorithm's own cost, without the module's compact byte layout.
#[derive(Default)]
struct QueueLog {
    entries: VecDeque<(u64, u64)>,
    total: u64,
}

impl Log for QueueLog {
    fn newest_ms(&self) -> Option<u64> {
        self.entries.back().map(|e| e.0)
    }
    fn total(&self) -> u64 {
        self.total
    }
    fn entries(&self) -> impl Iterator<Item = Result<(u64, u64), CorruptLog>> {
        self.entries.iter().copied().map(Ok)
    }
}

impl OwnedLog for QueueLog {
    fn apply(&mut self, a: &Append) {
        while let Some(&(t, c)) = self.entries.front() {
            if t > a.cutoff_ms {
                break;
            }
            self.total -= c;
            self.entries.pop_front();
        }
        match self.entries.back_mut() {
            Some(last) if last.0 == a.now_ms => last.1 += a.cost,
            _ => self.entries.push_back((a.now_ms, a.cost)),
        }
        self.total += a.cost;
    }

    /// (Never called: the benchmark does not refund.)
    fn refund(&mut self, r: &Refund) {
        let mut units = r.units;
        while let Some(last) = self.entries.back_mut().filter(|_| units > 0) {
            let take = units.min(last.1);
            last.1 -= take;
            self.total -= take;
            units -= take;
            if last.1 == 0 {
                self.entries.pop_back();
            }
        }
    }
}

/// The exact log at a steady `entries` live entries: one call per ms with a
/// window of `entries` ms, so each call trims the oldest entry and appends
/// one.
fn sliding_row(entries: u64, iters: u64) -> Row {
    let p = SlidingParams::new(MAX_AMOUNT, entries).unwrap();
    let mut log = QueueLog::default();
    for i in 0..entries {
        log.apply(&Append {
            now_ms: BASE_MS + i,
            cost: 1,
            cutoff_ms: 0,
        });
    }
    let start = BASE_MS + entries;
    let state = format!("{entries} entries");
    let exact = Exact::new(p);
    let (row, log) = row(
        "SLIDING (exact log)",
        state,
        &exact,
        Some(log),
        start,
        iters,
    );
    let log: QueueLog = log.expect("a log");
    assert_eq!(
        log.entries.len() as u64,
        entries,
        "the log stayed at its size"
    );
    row
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let iters = if quick { 100_000 } else { 500_000 };
    let rows = [
        fixed_row(iters),
        sliding_row(10, iters),
        sliding_row(100_000, iters),
        approx_row(iters),
        token_row(iters),
        concurrent_row(iters),
    ];
    println!("| core | state | ns per decision |");
    println!("|---|---|---:|");
    for r in rows {
        println!("| {} | {} | {:.1} |", r.core, r.state, r.ns);
    }
}
