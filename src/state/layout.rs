//! The prefix every librl value starts with, the field reader and writer
//! the layouts share, and the block wrapper. Limiters are plain Redis
//! strings, so RDB, AOF rewrite, DUMP/RESTORE, COPY, RENAME and DEBUG
//! DIGEST work natively. Only this file knows header bytes.
//!
//! Prefix: `00 'r' 'l' <version> <kind>`. The leading NUL keeps ordinary
//! text values from ever looking like ours; the version lets an older
//! module refuse a newer layout cleanly (it reads the first four bytes of
//! any value of five or more, so every value of every version starts this
//! way and is at least five bytes long).
//!
//! - Version 1 (the first release): the kind is the tag's letter, then
//!   fixed-width little-endian fields.
//! - Version 2: the block wrapper (`B`, a u64 end) and a token bucket in
//!   debt (`T` with a debt field).
//! - Version 3 (what this module writes): fields are variable-length
//!   integers ([`Writer::varint`], [`Writer::duration`]), and the limiters'
//!   times are stored as offsets from an *anchor*: the key's own absolute
//!   expiry, which librl sets on every write to the time the limiter is
//!   empty again. A kind byte in upper case (`F`, `T`, `S`, `A`) reads its
//!   anchor from the key; in lower case (`f`, `t`, `s`, `a`, "pinned") the
//!   anchor is stored as a varint right after it, for a value whose key
//!   expires at another time (inside a block) or at a time the server
//!   cannot store. `L` (the exact log's large layout), `B`, `O` and the
//!   kinds without times store every field.

use super::varint;

pub const MAGIC: [u8; 3] = [0, b'r', b'l'];
/// The first release's layouts.
pub const VERSION_1: u8 = 1;
/// Version 2: the block wrapper (tag `B`) and a token bucket in debt (tag
/// `T` with a debt field). A module that knows only version 1 refuses
/// these values cleanly.
pub const VERSION_2: u8 = 2;
/// Version 3: the compact layouts, anchored to the key's expiry. What
/// librl writes; versions 1 and 2 are read and rewritten as version 3 by
/// the next write.
pub const VERSION_3: u8 = 3;
pub const HEADER_LEN: usize = MAGIC.len() + 2;

/// Which kind of value a librl key holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tag {
    Fixed = b'F' as isize,
    Token = b'T' as isize,
    Override = b'O' as isize,
    /// The exact log (version 3: its compact layout).
    Sliding = b'S' as isize,
    Approx = b'A' as isize,
    /// A BLOCK in force, wrapping the limiter's own value (version 2).
    Block = b'B' as isize,
    /// The exact log's large layout (version 3), updated in place.
    Log = b'L' as isize,
    /// A concurrency limiter's leases (version 3).
    Concurrent = b'C' as isize,
}

impl Tag {
    pub fn from_byte(b: u8) -> Option<Tag> {
        match b {
            b'F' => Some(Tag::Fixed),
            b'T' => Some(Tag::Token),
            b'O' => Some(Tag::Override),
            b'S' => Some(Tag::Sliding),
            b'A' => Some(Tag::Approx),
            b'B' => Some(Tag::Block),
            b'L' => Some(Tag::Log),
            b'C' => Some(Tag::Concurrent),
            _ => None,
        }
    }

    /// Whether a version-3 value of this kind stores its times as offsets
    /// from an anchor (see the module's comment).
    pub fn is_anchored(self) -> bool {
        matches!(self, Tag::Fixed | Tag::Token | Tag::Sliding | Tag::Approx)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Not a librl value at all (any other string).
    Foreign,
    /// A librl value of another kind (another algorithm, or an override).
    OtherTag,
    /// Our marker, but a version this build does not read.
    UnsupportedVersion(u8),
    /// Our marker and version, but the fields are impossible.
    Corrupt,
    /// A value whose times count from its key's expiry, on a key that has
    /// none (a `PERSIST`, or a `RESTORE` without the TTL): it holds nothing
    /// a limiter can count from, and reads as empty.
    Unanchored,
}

/// The 5-byte prefix of a version and tag.
pub fn prefix(version: u8, tag: Tag) -> [u8; HEADER_LEN] {
    let [m0, m1, m2] = MAGIC;
    [m0, m1, m2, version, tag as u8]
}

/// A value's prefix, read.
#[derive(Clone, Copy, Debug)]
pub struct Prefix<'a> {
    pub version: u8,
    pub tag: Tag,
    /// Version 3, an anchored kind in lower case: the anchor is stored at
    /// the start of `rest`.
    pub pinned: bool,
    /// The bytes after the kind byte.
    pub rest: &'a [u8],
}

