//! RL.SLIDING's exact log, in two layouts (version 3) that share one entry
//! encoding: an entry is `varint(delta_ms) varint(cost)`, its time being
//! the previous entry's plus `delta_ms`. Calls in the same millisecond
//! share one entry; with a call every millisecond an entry is 2 bytes.
//!
//! **Compact** (`S`, anchored; `s` pinned): `duration(anchor - last_ms)`,
//! then the entries oldest-first, the first without its delta. The whole
//! value is the log, so a subject with one call costs what a fixed window
//! does (7 bytes for a 1-minute window). Kept while the value is at most
//! [`COMPACT_MAX`] bytes: an append extends the value at its end (the
//! server's string keeps room for the next few appends), any other change
//! rewrites it, reading every entry (at most ~30).
//!
//! **Large** (`L`): `head:u32 tail:u32 total:u64 first_ms:u64 last_ms:u64`
//! (little-endian), then the data area. Live entries occupy
//! `data[head..tail]`, oldest first; the head entry keeps a delta that is
//! never read (its time is `first_ms`), so trimming the oldest entries only
//! moves `head`. Updated in place: an append writes one entry and the
//! fields; a REFUND walks back from the newest entry, dropping or
//! shortening only the entries it takes units from. The area keeps a
//! quarter of slack (at least 32 bytes) when (re)built, and is rebuilt by
//! copying the live bytes when an append does not fit or when live entries
//! fill less than a quarter of it: every rebuild copies O(live) bytes after
//! at least live/4 appends or trims, which keeps a call amortized O(1). A
//! rebuild holds at most the old value, the new one and the server's copy
//! of it (each the live bytes plus a quarter plus 69 bytes), and no
//! per-entry structure.
//!
//! Version 1 (`S` at version 1) is the large layout with one more field
//! (`last:u32`, the newest entry's offset, after `tail`); it is read, and
//! the next write rewrites it as version 3.
//!
//! Entries can be read newest-first: a varint's last byte is the only one
//! below 0x80, so each entry's start is found by looking back from its end.

use super::layout::{self, DecodeError, Prefix, Tag, Writer, HEADER_LEN, VERSION_1, VERSION_3};
use super::varint;
use super::{SmallBytes, Stored, Write};
use crate::error::RlError;
use librl_core::algorithm::Exact;
use librl_core::sliding::{Append, CorruptLog, Log, Refund};

/// Version 1's fields: `head tail last` u32s, `total first_ms last_ms` u64s.
const V1_DATA_START: usize = HEADER_LEN + 3 * 4 + 3 * 8;
/// The large layout's fields: `head tail` u32s, `total first_ms last_ms` u64s.
pub const DATA_START: usize = HEADER_LEN + 2 * 4 + 3 * 8;
const MIN_SLACK: usize = 32;
/// A log whose compact value would be longer than this is kept large.
pub const COMPACT_MAX: usize = 64;
/// Past this, the oldest entries are merged pairwise into the later one of
/// each pair (a conservative approximation: a merged call counts until the
/// later call leaves the window). Reached only beyond ~16 million distinct
/// milliseconds in one window.
pub const MAX_LOG_BYTES: usize = 32 << 20;
/// The longest entry: two 10-byte varints.
const MAX_ENTRY: usize = 20;

/// The large layout's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Header {
    head: usize,
    tail: usize,
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
    /// Reads and checks the fields of a large log (`v1`: of version 1) in
    /// O(1); entries are checked as they are read.
    fn parse(bytes: &[u8], v1: bool) -> Result<Header, DecodeError> {
        let f = HEADER_LEN;
        let (data_start, total_at) = if v1 {
            (V1_DATA_START, f + 12)
        } else {
            (DATA_START, f + 8)
        };
        let parsed = (|| {
            let h = Header {
                head: read_u32(bytes, f)?,
                tail: read_u32(bytes, f + 4)?,
                total: read_u64(bytes, total_at)?,
                first_ms: read_u64(bytes, total_at + 8)?,
                last_ms: read_u64(bytes, total_at + 16)?,
            };
            // Version 1's offset of the newest entry must lie among them.
            let last_ok = !v1 || read_u32(bytes, f + 8).is_some_and(|l| h.head <= l && l < h.tail);
            last_ok.then_some(h)
        })();
        let h = parsed.ok_or(DecodeError::Corrupt)?;
        let capacity = bytes.len().saturating_sub(data_start);
        let sane = bytes.len() >= data_start
            && h.head < h.tail
            && h.tail <= capacity
            && h.total >= 1
            && h.first_ms <= h.last_ms;
        if sane {
            Ok(h)
        } else {
            Err(DecodeError::Corrupt)
        }
    }

    /// The large layout's first `DATA_START` bytes: prefix and fields.
    fn encode(&self) -> [u8; DATA_START] {
        let mut out = [0u8; DATA_START];
        let mut w = Writer::new(&mut out, Tag::Log);
        // Offsets fit u32: the log never exceeds MAX_LOG_BYTES plus one
        // rebuild's slack.
        w.bytes(&(self.head as u32).to_le_bytes());
        w.bytes(&(self.tail as u32).to_le_bytes());
        w.u64(self.total);
        w.u64(self.first_ms);
        w.u64(self.last_ms);
        out
    }
}

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

#[inline(always)]
fn varint_at(data: &[u8], pos: &mut usize) -> Option<u64> {
    varint::get(data, pos)
}

