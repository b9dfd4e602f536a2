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

/// How many bytes `v` takes as a varint.
pub fn len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Decodes a varint at `data[*pos..]`, advancing `pos`: None when it runs
/// past the data or past 64 bits.
pub fn get(data: &[u8], pos: &mut usize) -> Option<u64> {
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
    fn round_trips_and_lengths_agree() {
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
            assert_eq!(n, len(v), "{v}");
            let mut pos = 0;
            assert_eq!(get(&bytes[..n], &mut pos), Some(v));
            assert_eq!(pos, n);
        }
        assert_eq!(get(&[0x80], &mut 0), None);
    }
}
