//! conformance/vectors/algorithms.json: sequences of calls and the module's
//! six-integer reply to each, made by librl-core itself, so that every
//! language's in-process algorithms (the `local` fail mode, docs/http.md,
//! Fail modes) are held to the module's decisions. This test writes the
//! file from the core and fails when the file differs: run it with
//! `LIBRL_WRITE_VECTORS=1 cargo test -p librl-core --test algorithm_vectors`
//! after a change to the sequences or to the core, and commit the file.
//!
//! A call is decided on the key's state as the module keeps it: an admitted
//! call's state is stored, a denied one stores nothing, and a state whose
//! expiry (`expires_at_ms`) has come is gone, as Redis deletes the key.

use librl_core::algorithm::{Exact, InMemory};
use librl_core::approx::ApproxParams;
use librl_core::decision::Verdict;
use librl_core::fixed::FixedParams;
use librl_core::sliding::{SlidingParams, VecLog};
use librl_core::token::TokenParams;
use std::fmt::Write as _;
use std::path::PathBuf;

/// One sequence: the policy's parameters and its calls `(now_ms, cost)`.
struct Sequence {
    name: &'static str,
    algorithm: &'static str,
    limit: u64,
    window_ms: u64,
    aligned: bool,
    burst: Option<u64>,
    calls: Vec<(u64, u64)>,
}

fn seq(
    name: &'static str,
    algorithm: &'static str,
    limit: u64,
    window_ms: u64,
    calls: Vec<(u64, u64)>,
) -> Sequence {
    Sequence {
        name,
        algorithm,
        limit,
        window_ms,
        aligned: false,
        burst: None,
        calls,
    }
}

/// Calls at a steady pace: `n` calls of `cost`, `step` ms apart from `from`.
fn paced(from: u64, step: u64, n: u64, cost: u64) -> Vec<(u64, u64)> {
    (0..n).map(|i| (from + i * step, cost)).collect()
}

/// A reproducible irregular sequence (a linear congruential generator):
/// `n` calls, gaps of 0 to `max_gap` ms, costs of 1 to `max_cost`.
fn irregular(seed: u64, n: usize, max_gap: u64, max_cost: u64) -> Vec<(u64, u64)> {
    let mut x = seed;
    let mut next = move || {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        x >> 33
    };
    let mut now = 1_000_000;
    (0..n)
        .map(|_| {
            now += next() % (max_gap + 1);
            (now, 1 + next() % max_cost)
        })
        .collect()
}

fn sequences() -> Vec<Sequence> {
    let mut all = vec![
        seq(
            "fixed-fills-then-denies",
            "fixed",
            3,
            1000,
            paced(0, 0, 5, 1),
        ),
        seq(
            "fixed-new-window",
            "fixed",
            2,
            1000,
            vec![(0, 1), (10, 1), (999, 1), (1000, 1), (1001, 1), (1002, 1)],
        ),
        seq(
            "fixed-cost-over-the-limit-never-fits",
            "fixed",
            3,
            1000,
            vec![(0, 4), (0, 3), (1, 1)],
        ),
        seq(
            "fixed-costs",
            "fixed",
            10,
            1000,
            vec![(0, 4), (1, 4), (2, 4), (3, 2), (1000, 10)],
        ),
        Sequence {
            aligned: true,
            ..seq(
                "fixed-aligned-windows-on-the-clock",
                "fixed",
                2,
                1000,
                vec![
                    (1500, 1),
                    (1600, 1),
                    (1999, 1),
                    (2000, 1),
                    (2999, 2),
                    (3000, 1),
                ],
            )
        },
        seq("fixed-irregular", "fixed", 5, 700, irregular(1, 60, 300, 2)),
        seq(
            "sliding-fills-then-denies",
            "sliding",
            3,
            1000,
            paced(0, 100, 5, 1),
        ),
        seq(
            "sliding-oldest-leaves-the-window",
            "sliding",
            2,
            1000,
            vec![(0, 1), (400, 1), (999, 1), (1000, 1), (1001, 1), (1400, 1)],
        ),
        seq(
            "sliding-cost-over-the-limit",
            "sliding",
            3,
            1000,
            vec![(0, 4), (0, 2), (1, 2)],
        ),
        seq(
            "sliding-irregular",
            "sliding",
            5,
            700,
            irregular(2, 60, 300, 2),
        ),
        seq(
            "approx-fills-then-denies",
            "approx",
            3,
            1000,
            paced(0, 100, 5, 1),
        ),
        seq(
            "approx-weighs-the-previous-window-down",
            "approx",
            10,
            1000,
            [paced(0, 50, 11, 1), paced(1500, 10, 8, 1)].concat(),
        ),
        seq(
            "approx-irregular",
            "approx",
            5,
            700,
            irregular(3, 60, 300, 2),
        ),
        seq("token-burst-then-rate", "token", 1, 1000, paced(0, 0, 3, 1)),
        Sequence {
            burst: Some(3),
            ..seq(
                "token-burst-larger-than-the-rate",
                "token",
                1,
                1000,
                vec![
                    (0, 1),
                    (0, 1),
                    (0, 1),
                    (0, 1),
                    (500, 1),
                    (1000, 1),
                    (3000, 2),
                    (3000, 2),
                ],
            )
        },
        Sequence {
            burst: Some(2),
            ..seq(
                "token-cost-over-the-burst",
                "token",
                5,
                1000,
                vec![(0, 3), (0, 2), (0, 1)],
            )
        },
        Sequence {
            burst: Some(4),
            ..seq("token-irregular", "token", 2, 500, irregular(4, 60, 300, 2))
        },
    ];
    all.push(seq(
        "token-irregular-rate-as-burst",
        "token",
        3,
        1000,
        irregular(5, 60, 200, 1),
    ));
    all
}

