package io.librl.http;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/** The breaker's back-off (docs/http.md, Fail modes) on an explicit clock. */
class BreakerTest {
  private final AtomicLong now = new AtomicLong(1_000_000);
  private final Breaker breaker = new Breaker(now::get);

  @Test
  void aFailureOpensItForOneSecondThenOneRequestProbes() {
    assertTrue(breaker.asks());
    breaker.ended(new TimeoutException("250 ms"));
    assertFalse(breaker.asks());
    now.addAndGet(999);
    assertFalse(breaker.asks());
    now.addAndGet(1);
    assertTrue(breaker.asks(), "the probe");
    assertFalse(breaker.asks(), "one probe at a time");
    breaker.ended(null);
    assertTrue(breaker.asks());
    assertTrue(breaker.asks());
  }

  @Test
  void eachFailedProbeDoublesTheBackOffUpToThirtySeconds() {
    breaker.ended(new TimeoutException("250 ms"));
    long backoff = Breaker.FIRST_BACKOFF_MS;
    for (int i = 0; i < 8; i++) {
      now.addAndGet(backoff);
      assertTrue(breaker.asks(), "the probe after " + backoff + " ms");
      breaker.ended(new TimeoutException("250 ms"));
      backoff = Math.min(backoff * 2, Breaker.MAX_BACKOFF_MS);
      now.addAndGet(backoff - 1);
      assertFalse(breaker.asks(), "still open " + (backoff - 1) + " ms after the failed probe");
      now.addAndGet(-(backoff - 1));
    }
    now.addAndGet(Breaker.MAX_BACKOFF_MS);
    assertTrue(breaker.asks());
  }

  @Test
  void anErrorAboutTheCallItselfDoesNotOpenIt() {
    assertFalse(Breaker.unavailable(new Backend.Failure(commandError("WRONGTYPE"), java.util.List.of(), java.util.List.of())));
    assertTrue(Breaker.unavailable(commandError("LOADING")));
    assertTrue(Breaker.unavailable(new java.io.IOException("connection reset")));
  }

  private static io.librl.LibrlCommandException commandError(String code) {
    try {
      java.lang.reflect.Constructor<io.librl.LibrlCommandException> c =
          io.librl.LibrlCommandException.class.getDeclaredConstructor(String.class, Throwable.class, boolean.class);
      c.setAccessible(true);
      return c.newInstance("RL.ALL", new RuntimeException(code + " the server said no"), true);
    } catch (ReflectiveOperationException e) {
      throw new AssertionError(e);
    }
  }
}
