package io.librl;

import java.nio.charset.StandardCharsets;
import java.util.List;

/** The Redis Cluster slot of a key, and the one-slot check of a call's keys. */
public final class Slot {
  private Slot() {}

  /** The number of slots of a Redis Cluster. */
  public static final int COUNT = 16384;

  /**
   * The slot of {@code key}: CRC16 of its hash tag (the part between the first {@code {} and the
   * next {@code }}, when not empty) or of the whole key, modulo 16384. The key is hashed as UTF-8,
   * as Lettuce and Jedis send it.
   */
  public static int of(String key) {
    byte[] b = key.getBytes(StandardCharsets.UTF_8);
    int start = 0;
    int end = b.length;
    for (int open = 0; open < b.length; open++) {
      if (b[open] == '{') {
        for (int close = open + 1; close < b.length; close++) {
          if (b[close] == '}') {
            if (close > open + 1) {
              start = open + 1;
              end = close;
            }
            break;
          }
        }
        break;
      }
    }
    return crc16(b, start, end) % COUNT;
  }

  /** CRC-16/XMODEM, the cluster's key hash. */
  private static int crc16(byte[] b, int from, int to) {
    int crc = 0;
    for (int i = from; i < to; i++) {
      crc ^= (b[i] & 0xff) << 8;
      for (int bit = 0; bit < 8; bit++) {
        crc = (crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1;
      }
    }
    return crc & 0xffff;
  }

  /**
   * Refuses, before sending, a call whose keys do not share a slot: the cluster would answer
   * CROSSSLOT, and the fix is a common hash tag.
   */
  static void check(String where, List<String> keys) {
    if (keys.size() < 2) {
      return;
    }
    String first = keys.get(0);
    int slot = of(first);
    for (String k : keys.subList(1, keys.size())) {
      int s = of(k);
      if (s != slot) {
        throw new LibrlArgumentException(
            where,
            "every key and override key must hash to one cluster slot, but '"
                + first
                + "' is in slot "
                + slot
                + " and '"
                + k
                + "' in slot "
                + s
                + ". Give them a common hash tag, the part of the key in braces that alone decides"
                + " the slot: use {user42}:min and {user42}:day instead of user42:min and"
                + " user42:day.");
      }
    }
  }
}