/// Reads a value's prefix, for every reader of every layout. Checks
/// marker, version and kind, in that order, so that a foreign value, a
/// newer layout and an unknown kind each get their own error.
pub fn read_prefix(bytes: &[u8]) -> Result<Prefix<'_>, DecodeError> {
    let Some((header, rest)) = bytes.split_first_chunk::<HEADER_LEN>() else {
        return Err(DecodeError::Foreign);
    };
    let [m0, m1, m2, version, kind] = *header;
    if [m0, m1, m2] != MAGIC {
        return Err(DecodeError::Foreign);
    }
    // A (version, kind) pair this module never writes is a newer module's
    // layout, whichever command reads it.
    let known = match version {
        VERSION_1 | VERSION_3 => true,
        VERSION_2 => matches!(kind, b'T' | b'B'),
        _ => false,
    };
    if !known {
        return Err(DecodeError::UnsupportedVersion(version));
    }
    let upper = kind.to_ascii_uppercase();
    let pinned = kind != upper;
    let tag = Tag::from_byte(upper).ok_or(DecodeError::Corrupt)?;
    if pinned && !(version == VERSION_3 && tag.is_anchored()) {
        return Err(DecodeError::Corrupt);
    }
    // Only version 3 has the large log's kind.
    if tag == Tag::Log && version != VERSION_3 {
        return Err(DecodeError::Corrupt);
    }
    Ok(Prefix {
        version,
        tag,
        pinned,
        rest,
    })
}

/// The anchor of a version-3 value of an anchored kind and a reader over
/// its fields: stored after the kind byte when pinned, else the key's
/// absolute expiry, asked of `key_expiry` only then. A value that needs
/// its key's expiry on a key that has none is `Unanchored`.
pub fn anchored<'a>(
    p: Prefix<'a>,
    key_expiry: impl FnOnce() -> Option<u64>,
) -> Result<(u64, Reader<'a>), DecodeError> {
    let mut r = Reader { rest: p.rest };
    let anchor = if p.pinned {
        r.varint()?
    } else {
        key_expiry().ok_or(DecodeError::Unanchored)?
    };
    Ok((anchor, r))
}

/// The latest expiry a key can be given (the server stores a signed
/// 64-bit millisecond time): a value anchored later is written pinned.
pub const MAX_KEY_EXPIRY_MS: u64 = i64::MAX as u64;

/// `value` made independent of its key's expiry: a version-3 value of an
/// anchored kind in upper case gets its anchor stored after the kind byte
/// (which becomes lower case); any other value, or an empty one, is
/// returned as it is.
pub fn pin(value: &[u8], anchor: Option<u64>) -> Result<Vec<u8>, DecodeError> {
    let needs_pin = matches!(
        read_prefix(value),
        Ok(Prefix { version: VERSION_3, tag, pinned: false, .. }) if tag.is_anchored()
    );
    if !needs_pin {
        return Ok(value.to_vec());
    }
    let anchor = anchor.ok_or(DecodeError::Corrupt)?;
    let (header, rest) = value
        .split_first_chunk::<HEADER_LEN>()
        .ok_or(DecodeError::Corrupt)?;
    let mut out = Vec::with_capacity(value.len() + varint::MAX_LEN);
    out.extend_from_slice(header);
    if let Some(kind) = out.get_mut(HEADER_LEN - 1) {
        *kind = kind.to_ascii_lowercase();
    }
    varint::put(&mut out, anchor);
    out.extend_from_slice(rest);
    Ok(out)
}

