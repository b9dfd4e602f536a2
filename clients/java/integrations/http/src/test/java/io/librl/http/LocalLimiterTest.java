package io.librl.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.librl.AllDecision;
import io.librl.Decision;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * The {@code local} fail mode's limiter (docs/http.md, Fail modes), without Redis: librl-core's
 * decisions (conformance/vectors/algorithms.json, run by {@link VectorsTest} through {@link
 * #algorithm}), all-or-nothing checks, concurrency slots, the key bound, and bad input refused
 * before anything changes.
 */
class LocalLimiterTest {
  /** algorithms.json's function: one limiter, each call's six integers at its own now. */
  @SuppressWarnings("unchecked")
  static Object algorithm(Map<String, Object> input) {
    Policy.Algorithm algorithm = Policy.Algorithm.valueOf(((String) input.get("algorithm")).toUpperCase(java.util.Locale.ROOT));
    long limit = ((Number) input.get("limit")).longValue();
    long windowMs = ((Number) input.get("window_ms")).longValue();
    boolean aligned = Boolean.TRUE.equals(input.get("aligned"));
    long burst = input.get("burst") instanceof Number b ? b.longValue() : 0;
    LocalLimiter local = new LocalLimiter(10);
    List<Object> out = new ArrayList<>();
    for (Object call : (List<Object>) input.get("calls")) {
      List<Object> pair = (List<Object>) call;
      long now = ((Number) pair.get(0)).longValue();
      long cost = ((Number) pair.get(1)).longValue();
      LocalLimiter.Clause c = new LocalLimiter.Clause("k", algorithm, limit, windowMs, aligned, burst, cost);
      Decision d = local.checkAt(List.of(c), false, now).decisions().get(0);
      out.add(
          List.of(
              d.allowed() ? 1L : 0L,
              d.count(),
              ms(d.retryAfter()),
              d.limit(),
              d.remaining(),
              ms(d.resetAfter())));
    }
    return out;
  }

  private static long ms(Duration d) {
    return d.equals(Decision.NEVER) ? -1 : d.toMillis();
  }

  private static LocalLimiter.Clause fixed(String key, long limit, long windowMs) {
    return new LocalLimiter.Clause(key, Policy.Algorithm.FIXED, limit, windowMs, false, 0, 1);
  }

  private static LocalLimiter.Clause slots(String key, long limit, long leaseMs) {
    return new LocalLimiter.Clause(key, Policy.Algorithm.CONCURRENCY, limit, leaseMs, false, 0, 1);
  }

  private static LocalLimiter.Clause withCost(LocalLimiter.Clause c, long cost) {
    return new LocalLimiter.Clause(c.key(), c.algorithm(), c.limit(), c.windowMs(), c.aligned(), c.burst(), cost);
  }

  private static List<Long> peekCounts(LocalLimiter local, long now, LocalLimiter.Clause... cs) {
    return local.checkAt(List.of(cs), true, now).decisions().stream().map(Decision::count).toList();
  }

  @Test
  void aRequestOneClauseRefusesIsCountedByNone() {
    LocalLimiter local = new LocalLimiter(100);
    var minute = fixed("m", 10, 60_000);
    var burst = fixed("b", 1, 10_000);
    AllDecision first = local.checkAt(List.of(minute, burst), false, 1000);
    assertTrue(first.allowed());
    assertEquals(List.of(1L, 1L), first.decisions().stream().map(Decision::count).toList());
    for (long now : new long[] {1001, 2000, 3000}) {
      AllDecision all = local.checkAt(List.of(minute, burst), false, now);
      assertFalse(all.allowed());
      assertTrue(all.decisions().get(0).allowed(), "the minute clause alone admits");
      assertEquals(all.decisions().get(1).retryAfter(), all.retryAfter());
    }
    assertEquals(2, local.checkAt(List.of(minute), false, 3000).decisions().get(0).count());
    assertEquals(Duration.ofMillis(1), local.checkAt(List.of(minute, burst), false, 10_999).retryAfter());
    assertTrue(local.checkAt(List.of(minute, burst), false, 11_000).allowed());
  }

  @Test
  void theLongestWaitAndNeverWin() {
    LocalLimiter local = new LocalLimiter(10);
    var pair = List.of(fixed("a", 1, 1000), fixed("b", 1, 5000));
    local.checkAt(pair, false, 0);
    assertEquals(Duration.ofSeconds(5), local.checkAt(pair, false, 0).retryAfter());
    AllDecision never = local.checkAt(List.of(fixed("a", 1, 1000), withCost(fixed("c", 1, 1000), 2)), false, 0);
    assertTrue(never.neverAdmits());
    assertEquals(1, never.decisions().get(1).remaining());
  }

  @Test
  void peekRecordsNothing() {
    LocalLimiter local = new LocalLimiter(10);
    for (int i = 0; i < 3; i++) {
      assertEquals(List.of(1L), peekCounts(local, 0, fixed("k", 1, 1000)));
    }
    assertEquals(0, local.size());
  }

  @Test
  void everyAlgorithmFillsThenRefuses() {
    Object[][] cases = {
      {fixed("f", 3, 60_000), 3},
      {new LocalLimiter.Clause("s", Policy.Algorithm.SLIDING, 3, 60_000, false, 0, 1), 3},
      {new LocalLimiter.Clause("a", Policy.Algorithm.APPROX, 3, 60_000, false, 0, 1), 3},
      {new LocalLimiter.Clause("t", Policy.Algorithm.TOKEN, 3, 60_000, false, 5, 1), 5},
      {slots("c", 2, 60_000), 2},
    };
    for (Object[] tc : cases) {
      LocalLimiter local = new LocalLimiter(10);
      var c = (LocalLimiter.Clause) tc[0];
      for (int i = 0; i < (int) tc[1]; i++) {
        assertTrue(local.checkAt(List.of(c), false, 1000).allowed(), c.key() + " call " + i);
      }
      AllDecision refused = local.checkAt(List.of(c), false, 1000);
      assertFalse(refused.allowed(), c.key());
      assertEquals(0, refused.decisions().get(0).remaining());
    }
  }

  @Test
  void concurrencySlotsAreHeldUntilReleasedOrEnded() {
    LocalLimiter local = new LocalLimiter(10);
    var c = slots("c", 2, 10_000);
    Decision a = local.checkAt(List.of(c), false, 5).decisions().get(0);
    Decision b = local.checkAt(List.of(c), false, 6).decisions().get(0);
    assertEquals(List.of(5001L, 5002L), List.of(a.leaseId(), b.leaseId()));
    Decision full = local.checkAt(List.of(c), false, 7).decisions().get(0);
    assertFalse(full.allowed());
    assertEquals(0, full.leaseId());
    assertEquals(Duration.ofMillis(9998), full.retryAfter());
    assertTrue(local.releaseAt(c, a.leaseId(), 8));
    assertFalse(local.releaseAt(c, a.leaseId(), 8), "released once");
    Decision d = local.checkAt(List.of(c), false, 9).decisions().get(0);
    assertEquals(List.of(2L, 5003L), List.of(d.count(), d.leaseId()));
    assertFalse(local.releaseAt(c, b.leaseId(), 10_006), "a lease that ended frees nothing");
    assertEquals(List.of(2L), peekCounts(local, 10_006, c), "one lease held, plus the call's");
  }

  @Test
  void aRefusedRequestTakesNoSlot() {
    LocalLimiter local = new LocalLimiter(10);
    var once = fixed("f", 1, 10_000);
    assertTrue(local.checkAt(List.of(slots("c", 1, 10_000), once), false, 0).allowed());
    AllDecision refused = local.checkAt(List.of(slots("d", 1, 10_000), once), false, 1);
    assertFalse(refused.allowed());
    assertTrue(refused.decisions().get(0).allowed());
    assertEquals(0, refused.decisions().get(0).leaseId(), "nothing taken");
    assertTrue(local.checkAt(List.of(slots("d", 1, 10_000)), false, 2).allowed());
  }

  @Test
  void releasingTheLastLeaseDropsTheKey() {
    LocalLimiter local = new LocalLimiter(10);
    var c = slots("c", 1, 10_000);
    long id = local.checkAt(List.of(c), false, 100).decisions().get(0).leaseId();
    assertTrue(local.releaseAt(c, id, 200));
    assertEquals(0, local.size());
    assertEquals(200_001, local.checkAt(List.of(c), false, 200).decisions().get(0).leaseId());
  }

  @Test
  void aFullStoreEvictsTheKeysClosestToExpiry() {
    LocalLimiter local = new LocalLimiter(20);
    for (int i = 0; i < 10; i++) {
      local.checkAt(List.of(fixed("short" + i, 5, 1000)), false, 0);
      local.checkAt(List.of(fixed("long" + i, 5, 3_600_000)), false, 0);
    }
    local.checkAt(List.of(fixed("new", 5, 60_000)), false, 0);
    assertEquals(11, local.size(), "the tenth closest to expiry and its equals went");
    assertEquals(List.of(2L, 1L), peekCounts(local, 0, fixed("long0", 5, 3_600_000), fixed("short0", 5, 1000)));
    for (int i = 0; i < 9; i++) {
      local.checkAt(List.of(fixed("x" + i, 5, 60_000)), false, 0);
    }
    local.checkAt(List.of(fixed("one-more", 5, 60_000)), false, 60_000);
    assertEquals(11, local.size(), "the expired keys went first, nothing live");
    for (int i = 0; i < 10; i++) {
      assertEquals(List.of(2L), peekCounts(local, 60_000, fixed("long" + i, 5, 3_600_000)));
    }
  }

  @Test
  void neverEvictsAKeyForItself() {
    LocalLimiter local = new LocalLimiter(1);
    local.checkAt(List.of(fixed("a", 2, 60_000)), false, 0);
    assertEquals(2, local.checkAt(List.of(fixed("a", 2, 60_000)), false, 0).decisions().get(0).count());
    local.checkAt(List.of(fixed("b", 2, 60_000)), false, 0);
    assertEquals(1, local.size());
    assertEquals(List.of(1L), peekCounts(local, 0, fixed("a", 2, 60_000)), "a was evicted: afresh");
  }

  @Test
  void aChangedAlgorithmStartsAfreshAndATokenWindowRescales() {
    LocalLimiter local = new LocalLimiter(10);
    local.checkAt(List.of(fixed("k", 1, 60_000)), false, 0);
    var token = new LocalLimiter.Clause("k", Policy.Algorithm.TOKEN, 1, 60_000, false, 0, 1);
    assertTrue(local.checkAt(List.of(token), false, 0).allowed());
    local.checkAt(List.of(new LocalLimiter.Clause("t", Policy.Algorithm.TOKEN, 4, 1000, false, 0, 2)), false, 0);
    Decision d =
        local.checkAt(List.of(new LocalLimiter.Clause("t", Policy.Algorithm.TOKEN, 4, 2000, false, 0, 1)), false, 0)
            .decisions()
            .get(0);
    assertEquals(List.of(3L, 1L, 1500L), List.of(d.count(), d.remaining(), d.resetAfter().toMillis()));
  }

  @Test
  void aClockSteppingBackStandsStillAndTheWallClock() {
    LocalLimiter local = new LocalLimiter(10);
    local.checkAt(List.of(fixed("k", 2, 1000)), false, 5000);
    Decision d = local.checkAt(List.of(fixed("k", 2, 1000)), false, 10).decisions().get(0);
    assertEquals(List.of(2L, 1000L), List.of(d.count(), d.resetAfter().toMillis()));
    assertTrue(local.check(List.of(fixed("w", 1, 60_000)), false).allowed());
    assertFalse(local.check(List.of(fixed("w", 1, 60_000)), false).allowed());
    var c = slots("c", 1, 60_000);
    assertTrue(local.release(c, local.check(List.of(c), false).decisions().get(0).leaseId()));
  }

  @Test
  void aPlansCheckIsAClause() {
    Config config =
        Config.parse(
            "policies: [{name: t, algorithm: token, limit: 3, window: 2s, burst: 9},"
                + " {name: c, algorithm: concurrency, limit: 2, lease: 5s}]\n");
    List<LocalLimiter.Clause> clauses =
        LocalLimiter.clauses(
            List.of(
                new Plan.Check(config.policies().get(0), null, "rl:t", null, 2),
                new Plan.Check(config.policies().get(1), null, "rl:c", null, 1)));
    assertEquals(new LocalLimiter.Clause("rl:t", Policy.Algorithm.TOKEN, 3, 2000, false, 9, 2), clauses.get(0));
    assertEquals(new LocalLimiter.Clause("rl:c", Policy.Algorithm.CONCURRENCY, 2, 5000, false, 0, 1), clauses.get(1));
  }

  @Test
  void badInputIsRefusedAndChangesNothing() {
    var good = fixed("good", 1, 60_000);
    List<LocalLimiter.Clause> bad =
        List.of(
            fixed("k", 0, 60_000),
            fixed("k", (1L << 50) + 1, 60_000),
            fixed("k", 1, 0),
            fixed("k", 1, LocalLimiter.MAX_WINDOW_MS + 1),
            withCost(fixed("k", 1, 60_000), 0),
            new LocalLimiter.Clause("k", Policy.Algorithm.TOKEN, 1, 60_000, false, -1, 1),
            withCost(slots("k", 1, 60_000), 1L << 51),
            new LocalLimiter.Clause(null, Policy.Algorithm.FIXED, 1, 60_000, false, 0, 1),
            new LocalLimiter.Clause("k", null, 1, 60_000, false, 0, 1));
    for (LocalLimiter.Clause c : bad) {
      LocalLimiter local = new LocalLimiter(10);
      assertThrows(IllegalArgumentException.class, () -> local.checkAt(List.of(good, c), false, 0), c.toString());
      assertEquals(0, local.size());
    }
    LocalLimiter local = new LocalLimiter(10);
    assertThrows(IllegalArgumentException.class, () -> local.checkAt(List.of(good), false, -1));
    assertFalse(local.releaseAt(good, 1, 0));
    assertEquals(0, local.size());
  }

  @Test
  void concurrentChecksNeverAdmitMoreThanTheLimit() throws InterruptedException {
    LocalLimiter local = new LocalLimiter(1000);
    var c = fixed("k", 500, 3_600_000);
    AtomicInteger admitted = new AtomicInteger();
    List<Thread> threads = new ArrayList<>();
    for (int t = 0; t < 4; t++) {
      threads.add(
          new Thread(
              () -> {
                for (int i = 0; i < 200; i++) {
                  if (local.checkAt(List.of(c), false, 0).allowed()) {
                    admitted.incrementAndGet();
                  }
                }
              }));
    }
    threads.forEach(Thread::start);
    for (Thread t : threads) {
      t.join();
    }
    assertEquals(500, admitted.get());
  }
}