/// The varint ending at `data[..*end]`, moving `end` back to its start.
#[inline(always)]
fn varint_before(data: &[u8], end: &mut usize) -> Option<u64> {
    let e = *end;
    // Its last byte is below 0x80; every byte before it in the same varint
    // is not, and the previous varint's last byte is.
    let last = *data.get(e.checked_sub(1)?)?;
    if last >= 0x80 {
        return None;
    }
    let mut start = e - 1;
    if start == 0 || data.get(start - 1).is_some_and(|&b| b < 0x80) {
        *end = start;
        return Some(u64::from(last));
    }
    while start > 0 && data.get(start - 1).is_some_and(|&b| b >= 0x80) {
        start -= 1;
        if e - start > 10 {
            return None;
        }
    }
    let mut pos = start;
    let v = varint_at(data, &mut pos)?;
    (pos == e).then(|| {
        *end = start;
        v
    })
}

/// How the view's bytes are laid out.
#[derive(Clone, Copy, Debug)]
enum Form {
    /// Version 3 compact; `gap_ms` is the anchor minus the newest entry's
    /// time.
    Compact { pinned: bool, gap_ms: u64 },
    /// Version 3 large.
    Large(Header),
    /// Version 1 (large, read only).
    V1,
}

/// A checked log over the key's bytes, readable from either end.
pub struct LogView<'a> {
    bytes: &'a [u8],
    /// The live entries: `bytes[start..end]`.
    start: usize,
    end: usize,
    /// Whether the first live entry carries a (never read) delta.
    lead_delta: bool,
    total: u64,
    first_ms: u64,
    last_ms: u64,
    form: Form,
}

/// The log in `bytes` (any version); `key_expiry` is asked only for an
/// anchored compact log.
pub fn view<'a>(
    bytes: &'a [u8],
    key_expiry: &dyn Fn() -> Option<u64>,
) -> Result<LogView<'a>, DecodeError> {
    let p = layout::read_prefix(bytes)?;
    match (p.version, p.tag) {
        (VERSION_1, Tag::Sliding) => large(bytes, true),
        (VERSION_3, Tag::Log) => large(bytes, false),
        (VERSION_3, Tag::Sliding) => compact(bytes, p, key_expiry),
        _ => Err(DecodeError::OtherTag),
    }
}

fn large(bytes: &[u8], v1: bool) -> Result<LogView<'_>, DecodeError> {
    let h = Header::parse(bytes, v1)?;
    let data_start = if v1 { V1_DATA_START } else { DATA_START };
    Ok(LogView {
        bytes,
        start: data_start + h.head,
        end: data_start + h.tail,
        lead_delta: true,
        total: h.total,
        first_ms: h.first_ms,
        last_ms: h.last_ms,
        form: if v1 { Form::V1 } else { Form::Large(h) },
    })
}

/// A compact log, read whole: its total and oldest time are summed here,
/// so every entry is checked before anything is decided.
fn compact<'a>(
    bytes: &'a [u8],
    p: Prefix<'a>,
    key_expiry: &dyn Fn() -> Option<u64>,
) -> Result<LogView<'a>, DecodeError> {
    let pinned = p.pinned;
    let (anchor, mut r) = layout::anchored(p, key_expiry)?;
    let gap_ms = r.duration()?;
    let last_ms = anchor.checked_sub(gap_ms).ok_or(DecodeError::Corrupt)?;
    let start = bytes.len() - r.rest().len();
    let data = r.rest();
    let mut pos = 0;
    let mut total = 0u64;
    let mut span = 0u64;
    let mut first = true;
    while pos < data.len() {
        if !first {
            let delta = varint_at(data, &mut pos).filter(|&d| d >= 1);
            span = delta
                .and_then(|d| span.checked_add(d))
                .ok_or(DecodeError::Corrupt)?;
        }
        first = false;
        let cost = varint_at(data, &mut pos).filter(|&c| c >= 1);
        total = cost
            .and_then(|c| total.checked_add(c))
            .ok_or(DecodeError::Corrupt)?;
    }
    if total == 0 {
        return Err(DecodeError::Corrupt);
    }
    Ok(LogView {
        bytes,
        start,
        end: bytes.len(),
        lead_delta: false,
        total,
        first_ms: last_ms.checked_sub(span).ok_or(DecodeError::Corrupt)?,
        last_ms,
        form: Form::Compact { pinned, gap_ms },
    })
}

impl<'a> LogView<'a> {
    fn data(&self) -> &'a [u8] {
        self.bytes.get(self.start..self.end).unwrap_or_default()
    }

    /// Steps oldest-first over the entries at or before `cutoff_ms`: the
    /// offset (in `data()`) of the first entry after it (where the live
    /// entries start; `data().len()` when none is), the cost the stepped
    /// entries held and the first live entry's time.
    fn trim(&self, cutoff_ms: u64) -> Result<(usize, u64, u64), CorruptLog> {
        let mut it = self.forward();
        let mut expired = 0u64;
        loop {
            let at = it.pos;
            match it.next() {
                None => return Ok((at, expired, self.last_ms)),
                Some(Err(e)) => return Err(e),
                Some(Ok((t, c))) if t <= cutoff_ms => expired = expired.saturating_add(c),
                Some(Ok((t, _))) => return Ok((at, expired, t)),
            }
        }
    }

    fn forward(&self) -> Entries<'a> {
        Entries {
            data: self.data(),
            pos: 0,
            time: self.first_ms,
            first: true,
            lead_delta: self.lead_delta,
            last_ms: self.last_ms,
        }
    }

    fn backward(&self) -> Backward<'a> {
        Backward {
            data: self.data(),
            end: self.end - self.start,
            time: self.last_ms,
            lead_delta: self.lead_delta,
            first_ms: self.first_ms,
        }
    }
}

impl Log for LogView<'_> {
    fn newest_ms(&self) -> Option<u64> {
        Some(self.last_ms)
    }

    fn total(&self) -> u64 {
        self.total
    }

    fn entries(&self) -> impl Iterator<Item = Result<(u64, u64), CorruptLog>> {
        self.forward()
    }

    fn entries_newest_first(&self) -> impl Iterator<Item = Result<(u64, u64), CorruptLog>> {
        self.backward().map(|e| e.map(|s| (s.time, s.cost)))
    }
}

