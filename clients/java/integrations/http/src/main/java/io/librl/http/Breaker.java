package io.librl.http;

import io.librl.LibrlCommandException;
import java.util.Set;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.function.LongSupplier;

/**
 * The breaker (docs/http.md, Fail modes): after an exchange fails on the way or times out,
 * requests apply the fail mode at once for a back-off (1 s, doubled after each failed probe, at
 * most 30 s), while one request at a time asks Redis (the probe); a probe that gets an answer
 * closes it. A Redis that answers an error about the call itself ({@code WRONGTYPE}) answered.
 */
final class Breaker {
  static final long FIRST_BACKOFF_MS = 1_000;
  static final long MAX_BACKOFF_MS = 30_000;

  /** Error replies that say the server cannot answer now, rather than that the call was wrong. */
  private static final Set<String> UNAVAILABLE_REPLIES = Set.of("LOADING", "BUSY", "MASTERDOWN", "CLUSTERDOWN");

  private final LongSupplier clockMs;
  /** When the next probe may go; -1 while Redis answers. Read without the lock on the fast path. */
  private volatile long untilMs = -1;
  private long backoffMs = FIRST_BACKOFF_MS;
  private boolean probing;

  Breaker(LongSupplier clockMs) {
    this.clockMs = clockMs;
  }

  /** Whether this request asks Redis (normally, or as the probe). */
  boolean asks() {
    if (untilMs < 0) {
      return true;
    }
    synchronized (this) {
      if (untilMs < 0) {
        return true;
      }
      if (probing || clockMs.getAsLong() < untilMs) {
        return false;
      }
      probing = true;
      return true;
    }
  }

  /** An exchange ended: with {@code error} null Redis answered, else it failed or answered an error. */
  void ended(Throwable error) {
    if (error != null && unavailable(error)) {
      failed();
    } else if (untilMs >= 0) {
      synchronized (this) {
        untilMs = -1;
        backoffMs = FIRST_BACKOFF_MS;
        probing = false;
      }
    }
  }

  private synchronized void failed() {
    if (probing) {
      backoffMs = Math.min(backoffMs * 2, MAX_BACKOFF_MS);
    } else if (untilMs >= 0) {
      return; // a request sent before the breaker opened: no probe of its own
    }
    probing = false;
    untilMs = clockMs.getAsLong() + backoffMs;
  }

  /** Whether {@code error} says Redis could not answer, rather than that the call was wrong. */
  static boolean unavailable(Throwable error) {
    Throwable e = error;
    while ((e instanceof CompletionException || e instanceof ExecutionException || e instanceof Backend.Failure)
        && e.getCause() != null) {
      e = e.getCause();
    }
    if (e instanceof LibrlCommandException c && c.errorCode() != null) {
      return UNAVAILABLE_REPLIES.contains(c.errorCode());
    }
    return true;
  }

  /** The request's error when the breaker decided without asking Redis. */
  static final class Open extends RuntimeException {
    private static final long serialVersionUID = 1L;

    Open() {
      super(
          "Redis failed lately; the fail mode applies without waiting on it until the next probe",
          null,
          false,
          false);
    }
  }
}
