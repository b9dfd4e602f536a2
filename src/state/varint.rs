//! Unsigned LEB128 varints (7 bits a byte, low first, the high bit set on
//! every byte but the last), for the variable-length layouts: the fields
//! of every version-3 value (layout.rs), the exact log's entries, a
//! concurrency limiter's leases. Only the shortest encoding of a number is
//! read back, so a value has one encoding and bytes no librl wrote are
//! refused.

/// The longest varint of a u64.
pub const MAX_LEN: usize = 10;
/// The longest varint of a u128.
pub const MAX_LEN_128: usize = 19;

/// Appends `v` to `out`.
pub fn put(out: &mut Vec<u8>, v: u64) {
    put128(out, u128::from(v));
}

/// Appends `v` to `out`.
pub fn put128(out: &mut Vec<u8>, v: u128) {
    let (bytes, len) = encode128(v);
    out.extend_from_slice(bytes.get(..len).unwrap_or_default());
}

/// `v` as a varint: the first `len` bytes of the array.
pub fn encode(v: u64) -> ([u8; MAX_LEN], usize) {
    let (wide, len) = encode128(u128::from(v));
    let mut out = [0u8; MAX_LEN];
    if let (Some(dst), Some(src)) = (out.get_mut(..len), wide.get(..len)) {
        dst.copy_from_slice(src);
    }
    (out, len)
}

/// `v` as a varint: the first `len` bytes of the array.
pub fn encode128(mut v: u128) -> ([u8; MAX_LEN_128], usize) {
    let mut out = [0u8; MAX_LEN_128];
    let mut len = 0;
    for slot in out.iter_mut() {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        *slot = if v == 0 { byte } else { byte | 0x80 };
        len += 1;
        if v == 0 {
            break;
        }
    }
    (out, len)
}

/// Writes `v` at `out[*at..]`, advancing `at`; false (nothing written)
/// when it does not fit.
pub fn put_at(out: &mut [u8], at: &mut usize, v: u64) -> bool {
    let (bytes, n) = encode(v);
    match (out.get_mut(*at..*at + n), bytes.get(..n)) {
        (Some(dst), Some(src)) => {
            dst.copy_from_slice(src);
            *at += n;
            true
        }
        _ => false,
    }
}

/// Decodes a varint at `data[*pos..]`, advancing `pos`: None when it runs
/// past the data, past 64 bits, or is not the shortest encoding.
#[inline(always)]
pub fn get(data: &[u8], pos: &mut usize) -> Option<u64> {
    // Most numbers of a log (a delta of a few ms, a cost of 1) are one byte.
    match data.get(*pos) {
        Some(&b) if b < 0x80 => {
            *pos += 1;
            Some(u64::from(b))
        }
        _ => get_u64(data, pos),
    }
}

/// `get` past its first byte, in u64 arithmetic: a number that fits 64
/// bits is at most ten bytes, the tenth holding bit 63 alone.
fn get_u64(data: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *data.get(*pos)?;
        *pos += 1;
        let part = u64::from(b & 0x7f);
        if shift == 63 && part > 1 {
            return None;
        }
        v |= part << shift;
        if b & 0x80 == 0 {
            // A last byte of 0 after others would be a longer encoding.
            return (b != 0 || shift == 0).then_some(v);
        }
    }
    None
}

/// `get` for a u128. Most stored numbers fit 64 bits (a bucket's
/// shortfall does unless its window is months long): those are read in
/// u64 arithmetic, the rest in u128.
pub fn get128(data: &[u8], pos: &mut usize) -> Option<u128> {
    let start = *pos;
    if let Some(v) = get(data, pos) {
        return Some(u128::from(v));
    }
    *pos = start;
    get_bits(data, pos, 128)
}

/// A varint of a number that fits `bits`, in its shortest encoding.
fn get_bits(data: &[u8], pos: &mut usize, bits: u32) -> Option<u128> {
    let mut v = 0u128;
    let mut shift = 0u32;
    loop {
        let b = *data.get(*pos)?;
        *pos += 1;
        let part = u128::from(b & 0x7f);
        // The group must fit in what is left of `bits`.
        let room = bits.checked_sub(shift).filter(|&r| r > 0)?;
        if room < 7 && part >> room != 0 {
            return None;
        }
        v |= part << shift;
        shift += 7;
        if b & 0x80 == 0 {
            // A last byte of 0 after others would be a longer encoding.
            return (b != 0 || shift == 7).then_some(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for v in [
            0,
            1,
            127,
            128,
            16_383,
            16_384,
            1 << 35,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let (bytes, n) = encode(v);
            let mut pos = 0;
            assert_eq!(get(&bytes[..n], &mut pos), Some(v));
            assert_eq!(pos, n);
        }
        assert_eq!(get(&[0x80], &mut 0), None);
        let mut out = [0u8; 3];
        let mut at = 1;
        assert!(put_at(&mut out, &mut at, 300));
        assert_eq!((out, at), ([0, 0xac, 0x02], 3));
        assert!(!put_at(&mut out, &mut at, 1));
    }

    #[test]
    fn a_number_has_one_encoding() {
        for v in [0u128, 1, 127, 128, 300, u64::MAX as u128, u128::MAX] {
            let mut out = Vec::new();
            put128(&mut out, v);
            let mut pos = 0;
            assert_eq!(get128(&out, &mut pos), Some(v));
            assert_eq!(pos, out.len());
        }
        // A longer encoding of 1, of 0, an unterminated one, one too wide.
        assert_eq!(get(&[0x81, 0x00], &mut 0), None);
        assert_eq!(get(&[0x80, 0x00], &mut 0), None);
        assert_eq!(get(&[0x80], &mut 0), None);
        let mut wide = vec![0xff; 9];
        wide.push(0x02);
        assert_eq!(get(&wide, &mut 0), None);
        wide.pop();
        wide.push(0x01);
        assert_eq!(get(&wide, &mut 0), Some(u64::MAX));
        assert_eq!(get128(&[0xff; 20], &mut 0), None);
        // Past 64 bits, get128 reads what get refuses.
        let mut wide = Vec::new();
        put128(&mut wide, u128::from(u64::MAX) + 1);
        assert_eq!(get(&wide, &mut 0), None);
        assert_eq!(get128(&wide, &mut 0), Some(u128::from(u64::MAX) + 1));
        // A longer encoding of a u64 is refused by both.
        assert_eq!(get128(&[0x81, 0x80, 0x00], &mut 0), None);
    }

    proptest::proptest! {
        /// The u64 reader and the u128 one with its u64 shortcut read
        /// exactly what the general decoder reads, to the same position.
        #[test]
        fn the_fast_readers_agree_with_the_general_one(
            data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..22),
            bias in proptest::prelude::any::<bool>(),
        ) {
            // Half the cases made of continuation bytes ending in one
            // terminator: the long encodings near 64 bits.
            let data: Vec<u8> = if bias {
                let n = data.len();
                data.iter().enumerate().map(|(i, b)| if i + 1 < n { b | 0x80 } else { b & 0x7f }).collect()
            } else {
                data
            };
            let (mut a, mut b) = (0, 0);
            let general = get_bits(&data, &mut b, 64).map(|v| v as u64);
            proptest::prop_assert_eq!(get(&data, &mut a), general);
            if general.is_some() {
                proptest::prop_assert_eq!(a, b);
            }
            let (mut a, mut b) = (0, 0);
            let general = get_bits(&data, &mut b, 128);
            proptest::prop_assert_eq!(get128(&data, &mut a), general);
            if general.is_some() {
                proptest::prop_assert_eq!(a, b);
            }
        }
    }
}