/// Entries oldest-first, checked as they are read: bytes no librl could
/// have written end the iteration with `CorruptLog`.
struct Entries<'a> {
    data: &'a [u8],
    pos: usize,
    time: u64,
    first: bool,
    lead_delta: bool,
    last_ms: u64,
}

impl Iterator for Entries<'_> {
    type Item = Result<(u64, u64), CorruptLog>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.data.len() {
            return None;
        }
        let entry = (|| {
            let delta = if self.first && !self.lead_delta {
                0
            } else {
                varint_at(self.data, &mut self.pos)?
            };
            let cost = varint_at(self.data, &mut self.pos)?;
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
                self.pos = self.data.len();
                Some(Err(CorruptLog))
            }
        }
    }
}

/// One entry read newest-first: its time, cost and where it starts, and
/// where its cost starts (the bytes before are its delta).
#[derive(Clone, Copy, Debug)]
struct Step {
    time: u64,
    cost: u64,
    start: usize,
    cost_at: usize,
}

/// Entries newest-first, each found by looking back from its end; checked
/// as they are read, down to the oldest, whose time must be the log's
/// first.
struct Backward<'a> {
    data: &'a [u8],
    end: usize,
    time: u64,
    lead_delta: bool,
    first_ms: u64,
}

impl Iterator for Backward<'_> {
    type Item = Result<Step, CorruptLog>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.end == 0 {
            return None;
        }
        let step = (|| {
            let mut pos = self.end;
            let cost = varint_before(self.data, &mut pos).filter(|&c| c >= 1)?;
            let cost_at = pos;
            let head = if pos == 0 && !self.lead_delta {
                true
            } else {
                let delta = varint_before(self.data, &mut pos)?;
                if pos == 0 {
                    true
                } else {
                    // The previous entry's time; this one's is `self.time`.
                    let before = self.time.checked_sub(delta).filter(|_| delta >= 1)?;
                    let step = Step {
                        time: self.time,
                        cost,
                        start: pos,
                        cost_at,
                    };
                    self.time = before;
                    self.end = pos;
                    return Some(step);
                }
            };
            // The oldest entry: its time is the log's first.
            (head && self.time == self.first_ms).then(|| {
                self.end = 0;
                Step {
                    time: self.time,
                    cost,
                    start: 0,
                    cost_at,
                }
            })
        })();
        match step {
            Some(s) => Some(Ok(s)),
            None => {
                self.end = 0;
                Some(Err(CorruptLog))
            }
        }
    }
}

/// An in-place update of a large log: its new prefix and fields, and one
/// entry written at `entry_at` (an offset in the value; none when
/// `entry_len` is 0).
#[derive(Clone)]
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

/// A compact log's append: `entry` written at the value's end, `at`.
#[derive(Clone)]
pub struct Extension {
    pub at: usize,
    entry: [u8; MAX_ENTRY],
    entry_len: usize,
}

impl Extension {
    pub fn entry(&self) -> &[u8] {
        self.entry.get(..self.entry_len).unwrap_or_default()
    }
}

/// How committing changes the log's bytes.
pub enum Edit {
    InPlace(LogPatch),
    Extend(Extension),
    /// A compact log, built without allocating.
    Whole(SmallBytes),
    /// The key's value must become these bytes.
    Replace(Vec<u8>),
}

impl Edit {
    /// Applies the edit to a value held in memory (tests, fuzzing, and a
    /// write that must become the whole value).
    pub fn apply_to(self, value: &mut Vec<u8>) {
        match self {
            Edit::Replace(bytes) => *value = bytes,
            Edit::Whole(bytes) => *value = bytes.as_slice().to_vec(),
            Edit::InPlace(p) => {
                let end = p.entry_at + p.entry_len;
                if let Some(dst) = value.get_mut(p.entry_at..end) {
                    dst.copy_from_slice(p.entry());
                }
                if let Some(dst) = value.get_mut(..DATA_START) {
                    dst.copy_from_slice(&p.header);
                }
            }
            Edit::Extend(x) => {
                value.truncate(x.at);
                value.extend_from_slice(x.entry());
            }
        }
    }

    fn into_write(self, inner: Option<&[u8]>) -> Write {
        match self {
            Edit::InPlace(patch) => Write::Log(patch),
            Edit::Extend(x) => Write::Extend(x),
            Edit::Whole(bytes) => Write::Small(bytes),
            Edit::Replace(bytes) if bytes.len() > inner.map_or(0, <[u8]>::len) => {
                Write::Grown(bytes)
            }
            Edit::Replace(bytes) => Write::Replace(bytes),
        }
    }
}

/// The exact log in its key: decided from a view over the bytes; an
/// admitted call or a refund is committed in place when it can be (the
/// edit is planned before anything is written, reading every entry a
/// rebuild needs, so a corrupt log is refused before anything changes).
impl<'v> Stored<'v> for Exact<LogView<'v>> {
    const EXPECTED: &'static str = "an RL.SLIDING limiter";

    fn decode(
        bytes: &'v [u8],
        key_expiry: &dyn Fn() -> Option<u64>,
    ) -> Result<LogView<'v>, DecodeError> {
        view(bytes, key_expiry)
    }

    fn admitted(
        &self,
        log: Option<&LogView<'v>>,
        append: &Append,
        anchor: u64,
    ) -> Result<Write, RlError> {
        Ok(plan(log, append, anchor)?.into_write(log.map(|l| l.bytes)))
    }

    fn refunded(
        &self,
        log: Option<&LogView<'v>>,
        refund: &Refund,
        anchor: u64,
    ) -> Result<Write, RlError> {
        let log = log.ok_or(RlError::Internal("a refund stored on an empty log"))?;
        Ok(plan_refund(log, refund, anchor)?.into_write(Some(log.bytes)))
    }
}

