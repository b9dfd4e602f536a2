package io.librl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.Pipeline;

/**
 * Calls keep working while their slot moves key by key (docs/contributing.md, Calls while a slot
 * moves): on a real 3-primary cluster, a slot holding 20,000 limiter keys moves in MIGRATE batches
 * of 100 keys 10 ms apart while Jedis and Lettuce callers call in it in a loop, one thread per kind
 * of call and client. A half-moved slot answers TRYAGAIN to a call naming a key it holds on neither
 * side; the package splits such a call into one-key calls, so none fails, and every count is exact
 * afterwards.
 */
class MigrationTest {
  private static final Duration HOUR = Duration.ofHours(1);
  private static final int FILL = 20_000;

  /** One kind of call: its calls, admissions, errors and timings, as the callers count them. */
  static final class Kind {
    final String name;
    final AtomicLong calls = new AtomicLong();
    final AtomicLong admitted = new AtomicLong();
    final AtomicLong errors = new AtomicLong();
    final AtomicLong slowestNanos = new AtomicLong();
    final Map<String, Boolean> firstErrors = new ConcurrentHashMap<>();

    Kind(String name) {
      this.name = name;
    }

    void count(long nanos, boolean allowed) {
      calls.incrementAndGet();
      if (allowed) {
        admitted.incrementAndGet();
      }
      slowestNanos.accumulateAndGet(nanos, Math::max);
    }

    void fail(long nanos, RuntimeException e) {
      calls.incrementAndGet();
      errors.incrementAndGet();
      slowestNanos.accumulateAndGet(nanos, Math::max);
      if (firstErrors.size() < 3) {
        firstErrors.put(String.valueOf(e.getMessage()), true);
      }
    }

    @Override
    public String toString() {
      return String.format(
          "%s %d calls, %d errors, slowest %d ms%s",
          name, calls.get(), errors.get(), slowestNanos.get() / 1_000_000,
          firstErrors.isEmpty() ? "" : " " + firstErrors.keySet());
    }
  }

  /** The subjects of one client's callers, all under the slot's hash tag. */
  record Subjects(String tag, String client) {
    Fixed plain() {
      return Fixed.of(tag + ":" + client + ":plain", 1_000_000, HOUR);
    }

    Fixed unset() {
      return Fixed.of(tag + ":" + client + ":unset", 1_000_000, HOUR).override(tag + ":" + client + ":none");
    }

    /** Its own limit admits 5: every later admission shows the override applied. */
    Fixed set() {
      return Fixed.of(tag + ":" + client + ":set", 5, HOUR).override(okey());
    }

    String okey() {
      return tag + ":" + client + ":o";
    }

    List<Clause<?>> all() {
      return List.of(
          Fixed.of(tag + ":" + client + ":hour", 1_000_000, HOUR),
          Fixed.of(tag + ":" + client + ":brief", 1_000_000, Duration.ofMillis(300)));
    }

    Concurrent lease() {
      return Concurrent.of(tag + ":" + client + ":lease", 1000, Duration.ofMinutes(1))
          .override(tag + ":" + client + ":none");
    }
  }

