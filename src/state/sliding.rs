//! RL.SLIDING's exact log: a compact, append-only byte log that is updated
//! in place, so an admitted call costs amortized O(1) whatever the log's
//! length.
//!
//! Layout after the common 5-byte prefix (tag `S`), all little-endian:
//! `head:u32 tail:u32 last:u32 total:u64 first_ms:u64 last_ms:u64`, then the
//! data area. Live entries occupy `data[head..tail]`, oldest first; the
//! newest starts at `data[last]`. An entry is `varint(delta_ms)
//! varint(cost)`, its time being the previous entry's plus `delta_ms`; the
//! head entry's time is `first_ms` (its own delta is ignored), so trimming
//! the oldest entries only moves `head`. Calls in the same millisecond share
//! one entry. With a call every millisecond an entry is 2 bytes.
//!
//! Space: the data area keeps at most a quarter of slack beyond the live
//! entries when it is (re)built; it is rebuilt, exactly sized, when an
//! append does not fit or when live entries fill less than a quarter of it.
//! Every rebuild copies O(live) bytes after at least live/4 appends or
//! trims, which keeps a call amortized O(1).

use super::layout::{prefix, DecodeError, Reader, Tag, HEADER_LEN, VERSION};
use super::varint;
use super::{SmallBytes, Stored, Write};
use crate::error::RlError;
use librl_core::algorithm::Exact;
use librl_core::sliding::{Append, CorruptLog, Log, Refund, VecLog};

const FIELDS_LEN: usize = 3 * 4 + 3 * 8;
pub const DATA_START: usize = HEADER_LEN + FIELDS_LEN;
const MIN_SLACK: usize = 32;
/// Past this, the oldest entries are merged pairwise into the later one of
/// each pair (a conservative approximation: a merged call counts until the
/// later call leaves the window). Reached only beyond ~16 million distinct
/// milliseconds in one window.
pub const MAX_LOG_BYTES: usize = 32 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Header {
    head: usize,
    tail: usize,
    last: usize,
    total: u64,
    first_ms: u64,
    last_ms: u64,
}

fn read_u32(b: &[u8], at: usize) -> Option<usize> {
    let bytes: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
    usize::try_from(u32::from_le_bytes(bytes)).ok()
}

fn read_u64(b: &[u8], at: usize) -> Option<u64> {
    let bytes: [u8; 8] = b.get(at..at + 8)?.try_into().ok()?;
    Some(u64::from_le_bytes(bytes))
}

impl Header {
    /// Reads and checks the header in O(1); entries are checked lazily as
    /// they are read.
    fn parse(bytes: &[u8]) -> Result<Header, DecodeError> {
        Reader::new(bytes, Tag::Sliding)?;
        let f = HEADER_LEN;
        let parsed = (|| {
            Some(Header {
                head: read_u32(bytes, f)?,
                tail: read_u32(bytes, f + 4)?,
                last: read_u32(bytes, f + 8)?,
                total: read_u64(bytes, f + 12)?,
                first_ms: read_u64(bytes, f + 20)?,
                last_ms: read_u64(bytes, f + 28)?,
            })
        })();
        let h = parsed.ok_or(DecodeError::Corrupt)?;
        let capacity = bytes.len() - DATA_START.min(bytes.len());
        let sane = bytes.len() >= DATA_START
            && h.head <= h.last
            && h.last < h.tail
            && h.tail <= capacity
            && h.total >= 1
            && h.first_ms <= h.last_ms;
        if sane {
            Ok(h)
        } else {
            Err(DecodeError::Corrupt)
        }
    }

    fn write(&self, bytes: &mut [u8]) {
        if let Some(prefix) = bytes.get_mut(..DATA_START) {
            self.write_prefix(prefix);
        }
    }

    /// Writes the value's first `DATA_START` bytes: prefix and fields.
    fn write_prefix(&self, bytes: &mut [u8]) {
        let f = HEADER_LEN;
        let mut put = |at: usize, v: &[u8]| {
            if let Some(dst) = bytes.get_mut(at..at + v.len()) {
                dst.copy_from_slice(v);
            }
        };
        put(0, &prefix(VERSION, Tag::Sliding));
        // Offsets fit u32: the log never exceeds MAX_LOG_BYTES plus one rebuild's slack.
        put(f, &(self.head as u32).to_le_bytes());
        put(f + 4, &(self.tail as u32).to_le_bytes());
        put(f + 8, &(self.last as u32).to_le_bytes());
        put(f + 12, &self.total.to_le_bytes());
        put(f + 20, &self.first_ms.to_le_bytes());
        put(f + 28, &self.last_ms.to_le_bytes());
    }
}

