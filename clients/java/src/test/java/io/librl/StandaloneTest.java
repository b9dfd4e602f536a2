package io.librl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lettuce.core.RedisCommandExecutionException;
import io.lettuce.core.protocol.ProtocolVersion;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.function.Supplier;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicContainer;
import org.junit.jupiter.api.DynamicNode;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;
import redis.clients.jedis.RedisProtocol;
import redis.clients.jedis.exceptions.JedisDataException;

/**
 * Every command, option and error through both clients, on each of the four servers: Jedis and
 * Lettuce's blocking view, RESP2 on some servers and RESP3 on others, so every client meets every
 * protocol.
 */
class StandaloneTest {
  private static final Duration SECOND = Duration.ofSeconds(1);
  private static final Duration MINUTE = Duration.ofMinutes(1);

  /** A check, on a limiter over a flushed server. */
  interface Check {
    void run(Limiter limiter, TestServers.Server server, Class<? extends Exception> serverError);
  }

  record Named(String name, Check check) {}

  @TestFactory
  Stream<DynamicNode> everyCheckOnEveryServerThroughBothClients() {
    List<DynamicNode> out = new ArrayList<>();
    for (TestServers.Flavor f : TestServers.Flavor.values()) {
      boolean resp3 = f.ordinal() % 2 == 1;
      List<DynamicNode> clients = new ArrayList<>();
      clients.add(
          container(
              "jedis " + (resp3 ? "resp3" : "resp2"),
              f,
              () -> Clients.jedis(TestServers.standalone(f), resp3 ? RedisProtocol.RESP3 : RedisProtocol.RESP2),
              JedisDataException.class));
      // Lettuce on the other protocol of the same server.
      clients.add(
          container(
              "lettuce " + (resp3 ? "resp2" : "resp3"),
              f,
              () ->
                  Clients.lettuce(
                          TestServers.standalone(f), resp3 ? ProtocolVersion.RESP2 : ProtocolVersion.RESP3)
                      .sync(),
              RedisCommandExecutionException.class));
      // Lettuce with the limiter's own socket for ordinary calls (its blocking ones on Lettuce's).
      clients.add(
          container(
              "lettuce lean",
              f,
              () -> Clients.lean(TestServers.standalone(f), resp3 ? ProtocolVersion.RESP2 : ProtocolVersion.RESP3).sync(),
              RedisCommandExecutionException.class));
      out.add(DynamicContainer.dynamicContainer(f.label, clients));
    }
    return out.stream();
  }

  private static DynamicContainer container(
      String name, TestServers.Flavor f, Supplier<Limiter> make, Class<? extends Exception> serverError) {
    Limiter[] limiter = new Limiter[1];
    List<DynamicTest> tests = new ArrayList<>();
    for (Named c : CHECKS) {
      tests.add(
          DynamicTest.dynamicTest(
              c.name,
              () -> {
                TestServers.Server server = TestServers.standalone(f);
                if (limiter[0] == null) {
                  limiter[0] = make.get();
                }
                TestServers.flushAll(server);
                c.check.run(limiter[0], server, serverError);
              }));
    }
    return DynamicContainer.dynamicContainer(name, tests);
  }

  /** INFO commandstats' calls of a command on the server. */
  static long calls(TestServers.Server s, String command) {
    for (String line : s.info("commandstats").split("\r?\n")) {
      String prefix = "cmdstat_" + command + ":calls=";
      if (line.startsWith(prefix)) {
        String rest = line.substring(prefix.length());
        return Long.parseLong(rest.substring(0, rest.indexOf(',')));
      }
    }
    return 0;
  }

  static boolean exists(TestServers.Server s, String key) {
    return Long.valueOf(1).equals(s.call("EXISTS", key));
  }