/// Splits a value into its stored block end and the limiter's own value,
/// which may be empty (a key blocked before it held any state). A block is
/// `B` at version 2 (`until_ms` a little-endian u64) or version 3 (a
/// varint); any other value has no block.
pub fn split_block(bytes: &[u8]) -> Result<(Option<u64>, &[u8]), DecodeError> {
    // Every call with a value asks this first: two compares with the
    // block's prefixes, the full reading left to the limiter's decoder.
    match bytes.split_first_chunk::<HEADER_LEN>() {
        Some((header, rest)) if *header == prefix(VERSION_3, Tag::Block) => {
            let mut r = Reader { rest };
            let until = r.varint()?;
            Ok((Some(until), r.rest))
        }
        Some((header, rest)) if *header == prefix(VERSION_2, Tag::Block) => {
            let (until, inner) = rest.split_first_chunk::<8>().ok_or(DecodeError::Corrupt)?;
            Ok((Some(u64::from_le_bytes(*until)), inner))
        }
        _ => Ok((None, bytes)),
    }
}

/// A block ending at `until_ms` around the limiter's own value `inner`,
/// pinned to `inner_anchor` (the time the limiter alone would have expired)
/// since the key's expiry is now the later of the two.
pub fn wrap_block(
    until_ms: u64,
    inner: &[u8],
    inner_anchor: Option<u64>,
) -> Result<Vec<u8>, DecodeError> {
    let inner = pin(inner, inner_anchor)?;
    let mut out = Vec::with_capacity(HEADER_LEN + varint::MAX_LEN + inner.len());
    out.extend_from_slice(&prefix(VERSION_3, Tag::Block));
    varint::put(&mut out, until_ms);
    out.extend_from_slice(&inner);
    Ok(out)
}

/// The units a duration is coded in, smallest first: ms, s, min, h.
const UNITS: [u64; 4] = [1, 1_000, 60_000, 3_600_000];

/// A duration as `varint(n << 2 | unit)` with `unit` the largest of
/// [`UNITS`] that divides it: a round window (`1m`, `1h`, `1d`) is one byte.
fn duration_code(ms: u64) -> u128 {
    // Largest unit first, spelled out: a division by a constant is a
    // multiplication, where a loop over the table would divide.
    let (n, unit) = if ms.is_multiple_of(3_600_000) {
        (ms / 3_600_000, 3)
    } else if ms.is_multiple_of(60_000) {
        (ms / 60_000, 2)
    } else if ms.is_multiple_of(1_000) {
        (ms / 1_000, 1)
    } else {
        (ms, 0)
    };
    (u128::from(n) << 2) | unit
}

/// The duration `code` stands for, if it is the one [`duration_code`]
/// writes.
fn duration_of(code: u128) -> Option<u64> {
    let unit = (code & 3) as usize;
    let n = u64::try_from(code >> 2).ok()?;
    let ms = n.checked_mul(*UNITS.get(unit)?)?;
    (duration_code(ms) == code).then_some(ms)
}

/// Writes a value's fields into `out` (sized by the caller from the
/// layout's largest encoding; bytes past its end are dropped).
pub struct Writer<'a> {
    out: &'a mut [u8],
    pos: usize,
}

impl<'a> Writer<'a> {
    /// A value of version 3 (the one librl writes); for an anchored kind,
    /// anchored to the key's expiry.
    pub fn new(out: &'a mut [u8], tag: Tag) -> Self {
        Self::versioned(out, VERSION_3, tag)
    }

    pub fn versioned(out: &'a mut [u8], version: u8, tag: Tag) -> Self {
        let mut w = Writer { out, pos: 0 };
        w.bytes(&prefix(version, tag));
        w
    }

    #[inline(always)]
    fn byte(&mut self, b: u8) {
        if let Some(slot) = self.out.get_mut(self.pos) {
            *slot = b;
        }
        self.pos += 1;
    }

    pub fn bytes(&mut self, b: &[u8]) {
        if let Some(dst) = self.out.get_mut(self.pos..self.pos + b.len()) {
            dst.copy_from_slice(b);
        }
        self.pos += b.len();
    }