/// The longest entry: two 10-byte varints.
const MAX_ENTRY: usize = 20;

fn encode_entry(delta_ms: u64, cost: u64) -> ([u8; MAX_ENTRY], usize) {
    let mut out = [0u8; MAX_ENTRY];
    let mut len = 0;
    for v in [delta_ms, cost] {
        let (bytes, n) = varint::encode(v);
        if let (Some(dst), Some(src)) = (out.get_mut(len..len + n), bytes.get(..n)) {
            dst.copy_from_slice(src);
        }
        len += n;
    }
    (out, len)
}

/// An in-place update of a log: its new prefix and fields, and one entry
/// written at `entry_at` (an offset in the value).
pub struct LogPatch {
    pub header: [u8; DATA_START],
    pub entry_at: usize,
    entry: [u8; MAX_ENTRY],
    entry_len: usize,
}

impl LogPatch {
    pub fn entry(&self) -> &[u8] {
        self.entry.get(..self.entry_len).unwrap_or_default()
    }
}

/// How committing an admitted call changes the log's bytes.
pub enum Edit {
    InPlace(LogPatch),
    /// A new log of one entry, built without allocating (the common case
    /// of a first call on a key).
    Fresh(SmallBytes),
    /// The key's value must become these bytes.
    Replace(Vec<u8>),
}

impl Edit {
    /// Applies the edit to a value held in memory (tests, fuzzing).
    pub fn apply_to(self, value: &mut Vec<u8>) {
        match self {
            Edit::Replace(bytes) => *value = bytes,
            Edit::Fresh(bytes) => *value = bytes.as_slice().to_vec(),
            Edit::InPlace(p) => {
                let end = p.entry_at + p.entry_len;
                if let Some(dst) = value.get_mut(p.entry_at..end) {
                    dst.copy_from_slice(p.entry());
                }
                if let Some(dst) = value.get_mut(..DATA_START) {
                    dst.copy_from_slice(&p.header);
                }
            }
        }
    }
}

/// The exact log in its key: decided from a view over the bytes; an
/// admitted call is committed in place when it fits (the edit is planned,
/// reading every entry a rebuild needs first, so a corrupt log is refused
/// before anything is written), a refund by rebuilding the log.
impl<'v> Stored<'v> for Exact<LogView<'v>> {
    const EXPECTED: &'static str = "an RL.SLIDING limiter";

    fn decode(bytes: &'v [u8]) -> Result<LogView<'v>, DecodeError> {
        view(bytes)
    }

    fn admitted(&self, inner: Option<&'v [u8]>, append: &Append) -> Result<Write, RlError> {
        Ok(match plan(inner, append)? {
            Edit::InPlace(patch) => Write::Log(patch),
            Edit::Fresh(bytes) => Write::small(&bytes),
            Edit::Replace(bytes) if bytes.len() > inner.map_or(0, <[u8]>::len) => {
                Write::Grown(bytes)
            }
            Edit::Replace(bytes) => Write::Replace(bytes),
        })
    }

    fn refunded(&self, log: Option<&LogView<'v>>, refund: &Refund) -> Result<Vec<u8>, RlError> {
        let entries: Vec<(u64, u64)> = match log {
            Some(l) => l.entries().collect::<Result<_, _>>()?,
            None => Vec::new(),
        };
        let mut reference = VecLog(entries);
        reference.refund(refund);
        Ok(build(&reference.0))
    }
}

/// A validated header over the key's bytes, readable oldest-first.
pub struct LogView<'a> {
    data: &'a [u8],
    header: Header,
}

pub fn view(bytes: &[u8]) -> Result<LogView<'_>, DecodeError> {
    let header = Header::parse(bytes)?;
    Ok(LogView {
        data: bytes.get(DATA_START..).unwrap_or_default(),
        header,
    })
}

