package io.librl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.junit.jupiter.api.Test;
import redis.clients.jedis.RedisProtocol;
import redis.clients.jedis.UnifiedJedis;

/**
 * The "after" code of docs/migration.md's Java sections, as written there, against a real server:
 * bucket4j's buckets and Resilience4j's {@code RateLimiter} on librl.
 */
class FromOtherLimitersTest {
  private static Limiter limiter() {
    TestServers.Server server = TestServers.standalone(TestServers.Flavor.REDIS7);
    UnifiedJedis jedis = Clients.jedisPooled(server, RedisProtocol.RESP2);
    jedis.flushAll();
    return JedisLimiter.of(jedis);
  }

  @Test
  void bucket4jBuckets() {
    Limiter limiter = limiter();

    // Bandwidth.classic(100, Refill.greedy(10, Duration.ofSeconds(1))), or in bucket4j 8
    // limit.capacity(100).refillGreedy(10, Duration.ofSeconds(1)): a token bucket.
    Token api = Token.of("api:{user:42}", 10, Duration.ofSeconds(1)).burst(100);
    // bucket.tryConsumeAndReturnRemaining(1)
    Decision probe = limiter.decide(api);
    assertTrue(probe.allowed()); // probe.isConsumed()
    assertEquals(99, probe.remaining()); // probe.getRemainingTokens()
    // bucket.tryConsume(5)
    assertTrue(limiter.decide(api.cost(5)).allowed());
    // bucket.addTokens(5)
    limiter.decide(api.refund(5));
    // bucket.getAvailableTokens(): a read that records nothing
    assertEquals(99, limiter.decide(api.cost(0)).remaining());
    // tryConsume(101) can never succeed: bucket4j waits Long.MAX_VALUE ns, librl says NEVER.
    Decision never = limiter.decide(api.cost(101));
    assertFalse(never.allowed());
    assertTrue(never.neverAdmits());

    // Refill.intervally(5, Duration.ofMinutes(1)) with capacity 5: all 5 back at once each
    // minute from the first use: a fixed window; intervallyAligned: .aligned() (Unix time).
    Fixed perMinute = Fixed.of("export:{user:42}", 5, Duration.ofMinutes(1));
    for (int i = 0; i < 5; i++) {
      assertTrue(limiter.decide(perMinute).allowed());
    }
    Decision denied = limiter.decide(perMinute);
    assertFalse(denied.allowed());
    // probe.getNanosToWaitForRefill()
    assertTrue(denied.retryAfter().compareTo(Duration.ofMinutes(1)) <= 0);

    // Several Bandwidths in one BucketConfiguration: one RL.ALL, all or nothing.
    AllDecision both =
        limiter.all(
            Token.of("search:{user:42}:second", 10, Duration.ofSeconds(1)),
            Fixed.of("search:{user:42}:hour", 1000, Duration.ofHours(1)));
    assertTrue(both.allowed());
  }

  @Test
  void resilience4jRateLimiter() throws Exception {
    Limiter limiter = limiter();

    // limitForPeriod(2), limitRefreshPeriod(1s), timeoutDuration(0): rateLimiter.acquirePermission()
    Fixed backend = Fixed.of("backend:{svc:orders}", 2, Duration.ofSeconds(1));
    assertTrue(limiter.decide(backend).allowed());
    assertTrue(limiter.decide(backend).allowed());
    assertFalse(limiter.decide(backend).allowed()); // RequestNotPermitted

    // timeoutDuration(500ms): a caller waits at most that long for a permission. The server
    // holds the reply until the turn comes (WAIT), or tells the caller how long to wait (RESERVE,
    // Resilience4j's reservePermission()).
    Token waiting =
        Token.of("backend:{svc:billing}", 2, Duration.ofSeconds(1)).burst(2).waitUpTo(Duration.ofMillis(500));
    assertTrue(limiter.decide(waiting).allowed());
    assertTrue(limiter.decide(waiting).allowed());
    long start = System.nanoTime();
    assertTrue(limiter.decide(waiting).allowed()); // held about 500 ms by the server
    assertTrue(Duration.ofNanos(System.nanoTime() - start).compareTo(Duration.ofMillis(400)) >= 0);
    Token reserving =
        Token.of("backend:{svc:mail}", 2, Duration.ofSeconds(1)).burst(2).reserve(Duration.ofMillis(500));
    limiter.decide(reserving);
    limiter.decide(reserving);
    Decision reserved = limiter.decide(reserving);
    assertTrue(reserved.allowed()); // admitted: act after reserved.retryAfter()
    assertTrue(reserved.retryAfter().compareTo(Duration.ofMillis(500)) <= 0);
    assertTrue(reserved.retryAfter().compareTo(Duration.ZERO) > 0);

    // rateLimiter.changeLimitForPeriod(5): an override, for every process at once.
    limiter.overrideSet(LimitOverride.of("override:{svc:orders}", 5, Duration.ofSeconds(1)));
    assertEquals(5, limiter.decide(backend.override("override:{svc:orders}")).limit());
  }
}
