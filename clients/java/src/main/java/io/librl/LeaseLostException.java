package io.librl;

/**
 * A lease that {@link Lease#keepAlive()} could not keep: the server said it was not held (it
 * ended or was released elsewhere: its slots may be someone else's), or its end came with no
 * renewal getting through (the last renewal's failure is the cause). {@link Lease#lost()}
 * completes with it.
 */
public final class LeaseLostException extends LibrlException {
  private static final long serialVersionUID = 1L;

  private final long leaseId;

  LeaseLostException(String key, long leaseId, Throwable cause) {
    super(
        "RL.CONCURRENT",
        "lease "
            + leaseId
            + " of "
            + key
            + (cause == null
                ? " is not held any more: it ended or was released elsewhere"
                : " ended with no renewal getting through: " + cause.getMessage()),
        cause);
    this.leaseId = leaseId;
  }

  /** The lease that was lost. */
  public long leaseId() {
    return leaseId;
  }

  /** Whether the server said the lease was not held, rather than renewals failing on the way. */
  public boolean ended() {
    return getCause() == null;
  }
}
