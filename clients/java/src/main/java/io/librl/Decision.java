package io.librl;

import java.time.Duration;
import java.util.Objects;

/**
 * A limiter's reply (docs/commands.md, The limiter reply): six integers, and {@code
 * RL.CONCURRENT}'s lease.
 *
 * @param allowed the call was admitted and its cost recorded (always true for a refund, a {@code
 *     COST 0} read, and in monitor and off mode)
 * @param count the units counted against the limit after this call (a token bucket: capacity
 *     minus tokens, rounded up)
 * @param retryAfter how long until a call of the same cost is admitted: zero when admitted,
 *     {@link #NEVER} when no wait helps (the cost exceeds the effective limit); after an admitted
 *     {@link Token#reserve(Duration)}, the wait before acting
 * @param limit the effective limit, after any override (a token bucket: its capacity)
 * @param remaining {@code max(0, limit - count)}
 * @param resetAfter how long until the limiter is empty (a token bucket: full) again
 * @param leaseId {@code RL.CONCURRENT}'s lease: the one this call took, released or renewed (a
 *     positive integer below 2^53), or 0 when it holds none (denied, PEEK, COST 0, a lease not
 *     held, {@code off} mode, another limiter)
 */
public record Decision(
    boolean allowed,
    long count,
    Duration retryAfter,
    long limit,
    long remaining,
    Duration resetAfter,
    long leaseId) {

  /**
   * The one sentinel: the {@link #retryAfter()} of a call no wait can help, whose cost exceeds the
   * effective limit (the commands reply {@code retry_after -1}). It is minus one millisecond, the
   * only negative duration a reply holds: compare with {@code equals}, or ask {@link
   * #neverAdmits()}.
   */
  public static final Duration NEVER = Duration.ofMillis(-1);

  public Decision {
    Objects.requireNonNull(retryAfter, "retryAfter");
    Objects.requireNonNull(resetAfter, "resetAfter");
  }

  /** A decision holding no lease: every limiter's but {@code RL.CONCURRENT}'s. */
  public Decision(
      boolean allowed, long count, Duration retryAfter, long limit, long remaining, Duration resetAfter) {
    this(allowed, count, retryAfter, limit, remaining, resetAfter, 0);
  }

  /** Whether no wait helps: the cost exceeds the effective limit ({@code retryAfter == NEVER}). */
  public boolean neverAdmits() {
    return NEVER.equals(retryAfter);
  }
}