    pub fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }

    /// A u64 as a varint, written in place (the hot path of every write:
    /// up to three bytes without the loop).
    #[inline(always)]
    pub fn varint(&mut self, mut v: u64) {
        if v < 0x80 {
            return self.byte(v as u8);
        }
        if v < 0x4000 {
            self.byte(v as u8 | 0x80);
            return self.byte((v >> 7) as u8);
        }
        if v < 0x20_0000 {
            self.byte(v as u8 | 0x80);
            self.byte((v >> 7) as u8 | 0x80);
            return self.byte((v >> 14) as u8);
        }
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if let Some(slot) = self.out.get_mut(self.pos) {
                *slot = if v == 0 { byte } else { byte | 0x80 };
            }
            self.pos += 1;
            if v == 0 {
                return;
            }
        }
    }

    #[inline(always)]
    pub fn varint128(&mut self, v: u128) {
        match u64::try_from(v) {
            Ok(v) => self.varint(v),
            Err(_) => {
                let (bytes, len) = varint::encode128(v);
                self.bytes(bytes.get(..len).unwrap_or_default());
            }
        }
    }

    /// A duration in ms, one byte for a round minute or hour.
    #[inline(always)]
    pub fn duration(&mut self, ms: u64) {
        self.varint128(duration_code(ms));
    }

    /// How many bytes have been written.
    pub fn written(&self) -> usize {
        self.pos
    }
}

