//! The prefix every librl value starts with, and the field reader and
//! writer the fixed-size layouts share. Limiters are plain Redis strings, so
//! RDB, AOF rewrite, DUMP/RESTORE, COPY, RENAME and DEBUG DIGEST work
//! natively.
//!
//! Layout: `00 'r' 'l' <version> <tag>` then the algorithm's fields as
//! little-endian integers. The leading NUL keeps ordinary text values from
//! ever looking like ours; the version lets a later layout be refused
//! cleanly by an older module.

pub const MAGIC: [u8; 3] = [0, b'r', b'l'];
/// The version every layout of the first release has, and what librl
/// writes whenever the value needs nothing newer.
pub const VERSION: u8 = 1;
/// Version 2: the block wrapper (tag `B`) and a token bucket in debt (tag
/// `T` with a debt field). A module that knows only version 1 refuses
/// these values cleanly.
pub const VERSION_2: u8 = 2;
/// Version 3: a concurrency limiter's leases (tag `C`). A module that
/// knows only versions 1 and 2 refuses every version-3 value cleanly.
pub const VERSION_3: u8 = 3;
pub const HEADER_LEN: usize = MAGIC.len() + 2;

/// Which kind of value a librl key holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tag {
    Fixed = b'F' as isize,
    Token = b'T' as isize,
    Override = b'O' as isize,
    Sliding = b'S' as isize,
    Approx = b'A' as isize,
    /// A BLOCK in force, wrapping the limiter's own value (version 2).
    Block = b'B' as isize,
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
            b'C' => Some(Tag::Concurrent),
            _ => None,
        }
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
}

/// The block wrapper's length before the wrapped value.
pub const BLOCK_LEN: usize = HEADER_LEN + 8;

/// The 5-byte prefix of a version and tag.
pub fn prefix(version: u8, tag: Tag) -> [u8; HEADER_LEN] {
    let [m0, m1, m2] = MAGIC;
    [m0, m1, m2, version, tag as u8]
}

/// Reads a value's prefix, for every reader of every layout: its version,
/// its tag and the bytes after it. Checks marker, version and tag, in that
/// order, so that a foreign value, a newer layout and an unknown tag each
/// get their own error.
pub fn read_prefix(bytes: &[u8]) -> Result<(u8, Tag, &[u8]), DecodeError> {
    let Some((header, rest)) = bytes.split_first_chunk::<HEADER_LEN>() else {
        return Err(DecodeError::Foreign);
    };
    let [m0, m1, m2, version, tag] = *header;
    if [m0, m1, m2] != MAGIC {
        return Err(DecodeError::Foreign);
    }
    // A (version, tag) pair this module never writes is a newer module's
    // layout, whichever command reads it.
    let known = version == VERSION
        || (version == VERSION_2 && matches!(tag, b'T' | b'B'))
        || (version == VERSION_3 && tag == b'C');
    if !known {
        return Err(DecodeError::UnsupportedVersion(version));
    }
    let tag = Tag::from_byte(tag).ok_or(DecodeError::Corrupt)?;
    Ok((version, tag, rest))
}

/// Splits a value into its stored block end (version 2, tag `B`, then
/// `until_ms` as a little-endian u64) and the limiter's own value, which
/// may be empty (a key blocked before it held any state). Any other value
/// has no block.
pub fn split_block(bytes: &[u8]) -> Result<(Option<u64>, &[u8]), DecodeError> {
    // Every call with a value asks this first: one compare with the block's
    // prefix, the full reading left to the limiter's own decoder.
    match bytes.split_first_chunk::<HEADER_LEN>() {
        Some((header, rest)) if *header == prefix(VERSION_2, Tag::Block) => {
            let (until, inner) = rest.split_first_chunk::<8>().ok_or(DecodeError::Corrupt)?;
            Ok((Some(u64::from_le_bytes(*until)), inner))
        }
        _ => Ok((None, bytes)),
    }
}

/// A block ending at `until_ms` around the limiter's own value `inner`.
pub fn wrap_block(until_ms: u64, inner: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; BLOCK_LEN];
    let mut w = Writer::versioned(&mut out, VERSION_2, Tag::Block);
    w.u64(until_ms);
    out.extend_from_slice(inner);
    out
}

pub struct Writer<'a> {
    out: &'a mut [u8],
    pos: usize,
}

impl<'a> Writer<'a> {
    pub fn new(out: &'a mut [u8], tag: Tag) -> Self {
        Self::versioned(out, VERSION, tag)
    }

    pub fn versioned(out: &'a mut [u8], version: u8, tag: Tag) -> Self {
        let mut w = Writer { out, pos: 0 };
        w.bytes(&prefix(version, tag));
        w
    }

    pub fn bytes(&mut self, b: &[u8]) {
        // Callers size `out` exactly from the layout constants.
        if let Some(dst) = self.out.get_mut(self.pos..self.pos + b.len()) {
            dst.copy_from_slice(b);
        }
        self.pos += b.len();
    }

    pub fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }
}

