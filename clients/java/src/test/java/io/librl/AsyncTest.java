package io.librl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lettuce.core.protocol.ProtocolVersion;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import redis.clients.jedis.RedisProtocol;

/** Lettuce's asynchronous and reactive views, and one limiter shared by many threads. */
class AsyncTest {
  private static final Duration SECOND = Duration.ofSeconds(1);
  private static final Duration MINUTE = Duration.ofMinutes(1);
  private static final TestServers.Flavor FLAVOR = TestServers.Flavor.REDIS8;

  private static Throwable failure(CompletionStage<?> stage) {
    return stage.toCompletableFuture().handle((v, e) -> LettuceTransport.unwrap(e)).join();
  }

  @Test
  void theAsyncViewAnswersWithStages() {
    TestServers.Server s = TestServers.standalone(FLAVOR);
    AsyncLimiter a = Clients.lettuce(s, ProtocolVersion.RESP3).async();
    Decision d = a.fixed("async:f", 2, MINUTE).toCompletableFuture().join();
    assertTrue(d.allowed());
    AllDecision all =
        a.all(Fixed.of("{async}:1", 1, MINUTE), Sliding.of("{async}:2", 1, MINUTE).approx())
            .toCompletableFuture()
            .join();
    assertTrue(all.allowed());
    assertFalse(a.all(Fixed.of("{async}:1", 1, MINUTE)).toCompletableFuture().join().allowed());
    assertEquals(Optional.empty(), a.overrideGet("async:none").toCompletableFuture().join());
    a.overrideSet(LimitOverride.of("async:o", 3, SECOND)).toCompletableFuture().join();
    assertEquals(1L, a.overrideDel("async:o").toCompletableFuture().join());
    // A server error fails the stage; a bad argument fails it too, with nothing sent.
    Throwable err = failure(a.fixed("async:f", 0, MINUTE));
    assertInstanceOf(LibrlCommandException.class, err);
    assertEquals("ERR", ((LibrlCommandException) err).errorCode());
    long before = StandaloneTest.calls(s, "rl.fixed");
    assertInstanceOf(LibrlArgumentException.class, failure(a.fixed("async:f", 1, Duration.ZERO)));
    assertEquals(before, StandaloneTest.calls(s, "rl.fixed"));
  }

  @Test
  void theReactiveViewIsColdMonos() {
    TestServers.Server s = TestServers.standalone(FLAVOR);
    ReactiveLimiter r = Clients.lettuce(s, ProtocolVersion.RESP2).reactive();
    var mono = r.fixed("reactive:f", 1, MINUTE);
    long before = StandaloneTest.calls(s, "rl.fixed");
    assertEquals(before, StandaloneTest.calls(s, "rl.fixed"), "a Mono sent before it was subscribed");
    assertTrue(mono.block().allowed());
    assertFalse(mono.block().allowed(), "a second subscription is a second call");
    assertTrue(r.overrideGet("reactive:none").blockOptional().isEmpty());
    assertEquals(
        "WRONGTYPE",
        ((LibrlCommandException)
                r.sliding("reactive:f", 1, MINUTE).onErrorResume(e -> reactor.core.publisher.Mono.error(e))
                    .materialize().block().getThrowable())
            .errorCode());
    assertTrue(r.withDenialCache(new DenialCache()).denialCache().isPresent());
  }

  @Test
  void leasesThroughTheAsyncAndReactiveViewsAreGivenBack() {
    TestServers.Server s = TestServers.standalone(FLAVOR);
    LettuceLimiter lettuce = Clients.lettuce(s, ProtocolVersion.RESP3);
    AsyncLimiter a = lettuce.async();
    Concurrent c = Concurrent.of("async:lease", 1, MINUTE);
    Lease lease = a.acquire(c).toCompletableFuture().join();
    assertTrue(lease.allowed());
    assertFalse(a.acquire(c).toCompletableFuture().join().allowed());
    assertTrue(lease.releaseAsync().toCompletableFuture().join());
    // Mono.usingWhen gives the lease back however the work ends, an error included.
    ReactiveLimiter r = lettuce.reactive();
    Mono<String> work =
        Mono.usingWhen(
            r.acquire(c),
            l ->
                l.allowed()
                    ? Mono.<String>error(new IllegalStateException("the work failed"))
                    : Mono.just("busy"),
            l -> Mono.fromCompletionStage(l.releaseAsync()));
    assertInstanceOf(IllegalStateException.class, work.materialize().block().getThrowable());
    assertEquals(0, lettuce.sync().decide(c.cost(0)).count(), "usingWhen kept the lease");
    assertEquals(
        "WRONGTYPE",
        ((LibrlCommandException) failure(a.acquire("async:f", 1, MINUTE))).errorCode());
  }

  @Test
  void aLeaseWhoseRenewalsCannotGetThroughIsReportedLostAtItsEnd() {
    TestServers.Server s = TestServers.standalone(FLAVOR);
    LettuceLimiter lettuce =
        LettuceLimiter.create(Clients.redisClient(s, ProtocolVersion.RESP3, Duration.ofSeconds(5)));
    Lease lease = lettuce.sync().acquire(Concurrent.of("async:unreachable", 1, Duration.ofMillis(300)));
    assertTrue(lease.allowed());
    lease.keepAlive();
    long t0 = System.nanoTime();
    lettuce.close(); // every renewal now fails on the way
    LeaseLostException lost =
        lease.lost().toCompletableFuture().orTimeout(5, java.util.concurrent.TimeUnit.SECONDS).join();
    long ms = (System.nanoTime() - t0) / 1_000_000;
    assertFalse(lost.ended(), lost.toString());
    assertInstanceOf(LibrlCommandException.class, lost.getCause());
    assertTrue(ms >= 50 && ms < 1000, "reported lost after " + ms + " ms, not at the lease's end");
  }

  /**
   * One limiter, with its denial cache, shared by 8 threads making 40 RL.ALL calls each: exactly
   * the limit is admitted, and the cache holds the one denial.
   */
  @Test
  void concurrentCallsAdmitExactlyTheLimit() throws Exception {
    TestServers.Server s = TestServers.standalone(FLAVOR);
    List<Limiter> limiters =
        List.of(
            Clients.jedis(s, RedisProtocol.RESP3).withDenialCache(),
            Clients.lettuce(s, ProtocolVersion.RESP3).sync().withDenialCache());
    ExecutorService pool = Executors.newFixedThreadPool(8);
    try {
      int n = 0;
      for (Limiter l : limiters) {
        String key = "{conc}:" + n++;
        AtomicInteger admitted = new AtomicInteger();
        AtomicInteger denied = new AtomicInteger();
        List<Future<?>> done = new ArrayList<>();
        for (int t = 0; t < 8; t++) {
          done.add(
              pool.submit(
                  () -> {
                    for (int i = 0; i < 40; i++) {
                      AllDecision a =
                          l.all(Fixed.of(key, 100, MINUTE), Token.of(key + ":t", 1000, MINUTE));
                      (a.allowed() ? admitted : denied).incrementAndGet();
                    }
                  }));
        }
        for (Future<?> f : done) {
          f.get();
        }
        assertEquals(100, admitted.get());
        assertEquals(220, denied.get());
        assertEquals(1, l.denialCache().orElseThrow().size());
      }
    } finally {
      pool.shutdown();
    }
    CompletableFuture.allOf().join();
  }
}
