//! How limiter state is laid out in a key's bytes. Limiters are plain Redis
//! strings, so RDB, AOF rewrite, DUMP/RESTORE, COPY, RENAME and DEBUG DIGEST
//! work natively; this file is the only place that knows their layout.
//!
//! Layout: `00 'r' 'l' <version> <tag>` then the algorithm's fields as
//! little-endian u64s. The leading NUL keeps ordinary text values from ever
//! looking like ours; the version lets a later layout be refused cleanly by
//! an older module.

pub mod sliding_log;

use librl_core::approx::ApproxState;
use librl_core::fixed::FixedState;
use librl_core::overrides::Override;
use librl_core::token::TokenState;

const MAGIC: [u8; 3] = [0, b'r', b'l'];
pub const VERSION: u8 = 1;
const HEADER_LEN: usize = MAGIC.len() + 2;

/// Which kind of value a librl key holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tag {
    Fixed = b'F' as isize,
    Token = b'T' as isize,
    Override = b'O' as isize,
    Sliding = b'S' as isize,
    Approx = b'A' as isize,
}

impl Tag {
    fn from_byte(b: u8) -> Option<Tag> {
        match b {
            b'F' => Some(Tag::Fixed),
            b'T' => Some(Tag::Token),
            b'O' => Some(Tag::Override),
            b'S' => Some(Tag::Sliding),
            b'A' => Some(Tag::Approx),
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

pub const FIXED_LEN: usize = HEADER_LEN + 3 * 8;

pub fn encode_fixed(s: &FixedState) -> [u8; FIXED_LEN] {
    let mut out = [0u8; FIXED_LEN];
    let mut w = Writer::new(&mut out, Tag::Fixed);
    w.u64(s.start_ms);
    w.u64(s.end_ms);
    w.u64(s.count);
    out
}

pub fn decode_fixed(bytes: &[u8]) -> Result<FixedState, DecodeError> {
    let mut r = Reader::new(bytes, Tag::Fixed)?;
    let s = FixedState {
        start_ms: r.u64()?,
        end_ms: r.u64()?,
        count: r.u64()?,
    };
    r.finish()?;
    if s.is_consistent() {
        Ok(s)
    } else {
        Err(DecodeError::Corrupt)
    }
}

pub const TOKEN_LEN: usize = HEADER_LEN + 2 * 8 + 16;

pub fn encode_token(s: &TokenState) -> [u8; TOKEN_LEN] {
    let mut out = [0u8; TOKEN_LEN];
    let mut w = Writer::new(&mut out, Tag::Token);
    w.u64(s.at_ms);
    w.u64(s.window_ms);
    w.bytes(&s.missing.to_le_bytes());
    out
}

pub fn decode_token(bytes: &[u8]) -> Result<TokenState, DecodeError> {
    let mut r = Reader::new(bytes, Tag::Token)?;
    let s = TokenState {
        at_ms: r.u64()?,
        window_ms: r.u64()?,
        missing: r.u128()?,
    };
    r.finish()?;
    if s.is_consistent() {
        Ok(s)
    } else {
        Err(DecodeError::Corrupt)
    }
}

pub const APPROX_LEN: usize = HEADER_LEN + 3 * 8;

pub fn encode_approx(s: &ApproxState) -> [u8; APPROX_LEN] {
    let mut out = [0u8; APPROX_LEN];
    let mut w = Writer::new(&mut out, Tag::Approx);
    w.u64(s.start_ms);
    w.u64(s.current);
    w.u64(s.previous);
    out
}

pub fn decode_approx(bytes: &[u8]) -> Result<ApproxState, DecodeError> {
    let mut r = Reader::new(bytes, Tag::Approx)?;
    let s = ApproxState {
        start_ms: r.u64()?,
        current: r.u64()?,
        previous: r.u64()?,
    };
    r.finish()?;
    if s.is_consistent() {
        Ok(s)
    } else {
        Err(DecodeError::Corrupt)
    }
}

pub const OVERRIDE_LEN: usize = HEADER_LEN + 3 * 8;

/// An override's TTL is the key's own expiry, so it is not encoded here.
pub fn encode_override(o: &Override) -> [u8; OVERRIDE_LEN] {
    let mut out = [0u8; OVERRIDE_LEN];
    let mut w = Writer::new(&mut out, Tag::Override);
    w.u64(o.limit);
    w.u64(o.window_ms);
    w.u64(o.burst.unwrap_or(0));
    out
}

pub fn decode_override(bytes: &[u8]) -> Result<Override, DecodeError> {
    let mut r = Reader::new(bytes, Tag::Override)?;
    let o = Override {
        limit: r.u64()?,
        window_ms: r.u64()?,
        burst: Some(r.u64()?).filter(|&b| b != 0),
    };
    r.finish()?;
    if o.is_consistent() {
        Ok(o)
    } else {
        Err(DecodeError::Corrupt)
    }
}

struct Writer<'a> {
    out: &'a mut [u8],
    pos: usize,
}

impl<'a> Writer<'a> {
    fn new(out: &'a mut [u8], tag: Tag) -> Self {
        let mut w = Writer { out, pos: 0 };
        w.bytes(&MAGIC);
        w.bytes(&[VERSION, tag as u8]);
        w
    }

    fn bytes(&mut self, b: &[u8]) {
        // Callers size `out` exactly from the layout constants.
        if let Some(dst) = self.out.get_mut(self.pos..self.pos + b.len()) {
            dst.copy_from_slice(b);
        }
        self.pos += b.len();
    }

    fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }
}

struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// Checks marker, version and tag, in that order, so that a foreign
    /// value, a newer layout and another algorithm each get their own error.
    fn new(bytes: &'a [u8], want: Tag) -> Result<Self, DecodeError> {
        let Some((header, rest)) = bytes.split_first_chunk::<HEADER_LEN>() else {
            return Err(DecodeError::Foreign);
        };
        let [m0, m1, m2, version, tag] = *header;
        if [m0, m1, m2] != MAGIC {
            return Err(DecodeError::Foreign);
        }
        if version != VERSION {
            return Err(DecodeError::UnsupportedVersion(version));
        }
        match Tag::from_byte(tag) {
            Some(t) if t == want => Ok(Reader { rest }),
            Some(_) => Err(DecodeError::OtherTag),
            None => Err(DecodeError::Corrupt),
        }
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        let (head, rest) = self
            .rest
            .split_first_chunk::<8>()
            .ok_or(DecodeError::Corrupt)?;
        self.rest = rest;
        Ok(u64::from_le_bytes(*head))
    }

    fn u128(&mut self) -> Result<u128, DecodeError> {
        let (head, rest) = self
            .rest
            .split_first_chunk::<16>()
            .ok_or(DecodeError::Corrupt)?;
        self.rest = rest;
        Ok(u128::from_le_bytes(*head))
    }

    fn finish(self) -> Result<(), DecodeError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::Corrupt)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
            window_ms: 1000,
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
        let zero_window = encode_token(&TokenState { window_ms: 0, ..s });
        assert_eq!(decode_token(&zero_window), Err(DecodeError::Corrupt));
    }

    #[test]
    fn override_round_trips_with_and_without_burst() {
        for burst in [None, Some(7)] {
            let o = Override {
                limit: 5,
                window_ms: 60_000,
                burst,
            };
            assert_eq!(decode_override(&encode_override(&o)), Ok(o));
            assert_eq!(
                decode_fixed(&encode_override(&o)),
                Err(DecodeError::OtherTag)
            );
        }
        let zero_limit = encode_override(&Override {
            limit: 0,
            window_ms: 1,
            burst: None,
        });
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