/// A compact log of one entry, anchored.
#[inline(always)]
fn one_entry(now_ms: u64, cost: u64, anchor: u64) -> SmallBytes {
    SmallBytes::fields(Tag::Sliding, |w| {
        w.duration(anchor.saturating_sub(now_ms));
        w.varint(cost);
    })
}

/// Plans the commit of an admitted call: drop the entries at or before
/// the cutoff, log the cost at `now`, in place when it fits. `log` is the
/// value the decision was made on; `anchor` the key's new expiry. Pure:
/// nothing is written here.
pub fn plan(log: Option<&LogView<'_>>, a: &Append, anchor: u64) -> Result<Edit, CorruptLog> {
    let Some(v) = log else {
        return Ok(Edit::Whole(one_entry(a.now_ms, a.cost, anchor)));
    };
    let (live_at, expired, first_live) = v.trim(a.cutoff_ms)?;
    let live_total = v.total.saturating_sub(expired);
    if live_at >= v.data().len() || live_total == 0 {
        return Ok(Edit::Whole(one_entry(a.now_ms, a.cost, anchor)));
    }
    let change = Change::Append {
        now_ms: a.now_ms,
        cost: a.cost,
    };
    match v.form {
        Form::Large(h) => plan_large(v, h, live_at, live_total, first_live, a, anchor),
        Form::Compact {
            pinned: false,
            gap_ms,
        } if live_at == 0 && a.now_ms > v.last_ms && anchor.saturating_sub(a.now_ms) == gap_ms => {
            let (entry, entry_len) = encode_entry(a.now_ms - v.last_ms, a.cost);
            if v.bytes.len() + entry_len <= COMPACT_MAX {
                Ok(Edit::Extend(Extension {
                    at: v.bytes.len(),
                    entry,
                    entry_len,
                }))
            } else {
                rebuild(v, live_at, live_total, first_live, change, anchor)
            }
        }
        _ => rebuild(v, live_at, live_total, first_live, change, anchor),
    }
}

/// An admitted call on a large log: in place when the entry fits and the
/// area is not mostly empty.
fn plan_large(
    v: &LogView<'_>,
    h: Header,
    live_at: usize,
    live_total: u64,
    first_live: u64,
    a: &Append,
    anchor: u64,
) -> Result<Edit, CorruptLog> {
    let data = v.data();
    let (at, entry, entry_len) = if a.now_ms == v.last_ms {
        // The same millisecond as the newest entry: its cost grows, its
        // delta stays.
        let newest = v.backward().next().ok_or(CorruptLog)??;
        let mut entry = [0u8; MAX_ENTRY];
        let delta = data.get(newest.start..newest.cost_at).ok_or(CorruptLog)?;
        let (cost, cost_len) = varint::encode(newest.cost.saturating_add(a.cost));
        let len = delta.len() + cost_len;
        if let (Some(dst), Some(src)) = (entry.get_mut(..delta.len()), Some(delta)) {
            dst.copy_from_slice(src);
        }
        if let (Some(dst), Some(src)) = (entry.get_mut(delta.len()..len), cost.get(..cost_len)) {
            dst.copy_from_slice(src);
        }
        (h.head + newest.start, entry, len)
    } else {
        let (entry, len) = encode_entry(a.now_ms - v.last_ms, a.cost);
        (h.tail, entry, len)
    };
    let head = h.head + live_at;
    let new_tail = at + entry_len;
    let capacity = v.bytes.len() - DATA_START;
    let live = new_tail - head;
    if new_tail > capacity || oversized(capacity, live) || live > MAX_LOG_BYTES {
        let change = Change::Append {
            now_ms: a.now_ms,
            cost: a.cost,
        };
        return rebuild(v, live_at, live_total, first_live, change, anchor);
    }
    let header = Header {
        head,
        tail: new_tail,
        total: live_total.saturating_add(a.cost),
        first_ms: first_live,
        last_ms: a.now_ms,
    };
    Ok(Edit::InPlace(LogPatch {
        header: header.encode(),
        entry_at: DATA_START + at,
        entry,
        entry_len,
    }))
}

/// Whether a large log's data area of `capacity` bytes is too large for
/// `live` bytes of entries: mostly empty, or holding so few that the
/// compact layout would do (half its size, so that a log near the bound
/// does not go back and forth between the two).
fn oversized(capacity: usize, live: usize) -> bool {
    (capacity > 4 * MIN_SLACK && live.saturating_mul(4) < capacity) || live <= COMPACT_MAX / 2
}

/// Plans a refund's commit: drop the entries at or before the cutoff, take
/// `units` off the newest entries. A large log is changed in place, walking
/// back only over the entries the refund takes from.
pub fn plan_refund(v: &LogView<'_>, r: &Refund, anchor: u64) -> Result<Edit, CorruptLog> {
    let (live_at, expired, first_live) = v.trim(r.cutoff_ms)?;
    let live_total = v.total.saturating_sub(expired);
    let change = Change::Refund { units: r.units };
    let Form::Large(h) = v.form else {
        return rebuild(v, live_at, live_total, first_live, change, anchor);
    };
    let data = v.data();
    let mut units = r.units;
    let mut tail = data.len();
    let mut entry = [0u8; MAX_ENTRY];
    let mut entry_len = 0;
    let mut last_ms = None;
    for step in v.backward() {
        let s = step?;
        // Units left to take from entries that have left the window: the
        // log disagrees with its total.
        if s.start < live_at {
            return Err(CorruptLog);
        }
        if units == 0 {
            last_ms = Some(s.time);
            break;
        }
        if s.cost > units {
            // This entry keeps the rest: its cost shrinks in place.
            let delta = data.get(s.start..s.cost_at).ok_or(CorruptLog)?;
            let (cost, cost_len) = varint::encode(s.cost - units);
            entry_len = delta.len() + cost_len;
            if let Some(dst) = entry.get_mut(..delta.len()) {
                dst.copy_from_slice(delta);
            }
            if let (Some(dst), Some(src)) =
                (entry.get_mut(delta.len()..entry_len), cost.get(..cost_len))
            {
                dst.copy_from_slice(src);
            }
            tail = s.start + entry_len;
            last_ms = Some(s.time);
            break;
        }
        units -= s.cost;
        tail = s.start;
    }
    // A refund of everything is a deletion, never a stored refund.
    let last_ms = last_ms.ok_or(CorruptLog)?;
    let head = h.head + live_at;
    let new_tail = h.head + tail;
    let capacity = v.bytes.len() - DATA_START;
    if oversized(capacity, new_tail - head) {
        return rebuild(v, live_at, live_total, first_live, change, anchor);
    }
    let header = Header {
        head,
        tail: new_tail,
        total: live_total.saturating_sub(r.units),
        first_ms: first_live,
        last_ms,
    };
    let entry_at = DATA_START + new_tail - entry_len;
    Ok(Edit::InPlace(LogPatch {
        header: header.encode(),
        entry_at,
        entry,
        entry_len,
    }))
}