impl Log for LogView<'_> {
    fn newest_ms(&self) -> Option<u64> {
        Some(self.header.last_ms)
    }

    fn total(&self) -> u64 {
        self.header.total
    }

    fn entries(&self) -> impl Iterator<Item = Result<(u64, u64), CorruptLog>> {
        Entries {
            data: self.data,
            pos: self.header.head,
            end: self.header.tail,
            time: self.header.first_ms,
            first: true,
            last_ms: self.header.last_ms,
        }
    }
}

struct Entries<'a> {
    data: &'a [u8],
    pos: usize,
    end: usize,
    time: u64,
    first: bool,
    last_ms: u64,
}

/// Entries oldest-first, checked as they are read: bytes no librl could
/// have written end the iteration with `CorruptLog`.
impl Iterator for Entries<'_> {
    type Item = Result<(u64, u64), CorruptLog>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.end {
            return None;
        }
        let data = self.data.get(..self.end)?;
        let entry = (|| {
            let delta = varint::get(data, &mut self.pos)?;
            let cost = varint::get(data, &mut self.pos)?;
            let time = if self.first {
                self.time
            } else {
                self.time.checked_add(delta).filter(|&t| t > self.time)?
            };
            (time <= self.last_ms && cost >= 1).then_some((time, cost))
        })();
        match entry {
            Some((time, cost)) => {
                self.first = false;
                self.time = time;
                Some(Ok((time, cost)))
            }
            None => {
                self.pos = self.end;
                Some(Err(CorruptLog))
            }
        }
    }
}

/// Plans the commit of an admitted call: drop entries at or before the
/// cutoff, log the cost at `now`, in place when it fits. `existing` is the
/// value the decision was made on. Pure: nothing is written here.
pub fn plan(existing: Option<&[u8]>, a: &Append) -> Result<Edit, CorruptLog> {
    let fresh = || Ok(Edit::Fresh(fresh(a.now_ms, a.cost)));
    let Some(bytes) = existing else {
        return fresh();
    };
    let Ok(mut h) = Header::parse(bytes) else {
        return fresh();
    };
    let capacity = bytes.len() - DATA_START;
    let Some(data) = bytes.get(DATA_START..) else {
        return fresh();
    };
    // Trim: advance head past entries that left the window.
    let mut pos = h.head;
    let mut time = h.first_ms;
    let mut first = true;
    while pos < h.tail {
        let start = pos;
        let (Some(delta), Some(cost)) = (varint::get(data, &mut pos), varint::get(data, &mut pos))
        else {
            break;
        };
        if !first {
            time = time.saturating_add(delta);
        }
        first = false;
        if time > a.cutoff_ms {
            h.head = start;
            h.first_ms = time;
            break;
        }
        h.total = h.total.saturating_sub(cost);
        h.head = pos;
    }
    if h.head >= h.tail || h.total == 0 {
        return fresh();
    }
    // Log: same millisecond as the newest entry merges into it.
    let (at, entry) = if a.now_ms == h.last_ms {
        // The head entry's delta is never read, so it may be rewritten as 0.
        let mut p = h.last;
        let delta = varint::get(data, &mut p).unwrap_or(0);
        let delta = if h.last == h.head { 0 } else { delta };
        let old = varint::get(data, &mut p).unwrap_or(0);
        (h.last, encode_entry(delta, old.saturating_add(a.cost)))
    } else {
        (h.tail, encode_entry(a.now_ms - h.last_ms, a.cost))
    };
    let (entry, entry_len) = entry;
    let new_tail = at + entry_len;
    let live = new_tail - h.head;
    let oversized = capacity > 4 * MIN_SLACK && live.saturating_mul(4) < capacity;
    if new_tail > capacity || oversized || live > MAX_LOG_BYTES {
        let mut entries: Vec<(u64, u64)> = LogView { data, header: h }
            .entries()
            .collect::<Result<_, _>>()?;
        match entries.last_mut() {
            Some(last) if last.0 == a.now_ms => last.1 = last.1.saturating_add(a.cost),
            _ => entries.push((a.now_ms, a.cost)),
        }
        if live > MAX_LOG_BYTES {
            entries = merge_pairs(&entries);
        }
        return Ok(Edit::Replace(build(&entries)));
    }
    h.last = at;
    h.tail = new_tail;
    h.last_ms = a.now_ms;
    h.total = h.total.saturating_add(a.cost);
    let mut header = [0u8; DATA_START];
    h.write_prefix(&mut header);
    Ok(Edit::InPlace(LogPatch {
        header,
        entry_at: DATA_START + at,
        entry,
        entry_len,
    }))
}