  @ParameterizedTest
  @EnumSource(
      value = TestServers.Flavor.class,
      names = {"REDIS7", "VALKEY9"})
  void callsKeepWorkingWhileTheirSlotMovesKeyByKey(TestServers.Flavor flavor) throws Exception {
    TestServers.Cluster c = TestServers.cluster(flavor);
    String tag = "{hot-" + flavor.name().toLowerCase(java.util.Locale.ROOT) + "}";
    int slot = Slot.of(tag);
    TestServers.Server source = c.owner(slot);
    TestServers.Server target = c.nodes.get(0) == source ? c.nodes.get(1) : c.nodes.get(0);
    try (Jedis j = source.jedis()) {
      Pipeline p = j.pipelined();
      for (int i = 0; i < FILL; i++) {
        p.sendCommand(
            () -> "RL.FIXED".getBytes(java.nio.charset.StandardCharsets.UTF_8),
            tag + ":fill:" + i, "10", "1h");
      }
      p.sync();
    }
    Map<String, Limiter> clients =
        Map.of(
            "jedis", JedisLimiter.of(Clients.jedisCluster(c)),
            "lettuce", Clients.lettuce(c).sync());
    List<Kind> kinds = new ArrayList<>();
    List<Thread> callers = new ArrayList<>();
    AtomicBoolean stop = new AtomicBoolean();
    Map<String, Kind[]> byClient = new ConcurrentHashMap<>();
    for (Map.Entry<String, Limiter> e : clients.entrySet()) {
      Limiter l = e.getValue();
      Subjects s = new Subjects(tag, e.getKey());
      l.overrideSet(s.okey(), 1_000_000, HOUR);
      // Each subject called once before the move.
      l.decide(s.plain());
      l.decide(s.unset());
      assertEquals(1_000_000, l.decide(s.set()).limit());
      l.all(s.all());
      l.acquire(s.lease()).close();
      Kind plain = new Kind(e.getKey() + " no override");
      Kind unset = new Kind(e.getKey() + " override never set");
      Kind set = new Kind(e.getKey() + " override set");
      Kind all = new Kind(e.getKey() + " all, 1 h and 300 ms keys");
      Kind lease = new Kind(e.getKey() + " lease, override never set");
      Kind[] mine = {plain, unset, set, all, lease};
      byClient.put(e.getKey(), mine);
      kinds.addAll(List.of(mine));
      callers.add(caller(stop, plain, () -> l.decide(s.plain()).allowed()));
      callers.add(caller(stop, unset, () -> l.decide(s.unset()).allowed()));
      callers.add(
          caller(
              stop,
              set,
              () -> {
                Decision d = l.decide(s.set());
                if (d.limit() != 1_000_000) {
                  throw new IllegalStateException("the override did not apply: " + d);
                }
                return d.allowed();
              }));
      callers.add(caller(stop, all, () -> l.all(s.all()).allowed()));
      callers.add(
          caller(
              stop,
              lease,
              () -> {
                try (Lease x = l.acquire(s.lease())) {
                  return x.allowed();
                }
              }));
    }
    TestServers.sleep(100);
    c.resetStats();
    long halfMoved = c.moveSlot(slot, target, 100, 10);
    Map<String, Long> stats = c.stats();
    long tryAgain = 0;
    for (TestServers.Server n : c.nodes) {
      tryAgain += errorCount(n, "TRYAGAIN");
    }
    TestServers.sleep(100); // one more round of every subject on the new owner
    stop.set(true);
    for (Thread t : callers) {
      t.join(30_000);
    }
    System.out.printf(
        "librl java migration: %s: slot %d half moved for %d ms; servers' TRYAGAIN %d (each one"
            + " split), RL.OVERRIDE GET %d, ASK %d, MOVED %d%n",
        flavor, slot, halfMoved / 1_000_000, tryAgain, stats.getOrDefault("rl.override|get", 0L),
        stats.get("ask"), stats.get("moved"));
    long calls = 0;
    long errors = 0;
    long slowest = 0;
    for (Kind k : kinds) {
      System.out.printf("librl java migration: %s: %s%n", flavor, k);
      calls += k.calls.get();
      errors += k.errors.get();
      slowest = Math.max(slowest, k.slowestNanos.get());
    }
    System.out.printf(
        "librl java migration: %s: %d calls, %d failed, slowest %d ms%n",
        flavor, calls, errors, slowest / 1_000_000);
    for (Kind k : kinds) {
      assertEquals(0, k.errors.get(), k.toString());
      assertTrue(k.calls.get() > 0, k.toString());
      // Within the clients' timeouts (Lettuce's 60 s; Jedis's 2 s socket timeout per try).
      assertTrue(k.slowestNanos.get() < Duration.ofSeconds(2).toNanos(), k.toString());
    }
    // Counts are exact: each subject counts the calls admitted, plus the one before the move.
    for (Map.Entry<String, Kind[]> e : byClient.entrySet()) {
      Subjects s = new Subjects(tag, e.getKey());
      Kind[] k = e.getValue();
      assertEquals(k[0].admitted.get() + 1, count(target, s.plain().key()), k[0].toString());
      assertEquals(k[1].admitted.get() + 1, count(target, s.unset().key()), k[1].toString());
      assertEquals(k[2].admitted.get() + 1, count(target, s.set().key()), k[2].toString());
      assertEquals(k[3].admitted.get() + 1, count(target, s.all().get(0).key()), k[3].toString());
      assertEquals(k[0].calls.get(), k[0].admitted.get(), "a plain call was denied: " + k[0]);
      Object leases = target.call("RL.CONCURRENT", s.lease().key(), "1000", "1m", "COST", "0");
      assertEquals(0L, ((List<?>) leases).get(1), "a lease was left held");
    }
    assertEquals(0L, source.call("CLUSTER", "COUNTKEYSINSLOT", Integer.toString(slot)));
    assertTrue((Long) target.call("CLUSTER", "COUNTKEYSINSLOT", Integer.toString(slot)) >= FILL);
    // 20,000 keys, two overrides: the scan's many pages, each arriving before the next is asked
    // over Jedis, do not nest.
    assertEquals(2, clients.get("jedis").overrideScan(tag + ":*:o").size());
    // The suites after this one share the cluster: take the filling away.
    while (target.call("CLUSTER", "GETKEYSINSLOT", Integer.toString(slot), "2000") instanceof List<?> keys
        && !keys.isEmpty()) {
      List<String> argv = new ArrayList<>(List.of("UNLINK"));
      keys.forEach(k -> argv.add(TestServers.decode(k)));
      target.call(argv.toArray(String[]::new));
    }
  }