/// What a rebuild does at the newest end of the live entries.
#[derive(Clone, Copy)]
enum Change {
    Append { now_ms: u64, cost: u64 },
    Refund { units: u64 },
}

/// Rebuilds the log from its live entries (`data()[live_at..]`, holding
/// `live_total`, the oldest at `first_live`) with `change` applied: as a
/// compact log when it fits, else as a large one with a quarter of slack.
/// The live bytes are copied as they are (an entry's encoding does not
/// depend on its position), into the buffer that becomes the new value.
fn rebuild(
    v: &LogView<'_>,
    live_at: usize,
    live_total: u64,
    first_live: u64,
    change: Change,
    anchor: u64,
) -> Result<Edit, CorruptLog> {
    let region = v.data().get(live_at..).unwrap_or_default();
    // The new value's data area starts at DATA_START, its head entry with
    // a delta (a compact log's first entry has none: give it 0).
    // Sized once for the largest value `finish` makes of it (the entries,
    // a quarter of slack): a rebuild allocates the new value once.
    let entries = 1 + region.len() + MAX_ENTRY;
    let mut buf = Vec::with_capacity(DATA_START + entries + (entries / 4).max(MIN_SLACK));
    buf.resize(DATA_START, 0);
    if !(v.lead_delta || live_at > 0) {
        buf.push(0);
    }
    buf.extend_from_slice(region);
    let mut total = live_total;
    let mut last_ms = v.last_ms;
    let mut first_ms = first_live;
    match change {
        Change::Append { now_ms, cost } => {
            if now_ms == last_ms {
                let mut pos = buf.len();
                let old = varint_before(&buf, &mut pos).ok_or(CorruptLog)?;
                buf.truncate(pos);
                varint::put(&mut buf, old.saturating_add(cost));
            } else {
                let (entry, len) = encode_entry(now_ms - last_ms, cost);
                buf.extend_from_slice(entry.get(..len).unwrap_or_default());
                last_ms = now_ms;
            }
            total = total.saturating_add(cost);
        }
        Change::Refund { units } => {
            last_ms = take_newest(&mut buf, first_live, last_ms, units)?;
            total = total.saturating_sub(units);
        }
    }
    if buf.len() - DATA_START > MAX_LOG_BYTES {
        (buf, first_ms) = merge_pairs(&buf, first_ms, last_ms)?;
    }
    check_area(&buf, first_ms, last_ms, total)?;
    Ok(finish(buf, total, first_ms, last_ms, anchor))
}

/// Reads every entry of a rebuilt data area (`buf[DATA_START..]`): the
/// bytes were copied as they were, so this is where an entry no librl
/// wrote is found, before anything is written. Its entries must run from
/// `first_ms` to `last_ms` and hold `total`.
fn check_area(buf: &[u8], first_ms: u64, last_ms: u64, total: u64) -> Result<(), CorruptLog> {
    let entries = Entries {
        data: buf.get(DATA_START..).unwrap_or_default(),
        pos: 0,
        time: first_ms,
        first: true,
        lead_delta: true,
        last_ms,
    };
    let mut sum = 0u64;
    let mut newest = None;
    for e in entries {
        let (t, c) = e?;
        sum = sum.checked_add(c).ok_or(CorruptLog)?;
        newest = Some(t);
    }
    if sum == total && newest == Some(last_ms) {
        Ok(())
    } else {
        Err(CorruptLog)
    }
}

/// Takes `units` off the newest entries of the large-format data area in
/// `buf[DATA_START..]`, removing each entry that reaches 0: the newest
/// remaining entry's time.
fn take_newest(
    buf: &mut Vec<u8>,
    first_ms: u64,
    last_ms: u64,
    units: u64,
) -> Result<u64, CorruptLog> {
    let area = buf.get(DATA_START..).unwrap_or_default();
    let back = Backward {
        data: area,
        end: area.len(),
        time: last_ms,
        lead_delta: true,
        first_ms,
    };
    let mut left = units;
    let mut cut = None;
    let mut newest = None;
    for step in back {
        let s = step?;
        if left == 0 {
            newest = Some(s.time);
            break;
        }
        if s.cost > left {
            cut = Some((s.cost_at, s.cost - left));
            newest = Some(s.time);
            break;
        }
        left -= s.cost;
        cut = Some((s.start, 0));
    }
    let newest = newest.ok_or(CorruptLog)?;
    if let Some((at, cost)) = cut {
        buf.truncate(DATA_START + at);
        if cost > 0 {
            varint::put(buf, cost);
        }
    }
    Ok(newest)
}