pub struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// Reads the prefix (`read_prefix`) of a value that must be `want`'s:
    /// another algorithm's is `OtherTag`.
    pub fn new(bytes: &'a [u8], want: Tag) -> Result<Self, DecodeError> {
        Self::versioned(bytes, want, VERSION).map(|(reader, _)| reader)
    }

    /// Like `new`, accepting versions 1 to `newest` of this tag; returns
    /// the value's version too.
    pub fn versioned(bytes: &'a [u8], want: Tag, newest: u8) -> Result<(Self, u8), DecodeError> {
        let (version, tag, rest) = read_prefix(bytes)?;
        if tag != want {
            Err(DecodeError::OtherTag)
        } else if version > newest {
            Err(DecodeError::UnsupportedVersion(version))
        } else {
            Ok((Reader { rest }, version))
        }
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

    /// The bytes after the fields read so far (a layout whose tail is not
    /// fixed-size fields reads it itself).
    pub fn rest(self) -> &'a [u8] {
        self.rest
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
    use super::super::approx::decode_approx;
    use super::super::fixed::{decode_fixed, encode_fixed, FIXED_LEN};
    use super::super::overrides::{decode_override, encode_override};
    use super::super::token::{decode_token, encode_token};
    use super::*;
    use librl_core::fixed::FixedState;
    use librl_core::overrides::Override;
    use librl_core::token::TokenState;
    use librl_core::units::{Amount, Window};
    use proptest::prelude::*;

    #[test]
    fn fixed_round_trips() {
        let s = FixedState {
            start_ms: 1,
            end_ms: 2,
            count: 3,
        };
        assert_eq!(decode_fixed(&encode_fixed(&s)), Ok(s));
    }

    #[test]
    fn classifies_bad_values() {
        let good = encode_fixed(&FixedState {
            start_ms: 1,
            end_ms: 2,
            count: 3,
        });
        assert_eq!(decode_fixed(b"hello"), Err(DecodeError::Foreign));
        assert_eq!(decode_fixed(b""), Err(DecodeError::Foreign));
        let mut newer = good;
        newer[3] = 2;
        assert_eq!(
            decode_fixed(&newer),
            Err(DecodeError::UnsupportedVersion(2))
        );
        let mut other = good;
        other[4] = b'?';
        assert_eq!(decode_fixed(&other), Err(DecodeError::Corrupt));
        assert_eq!(
            decode_fixed(&good[..FIXED_LEN - 1]),
            Err(DecodeError::Corrupt)
        );
        let mut longer = good.to_vec();
        longer.push(0);
        assert_eq!(decode_fixed(&longer), Err(DecodeError::Corrupt));
        let empty_window = encode_fixed(&FixedState {
            start_ms: 5,
            end_ms: 5,
            count: 1,
        });
        assert_eq!(decode_fixed(&empty_window), Err(DecodeError::Corrupt));
    }

    #[test]
    fn token_round_trips_and_tags_are_distinct() {
        let s = TokenState {
            at_ms: 7,
            window_ms: Window::new(1000).unwrap(),
            missing: 123_456,
        };
        let bytes = encode_token(&s);
        assert_eq!(decode_token(&bytes), Ok(s));
        assert_eq!(decode_fixed(&bytes), Err(DecodeError::OtherTag));
        let fixed = encode_fixed(&FixedState {
            start_ms: 1,
            end_ms: 2,
            count: 3,
        });
        assert_eq!(decode_token(&fixed), Err(DecodeError::OtherTag));
        // A window of 0 cannot be a TokenState, so its bytes are written
        // over a valid encoding (the window follows `at_ms`).
        let mut zero_window = bytes;
        zero_window[HEADER_LEN + 8..HEADER_LEN + 16].fill(0);
        assert_eq!(decode_token(&zero_window), Err(DecodeError::Corrupt));
    }

    #[test]
    fn override_round_trips_with_and_without_burst() {
        for burst in [None, Amount::new(7)] {
            let o = Override {
                limit: Amount::new(5).unwrap(),
                window_ms: Window::new(60_000).unwrap(),
                burst,
            };
            assert_eq!(decode_override(&encode_override(&o)), Ok(o));
            assert_eq!(
                decode_fixed(&encode_override(&o)),
                Err(DecodeError::OtherTag)
            );
        }
        // A limit of 0 cannot be an Override, so its bytes are written over
        // a valid encoding (the limit comes first).
        let mut zero_limit = encode_override(&Override {
            limit: Amount::ONE,
            window_ms: Window::new(1).unwrap(),
            burst: None,
        });
        zero_limit[HEADER_LEN..HEADER_LEN + 8].fill(0);
        assert_eq!(decode_override(&zero_limit), Err(DecodeError::Corrupt));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode_fixed(&bytes);
            let _ = decode_token(&bytes);
            let _ = decode_override(&bytes);
            let _ = decode_approx(&bytes);
        }

        #[test]
        fn arbitrary_bytes_after_a_valid_header_never_panic(
            tag in prop::sample::select(vec![b'F', b'T', b'O', b'A']),
            tail in prop::collection::vec(any::<u8>(), 0..48),
        ) {
            let mut bytes = vec![0, b'r', b'l', VERSION, tag];
            bytes.extend(tail);
            let _ = decode_fixed(&bytes);
            let _ = decode_token(&bytes);
            let _ = decode_override(&bytes);
            let _ = decode_approx(&bytes);
        }
    }
}
