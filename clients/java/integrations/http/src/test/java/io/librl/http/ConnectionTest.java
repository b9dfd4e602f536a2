package io.librl.http;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.junit.jupiter.api.Test;

/** {@link RateLimiter#awaitConnection}: what an application waits for before taking requests. */
class ConnectionTest {
  private static final Config CONFIG =
      Config.parse("policies: [{name: p, algorithm: fixed, limit: 1, window: 1s}]\n");

  @Test
  void awaitConnectionReturnsOnceRedisIsConnected() {
    try (RateLimiter limiter = RateLimiter.builder(CONFIG).redisUrl(TestRedis.url()).build()) {
      assertTrue(limiter.awaitConnection(Duration.ofSeconds(30)));
    }
  }

  @Test
  void aRefusedConnectionEndsTheWaitAtOnce() {
    try (RateLimiter limiter = RateLimiter.builder(CONFIG).redisUrl("redis://127.0.0.1:1").build()) {
      long start = System.nanoTime();
      assertFalse(limiter.awaitConnection(Duration.ofSeconds(30)));
      Duration waited = Duration.ofNanos(System.nanoTime() - start);
      assertTrue(waited.compareTo(Duration.ofSeconds(20)) < 0, "waited " + waited);
    }
  }
}
