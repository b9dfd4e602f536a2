package io.librl;

import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * An override to store with {@code RL.OVERRIDE SET} ({@link Limiter#overrideSet(LimitOverride)}):
 * a limit and window (and a token bucket's burst) that replace a limiter call's own when the call
 * names this override key. Immutable. docs/overrides.md.
 */
public final class LimitOverride {
  private final String okey;
  private final long limit;
  private final Duration window;
  private final Long burst;
  private final Duration ttl;

  private LimitOverride(String okey, long limit, Duration window, Long burst, Duration ttl) {
    this.okey = Objects.requireNonNull(okey, "okey");
    this.limit = limit;
    this.window = Objects.requireNonNull(window, "window");
    this.burst = burst;
    this.ttl = ttl;
  }

  /** {@code limit} per {@code window}, stored at {@code okey}. */
  public static LimitOverride of(String okey, long limit, Duration window) {
    return new LimitOverride(okey, limit, window, null, null);
  }

  /** A token bucket's capacity ({@code BURST capacity}). */
  public LimitOverride burst(long capacity) {
    return new LimitOverride(okey, limit, window, capacity, ttl);
  }

  /** The override expires after {@code ttl} ({@code TTL duration}); without, it lives until deleted. */
  public LimitOverride ttl(Duration ttl) {
    return new LimitOverride(okey, limit, window, burst, Objects.requireNonNull(ttl, "ttl"));
  }

  /** The override key. */
  public String okey() {
    return okey;
  }

  /** The limit. */
  public long limit() {
    return limit;
  }

  /** The window. */
  public Duration window() {
    return window;
  }

  /** The burst, when given. */
  public OptionalLong burst() {
    return burst == null ? OptionalLong.empty() : OptionalLong.of(burst);
  }

  /** The TTL, when given. */
  public Optional<Duration> ttl() {
    return Optional.ofNullable(ttl);
  }

  /** {@code RL.OVERRIDE SET okey limit window [BURST capacity] [TTL duration]}, without the name. */
  void words(Words words) {
    String where = "overrideSet " + okey;
    words.add("SET").add(okey).add(limit).add(Durations.word(where, "window", window, false));
    if (burst != null) {
      words.add("BURST").add(burst);
    }
    if (ttl != null) {
      words.add("TTL").add(Durations.word(where, "ttl", ttl, false));
    }
  }
}
