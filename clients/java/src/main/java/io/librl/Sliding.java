package io.librl;

import java.time.Duration;
import java.util.OptionalLong;

/**
 * {@code RL.SLIDING}: at most {@code limit} units in any window ending now, from an exact log;
 * {@link #approx()} is the two-window weighted counter, in constant memory. docs/commands.md,
 * RL.SLIDING.
 */
public final class Sliding extends Clause<Sliding> {
  private final boolean approx;

  private Sliding(String key, long limit, Duration window, Common common, boolean approx) {
    super(key, limit, window, common);
    this.approx = approx;
  }

  /** A sliding window of {@code limit} units in any {@code window} on {@code key}. */
  public static Sliding of(String key, long limit, Duration window) {
    return new Sliding(key, limit, window, Common.NONE, false);
  }

  /** The two-window weighted counter instead of the exact log ({@code APPROX}). */
  public Sliding approx() {
    return new Sliding(key, limit, window, common, true);
  }

  /** Whether this is the approximate counter. */
  public boolean isApprox() {
    return approx;
  }

  @Override
  Sliding with(Common common) {
    return new Sliding(key, limit, window, common, approx);
  }

  @Override
  Sliding withLimits(long limit, Duration window, OptionalLong burst) {
    return new Sliding(key, limit, window, common, approx);
  }

  @Override
  String algorithm() {
    return "SLIDING";
  }

  @Override
  void ownWords(String where, Words words) {
    if (approx) {
      words.add("APPROX");
    }
  }
}