/// Merges entries pairwise into the later of each pair, halving the log.
fn merge_pairs(entries: &[(u64, u64)]) -> Vec<(u64, u64)> {
    entries
        .chunks(2)
        .map(|pair| {
            let (t, _) = pair[pair.len() - 1];
            (t, pair.iter().map(|e| e.1).fold(0u64, u64::saturating_add))
        })
        .collect()
}

/// A fresh log of one entry, as `build(&[(now_ms, cost)])` lays it out,
/// on the stack.
fn fresh(now_ms: u64, cost: u64) -> SmallBytes {
    let (entry, len) = encode_entry(0, cost);
    let size = DATA_START + len + MIN_SLACK;
    let mut out = [0u8; DATA_START + MAX_ENTRY + MIN_SLACK];
    Header {
        head: 0,
        tail: len,
        last: 0,
        total: cost,
        first_ms: now_ms,
        last_ms: now_ms,
    }
    .write(&mut out);
    if let (Some(dst), Some(src)) = (out.get_mut(DATA_START..DATA_START + len), entry.get(..len)) {
        dst.copy_from_slice(src);
    }
    SmallBytes::new(out.get(..size).unwrap_or_default())
}

/// A fresh log holding `entries` (oldest first, distinct increasing times),
/// with a quarter of slack for appends.
pub fn build(entries: &[(u64, u64)]) -> Vec<u8> {
    let mut data = Vec::new();
    let mut last = 0;
    let mut prev = entries.first().map_or(0, |e| e.0);
    for &(t, c) in entries {
        last = data.len();
        varint::put(&mut data, t - prev);
        varint::put(&mut data, c);
        prev = t;
    }
    let tail = data.len();
    let slack = (tail / 4).max(MIN_SLACK);
    let mut out = vec![0u8; DATA_START + tail + slack];
    if let Some(dst) = out.get_mut(DATA_START..DATA_START + tail) {
        dst.copy_from_slice(&data);
    }
    Header {
        head: 0,
        tail,
        last,
        total: entries.iter().map(|e| e.1).fold(0u64, u64::saturating_add),
        first_ms: entries.first().map_or(0, |e| e.0),
        last_ms: entries.last().map_or(0, |e| e.0),
    }
    .write(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::Value;
    use crate::state::{check, Step};
    use librl_core::limit::Limit;
    use librl_core::sliding::{decide, SlidingParams, VecLog};
    use proptest::prelude::*;

    /// Applies a commit to an owned value the way the server shim does.
    fn commit(value: &mut Option<Vec<u8>>, a: &Append) {
        let edit = plan(value.as_deref(), a).expect("a log we built is not corrupt");
        let mut bytes = value.take().unwrap_or_default();
        edit.apply_to(&mut bytes);
        *value = Some(bytes);
    }

    #[test]
    fn a_call_per_millisecond_costs_about_two_bytes() {
        let p = SlidingParams::new(1_000_000, 60_000).unwrap();
        let mut value = None;
        for now in 0..10_000u64 {
            let log = value.as_deref().map(|b| view(b).unwrap());
            let d = decide(&p, log.as_ref(), 1_000_000 + now, 1).unwrap();
            commit(&mut value, &d.into_state().unwrap());
        }
        let len = value.unwrap().len();
        assert!(
            len <= DATA_START + 2 * 10_000 * 5 / 4 + MIN_SLACK,
            "{len} bytes"
        );
    }

    #[test]
    fn rejects_tampered_headers() {
        let good = build(&[(5, 1), (9, 2)]);
        assert!(view(&good).is_ok());
        let mut bad_tail = good.clone();
        bad_tail[HEADER_LEN + 4] = 0xff;
        assert_eq!(view(&bad_tail).err(), Some(DecodeError::Corrupt));
        assert_eq!(
            view(&good[..DATA_START - 1]).err(),
            Some(DecodeError::Corrupt)
        );
        let mut bad_entry = good.clone();
        bad_entry[DATA_START + 2] = 0x80;
        bad_entry[DATA_START + 3] = 0x80;
        let v = view(&bad_entry).unwrap();
        assert!(v.entries().any(|e| e.is_err()));
    }

    /// Regression: committing used to read the entries a rebuild needs only
    /// while writing, so a corrupt entry past what the decision read was
    /// silently dropped, and in RL.ALL could surface after other clauses
    /// were written. Now the rebuild is planned before anything is written,
    /// and the corrupt log is refused.
    #[test]
    fn a_corrupt_entry_met_while_planning_a_rebuild_is_refused_before_writing() {
        let good = build(&[(5, 1), (9, 2)]);
        let tail = u32::from_le_bytes(good[HEADER_LEN + 4..HEADER_LEN + 8].try_into().unwrap());
        // No slack left: the next append must rebuild the log.
        let mut full = good[..DATA_START + tail as usize].to_vec();
        // The second entry's cost becomes an unterminated varint.
        let last = full.len() - 1;
        full[last] = 0x80;
        let p = SlidingParams::new(100, 1_000).unwrap();
        let step = Step {
            now: 10,
            action: crate::request::Action::Take {
                cost: 1,
                reserve: None,
            },
            block_ms: None,
            peek: false,
        };
        // The decision itself reads no further than the first live entry.
        let log = view(&full).unwrap();
        assert!(decide(&p, Some(&log), 10, 1).is_ok());
        assert!(matches!(
            check(&Limit::Sliding(p), Value::String(&full), &step),
            Err(RlError::BadState(DecodeError::Corrupt))
        ));
    }

    #[test]
    fn a_fresh_log_is_laid_out_as_build_lays_it_out() {
        for (now, cost) in [(0, 1), (5_000_000, 3), (u64::MAX, 1 << 50)] {
            assert_eq!(fresh(now, cost).as_slice(), build(&[(now, cost)]));
        }
    }

    #[test]
    fn merging_is_conservative() {
        assert_eq!(merge_pairs(&[(1, 1), (2, 2), (3, 3)]), [(2, 3), (3, 3)]);
    }

    proptest! {
        /// The compact log makes the same decisions as the reference log
        /// for random traces, costs, limits and windows.
        #[test]
        fn matches_the_reference_log(
            limit in 1u64..60,
            window_ms in 1u64..3000,
            steps in prop::collection::vec((0u64..300, 1u64..9, any::<bool>()), 1..300),
        ) {
            let p = SlidingParams::new(limit, window_ms).unwrap();
            let mut reference = VecLog::default();
            let mut value: Option<Vec<u8>> = None;
            let mut now = 5_000_000u64;
            for (gap, cost, same_ms) in steps {
                if !same_ms {
                    now += gap;
                }
                let want = decide(&p, Some(&reference), now, cost).unwrap();
                let log = value.as_deref().map(|b| view(b).unwrap());
                let got = decide(&p, log.as_ref(), now, cost);
                prop_assert!(got.is_ok(), "the compact log read as corrupt");
                let got = got.unwrap();
                prop_assert_eq!(got.reply(), want.reply());
                prop_assert_eq!(got.into_state(), want.into_state());
                if let Some(a) = got.into_state() {
                    reference.apply(&a);
                    commit(&mut value, &a);
                    let bytes = value.as_deref().unwrap();
                    let v = view(bytes).unwrap();
                    let entries: Result<Vec<_>, _> = v.entries().collect();
                    prop_assert!(entries.is_ok(), "the compact log read as corrupt");
                    let entries = entries.unwrap();
                    prop_assert_eq!(&entries, &reference.0);
                    prop_assert_eq!(v.total(), entries.iter().map(|e| e.1).sum::<u64>());
                }
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(tail in prop::collection::vec(any::<u8>(), 0..120), now in any::<u64>(), cost in 1u64..10) {
            let mut bytes = vec![0, b'r', b'l', VERSION, b'S'];
            bytes.extend(tail);
            if let Ok(v) = view(&bytes) {
                let _: Vec<_> = v.entries().collect();
                let p = SlidingParams::new(5, 100).unwrap();
                if let Some(a) = decide(&p, Some(&v), now, cost).ok().and_then(|d| d.into_state()) {
                    let _ = plan(Some(&bytes), &a);
                }
            }
        }
    }
}