/// Reads a value's fields in order.
pub struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// Reads the prefix (`read_prefix`) of a value that must be `want`'s
    /// (another kind is `OtherTag`), of a version from 1 to `newest`;
    /// returns the value's version too.
    pub fn versioned(bytes: &'a [u8], want: Tag, newest: u8) -> Result<(Self, u8), DecodeError> {
        let p = read_prefix(bytes)?;
        if p.tag != want {
            Err(DecodeError::OtherTag)
        } else if p.version > newest {
            Err(DecodeError::UnsupportedVersion(p.version))
        } else {
            Ok((Reader { rest: p.rest }, p.version))
        }
    }

    /// A reader over `rest` (the fields after a prefix already read).
    pub fn over(rest: &'a [u8]) -> Self {
        Reader { rest }
    }

    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        let (head, rest) = self
            .rest
            .split_first_chunk::<8>()
            .ok_or(DecodeError::Corrupt)?;
        self.rest = rest;
        Ok(u64::from_le_bytes(*head))
    }

    pub fn u128(&mut self) -> Result<u128, DecodeError> {
        let (head, rest) = self
            .rest
            .split_first_chunk::<16>()
            .ok_or(DecodeError::Corrupt)?;
        self.rest = rest;
        Ok(u128::from_le_bytes(*head))
    }

    pub fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut pos = 0;
        let v = varint::get(self.rest, &mut pos).ok_or(DecodeError::Corrupt)?;
        self.rest = self.rest.get(pos..).unwrap_or_default();
        Ok(v)
    }

    pub fn varint128(&mut self) -> Result<u128, DecodeError> {
        let mut pos = 0;
        let v = varint::get128(self.rest, &mut pos).ok_or(DecodeError::Corrupt)?;
        self.rest = self.rest.get(pos..).unwrap_or_default();
        Ok(v)
    }

    /// A duration written by [`Writer::duration`].
    pub fn duration(&mut self) -> Result<u64, DecodeError> {
        let code = self.varint128()?;
        duration_of(code).ok_or(DecodeError::Corrupt)
    }

    /// The fields not read yet.
    pub fn rest(&self) -> &'a [u8] {
        self.rest
    }

    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    pub fn finish(self) -> Result<(), DecodeError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::Corrupt)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::approx::{decode_approx, encode_approx};
    use super::super::fixed::{decode_fixed, encode_fixed};
    use super::super::legacy;
    use super::super::overrides::{decode_override, encode_override};
    use super::super::token::{decode_bucket, encode_bucket};
    use super::*;
    use librl_core::approx::ApproxState;
    use librl_core::fixed::FixedState;
    use librl_core::overrides::Override;
    use librl_core::token::{Bucket, TokenState};
    use librl_core::units::{Amount, Window};
    use librl_core::{MAX_AMOUNT, MAX_WINDOW_MS};
    use proptest::prelude::*;

    /// How the previous release (versions 1 and 2) read a value's prefix,
    /// kept as it was: what an older module answers to a value of ours.
    fn older_module_reads(bytes: &[u8]) -> Result<u8, DecodeError> {
        let Some((header, _)) = bytes.split_first_chunk::<HEADER_LEN>() else {
            return Err(DecodeError::Foreign);
        };
        let [m0, m1, m2, version, tag] = *header;
        if [m0, m1, m2] != MAGIC {
            return Err(DecodeError::Foreign);
        }
        let known = version == 1 || (version == 2 && matches!(tag, b'T' | b'B'));
        if !known {
            return Err(DecodeError::UnsupportedVersion(version));
        }
        Ok(tag)
    }

    fn none() -> Option<u64> {
        None
    }

    #[test]
    fn round_windows_are_one_byte() {
        for (ms, len) in [
            (1_000, 1),
            (60_000, 1),
            (3_600_000, 1),
            (86_400_000, 1),
            (1_500, 2),
        ] {
            let mut out = [0u8; 16];
            let mut w = Writer::versioned(&mut out, 0, Tag::Fixed);
            w.duration(ms);
            assert_eq!(w.written() - HEADER_LEN, len, "{ms}");
            let mut r = Reader::over(&out[HEADER_LEN..HEADER_LEN + len]);
            assert_eq!(r.duration(), Ok(ms));
        }
        // Another unit's spelling of the same duration is not ours.
        let mut r = Reader::over(&[(60 << 2) | 1]);
        assert_eq!(r.duration(), Err(DecodeError::Corrupt));
    }

    #[test]
    fn classifies_bad_values() {
        let good = encode_fixed(&FixedState {
            start_ms: 1,
            end_ms: 2,
            count: 3,
        });
        let good = good.as_slice();
        let at = || Some(2);
        assert_eq!(
            decode_fixed(good, at),
            Ok(FixedState {
                start_ms: 1,
                end_ms: 2,
                count: 3
            })
        );
        assert_eq!(decode_fixed(b"hello", at), Err(DecodeError::Foreign));
        assert_eq!(decode_fixed(b"", at), Err(DecodeError::Foreign));
        assert_eq!(decode_fixed(b"\x00rl\x03", at), Err(DecodeError::Foreign));
        let mut newer = good.to_vec();
        newer[3] = 4;
        assert_eq!(
            decode_fixed(&newer, at),
            Err(DecodeError::UnsupportedVersion(4))
        );
        newer[3] = 2;
        assert_eq!(
            decode_fixed(&newer, at),
            Err(DecodeError::UnsupportedVersion(2))
        );
        let mut other = good.to_vec();
        other[4] = b'?';
        assert_eq!(decode_fixed(&other, at), Err(DecodeError::Corrupt));
        // Lower case is for the anchored kinds only.
        other[4] = b'o';
        assert_eq!(decode_fixed(&other, at), Err(DecodeError::Corrupt));
        assert_eq!(
            decode_fixed(&good[..good.len() - 1], at),
            Err(DecodeError::Corrupt)
        );
        let mut longer = good.to_vec();
        longer.push(0);
        assert_eq!(decode_fixed(&longer, at), Err(DecodeError::Corrupt));
        // Anchored to a key with no expiry, or an expiry before the window.
        assert_eq!(decode_fixed(good, none), Err(DecodeError::Unanchored));
        assert_eq!(decode_fixed(good, || Some(0)), Err(DecodeError::Corrupt));
        // Another kind's value.
        let token = encode_bucket(&bucket(0), 10);
        assert_eq!(
            decode_fixed(token.as_slice(), at),
            Err(DecodeError::OtherTag)
        );
        assert_eq!(decode_bucket(good, at), Err(DecodeError::OtherTag));
        assert_eq!(decode_override(good), Err(DecodeError::OtherTag));
    }

    fn bucket(debt: u128) -> Bucket {
        Bucket {
            state: TokenState {
                at_ms: 7,
                window_ms: Window::new(1000).unwrap(),
                missing: 123_456,
            },
            debt,
        }
    }

    #[test]
    fn values_of_the_earlier_layouts_are_read() {
        let at = || Some(u64::MAX);
        assert_eq!(
            decode_fixed(&legacy::fixed(1, 2, 3), at),
            Ok(FixedState {
                start_ms: 1,
                end_ms: 2,
                count: 3
            })
        );
        assert_eq!(
            decode_approx(&legacy::approx(1000, 2, 4), at),
            Ok(ApproxState {
                start_ms: 1000,
                current: 2,
                previous: 4
            })
        );
        assert_eq!(
            decode_bucket(&legacy::token(7, 1000, 123_456, 0), at),
            Ok(bucket(0))
        );
        assert_eq!(
            decode_bucket(&legacy::token(7, 1000, 123_456, 9), at),
            Ok(bucket(9))
        );
        assert_eq!(
            decode_override(&legacy::override_value(5, 60_000, 0)),
            Ok(Override {
                limit: Amount::new(5).unwrap(),
                window_ms: Window::new(60_000).unwrap(),
                burst: None
            })
        );
        // Impossible fields of the first layout stay corrupt.
        assert_eq!(
            decode_fixed(&legacy::fixed(5, 5, 1), at),
            Err(DecodeError::Corrupt)
        );
        assert_eq!(
            decode_bucket(&legacy::token(7, 0, 1, 0), at),
            Err(DecodeError::Corrupt)
        );
        assert_eq!(
            decode_override(&legacy::override_value(0, 1, 0)),
            Err(DecodeError::Corrupt)
        );
        // Version 2's block around a version-1 value.
        let blocked = legacy::block(99, &legacy::fixed(1, 2, 3));
        assert_eq!(
            split_block(&blocked),
            Ok((Some(99), &legacy::fixed(1, 2, 3)[..]))
        );
    }

    #[test]
    fn a_value_pinned_to_its_anchor_reads_without_its_key() {
        let s = FixedState {
            start_ms: 1_000,
            end_ms: 61_000,
            count: 4,
        };
        let anchored = encode_fixed(&s);
        let pinned = pin(anchored.as_slice(), Some(61_000)).unwrap();
        assert_eq!(pinned[4], b'f');
        assert_eq!(decode_fixed(&pinned, none), Ok(s));
        // Pinning needs the anchor, and leaves other values as they are.
        assert_eq!(pin(anchored.as_slice(), None), Err(DecodeError::Corrupt));
        assert_eq!(pin(&pinned, None).unwrap(), pinned);
        let old = legacy::fixed(1, 2, 3);
        assert_eq!(pin(&old, None).unwrap(), old);
        assert_eq!(pin(&[], None).unwrap(), Vec::<u8>::new());
        // A block keeps the limiter's value readable inside it.
        let blocked = wrap_block(500_000, anchored.as_slice(), Some(61_000)).unwrap();
        let (until, inner) = split_block(&blocked).unwrap();
        assert_eq!(until, Some(500_000));
        assert_eq!(decode_fixed(inner, none), Ok(s));
        let empty = wrap_block(500_000, &[], None).unwrap();
        assert_eq!(split_block(&empty), Ok((Some(500_000), &[][..])));
    }

    fn fixed_state() -> impl Strategy<Value = FixedState> {
        (0u64..1 << 62, 1..=MAX_WINDOW_MS, 1..=MAX_AMOUNT).prop_map(|(start_ms, len, count)| {
            FixedState {
                start_ms,
                end_ms: start_ms + len,
                count,
            }
        })
    }

    fn token_bucket() -> impl Strategy<Value = (Bucket, u64)> {
        (
            0u64..1 << 62,
            1..=MAX_WINDOW_MS,
            1u128..1 << 100,
            0u128..1 << 100,
            0u64..1 << 40,
        )
            .prop_map(|(at_ms, window, missing, debt, ahead)| {
                let window_ms = Window::new(window).unwrap();
                let missing = missing % (u128::from(MAX_AMOUNT) * u128::from(window)) + 1;
                let debt = debt % librl_core::token::MAX_DEBT;
                let state = TokenState {
                    at_ms,
                    window_ms,
                    missing,
                };
                (Bucket { state, debt }, at_ms + ahead)
            })
    }

    fn approx_state() -> impl Strategy<Value = (ApproxState, u64)> {
        (
            0u64..1 << 62,
            0..=MAX_AMOUNT,
            0..=MAX_AMOUNT,
            1..=2 * MAX_WINDOW_MS,
        )
            .prop_map(|(start_ms, current, previous, life)| {
                (
                    ApproxState {
                        start_ms,
                        current,
                        previous,
                    },
                    start_ms + life,
                )
            })
    }

    /// Every version-3 value this module can write, for a few states.
    fn version_3_values(
        f: FixedState,
        (b, b_at): (Bucket, u64),
        (a, a_at): (ApproxState, u64),
    ) -> Vec<Vec<u8>> {
        let fixed = encode_fixed(&f).as_slice().to_vec();
        let o = Override {
            limit: Amount::new(f.count).unwrap(),
            window_ms: Window::new(f.end_ms - f.start_ms).unwrap(),
            burst: Amount::new(f.count / 2),
        };
        vec![
            fixed.clone(),
            pin(&fixed, Some(f.end_ms)).unwrap(),
            encode_bucket(&b, b_at).as_slice().to_vec(),
            encode_approx(&a, a_at).as_slice().to_vec(),
            encode_override(&o),
            wrap_block(b_at, &fixed, Some(f.end_ms)).unwrap(),
            wrap_block(b_at, &[], None).unwrap(),
            super::super::sliding::build(&[(f.start_ms, f.count), (f.end_ms, 1)]),
            // A compact exact log of one call.
            b"\x00rl\x03S\x06\x01".to_vec(),
        ]
    }

    proptest! {
        #[test]
        fn every_state_round_trips(f in fixed_state(), b in token_bucket(), a in approx_state()) {
            let fixed = encode_fixed(&f);
            prop_assert_eq!(decode_fixed(fixed.as_slice(), || Some(f.end_ms)), Ok(f));
            let token = encode_bucket(&b.0, b.1);
            prop_assert_eq!(decode_bucket(token.as_slice(), || Some(b.1)), Ok(b.0));
            let approx = encode_approx(&a.0, a.1);
            prop_assert_eq!(decode_approx(approx.as_slice(), || Some(a.1)), Ok(a.0));
        }

        /// What a module of the previous release answers to every value
        /// this one writes: the newer-version error, never a reading.
        #[test]
        fn an_older_module_refuses_every_version_3_value(
            f in fixed_state(), b in token_bucket(), a in approx_state(),
        ) {
            for v in version_3_values(f, b, a) {
                prop_assert!(v.len() >= HEADER_LEN);
                prop_assert_eq!(older_module_reads(&v), Err(DecodeError::UnsupportedVersion(3)));
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(
            bytes in prop::collection::vec(any::<u8>(), 0..64),
            expiry in any::<Option<u64>>(),
        ) {
            let _ = decode_fixed(&bytes, || expiry);
            let _ = decode_bucket(&bytes, || expiry);
            let _ = decode_override(&bytes);
            let _ = decode_approx(&bytes, || expiry);
            let _ = split_block(&bytes);
            let _ = pin(&bytes, expiry);
        }

        #[test]
        fn arbitrary_bytes_after_a_valid_header_never_panic(
            kind in prop::sample::select(b"FTOABLSftas".to_vec()),
            version in 1u8..4,
            tail in prop::collection::vec(any::<u8>(), 0..48),
            expiry in any::<Option<u64>>(),
        ) {
            let mut bytes = vec![0, b'r', b'l', version, kind];
            bytes.extend(tail);
            let _ = decode_fixed(&bytes, || expiry);
            let _ = decode_bucket(&bytes, || expiry);
            let _ = decode_override(&bytes);
            let _ = decode_approx(&bytes, || expiry);
            let _ = split_block(&bytes);
            let _ = pin(&bytes, expiry);
        }
    }
}