  /**
   * A resharding stopped half way (IMPORTING and MIGRATING set, no key moved): every call naming an
   * override that does not exist, and every RL.ALL, meets TRYAGAIN for as long as it lasts; split,
   * each still runs, an RL.ALL that one clause denies gives back what the others took, and
   * ASK is followed to the target for the override that is on neither side.
   */
  @ParameterizedTest(name = "{0} {1}")
  @MethodSource("io.librl.ClusterTest#clusters")
  void everyKindOfCallRunsInASlotLeftHalfMoved(TestServers.Flavor flavor, ClusterTest.Client client) {
    TestServers.Cluster c = TestServers.cluster(flavor);
    Limiter l = client.make().apply(c);
    String tag = "{half-" + flavor.label + "-" + client.name() + "}";
    int slot = Slot.of(tag);
    TestServers.Server source = c.owner(slot);
    TestServers.Server target = c.nodes.get(0) == source ? c.nodes.get(1) : c.nodes.get(0);
    String none = tag + ":none";
    Fixed hour = Fixed.of(tag + ":hour", 100, HOUR).override(none);
    Fixed full = Fixed.of(tag + ":full", 1, HOUR);
    Concurrent inflight = Concurrent.of(tag + ":inflight", 5, Duration.ofMinutes(1)).override(none);
    Token paced = Token.of(tag + ":paced", 2, Duration.ofSeconds(1)).burst(1).override(none);
    // Every key exists before the slot is marked moving, so the source serves each one-key call.
    l.decide(hour);
    l.decide(full);
    Lease kept = l.acquire(inflight);
    l.decide(paced);
    l.overrideSet(tag + ":o", 50, HOUR);
    c.beginMove(slot, source, target);
    try {
      c.resetStats();
      Decision d = l.decide(hour);
      assertTrue(d.allowed() && d.limit() == 100 && d.count() == 2, d.toString());
      AllDecision a = l.all(hour, inflight);
      assertTrue(a.allowed(), a.toString());
      long id = a.decisions().get(1).leaseId();
      assertTrue(id > 0, a.toString());
      assertTrue(l.heldLease(inflight, id).release());
      // One clause denies: the clauses before it are given back, the lease released.
      AllDecision denied = l.all(hour, inflight, full);
      assertFalse(denied.allowed(), denied.toString());
      assertFalse(denied.decisions().get(2).allowed());
      assertTrue(denied.retryAfter().compareTo(Duration.ofMinutes(59)) > 0, denied.toString());
      assertEquals(0, denied.decisions().get(1).leaseId());
      assertEquals(3, l.decide(hour.cost(0)).count(), "a denied RL.ALL kept its count");
      assertEquals(1, l.decide(inflight.cost(0)).count(), "a denied RL.ALL kept its lease");
      AllDecision peek = l.peekAll(hour, full);
      assertFalse(peek.allowed());
      assertTrue(peek.decisions().get(0).allowed());
      assertEquals(3, l.decide(hour.cost(0)).count(), "peekAll counted");
      // A waitUpTo clause is sent as a reservation, and the package waits it out: the bucket
      // emptied at or after t0, so its next token exists 500 ms later at the earliest.
      long t0 = System.nanoTime();
      assertTrue(l.decide(paced.cost(0)).count() <= 1);
      l.decide(paced.reserve(Duration.ofSeconds(1)));
      AllDecision waited = l.all(paced.waitUpTo(Duration.ofSeconds(2)), hour);
      long ms = (System.nanoTime() - t0) / 1_000_000;
      assertTrue(waited.allowed(), waited.toString());
      assertEquals(Duration.ZERO, waited.decisions().get(0).retryAfter(), waited.toString());
      assertTrue(ms >= 495, "returned after " + ms + " ms, before the reserved token");
      // Durable: each split call waits for a replica these primaries lack, and the split
      // RL.ALL reports one NOTDURABLE carrying the decision that stands.
      Limiter durable = l.withDurability(1, Duration.ofMillis(10));
      DurabilityException single = assertThrows(DurabilityException.class, () -> durable.decide(hour));
      assertEquals(5, single.decision().count());
      DurabilityException all = assertThrows(DurabilityException.class, () -> durable.all(hour, inflight));
      assertEquals("RL.ALL", all.command());
      assertTrue(all.allDecision().allowed(), all.allDecision().toString());
      assertTrue(l.heldLease(inflight, all.allDecision().decisions().get(1).leaseId()).release());
      assertEquals(1, l.overrideDel(tag + ":o", none));
      assertTrue(kept.release());
      long tryAgain = 0;
      for (TestServers.Server n : c.nodes) {
        tryAgain += errorCount(n, "TRYAGAIN");
      }
      Map<String, Long> stats = c.stats();
      assertTrue(tryAgain >= 7, "TRYAGAIN " + tryAgain);
      assertTrue(stats.get("ask") > 0, "the override on neither side was not asked of the target: " + stats);
    } finally {
      c.moveSlot(slot, target); // ends the resharding
    }
    assertEquals(6, l.decide(hour.cost(0)).count());
  }