/// Merges entries pairwise into the later of each pair, halving the log:
/// the new buffer and its oldest time.
fn merge_pairs(buf: &[u8], first_ms: u64, last_ms: u64) -> Result<(Vec<u8>, u64), CorruptLog> {
    let area = buf.get(DATA_START..).unwrap_or_default();
    let entries = Entries {
        data: area,
        pos: 0,
        time: first_ms,
        first: true,
        lead_delta: true,
        last_ms,
    };
    let mut out = Vec::with_capacity(DATA_START + area.len() / 2 + MIN_SLACK);
    out.resize(DATA_START, 0);
    let mut pending: Option<(u64, u64)> = None;
    let mut prev: Option<u64> = None;
    let mut first = None;
    let mut emit = |out: &mut Vec<u8>, (t, c): (u64, u64)| {
        let (entry, len) = encode_entry(prev.map_or(0, |p| t - p), c);
        out.extend_from_slice(entry.get(..len).unwrap_or_default());
        first.get_or_insert(t);
        prev = Some(t);
    };
    for e in entries {
        let (t, c) = e?;
        match pending.take() {
            None => pending = Some((t, c)),
            Some((_, c0)) => emit(&mut out, (t, c0.saturating_add(c))),
        }
    }
    if let Some(last) = pending {
        emit(&mut out, last);
    }
    Ok((out, first.unwrap_or(first_ms)))
}

/// The new value from a rebuilt data area (`buf[DATA_START..]`, its head
/// entry with a delta): compact when it fits in [`COMPACT_MAX`], else
/// large with a quarter of slack.
fn finish(mut buf: Vec<u8>, total: u64, first_ms: u64, last_ms: u64, anchor: u64) -> Edit {
    let area = buf.get(DATA_START..).unwrap_or_default();
    let mut lead = 0;
    let entries_at = varint_at(area, &mut lead).map_or(0, |_| lead);
    let entries = area.get(entries_at..).unwrap_or_default();
    let mut small = [0u8; COMPACT_MAX + 1];
    let mut w = Writer::new(&mut small, Tag::Sliding);
    w.duration(anchor.saturating_sub(last_ms));
    if w.written() + entries.len() <= COMPACT_MAX {
        w.bytes(entries);
        let len = w.written();
        return Edit::Whole(SmallBytes::new(small.get(..len).unwrap_or_default()));
    }
    let tail = area.len();
    let header = Header {
        head: 0,
        tail,
        total,
        first_ms,
        last_ms,
    };
    if let Some(dst) = buf.get_mut(..DATA_START) {
        dst.copy_from_slice(&header.encode());
    }
    buf.resize(DATA_START + tail + (tail / 4).max(MIN_SLACK), 0);
    Edit::Replace(buf)
}

