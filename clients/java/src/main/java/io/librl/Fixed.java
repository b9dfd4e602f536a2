package io.librl;

import java.time.Duration;
import java.util.OptionalLong;

/**
 * {@code RL.FIXED}: at most {@code limit} units per window, a window opening at the first admitted
 * call ({@link #aligned()}: on multiples of the window in Unix time, so a per-minute limit resets
 * on the minute). docs/commands.md, RL.FIXED.
 */
public final class Fixed extends Clause<Fixed> {
  private final boolean aligned;

  private Fixed(String key, long limit, Duration window, Common common, boolean aligned) {
    super(key, limit, window, common);
    this.aligned = aligned;
  }

  /** A fixed window of {@code limit} units per {@code window} on {@code key}. */
  public static Fixed of(String key, long limit, Duration window) {
    return new Fixed(key, limit, window, Common.NONE, false);
  }

  /** Windows aligned on multiples of the window in Unix time ({@code ALIGNED}). */
  public Fixed aligned() {
    return new Fixed(key, limit, window, common, true);
  }

  /** Whether windows are aligned. */
  public boolean isAligned() {
    return aligned;
  }

  @Override
  Fixed with(Common common) {
    return new Fixed(key, limit, window, common, aligned);
  }

  @Override
  Fixed withLimits(long limit, Duration window, OptionalLong burst) {
    return new Fixed(key, limit, window, common, aligned);
  }

  @Override
  String algorithm() {
    return "FIXED";
  }

  @Override
  void ownWords(String where, Words words) {
    if (aligned) {
      words.add("ALIGNED");
    }
  }
}
