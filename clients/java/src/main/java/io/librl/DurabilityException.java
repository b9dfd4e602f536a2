package io.librl;

import java.time.Duration;

/**
 * Thrown, with the call's result, by a limiter made with {@code withDurability(replicas, timeout)}
 * when fewer replicas than asked acknowledged the call's write within the timeout: the decision
 * stands on the primary, but a failover now could lose it. The message starts with {@value #CODE},
 * as the other librl packages' errors: {@code librl: RL.FIXED: NOTDURABLE the call reached 0 of 1
 * replicas within 100 ms}. When {@code WAIT} itself failed, {@link #getCause()} is the client's
 * exception and {@link #acked()} is 0.
 */
public final class DurabilityException extends LibrlException {
  private static final long serialVersionUID = 1L;

  /** The code every durability error's message starts with. */
  public static final String CODE = "NOTDURABLE";

  private final transient Object result;
  private final int wanted;
  private final long acked;
  private final Duration timeout;

  DurabilityException(
      String command, Object result, int wanted, long acked, Duration timeout, Throwable cause) {
    super(
        command,
        CODE
            + (cause == null
                ? " the call reached " + acked + " of " + wanted + " replicas within "
                    + timeout.toMillis() + " ms"
                : " WAIT failed: " + cause.getMessage()),
        cause);
    this.result = result;
    this.wanted = wanted;
    this.acked = acked;
    this.timeout = timeout;
  }

  /**
   * The call's result, as it stands on the primary: a {@link Decision}, a {@link Lease} (an
   * acquire's), an {@link AllDecision}, the
   * number of overrides deleted (a {@code Long}), or null for {@code overrideSet}.
   */
  public Object result() {
    return result;
  }

  /**
   * The result as a {@link Decision} (an acquire's: its lease's); an {@link IllegalStateException}
   * when it is not one.
   */
  public Decision decision() {
    if (result instanceof Decision d) {
      return d;
    }
    if (result instanceof Lease l) {
      return l.decision();
    }
    throw new IllegalStateException("the result is not a Decision: " + result);
  }

  /**
   * An acquire's {@link Lease}, which stands on the primary: release it, or keep it; an {@link
   * IllegalStateException} when the result is not one.
   */
  public Lease lease() {
    if (result instanceof Lease l) {
      return l;
    }
    throw new IllegalStateException("the result is not a Lease: " + result);
  }

  /** The result as an {@link AllDecision}; an {@link IllegalStateException} when it is not one. */
  public AllDecision allDecision() {
    if (result instanceof AllDecision d) {
      return d;
    }
    throw new IllegalStateException("the result is not an AllDecision: " + result);
  }

  /** The replicas asked for. */
  public int wanted() {
    return wanted;
  }

  /** The replicas that acknowledged the write within the timeout. */
  public long acked() {
    return acked;
  }

  /** WAIT's timeout. */
  public Duration timeout() {
    return timeout;
  }
}
