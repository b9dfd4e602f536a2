//! Nanoseconds per decision of librl's pure cores: each algorithm's
//! `decide` alone, and a whole call's pure work (decode the key's bytes,
//! decide, encode or update them in place), with `now` advancing 1 ms per
//! call and every admitted call committed, so the state stays realistic.
//! Prints a Markdown table; `make bench` puts it in the results.

#[allow(dead_code)]
#[path = "../../../src/codec/mod.rs"]
mod codec;
#[allow(dead_code)]
#[path = "../../../src/core/mod.rs"]
mod core;

use crate::codec::sliding_log::{self, Applied};
use crate::core::approx::{self, ApproxParams};
use crate::core::fixed::{self, FixedParams};
use crate::core::sliding::{self, SlidingParams};
use crate::core::token::{self, TokenParams};
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
    decide_ns: f64,
    call_ns: f64,
}

fn fixed_row(iters: u64) -> Row {
    let p = FixedParams {
        limit: core::MAX_AMOUNT,
        window_ms: DAY_MS,
        aligned: false,
    };
    let mut state = fixed::decide(&p, None, BASE_MS, 1).new_state;
    let decide_ns = measure(iters, |i| {
        let d = fixed::decide(&p, state, BASE_MS + i, 1);
        black_box(d.reply());
        state = d.new_state;
    });
    let mut bytes = codec::encode_fixed(&fixed::decide(&p, None, BASE_MS, 1).new_state.unwrap());
    let call_ns = measure(iters, |i| {
        let s = codec::decode_fixed(black_box(&bytes)).ok();
        let d = fixed::decide(&p, s, BASE_MS + i, 1);
        black_box(d.reply());
        if let Some(s) = d.new_state {
            bytes = codec::encode_fixed(&s);
        }
    });
    Row {
        core: "FIXED",
        state: "one window".into(),
        decide_ns,
        call_ns,
    }
}

fn token_row(iters: u64) -> Row {
    let p = TokenParams {
        rate: 1_000_000,
        window_ms: 1000,
        capacity: 1_000_000,
    };
    let mut state = token::decide(&p, None, BASE_MS, 1).new_state;
    let decide_ns = measure(iters, |i| {
        let d = token::decide(&p, state, BASE_MS + i, 1);
        black_box(d.reply());
        state = d.new_state;
    });
    let mut bytes = codec::encode_token(&token::decide(&p, None, BASE_MS, 1).new_state.unwrap());
    let call_ns = measure(iters, |i| {
        let s = codec::decode_token(black_box(&bytes)).ok();
        let d = token::decide(&p, s, BASE_MS + i, 1);
        black_box(d.reply());
        if let Some(s) = d.new_state {
            bytes = codec::encode_token(&s);
        }
    });
    Row {
        core: "TOKEN",
        state: "a bucket".into(),
        decide_ns,
        call_ns,
    }
}

fn approx_row(iters: u64) -> Row {
    let p = ApproxParams {
        limit: core::MAX_AMOUNT,
        window_ms: DAY_MS,
    };
    let mut state = approx::decide(&p, None, BASE_MS, 1).new_state;
    let decide_ns = measure(iters, |i| {
        let d = approx::decide(&p, state, BASE_MS + i, 1);
        black_box(d.reply());
        state = d.new_state;
    });
    let mut bytes = codec::encode_approx(&approx::decide(&p, None, BASE_MS, 1).new_state.unwrap());
    let call_ns = measure(iters, |i| {
        let s = codec::decode_approx(black_box(&bytes)).ok();
        let d = approx::decide(&p, s, BASE_MS + i, 1);
        black_box(d.reply());
        if let Some(s) = d.new_state {
            bytes = codec::encode_approx(&s);
        }
    });
    Row {
        core: "SLIDING APPROX",
        state: "two counters".into(),
        decide_ns,
        call_ns,
    }
}

/// The exact log in its byte layout at a steady `entries` live entries: one
/// call per ms with a window of `entries` ms, so each call trims the oldest
/// entry and appends one (rebuilds included, amortized).
fn sliding_row(entries: u64, iters: u64) -> Row {
    let p = SlidingParams {
        limit: core::MAX_AMOUNT,
        window_ms: entries,
    };
    let log: Vec<(u64, u64)> = (0..entries).map(|i| (BASE_MS + i, 1)).collect();
    let start = BASE_MS + entries;
    // decide alone, on a full log that stays as it is.
    let fixed_log = sliding_log::build(&log);
    let decide_ns = measure(iters, |_| {
        let view = sliding_log::view(black_box(&fixed_log)).ok();
        let d = sliding::decide(&p, view.as_ref(), start, 1);
        black_box(d.reply());
    });
    let mut bytes = sliding_log::build(&log);
    let call_ns = measure(iters, |i| {
        let view = sliding_log::view(black_box(&bytes)).ok();
        let d = sliding::decide(&p, view.as_ref(), start + i, 1);
        black_box(d.reply());
        if let Some(a) = d.new_state {
            if let Applied::Replace(new) = sliding_log::apply(Some(&mut bytes), &a) {
                bytes = new;
            }
        }
    });
    let live: u64 = sliding_log::view(&bytes)
        .map(|v| {
            use crate::core::sliding::Log;
            v.entries().count() as u64
        })
        .unwrap_or(0);
    assert_eq!(live, entries, "the log stayed at its size");
    Row {
        core: "SLIDING (exact log)",
        state: format!("{entries} entries"),
        decide_ns,
        call_ns,
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let iters = if quick { 100_000 } else { 1_000_000 };
    let rows = [
        fixed_row(iters),
        sliding_row(10, iters),
        sliding_row(100_000, iters),
        approx_row(iters),
        token_row(iters),
    ];
    println!("| core | state | decide (ns) | whole call, pure part (ns) |");
    println!("|---|---|---:|---:|");
    for r in rows {
        println!(
            "| {} | {} | {:.1} | {:.1} |",
            r.core, r.state, r.decide_ns, r.call_ns
        );
    }
}