  static final List<Named> CHECKS =
      List.of(
          new Named(
              "fixed admits up to the limit then denies until the window's end",
              (l, s, e) -> {
                for (int i = 1; i <= 3; i++) {
                  Decision d = l.fixed("f", 3, MINUTE);
                  assertEquals(new Decision(true, i, Duration.ZERO, 3, 3 - i, d.resetAfter()), d);
                }
                Decision d = l.fixed("f", 3, MINUTE);
                assertFalse(d.allowed());
                assertTrue(d.retryAfter().compareTo(Duration.ZERO) > 0 && d.retryAfter().compareTo(MINUTE) <= 0, d.toString());
                assertTrue(d.resetAfter().compareTo(Duration.ZERO) > 0, d.toString());
              }),
          new Named(
              "a cost above the limit never fits",
              (l, s, e) -> {
                Decision d = l.decide(Fixed.of("f", 3, MINUTE).cost(4));
                assertFalse(d.allowed());
                assertEquals(Decision.NEVER, d.retryAfter());
                assertTrue(d.neverAdmits());
              }),
          new Named(
              "cost 0 reads and peek changes nothing",
              (l, s, e) -> {
                l.decide(Sliding.of("s", 5, MINUTE).cost(2));
                Decision read = l.decide(Sliding.of("s", 5, MINUTE).cost(0));
                assertTrue(read.allowed());
                assertEquals(2, read.count());
                assertEquals(3, read.remaining());
                assertEquals(3, l.decide(Sliding.of("s", 5, MINUTE).peek()).count());
                assertEquals(2, l.decide(Sliding.of("s", 5, MINUTE).cost(0)).count(), "PEEK wrote");
                l.decide(Fixed.of("never-written", 5, MINUTE).peek());
                assertFalse(exists(s, "never-written"), "PEEK created a key");
              }),
          new Named(
              "approx, aligned and refund",
              (l, s, e) -> {
                Decision d = l.decide(Sliding.of("a", 10, SECOND).approx().cost(4));
                assertTrue(d.allowed());
                assertEquals(4, d.count());
                d = l.decide(Fixed.of("al", 10, Duration.ofHours(1)).aligned().cost(6));
                assertTrue(d.allowed() && d.resetAfter().compareTo(Duration.ofHours(1)) <= 0, d.toString());
                d = l.decide(Fixed.of("al", 10, Duration.ofHours(1)).aligned().refund(4));
                assertTrue(d.allowed());
                assertEquals(2, d.count());
              }),
          new Named(
              "token burst, reserve and wait",
              (l, s, e) -> {
                long start = System.nanoTime();
                Decision d = l.decide(Token.of("t", 10, SECOND).burst(2).cost(2));
                assertTrue(d.allowed());
                assertEquals(2, d.limit());
                assertEquals(0, d.remaining());
                // 10 per second: one token every 100 ms, reserved ahead.
                d = l.decide(Token.of("t", 10, SECOND).burst(2).reserve(SECOND));
                assertTrue(d.allowed());
                assertTrue(
                    d.retryAfter().compareTo(Duration.ZERO) > 0
                        && d.retryAfter().compareTo(Duration.ofMillis(100)) <= 0,
                    d.toString());
                // The bucket emptied at or after start: the second token after that exists
                // 200 ms later, and WAIT returns no earlier.
                d = l.decide(Token.of("t", 10, SECOND).burst(2).waitUpTo(SECOND));
                long heldMs = (System.nanoTime() - start) / 1_000_000;
                assertTrue(d.allowed(), d.toString());
                assertEquals(Duration.ZERO, d.retryAfter());
                assertTrue(heldMs >= 199, "WAIT returned after " + heldMs + " ms");
              }),
          new Named(
              "a block outlasts the window",
              (l, s, e) -> {
                Fixed login = Fixed.of("b", 1, Duration.ofMillis(100)).block(MINUTE);
                l.decide(login);
                Decision d = l.decide(login);
                assertFalse(d.allowed());
                assertTrue(d.retryAfter().compareTo(Duration.ofSeconds(59)) >= 0, d.toString());
              }),
          new Named(
              "all is all-or-nothing, and peekAll changes nothing",
              (l, s, e) -> {
                // Not aligned: an aligned second could end between the calls.
                List<Clause<?>> clauses =
                    List.of(
                        Fixed.of("{u}:s", 2, MINUTE),
                        Sliding.of("{u}:m", 10, MINUTE),
                        Token.of("{u}:t", 5, SECOND).burst(5));
                for (int i = 0; i < 2; i++) {
                  AllDecision a = l.all(clauses);
                  assertTrue(a.allowed());
                  assertEquals(3, a.decisions().size());
                }
                AllDecision a = l.all(clauses);
                assertFalse(a.allowed());
                assertTrue(a.retryAfter().compareTo(Duration.ZERO) > 0);
                assertFalse(a.decisions().get(0).allowed());
                assertTrue(a.decisions().get(1).allowed());
                // A denied call's clauses answer as their PEEK would: 2 recorded + this one.
                assertEquals(3, a.decisions().get(1).count());
                assertEquals(2, l.decide(Sliding.of("{u}:m", 10, MINUTE).cost(0)).count(), "a denied RL.ALL recorded");
                assertEquals(3, l.peekAll(Sliding.of("{u}:m", 10, MINUTE)).decisions().get(0).count());
                assertEquals(2, l.decide(Sliding.of("{u}:m", 10, MINUTE).cost(0)).count(), "peekAll recorded");
              }),
          new Named(
              "overrides set, apply, list, scan and delete",
              (l, s, e) -> {
                l.overrideSet(LimitOverride.of("o:gold", 100, MINUTE).burst(7).ttl(Duration.ofHours(1)));
                OverrideValues o = l.overrideGet("o:gold").orElseThrow();
                assertEquals(100, o.limit());
                assertEquals(MINUTE, o.window());
                assertEquals(OptionalLong.of(7), o.burst());
                assertTrue(o.ttl().orElseThrow().compareTo(Duration.ZERO) > 0);
                l.overrideSet("o:plain", 5, SECOND);
                OverrideValues plain = l.overrideGet("o:plain").orElseThrow();
                assertEquals(Optional.empty(), plain.ttl());
                assertEquals(OptionalLong.empty(), plain.burst());
                assertEquals(100, l.decide(Fixed.of("k", 1, MINUTE).override("o:gold")).limit());
                OverridePage page = l.overrideList("0", "o:*", 100);
                assertEquals(2, page.entries().size());
                assertTrue(page.isLast());
                assertEquals(2, l.overrideScan().size());
                assertEquals(1, l.overrideScan("o:g*").size());
                assertEquals(2, l.overrideDel("o:gold", "o:plain", "o:none"));
                assertEquals(Optional.empty(), l.overrideGet("o:gold"));
              }),
          new Named(
              "a server's error replies stay recognisable: ERR and WRONGTYPE",
              (l, s, serverError) -> {
                LibrlCommandException err =
                    assertThrows(LibrlCommandException.class, () -> l.fixed("e", 0, MINUTE));
                assertTrue(err.isServerError());
                assertEquals("ERR", err.errorCode());
                assertEquals("RL.FIXED", err.command());
                assertInstanceOf(serverError, err.getCause());
                assertEquals(
                    "librl: RL.FIXED: ERR limit must be an integer from 1 to 1125899906842624 (2^50)",
                    err.getMessage());
                s.call("SET", "str", "x");
                LibrlCommandException wrong =
                    assertThrows(LibrlCommandException.class, () -> l.token("str", 1, SECOND));
                assertEquals("WRONGTYPE", wrong.errorCode());
                assertInstanceOf(serverError, wrong.getCause());
                LibrlCommandException twice =
                    assertThrows(
                        LibrlCommandException.class,
                        () -> l.all(Fixed.of("x", 1, SECOND), Fixed.of("x", 1, SECOND)));
                assertEquals("ERR", twice.errorCode());
                assertTrue(twice.getMessage().contains("appears in more than one RL.ALL clause"), twice.getMessage());
                assertEquals(
                    "WRONGTYPE",
                    assertThrows(LibrlCommandException.class, () -> l.overrideGet("str")).errorCode());
              }),
          new Named(
              "bad arguments are refused before anything is sent",
              (l, s, e) -> {
                long before = calls(s, "rl.fixed") + calls(s, "rl.all") + calls(s, "rl.token");
                List<Runnable> bad =
                    List.of(
                        () -> l.fixed("k", 1, Duration.ofNanos(1_500_000)),
                        () -> l.fixed("k", 1, Duration.ZERO),
                        () -> l.decide(Fixed.of("k", 1, SECOND).cost(1).refund(1)),
                        () -> l.decide(Token.of("k", 1, SECOND).reserve(Duration.ZERO).waitUpTo(Duration.ZERO)),
                        () -> l.all(Fixed.of("k", 1, SECOND).peek()),
                        () -> l.all(),
                        () -> l.overrideDel(),
                        () -> l.withDurability(0, SECOND),
                        () -> l.withDurability(1, Duration.ZERO),
                        () -> l.withDurability(1, Duration.ofNanos(1_500_000)));
                for (Runnable r : bad) {
                  assertThrows(LibrlArgumentException.class, r::run);
                }
                assertEquals(before, calls(s, "rl.fixed") + calls(s, "rl.all") + calls(s, "rl.token"));
              }),
          new Named(
              "the denial cache answers until retry_after, and a refund clears it",
              (l, s, e) -> {
                Limiter cl = l.withDenialCache();
                Fixed c = Fixed.of("c", 1, SECOND);
                assertTrue(cl.decide(c).allowed());
                Decision first = cl.decide(c);
                assertFalse(first.allowed());
                assertEquals(1, cl.denialCache().orElseThrow().size());
                long before = calls(s, "rl.fixed");
                Decision again = cl.decide(c);
                assertFalse(again.allowed());
                assertTrue(again.retryAfter().compareTo(first.retryAfter()) <= 0);
                assertEquals(before, calls(s, "rl.fixed"), "not answered from the cache");
                cl.decide(c.refund(1));
                assertEquals(0, cl.denialCache().orElseThrow().size(), "a refund left the denial cached");
                assertTrue(cl.decide(c).allowed());
                Decision denied = cl.decide(c);
                TestServers.sleep(denied.retryAfter().toMillis());
                assertTrue(cl.decide(c).allowed(), "the cache outlived the denial");
                // RL.ALL denials too, and an override change forgets them.
                Fixed one = Fixed.of("{c}:all", 1, MINUTE);
                cl.all(one);
                assertFalse(cl.all(one).allowed());
                long all = calls(s, "rl.all");
                assertFalse(cl.all(one).allowed());
                assertEquals(all, calls(s, "rl.all"));
                cl.overrideSet("{c}:o", 1, SECOND);
                assertEquals(0, cl.denialCache().orElseThrow().size());
                assertTrue(l.denialCache().isEmpty(), "withDenialCache changed the original");
              }),
          new Named(
              "leases: acquire, refuse, release, renew, and try-with-resources always releases",
              (l, s, e) -> {
                Concurrent c = Concurrent.of("cc", 2, MINUTE);
                Lease a = l.acquire(c);
                assertTrue(a.allowed());
                assertTrue(a.id() > 0 && a.id() < (1L << 53), a.toString());
                assertEquals(1, a.decision().count());
                Lease b = l.acquire(c);
                assertEquals(a.id() + 1, b.id());
                try (Lease refused = l.acquire(c)) {
                  assertFalse(refused.allowed());
                  assertEquals(0, refused.id());
                  assertTrue(refused.decision().retryAfter().compareTo(Duration.ZERO) > 0);
                  assertFalse(refused.release(), "a refused acquire released something");
                }
                assertTrue(a.renew());
                assertTrue(a.release());
                assertTrue(a.release(), "a second release did not return the first answer");
                assertFalse(a.renew(), "a released lease renewed");
                Decision raw = l.decide(c.renew(a.id()));
                assertFalse(raw.allowed());
                assertEquals(0, raw.leaseId());
                assertEquals(1, l.decide(c.cost(0)).count());
                try (Lease x = l.acquire(c)) {
                  assertTrue(x.allowed());
                  assertEquals(2, l.decide(c.cost(0)).count());
                }
                assertEquals(1, l.decide(c.cost(0)).count(), "try-with-resources did not release");
                assertThrows(
                    IllegalStateException.class,
                    () -> {
                      try (Lease x = l.acquire(c)) {
                        assertTrue(x.allowed());
                        throw new IllegalStateException("the work failed");
                      }
                    });
                assertEquals(1, l.decide(c.cost(0)).count(), "a failed body kept its lease");
                Decision peek = l.decide(c.peek());
                assertTrue(peek.allowed());
                assertEquals(0, peek.leaseId());
                assertEquals(Decision.NEVER, l.decide(c.cost(3)).retryAfter());
                // A lease taken through decide, given back through heldLease.
                Decision taken = l.decide(c);
                assertTrue(l.heldLease(c, taken.leaseId()).release());
                assertFalse(l.heldLease(c, taken.leaseId()).release(), "released twice");
                assertTrue(b.release());
                assertFalse(exists(s, "cc"), "the key outlived its last lease");
                // An override's limit is the limit and its window the lease.
                l.overrideSet("cc:o", 1, SECOND);
                Concurrent o = Concurrent.of("co", 5, MINUTE).override("cc:o");
                try (Lease x = l.acquire(o)) {
                  assertEquals(1, x.decision().limit());
                  assertTrue(x.decision().resetAfter().compareTo(SECOND) <= 0, x.toString());
                  assertFalse(l.acquire(o).allowed());
                }
                assertThrows(LibrlArgumentException.class, () -> l.acquire(c.release(1)));
                assertThrows(LibrlArgumentException.class, () -> l.heldLease(c, 0));
              }),
          new Named(
              "keepAlive renews a lease until it is released, and says when it is lost",
              (l, s, e) -> {
                Concurrent c = Concurrent.of("ka", 1, Duration.ofMillis(300));
                Lease lease = l.acquire(c).keepAlive();
                TestServers.sleep(450); // past the lease's own end
                assertFalse(lease.isLost());
                assertFalse(l.acquire(c).allowed(), "the lease ended while kept alive");
                s.call("DEL", "ka"); // an operator's DEL: the next renewal finds it gone
                LeaseLostException lost =
                    lease.lost().toCompletableFuture().orTimeout(5, java.util.concurrent.TimeUnit.SECONDS).join();
                assertTrue(lost.ended(), lost.toString());
                assertEquals(lease.id(), lost.leaseId());
                assertFalse(lease.release());
                Lease released = l.acquire(c).keepAlive();
                assertTrue(released.release());
                TestServers.sleep(250);
                assertFalse(released.isLost(), "renewed after its release");
                assertFalse(exists(s, "ka"));
              }),
          new Named(
              "all takes a concurrent clause's lease with the other limits, all or nothing",
              (l, s, e) -> {
                Concurrent inflight = Concurrent.of("{g}:inflight", 1, MINUTE);
                Fixed day = Fixed.of("{g}:day", 100, Duration.ofDays(1));
                AllDecision a = l.all(day, inflight);
                assertTrue(a.allowed());
                long id = a.decisions().get(1).leaseId();
                assertTrue(id > 0, a.toString());
                assertEquals(0, a.decisions().get(0).leaseId());
                AllDecision denied = l.all(day, inflight);
                assertFalse(denied.allowed());
                assertEquals(0, denied.decisions().get(1).leaseId());
                assertEquals(1, l.decide(day.cost(0)).count(), "a denied RL.ALL counted");
                try (Lease lease = l.heldLease(inflight, id)) {
                  assertEquals(id, lease.id());
                }
                assertTrue(l.all(day, inflight).allowed(), "the held lease was not released");
                assertThrows(LibrlArgumentException.class, () -> l.all(day, inflight.waitUpTo(SECOND)));
              }),
          new Named(
              "a block lifted elsewhere is honoured within the denial cache's max age",
              (l, s, e) -> {
                DenialCache cache = new DenialCache(100, Duration.ofMillis(300));
                Limiter cl = l.withDenialCache(cache);
                Fixed login = Fixed.of("blk", 1, MINUTE).block(Duration.ofHours(1));
                assertTrue(cl.decide(login).allowed());
                Decision blocked = cl.decide(login);
                assertFalse(blocked.allowed());
                assertTrue(blocked.retryAfter().compareTo(Duration.ofMinutes(59)) > 0, blocked.toString());
                s.call("DEL", "blk"); // the operator lifts the block from another client
                TestServers.sleep(300);
                assertTrue(cl.decide(login).allowed(), "a lifted block was still cached past the max age");
                // Sooner, by hand: forgetKey at once.
                assertFalse(cl.decide(login).allowed());
                s.call("DEL", "blk");
                cache.forgetKey("blk");
                assertTrue(cl.decide(login).allowed(), "forgetKey left the denial cached");
                // An override raised elsewhere applies at once after clear().
                Fixed capped = Fixed.of("ov", 1, MINUTE).override("ov:o");
                cl.decide(capped);
                assertFalse(cl.decide(capped).allowed());
                s.call("RL.OVERRIDE", "SET", "ov:o", "10", "1m");
                cache.clear();
                assertTrue(cl.decide(capped).allowed(), "clear left the denial cached");
              }),
          new Named(
              "overrides apply on every limiter and in RL.ALL",
              (l, s, e) -> {
                l.overrideSet(LimitOverride.of("plan:{acme}", 2, MINUTE).burst(3));
                Token t = Token.of("{acme}:t", 100, SECOND).override("plan:{acme}");
                Decision d = l.decide(t);
                assertEquals(3, d.limit(), "the override's burst is the capacity");
                AllDecision a =
                    l.all(Sliding.of("{acme}:s", 100, SECOND).override("plan:{acme}"), t);
                assertEquals(Map.of(0, 2L, 1, 3L), Map.of(0, a.decisions().get(0).limit(), 1, a.decisions().get(1).limit()));
              }));
}
