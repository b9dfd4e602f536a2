//! Values as the earlier layouts wrote them (versions 1 and 2), built
//! byte by byte for the tests that read them after the change: the state
//! room's unit tests and the fuzzer. (tests/upgrade.rs stores such bytes
//! in real servers.)

use super::layout::{prefix, Tag, VERSION_1, VERSION_2};

fn value(version: u8, tag: Tag, fields: &[&[u8]]) -> Vec<u8> {
    let mut out = prefix(version, tag).to_vec();
    for f in fields {
        out.extend_from_slice(f);
    }
    out
}

/// `start_ms end_ms count`.
pub fn fixed(start_ms: u64, end_ms: u64, count: u64) -> Vec<u8> {
    let f = [start_ms, end_ms, count].map(u64::to_le_bytes);
    value(VERSION_1, Tag::Fixed, &[&f[0], &f[1], &f[2]])
}

/// `start_ms current previous`.
pub fn approx(start_ms: u64, current: u64, previous: u64) -> Vec<u8> {
    let f = [start_ms, current, previous].map(u64::to_le_bytes);
    value(VERSION_1, Tag::Approx, &[&f[0], &f[1], &f[2]])
}

/// `at_ms window_ms missing`; with a debt, version 2.
pub fn token(at_ms: u64, window_ms: u64, missing: u128, debt: u128) -> Vec<u8> {
    let (a, w) = (at_ms.to_le_bytes(), window_ms.to_le_bytes());
    let (m, d) = (missing.to_le_bytes(), debt.to_le_bytes());
    if debt == 0 {
        value(VERSION_1, Tag::Token, &[&a, &w, &m])
    } else {
        value(VERSION_2, Tag::Token, &[&a, &w, &m, &d])
    }
}

/// `limit window_ms burst`.
pub fn override_value(limit: u64, window_ms: u64, burst: u64) -> Vec<u8> {
    let f = [limit, window_ms, burst].map(u64::to_le_bytes);
    value(VERSION_1, Tag::Override, &[&f[0], &f[1], &f[2]])
}

/// The first release's exact log holding `entries` (oldest first, distinct
/// increasing times): `head tail last` u32s, `total first_ms last_ms`
/// u64s, the entries and 32 bytes of slack.
pub fn sliding(entries: &[(u64, u64)]) -> Vec<u8> {
    let mut data = Vec::new();
    let mut last = 0u32;
    let mut prev = entries.first().map_or(0, |e| e.0);
    for &(t, c) in entries {
        last = data.len() as u32;
        super::varint::put(&mut data, t - prev);
        super::varint::put(&mut data, c);
        prev = t;
    }
    let tail = data.len() as u32;
    let total: u64 = entries.iter().map(|e| e.1).sum();
    let first = entries.first().map_or(0, |e| e.0);
    let newest = entries.last().map_or(0, |e| e.0);
    let mut out = value(
        VERSION_1,
        Tag::Sliding,
        &[
            &0u32.to_le_bytes(),
            &tail.to_le_bytes(),
            &last.to_le_bytes(),
            &total.to_le_bytes(),
            &first.to_le_bytes(),
            &newest.to_le_bytes(),
        ],
    );
    out.extend_from_slice(&data);
    out.resize(out.len() + 32, 0);
    out
}

/// Version 2's block: `until_ms` as a u64, then the limiter's value.
pub fn block(until_ms: u64, inner: &[u8]) -> Vec<u8> {
    value(VERSION_2, Tag::Block, &[&until_ms.to_le_bytes(), inner])
}