  /**
   * A caller waiting for a slot (waitUpTo) whose key's slot moves away meanwhile is answered
   * TRYAGAIN by the old node at its turn, having taken nothing; the package sends it again, and
   * the key's new node admits it.
   */
  @ParameterizedTest(name = "{0} {1}")
  @MethodSource("io.librl.ClusterTest#clusters")
  void aWaitingAcquireWhoseSlotMovesIsSentToTheNewNode(
      TestServers.Flavor flavor, ClusterTest.Client client) {
    TestServers.Cluster c = TestServers.cluster(flavor);
    Limiter l = client.make().apply(c);
    Concurrent slot =
        Concurrent.of("{wait-" + flavor.label + "-" + client.name() + "}:inflight", 1, Duration.ofSeconds(1));
    int s = Slot.of(slot.key());
    TestServers.Server source = c.owner(s);
    TestServers.Server target = c.nodes.get(0) == source ? c.nodes.get(1) : c.nodes.get(0);
    assertTrue(l.acquire(slot).allowed()); // never released: it ends 1 s from now
    long t0 = System.nanoTime();
    java.util.concurrent.CompletableFuture<Lease> waiting =
        java.util.concurrent.CompletableFuture.supplyAsync(
            () -> l.acquire(slot.waitUpTo(Duration.ofSeconds(5))));
    TestServers.sleep(200); // queued on the source
    c.resetStats();
    c.moveSlot(s, target);
    try (Lease lease = waiting.join()) {
      long ms = (System.nanoTime() - t0) / 1_000_000;
      assertTrue(lease.allowed() && lease.id() > 0, lease.toString());
      assertTrue(ms >= 900 && ms < 5000, "admitted after " + ms + " ms");
    }
    assertEquals(1, errorCount(source, "TRYAGAIN"), "the wait did not meet the move");
  }

  /** A thread calling {@code call} in a loop until {@code stop}, counting into {@code kind}. */
  private static Thread caller(AtomicBoolean stop, Kind kind, java.util.function.BooleanSupplier call) {
    Thread t =
        new Thread(
            () -> {
              while (!stop.get()) {
                long t0 = System.nanoTime();
                try {
                  boolean allowed = call.getAsBoolean();
                  kind.count(System.nanoTime() - t0, allowed);
                } catch (RuntimeException e) {
                  kind.fail(System.nanoTime() - t0, e);
                }
                TestServers.sleep(1); // a caller's pace, not a load test of the machine
              }
            },
            "librl-migration " + kind.name);
    t.setDaemon(true);
    t.start();
    return t;
  }

  /** A fixed window's count as it stands, read on the node that owns it now. */
  private static long count(TestServers.Server owner, String key) {
    Object reply = owner.call("RL.FIXED", key, "1000000", "1h", "COST", "0");
    return (Long) ((List<?>) reply).get(1);
  }

  /** INFO errorstats' count of an error code on the node. */
  private static long errorCount(TestServers.Server n, String code) {
    for (String line : n.info("errorstats").split("\r?\n")) {
      if (line.startsWith("errorstat_" + code + ":count=")) {
        return Long.parseLong(line.substring(line.indexOf('=') + 1).trim());
      }
    }
    return 0;
  }
}
