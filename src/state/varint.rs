//! Unsigned LEB128 varints, for the layouts whose fields are small numbers
//! (the exact sliding log's entries, a concurrency limiter's leases).

/// The longest varint of a u64.
pub const MAX_LEN: usize = 10;

/// Appends `v` to `out`.
pub fn put(out: &mut Vec<u8>, v: u64) {
    let (bytes, len) = encode(v);
    out.extend_from_slice(bytes.get(..len).unwrap_or_default());
}

/// `v` as a varint: the first `len` bytes of the array.
pub fn encode(mut v: u64) -> ([u8; MAX_LEN], usize) {
    let mut out = [0u8; MAX_LEN];
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
/// past the data or past 64 bits.
#[inline]
pub fn get(data: &[u8], pos: &mut usize) -> Option<u64> {
    // Most fields are one byte.
    let first = *data.get(*pos)?;
    if first < 0x80 {
        *pos += 1;
        return Some(u64::from(first));
    }
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *data.get(*pos)?;
        *pos += 1;
        v |= u64::from(b & 0x7f).checked_shl(shift)?;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
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
}
