/**
 * Redis Cluster hash slots: CRC16 (XMODEM) of the key, or of its hash tag
 * (the part between the first `{` and the next `}` when that part is not
 * empty), modulo 16384.
 */

const TABLE = (() => {
  const table = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let crc = i << 8;
    for (let bit = 0; bit < 8; bit++) {
      crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    }
    table[i] = crc;
  }
  return table;
})();

/** CRC16/XMODEM of `bytes`, as Redis Cluster computes it. */
export function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (let i = 0; i < bytes.length; i++) {
    crc = ((crc << 8) & 0xffff) ^ (TABLE[((crc >> 8) ^ (bytes[i] as number)) & 0xff] as number);
  }
  return crc;
}

/** The bytes whose CRC decides the slot: the hash tag when there is one. */
function hashPart(bytes: Uint8Array): Uint8Array {
  const open = bytes.indexOf(0x7b); // {
  if (open < 0) return bytes;
  const close = bytes.indexOf(0x7d, open + 1); // }
  if (close < 0 || close === open + 1) return bytes;
  return bytes.subarray(open + 1, close);
}

/**
 * The cluster hash slot (0..16383) of `key`, with hash tags: `{user42}:min`
 * and `{user42}:day` share the slot of `user42`.
 */
export function keySlot(key: string | Uint8Array): number {
  const bytes = typeof key === "string" ? Buffer.from(key, "utf8") : key;
  return crc16(hashPart(bytes)) % 16384;
}