/// Decides one call on `state` (dropped once expired) and commits an
/// admitted one: the module's reply.
fn call<A>(alg: &A, state: &mut Option<(A::State, u64)>, now: u64, cost: u64) -> [i64; 6]
where
    A: InMemory,
    A::State: Clone,
{
    if state.as_ref().is_some_and(|(_, expires)| now >= *expires) {
        *state = None;
    }
    let current = state.as_ref().map(|(s, _)| s);
    let decision = alg
        .decide(current, now, cost)
        .unwrap_or_else(|_| panic!("a state this test stored is never corrupt"));
    let reply = decision.limiter_reply().six();
    if let Verdict::Admit {
        state: admit,
        expires_at_ms,
        ..
    } = decision.verdict
    {
        let old = state.take().map(|(s, _)| s);
        *state = Some((A::admit(old, admit), expires_at_ms));
    }
    reply
}

fn replies<A>(alg: &A, calls: &[(u64, u64)]) -> Vec<[i64; 6]>
where
    A: InMemory,
    A::State: Clone,
{
    let mut state = None;
    calls
        .iter()
        .map(|&(now, cost)| call(alg, &mut state, now, cost))
        .collect()
}

fn run(s: &Sequence) -> Vec<[i64; 6]> {
    match s.algorithm {
        "fixed" => replies(
            &FixedParams::new(s.limit, s.window_ms, s.aligned)
                .unwrap_or_else(|| panic!("{}: parameters out of range", s.name)),
            &s.calls,
        ),
        "sliding" => {
            let params = SlidingParams::new(s.limit, s.window_ms)
                .unwrap_or_else(|| panic!("{}: parameters out of range", s.name));
            replies(&Exact::<VecLog>::new(params), &s.calls)
        }
        "approx" => replies(
            &ApproxParams::new(s.limit, s.window_ms)
                .unwrap_or_else(|| panic!("{}: parameters out of range", s.name)),
            &s.calls,
        ),
        "token" => replies(
            &TokenParams::new(s.limit, s.window_ms, s.burst.unwrap_or(s.limit))
                .unwrap_or_else(|| panic!("{}: parameters out of range", s.name)),
            &s.calls,
        ),
        other => panic!("{}: no algorithm {other}", s.name),
    }
}

/// The file, in the layout of the other vector files (one-space indents).
fn render() -> String {
    let mut out = String::from(
        "{\n \"rule\": \"docs/http.md#fail-modes\",\n \"function\": \"algorithm\",\n \"vectors\": [",
    );
    for (i, s) in sequences().iter().enumerate() {
        let calls: Vec<String> = s.calls.iter().map(|(n, c)| format!("[{n}, {c}]")).collect();
        let expect: Vec<String> = run(s)
            .iter()
            .map(|r| {
                let ints: Vec<String> = r.iter().map(i64::to_string).collect();
                format!("[{}]", ints.join(", "))
            })
            .collect();
        let mut input = format!(
            "\"algorithm\": \"{}\", \"limit\": {}, \"window_ms\": {}",
            s.algorithm, s.limit, s.window_ms
        );
        if s.aligned {
            input.push_str(", \"aligned\": true");
        }
        if let Some(b) = s.burst {
            let _ = write!(input, ", \"burst\": {b}");
        }
        let _ = write!(
            out,
            "{}\n  {{\n   \"name\": \"{}\",\n   \"input\": {{{input}, \"calls\": [{}]}},\n   \"expect\": [{}]\n  }}",
            if i == 0 { "" } else { "," },
            s.name,
            calls.join(", "),
            expect.join(", ")
        );
    }
    out.push_str("\n ]\n}\n");
    out
}

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../conformance/vectors/algorithms.json")
}

#[test]
fn algorithms_json_is_the_cores_decisions() {
    let text = render();
    if std::env::var_os("LIBRL_WRITE_VECTORS").is_some() {
        std::fs::write(path(), &text).expect("write conformance/vectors/algorithms.json");
    }
    let on_disk = std::fs::read_to_string(path()).unwrap_or_default();
    assert!(
        on_disk == text,
        "conformance/vectors/algorithms.json differs from librl-core's decisions: \
         LIBRL_WRITE_VECTORS=1 cargo test -p librl-core --test algorithm_vectors"
    );
}

#[test]
fn names_are_unique() {
    let all = sequences();
    let mut names: Vec<&str> = all.iter().map(|s| s.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), all.len());
}
