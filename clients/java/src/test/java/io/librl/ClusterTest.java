package io.librl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * On a real 3-primary cluster, through JedisCluster and Lettuce's RedisClusterClient: every call
 * goes straight to the primary owning its key (INFO commandstats and errorstats, summed over the
 * nodes, show no MOVED, no ASK and no COMMAND GETKEYS), and after a slot moves the calls go
 * straight to the new owner again.
 */
class ClusterTest {
  private static final Duration SECOND = Duration.ofSeconds(1);
  private static final Duration MINUTE = Duration.ofMinutes(1);

  /** A client of a cluster: its name and how to make its limiter. */
  record Client(String name, Function<TestServers.Cluster, Limiter> make) {
    @Override
    public String toString() {
      return name;
    }
  }

  static final Client JEDIS = new Client("jedis", c -> JedisLimiter.of(Clients.jedisCluster(c)));
  static final Client LETTUCE = new Client("lettuce", c -> Clients.lettuce(c).sync());

  static Stream<Arguments> clusters() {
    return Stream.of(
        Arguments.of(TestServers.Flavor.REDIS7, JEDIS),
        Arguments.of(TestServers.Flavor.REDIS7, LETTUCE),
        Arguments.of(TestServers.Flavor.VALKEY9, JEDIS),
        Arguments.of(TestServers.Flavor.VALKEY9, LETTUCE));
  }

  @ParameterizedTest(name = "{0} {1}")
  @MethodSource("clusters")
  void everyCallGoesStraightToTheOwnerAndAgainAfterASlotMoves(TestServers.Flavor flavor, Client client) {
    TestServers.Cluster c = TestServers.cluster(flavor);
    Limiter l = client.make.apply(c);
    String p = client.name + "-";
    round(l, p, -1); // the clients load the slot map
    c.resetStats();
    int n = 60;
    for (int i = 0; i < n; i++) {
      round(l, p, i);
    }
    Map<String, Long> s = c.stats();
    System.out.printf(
        "librl java cluster routing: %s %s: %d calls each of fixed, sliding+override, token, all,"
            + " overrideSet, overrideGet, acquire and release: MOVED %d, ASK %d, COMMAND GETKEYS %d%n",
        flavor, client, n, s.get("moved"), s.get("ask"), s.get("getkeys"));
    assertEquals(0L, s.get("moved"), s.toString());
    assertEquals(0L, s.get("ask"), s.toString());
    assertEquals(0L, s.get("getkeys"), s.toString());
    for (String cmd : List.of("rl.fixed", "rl.sliding", "rl.token", "rl.all", "rl.override|set", "rl.override|get")) {
      assertEquals((long) n, s.getOrDefault(cmd, 0L), cmd + " in " + s);
    }
    assertEquals(2L * n, s.getOrDefault("rl.concurrent", 0L), "acquire and release: " + s);

    // DEL of keys in three slots: one command per slot.
    assertEquals(3, l.overrideDel("{" + p + "user1}:o", "{" + p + "user2}:o", "{" + p + "user3}:o"));
    assertEquals(n + 1 - 3, l.overrideScan("{" + p + "*").size());
    assertThrows(LibrlArgumentException.class, () -> l.overrideList("0"));

    // A slot moves mid-run: calls made before the client knows meet one MOVED each at most;
    // then none. Batches of 20 until one has no MOVED.
    String key = "{" + p + "user7}:s";
    int slot = Slot.of(key);
    TestServers.Server to = c.nodes.get(0) == c.owner(slot) ? c.nodes.get(1) : c.nodes.get(0);
    c.moveSlot(slot, to);
    long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
    for (int batch = 0; ; batch++) {
      c.resetStats();
      for (int i = 0; i < 20; i++) {
        assertTrue(l.all(Fixed.of(key, 1000, SECOND)).allowed());
      }
      Map<String, Long> after = c.stats();
      assertEquals(0L, after.get("getkeys"), after.toString());
      if (batch == 0) {
        System.out.printf(
            "librl java cluster routing: %s %s: MOVED right after the slot moved: %d over 20 calls%n",
            flavor, client, after.get("moved"));
      }
      if (after.get("moved") == 0) {
        break;
      }
      if (System.nanoTime() > deadline) {
        fail("still MOVED 10 s after the slot moved: " + after);
      }
      TestServers.sleep(20);
    }
    c.resetStats();
    for (int i = 0; i < 20; i++) {
      l.fixed(key + "x", 1000, SECOND);
      l.all(Fixed.of(key, 1000, SECOND));
    }
    Map<String, Long> settled = c.stats();
    assertEquals(0L, settled.get("moved"), settled.toString());
    assertEquals(0L, settled.get("getkeys"), settled.toString());
    assertEquals(20L, settled.get("rl.all"), settled.toString());
  }

  private static void round(Limiter l, String p, int i) {
    String user = p + "user" + i;
    l.fixed(user + ":f", 100, MINUTE);
    l.decide(Sliding.of("{" + user + "}:sl", 100, MINUTE).override("{" + user + "}:so"));
    l.token(user + ":t", 100, MINUTE);
    l.all(
        Fixed.of("{" + user + "}:s", 10, SECOND),
        Token.of("{" + user + "}:m", 100, MINUTE).override("{" + user + "}:o"));
    l.overrideSet("{" + user + "}:o", 50, MINUTE);
    assertTrue(l.overrideGet("{" + user + "}:o").isPresent());
    try (Lease lease = l.acquire(Concurrent.of("{" + user + "}:c", 5, MINUTE).override("{" + user + "}:o"))) {
      assertTrue(lease.allowed());
    }
  }

  @ParameterizedTest(name = "{0} {1}")
  @MethodSource("clusters")
  void keysInTwoSlotsAreRefusedWithAHashTagHintAndNothingSent(TestServers.Flavor flavor, Client client) {
    TestServers.Cluster c = TestServers.cluster(flavor);
    Limiter l = client.make.apply(c);
    c.resetStats();
    LibrlArgumentException e =
        assertThrows(
            LibrlArgumentException.class,
            () -> l.all(Fixed.of("user42:min", 1, MINUTE), Fixed.of("user42:day", 1, Duration.ofDays(1))));
    assertTrue(e.getMessage().contains("hash tag"), e.getMessage());
    assertThrows(LibrlArgumentException.class, () -> l.decide(Fixed.of("a", 1, MINUTE).override("b")));
    Map<String, Long> s = c.stats();
    assertEquals(0L, s.getOrDefault("rl.all", 0L) + s.getOrDefault("rl.fixed", 0L), "sent anyway: " + s);
    // With a common hash tag the same call goes through.
    String tag = "{" + client.name + "42}";
    assertTrue(l.all(Fixed.of(tag + ":min", 1, MINUTE), Fixed.of(tag + ":day", 1, Duration.ofDays(1))).allowed());
    assertFalse(l.all(Fixed.of(tag + ":min", 1, MINUTE)).allowed());
  }
}