/// A large log holding `entries` (oldest first, distinct increasing
/// times): tests and fixtures.
#[cfg(test)]
pub fn build(entries: &[(u64, u64)]) -> Vec<u8> {
    let mut buf = vec![0u8; DATA_START];
    let mut prev = entries.first().map_or(0, |e| e.0);
    for &(t, c) in entries {
        let (entry, len) = encode_entry(t - prev, c);
        buf.extend_from_slice(&entry[..len]);
        prev = t;
    }
    let tail = buf.len() - DATA_START;
    let header = Header {
        head: 0,
        tail,
        total: entries.iter().map(|e| e.1).sum(),
        first_ms: entries.first().map_or(0, |e| e.0),
        last_ms: entries.last().map_or(0, |e| e.0),
    };
    buf[..DATA_START].copy_from_slice(&header.encode());
    buf.resize(DATA_START + tail + (tail / 4).max(MIN_SLACK), 0);
    buf
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Action;
    use crate::state::{legacy, Held, Step};
    use librl_core::limit::Limit;
    use librl_core::sliding::{decide, refund, SlidingParams, VecLog};
    use proptest::prelude::*;

    fn take(now: u64, cost: u64) -> Step {
        Step {
            now,
            action: Action::Take {
                cost,
                reserve: None,
            },
            block_ms: None,
            peek: false,
        }
    }

    fn give_back(now: u64, units: u64) -> Step {
        Step {
            action: Action::Refund(units),
            ..take(now, 0)
        }
    }

    /// The entries a key's log holds, read oldest-first and newest-first
    /// (which must agree).
    fn entries(key: &Held) -> Vec<(u64, u64)> {
        let Some(bytes) = key.bytes.as_deref() else {
            return Vec::new();
        };
        let expiry = key.expires_at_ms;
        let v = view(bytes, &|| expiry).expect("a log we wrote");
        let oldest_first: Vec<_> = v.entries().collect::<Result<_, _>>().expect("entries");
        let mut newest_first: Vec<_> = v
            .entries_newest_first()
            .collect::<Result<_, _>>()
            .expect("entries, newest first");
        newest_first.reverse();
        assert_eq!(oldest_first, newest_first);
        assert_eq!(v.total(), oldest_first.iter().map(|e| e.1).sum::<u64>());
        oldest_first
    }

    #[test]
    fn one_call_is_seven_bytes() {
        let limit = Limit::Sliding(SlidingParams::new(10, 60_000).unwrap());
        let mut key = Held::default();
        let c = key.check(&limit, &take(1_000_000, 1)).unwrap();
        key.commit(c.commit.as_ref().unwrap());
        // The prefix, the window (1 min: one byte) and the cost.
        assert_eq!(key.bytes.as_deref(), Some(&b"\x00rl\x03S\x06\x01"[..]));
        assert_eq!(key.expires_at_ms, Some(1_060_000));
        assert_eq!(entries(&key), [(1_000_000, 1)]);
    }

    #[test]
    fn a_call_per_millisecond_costs_about_two_bytes() {
        let limit = Limit::Sliding(SlidingParams::new(1_000_000, 60_000).unwrap());
        let mut key = Held::default();
        for now in 0..10_000u64 {
            let c = key.check(&limit, &take(1_000_000 + now, 1)).unwrap();
            key.commit(c.commit.as_ref().unwrap());
        }
        let len = key.bytes.unwrap().len();
        assert!(
            len <= DATA_START + 2 * 10_000 * 5 / 4 + MIN_SLACK,
            "{len} bytes"
        );
    }

    #[test]
    fn rejects_tampered_headers() {
        let good = build(&[(5, 1), (9, 2)]);
        let none = || None;
        assert!(view(&good, &none).is_ok());
        let mut bad_tail = good.clone();
        bad_tail[HEADER_LEN + 4] = 0xff;
        assert_eq!(view(&bad_tail, &none).err(), Some(DecodeError::Corrupt));
        assert_eq!(
            view(&good[..DATA_START - 1], &none).err(),
            Some(DecodeError::Corrupt)
        );
        let mut bad_entry = good.clone();
        bad_entry[DATA_START + 2] = 0x80;
        bad_entry[DATA_START + 3] = 0x80;
        let v = view(&bad_entry, &none).unwrap();
        assert!(v.entries().any(|e| e.is_err()));
        assert!(v.entries_newest_first().any(|e| e.is_err()));
        // A compact log counts from its key's expiry.
        let compact = b"\x00rl\x03S\x06\x01";
        assert_eq!(view(compact, &none).err(), Some(DecodeError::Unanchored));
        assert!(view(compact, &|| Some(60_000)).is_ok());
        // An entry of cost 0 and a compact log of no entry are not ours.
        assert_eq!(
            view(b"\x00rl\x03S\x06\x00", &|| Some(60_000)).err(),
            Some(DecodeError::Corrupt)
        );
        assert_eq!(
            view(b"\x00rl\x03S\x06", &|| Some(60_000)).err(),
            Some(DecodeError::Corrupt)
        );
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
        // The second entry's delta becomes an unterminated varint.
        full[DATA_START + 2] = 0x80;
        let p = SlidingParams::new(100, 1_000).unwrap();
        // The decision itself reads no further than the first live entry.
        let log = view(&full, &|| None).unwrap();
        assert!(decide(&p, Some(&log), 10, 1).is_ok());
        let key = Held {
            bytes: Some(full),
            expires_at_ms: Some(1_009),
        };
        assert!(matches!(
            key.check(&Limit::Sliding(p), &take(10, 1)),
            Err(RlError::BadState(DecodeError::Corrupt))
        ));
    }

    #[test]
    fn a_refund_on_a_large_log_touches_only_the_newest_entries() {
        let entries: Vec<_> = (0..10_000u64).map(|i| (1_000_000 + i, 1)).collect();
        let bytes = build(&entries);
        let v = view(&bytes, &|| None).unwrap();
        let p = SlidingParams::new(1_000_000, 3_600_000).unwrap();
        let r = refund(&p, Some(&v), 1_010_000, 3).unwrap();
        let librl_core::decision::Change::Store {
            state,
            expires_at_ms,
        } = r.change
        else {
            panic!("a refund of 3 of 10,000 stores");
        };
        let Edit::InPlace(patch) = plan_refund(&v, &state, expires_at_ms).unwrap() else {
            panic!("a refund on a large log is written in place");
        };
        // The fields change, and nothing is rewritten before the entries
        // given back: the three newest are dropped whole.
        assert_eq!(patch.entry(), &[] as &[u8]);
        let mut after = bytes.clone();
        Edit::InPlace(patch).apply_to(&mut after);
        assert_eq!(after[DATA_START..], bytes[DATA_START..]);
        let v = view(&after, &|| None).unwrap();
        let left: Vec<_> = v.entries().collect::<Result<_, _>>().unwrap();
        assert_eq!(left, entries[..9_997]);
    }

    #[test]
    fn a_log_of_the_first_layout_is_read_and_rewritten_as_version_3() {
        let limit = Limit::Sliding(SlidingParams::new(10, 3_600_000).unwrap());
        let old = legacy::sliding(&[(1_000, 2), (1_010, 1), (1_020, 3)]);
        let mut key = Held {
            bytes: Some(old),
            expires_at_ms: Some(1_020 + 3_600_000),
        };
        assert_eq!(entries(&key), [(1_000, 2), (1_010, 1), (1_020, 3)]);
        let c = key.check(&limit, &take(1_030, 1)).unwrap();
        assert_eq!(c.reply.six(), [1, 7, 0, 10, 3, 3_600_000]);
        key.commit(c.commit.as_ref().unwrap());
        assert_eq!(key.bytes.as_ref().unwrap()[..5], *b"\x00rl\x03S");
        assert_eq!(
            entries(&key),
            [(1_000, 2), (1_010, 1), (1_020, 3), (1_030, 1)]
        );
        // A refund of the old layout, too.
        let mut key = Held {
            bytes: Some(legacy::sliding(&[(1_000, 2), (1_010, 1), (1_020, 3)])),
            expires_at_ms: Some(1_020 + 3_600_000),
        };
        let c = key.check(&limit, &give_back(1_030, 4)).unwrap();
        key.commit(c.commit.as_ref().unwrap());
        assert_eq!(entries(&key), [(1_000, 2)]);
        assert_eq!(key.expires_at_ms, Some(1_000 + 3_600_000));
    }

    #[test]
    fn merging_is_conservative() {
        let mut buf = vec![0u8; DATA_START];
        for (d, c) in [(0, 1), (1, 2), (1, 3)] {
            varint::put(&mut buf, d);
            varint::put(&mut buf, c);
        }
        let (merged, first) = merge_pairs(&buf, 1, 3).unwrap();
        assert_eq!(first, 2);
        let Edit::Replace(out) = finish_large(merged, 6, first, 3) else {
            panic!("a large log");
        };
        let v = view(&out, &|| None).unwrap();
        let e: Vec<_> = v.entries().collect::<Result<_, _>>().unwrap();
        assert_eq!(e, [(2, 3), (3, 3)]);
    }

    /// `finish` as a large log whatever its size (for small test logs).
    fn finish_large(buf: Vec<u8>, total: u64, first_ms: u64, last_ms: u64) -> Edit {
        let area = &buf[DATA_START..];
        let mut out = buf[..DATA_START].to_vec();
        out[..DATA_START].copy_from_slice(
            &Header {
                head: 0,
                tail: area.len(),
                total,
                first_ms,
                last_ms,
            }
            .encode(),
        );
        out.extend_from_slice(area);
        out.resize(out.len() + MIN_SLACK, 0);
        Edit::Replace(out)
    }

    /// One step of a trace: a call or a refund, some time after the last.
    #[derive(Clone, Debug)]
    struct Op {
        gap: u64,
        same_ms: bool,
        units: u64,
        refund: bool,
        /// A call with a window this many times shorter (an override).
        shorter: bool,
    }

    fn op() -> impl Strategy<Value = Op> {
        (0u64..300, any::<bool>(), 1u64..9, 0u8..8, 0u8..16).prop_map(
            |(gap, same_ms, units, refund, shorter)| Op {
                gap,
                same_ms,
                units,
                refund: refund == 0,
                shorter: shorter == 0,
            },
        )
    }

    /// Replays `ops` on a key and on the reference log: every reply and
    /// every stored log must agree.
    fn replay(limit: u64, window_ms: u64, ops: &[Op], start: Held, reference: &mut VecLog) {
        let mut key = start;
        let mut now = 5_000_000u64;
        for op in ops {
            if !op.same_ms {
                now += op.gap;
            }
            // A key whose expiry has passed is gone, whatever a later
            // call's window would still count.
            if key.expires_at_ms.is_some_and(|at| at < now) {
                key = Held::default();
                reference.0.clear();
            }
            let window = if op.shorter {
                window_ms / 3 + 1
            } else {
                window_ms
            };
            let p = SlidingParams::new(limit, window).unwrap();
            let step = if op.refund {
                give_back(now, op.units)
            } else {
                take(now, op.units)
            };
            let c = key
                .check(&Limit::Sliding(p), &step)
                .expect("a log we wrote");
            if op.refund {
                let want = refund(&p, Some(&*reference), now, op.units).unwrap();
                assert_eq!(c.reply.six(), want.reply());
                if let librl_core::decision::Change::Store { state, .. } = want.change {
                    reference.refund(&state);
                } else if want.change == librl_core::decision::Change::Clear {
                    reference.0.clear();
                }
            } else {
                let want = decide(&p, Some(&*reference), now, op.units).unwrap();
                assert_eq!(c.reply.six(), want.reply());
                if let Some(a) = want.into_state() {
                    reference.apply(&a);
                }
            }
            if let Some(commit) = &c.commit {
                key.commit(commit);
            }
            // The reference keeps what has left the window until the next
            // write; the key's log holds only the live entries.
            let live: Vec<_> = if key.bytes.is_some() {
                entries(&key)
            } else {
                Vec::new()
            };
            let cutoff = live.first().map_or(u64::MAX, |e| e.0);
            let kept: Vec<_> = reference
                .0
                .iter()
                .copied()
                .filter(|e| e.0 >= cutoff)
                .collect();
            assert_eq!(live, kept);
            let len = key.bytes.as_ref().map_or(0, Vec::len);
            if live.len() <= 2 {
                assert!(len <= COMPACT_MAX, "{len} bytes for {live:?}");
            }
        }
    }

    proptest! {
        /// The stored log makes the same decisions as the reference log
        /// for random traces of calls, refunds, costs, limits and windows.
        #[test]
        fn matches_the_reference_log(
            limit in 1u64..60,
            window_ms in 1u64..3000,
            ops in prop::collection::vec(op(), 1..300),
        ) {
            replay(limit, window_ms, &ops, Held::default(), &mut VecLog::default());
        }

        /// Long logs: large layout, in-place appends and refunds, rebuilds
        /// and the way back to the compact layout.
        #[test]
        fn matches_the_reference_log_when_long(
            window_ms in 500u64..5000,
            ops in prop::collection::vec(op(), 1..600),
        ) {
            replay(10_000, window_ms, &ops, Held::default(), &mut VecLog::default());
        }

        /// From a log of the first layout.
        #[test]
        fn matches_the_reference_log_from_the_first_layout(
            n in 1usize..40,
            ops in prop::collection::vec(op(), 1..100),
        ) {
            let old: Vec<_> = (0..n as u64).map(|i| (5_000_000 - 2 * n as u64 + 2 * i, 1 + i % 3)).collect();
            let key = Held {
                bytes: Some(legacy::sliding(&old)),
                expires_at_ms: Some(old.last().unwrap().0 + 1000),
            };
            replay(100, 1000, &ops, key, &mut VecLog(old));
        }

        #[test]
        fn arbitrary_bytes_never_panic(
            tail in prop::collection::vec(any::<u8>(), 0..120),
            kind in prop::sample::select(vec![b'S', b's', b'L']),
            version in 1u8..4,
            now in any::<u64>(),
            expiry in any::<u64>(),
            cost in 1u64..10,
        ) {
            let mut bytes = vec![0, b'r', b'l', version, kind];
            bytes.extend(tail);
            for limit in [SlidingParams::new(5, 100).unwrap(), SlidingParams::new(500, 100_000).unwrap()] {
                let key = Held { bytes: Some(bytes.clone()), expires_at_ms: Some(expiry) };
                let _ = key.check(&Limit::Sliding(limit), &take(now, cost));
                let _ = key.check(&Limit::Sliding(limit), &give_back(now, cost));
            }
        }
    }
}
