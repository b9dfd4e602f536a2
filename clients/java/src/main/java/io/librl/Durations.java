package io.librl;

import java.time.Duration;

/** Durations as the commands take them: whole milliseconds, "1500ms". */
final class Durations {
  private Durations() {}

  /**
   * {@code d} as a command word; {@code zeroOk} allows zero (RESERVE 0 and WAIT 0: admit only
   * without a wait). A negative duration, or one with a fraction of a millisecond, is refused.
   */
  static String word(String where, String name, Duration d, boolean zeroOk) {
    if (d.isNegative() || (d.isZero() && !zeroOk)) {
      throw new LibrlArgumentException(where, name + " must be positive, got " + d);
    }
    if (d.getNano() % 1_000_000 != 0) {
      throw new LibrlArgumentException(
          where, name + " must be a whole number of milliseconds, got " + d);
    }
    try {
      return d.toMillis() + "ms";
    } catch (ArithmeticException e) {
      throw new LibrlArgumentException(where, name + " is too long: " + d);
    }
  }

  /** A reply's milliseconds as a duration; -1 (no wait helps) as {@link Decision#NEVER}. */
  static Duration fromReply(long ms) {
    return ms < 0 ? Decision.NEVER : Duration.ofMillis(ms);
  }
}
