package io.librl.http;

import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The slots an admitted request holds (docs/http.md, Concurrency limits): the leases its
 * concurrency checks took in its {@code RL.ALL}, released when its response is finished, exactly
 * once whichever way it finishes (sent, client gone, handler failed).
 */
public final class Leases {
  static final Leases NONE = new Leases(List.of());

  /**
   * One lease: the check that took it and its id (the clause's reply's seventh integer), and the
   * local limiter that holds it when the {@code local} fail mode took it (else null: Redis).
   */
  record Held(Plan.Check check, long leaseId, LocalLimiter local) {
    Held(Plan.Check check, long leaseId) {
      this(check, leaseId, null);
    }
  }

  private final List<Held> held;
  private final AtomicBoolean taken = new AtomicBoolean();

  Leases(List<Held> held) {
    this.held = List.copyOf(held);
  }

  boolean isEmpty() {
    return held.isEmpty();
  }

  /** The leases to release, the first time only; empty after. */
  List<Held> take() {
    return held.isEmpty() || !taken.compareAndSet(false, true) ? List.of() : held;
  }
}
