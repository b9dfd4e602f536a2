package io.librl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lettuce.core.protocol.ProtocolVersion;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.JedisPooled;

/**
 * A call the server holds (WAIT, and a durable call's WAIT) holds its connection: over Lettuce it
 * goes on a dedicated one, so the shared connection keeps serving every other call meanwhile.
 */
class BlockingTest {
  private static final Duration SECOND = Duration.ofSeconds(1);
  private static final TestServers.Flavor FLAVOR = TestServers.Flavor.VALKEY9;

  /**
   * Times ordinary calls while the server holds {@code held} for about a second: each must
   * answer well within that (500 ms, a margin for a loaded machine), before the held one does.
   */
  private static void ordinaryCallsGoOnWhile(CompletableFuture<?> held, Limiter shared) {
    long slowestMs = 0;
    for (int i = 0; i < 5; i++) {
      long t0 = System.nanoTime();
      shared.fixed("blocking:ordinary", 1_000_000, SECOND);
      slowestMs = Math.max(slowestMs, (System.nanoTime() - t0) / 1_000_000);
    }
    assertTrue(!held.isDone(), "the held call returned before the ordinary calls were timed");
    held.join();
    assertTrue(slowestMs < 500, "an ordinary call waited " + slowestMs + " ms behind a held one");
  }

  /** A pool whose connections time out after 200 ms: shorter than any wait the tests hold. */
  private static JedisPooled shortTimeoutPool() {
    return new JedisPooled(
        new HostAndPort("127.0.0.1", TestServers.standalone(FLAVOR).port),
        DefaultJedisClientConfig.builder().socketTimeoutMillis(200).build());
  }

  @Test
  void lettuceSendsAWaitOnAConnectionOfItsOwn() {
    LettuceLimiter lettuce = Clients.lettuce(TestServers.standalone(FLAVOR), ProtocolVersion.RESP3);
    Token bucket = Token.of("blocking:wait", 1, SECOND);
    assertTrue(lettuce.sync().decide(bucket).allowed());
    long t0 = System.nanoTime();
    CompletableFuture<Decision> held =
        lettuce.async().decide(bucket.waitUpTo(Duration.ofSeconds(2))).toCompletableFuture();
    ordinaryCallsGoOnWhile(held, lettuce.sync());
    assertTrue(held.join().allowed());
    assertTrue((System.nanoTime() - t0) / 1_000_000 >= 900, "the server did not hold the call");
  }

  @Test
  void lettuceSendsALeaseWaitOnAConnectionOfItsOwnAndAReleaseWakesIt() {
    LettuceLimiter lettuce = Clients.lettuce(TestServers.standalone(FLAVOR), ProtocolVersion.RESP2);
    Concurrent slot = Concurrent.of("blocking:lease", 1, Duration.ofSeconds(30));
    Lease first = lettuce.sync().acquire(slot);
    assertTrue(first.allowed());
    long t0 = System.nanoTime();
    CompletableFuture<Lease> held =
        lettuce.async().acquire(slot.waitUpTo(Duration.ofSeconds(5))).toCompletableFuture();
    CompletableFuture.runAsync(
        () -> {
          TestServers.sleep(1000);
          first.release();
        });
    ordinaryCallsGoOnWhile(held, lettuce.sync());
    try (Lease second = held.join()) {
      assertTrue(second.allowed(), second.toString());
      long ms = (System.nanoTime() - t0) / 1_000_000;
      assertTrue(ms >= 900 && ms < 4000, "woken after " + ms + " ms, not by the release");
    }
  }

  @Test
  void jedisLiftsItsSocketTimeoutForALeaseWait() {
    try (JedisPooled pooled = shortTimeoutPool()) {
      Limiter l = JedisLimiter.of(pooled);
      Concurrent slot = Concurrent.of("blocking:jedis:lease", 1, Duration.ofMillis(400));
      assertTrue(l.acquire(slot).allowed()); // never released: it ends by itself
      long t0 = System.nanoTime();
      try (Lease next = l.acquire(slot.waitUpTo(SECOND))) {
        assertTrue(next.allowed(), next.toString());
        assertTrue((System.nanoTime() - t0) / 1_000_000 >= 300, "the server did not hold the call");
      }
    }
  }

  @Test
  void lettuceSendsADurableWaitOnAConnectionOfItsOwn() {
    LettuceLimiter lettuce = Clients.lettuce(TestServers.standalone(FLAVOR), ProtocolVersion.RESP2);
    // No replica: WAIT holds the connection for its whole timeout.
    AsyncLimiter durable = lettuce.async().withDurability(1, SECOND);
    CompletableFuture<Decision> held =
        durable.fixed("blocking:durable", 10, SECOND).toCompletableFuture();
    ordinaryCallsGoOnWhile(held.handle((d, e) -> e), lettuce.sync());
    Throwable e = held.handle((d, err) -> LettuceTransport.unwrap(err)).join();
    assertTrue(e instanceof DurabilityException d && d.decision().allowed(), String.valueOf(e));
  }

  @Test
  void lettuceRefusesAWaitAsLongAsItsTimeout() {
    LettuceLimiter lettuce =
        LettuceLimiter.create(
            Clients.redisClient(TestServers.standalone(FLAVOR), ProtocolVersion.RESP3, Duration.ofSeconds(2)));
    try {
      Limiter l = lettuce.sync();
      LibrlArgumentException e =
          assertThrows(
              LibrlArgumentException.class,
              () -> l.decide(Token.of("blocking:t", 1, SECOND).waitUpTo(Duration.ofMillis(1500))));
      assertTrue(e.getMessage().contains("timeout"), e.getMessage());
      assertTrue(l.decide(Token.of("blocking:t", 1, SECOND).waitUpTo(Duration.ofMillis(500))).allowed());
    } finally {
      lettuce.close();
    }
    // Closed: its calls fail on the way, not on the server.
    for (Token t : java.util.List.of(Token.of("blocking:t", 1, SECOND), Token.of("blocking:t", 1, SECOND).waitUpTo(Duration.ofMillis(100)))) {
      LibrlCommandException closed = assertThrows(LibrlCommandException.class, () -> lettuce.sync().decide(t));
      assertTrue(!closed.isServerError(), closed.toString());
    }
  }

  @Test
  void jedisLiftsItsSocketTimeoutForAWait() {
    try (JedisPooled pooled = shortTimeoutPool()) {
      Limiter l = JedisLimiter.of(pooled);
      Token bucket = Token.of("blocking:jedis", 1, Duration.ofMillis(500));
      assertTrue(l.decide(bucket).allowed());
      long t0 = System.nanoTime();
      Decision d = l.decide(bucket.waitUpTo(SECOND));
      assertTrue(d.allowed());
      assertEquals(Duration.ZERO, d.retryAfter());
      assertTrue((System.nanoTime() - t0) / 1_000_000 >= 300, "the server did not hold the call");
      // The pool's connections keep their 200 ms timeout for every other call.
      assertTrue(l.fixed("blocking:jedis:f", 10, SECOND).allowed());
    }
  }
}
