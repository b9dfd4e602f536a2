//! Nanoseconds per decision of librl's pure algorithms (the `librl-core`
//! crate), outside Redis: each algorithm's `decide`, with `now` advancing
//! 1 ms per call and every admitted call's new state kept (in a plain
//! in-memory value, not the module's byte layout: the whole call's cost,
//! layout included, is what the in-server measurements show).
//! Prints a Markdown table; `make bench` puts it in the results.

use librl_core::approx::{self, ApproxParams};
use librl_core::fixed::{self, FixedParams};
use librl_core::sliding::{self, Append, CorruptLog, Log, SlidingParams};
use librl_core::token::{self, TokenParams};
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

fn fixed_row(iters: u64) -> Row {
    let p = FixedParams {
        limit: MAX_AMOUNT,
        window_ms: DAY_MS,
        aligned: false,
    };
    let mut state = fixed::decide(&p, None, BASE_MS, 1).into_state();
    let ns = measure(iters, |i| {
        let d = fixed::decide(&p, state, BASE_MS + i, 1);
        black_box(d.reply());
        state = d.into_state().or(state);
    });
    Row {
        core: "FIXED",
        state: "one window".into(),
        ns,
    }
}

fn approx_row(iters: u64) -> Row {
    let p = ApproxParams {
        limit: MAX_AMOUNT,
        window_ms: DAY_MS,
    };
    let mut state = approx::decide(&p, None, BASE_MS, 1).into_state();
    let ns = measure(iters, |i| {
        let d = approx::decide(&p, state, BASE_MS + i, 1);
        black_box(d.reply());
        state = d.into_state().or(state);
    });
    Row {
        core: "SLIDING APPROX",
        state: "two counters".into(),
        ns,
    }
}

fn token_row(iters: u64) -> Row {
    let p = TokenParams {
        rate: 1_000_000,
        window_ms: 1000,
        capacity: 1_000_000,
    };
    let mut state = token::decide(&p, None, BASE_MS, 1).into_state();
    let ns = measure(iters, |i| {
        let d = token::decide(&p, state, BASE_MS + i, 1);
        black_box(d.reply());
        state = d.into_state().or(state);
    });
    Row {
        core: "TOKEN",
        state: "a bucket".into(),
        ns,
    }
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

impl QueueLog {
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
}

/// The exact log at a steady `entries` live entries: one call per ms with a
/// window of `entries` ms, so each call trims the oldest entry and appends
/// one.
fn sliding_row(entries: u64, iters: u64) -> Row {
    let p = SlidingParams {
        limit: MAX_AMOUNT,
        window_ms: entries,
    };
    let mut log = QueueLog::default();
    for i in 0..entries {
        log.apply(&Append {
            now_ms: BASE_MS + i,
            cost: 1,
            cutoff_ms: 0,
        });
    }
    let start = BASE_MS + entries;
    let ns = measure(iters, |i| {
        let d = sliding::decide(&p, Some(&log), start + i, 1).expect("a well-formed log");
        black_box(d.reply());
        if let Some(a) = d.into_state() {
            log.apply(&a);
        }
    });
    assert_eq!(
        log.entries.len() as u64,
        entries,
        "the log stayed at its size"
    );
    Row {
        core: "SLIDING (exact log)",
        state: format!("{entries} entries"),
        ns,
    }
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
    ];
    println!("| core | state | ns per decision |");
    println!("|---|---|---:|");
    for r in rows {
        println!("| {} | {} | {:.1} |", r.core, r.state, r.ns);
    }
}
