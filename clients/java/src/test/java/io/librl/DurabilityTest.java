package io.librl;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lettuce.core.protocol.ProtocolVersion;
import java.time.Duration;
import java.util.List;
import java.util.function.Function;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.RedisProtocol;

/**
 * withDurability: a call returns once the replica holds it; too few replicas give the decision
 * with a DurabilityException; in a cluster the call and WAIT go to the owning primary on one
 * connection, also after a slot moves.
 */
class DurabilityTest {
  private static final Duration SECOND = Duration.ofSeconds(1);
  private static final Duration MINUTE = Duration.ofMinutes(1);

  record Client(String name, Function<TestServers.Server, Limiter> standalone, Function<TestServers.Cluster, Limiter> cluster) {
    @Override
    public String toString() {
      return name;
    }
  }

  static Stream<Client> clients() {
    return Stream.of(
        new Client("jedis", s -> Clients.jedis(s, RedisProtocol.RESP2), ClusterTest.JEDIS.make()),
        new Client("lettuce", s -> Clients.lettuce(s, ProtocolVersion.RESP3).sync(), ClusterTest.LETTUCE.make()));
  }

  private static byte[] dump(TestServers.Server s, String key) {
    try (Jedis j = s.jedis()) {
      return j.dump(key);
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("clients")
  void aDurableCallReturnsOnceTheReplicaHoldsIt(Client client) {
    List<TestServers.Server> pair = TestServers.primaryWithReplica(TestServers.Flavor.VALKEY9);
    TestServers.Server primary = pair.get(0);
    TestServers.Server replica = pair.get(1);
    Limiter l = client.standalone.apply(primary);
    Limiter durable = l.withDurability(1, Duration.ofSeconds(2));
    String key = "d-" + client.name;
    for (int i = 0; i < 5; i++) {
      assertTrue(durable.fixed(key, 3, MINUTE).count() > 0);
      // Acknowledged: the replica already holds the same value.
      assertArrayEquals(dump(primary, key), dump(replica, key));
    }
    assertTrue(durable.all(Token.of("{" + key + "}:t", 5, SECOND)).allowed());
    durable.overrideSet(key + ":o", 5, SECOND);
    assertArrayEquals(dump(primary, key + ":o"), dump(replica, key + ":o"));
    assertEquals(1, durable.overrideDel(key + ":o"));

    Limiter tooMany = l.withDurability(2, Duration.ofMillis(100));
    DurabilityException e =
        assertThrows(DurabilityException.class, () -> tooMany.token(key + ":t", 5, SECOND));
    assertEquals(1, e.acked());
    assertEquals(2, e.wanted());
    assertTrue(e.decision().allowed());
    assertEquals("RL.TOKEN", e.command());
    assertTrue(
        e.getMessage().contains("NOTDURABLE the call reached 1 of 2 replicas within 100 ms"), e.getMessage());
    // A read waits for nothing.
    tooMany.decide(Token.of(key + ":t", 5, SECOND).cost(0));
    tooMany.peekAll(Token.of(key + ":t", 5, SECOND));
    // A server error is the call's, not WAIT's.
    LibrlCommandException err = assertThrows(LibrlCommandException.class, () -> durable.fixed(key, 0, MINUTE));
    assertEquals("RL.FIXED", err.command());
    assertEquals("ERR", err.errorCode());
  }

  /**
   * In a cluster, the call and WAIT go to the owning primary on one connection, following the
   * MOVED after a slot moves. These primaries have no replica: every call is decided, and
   * reported NOTDURABLE.
   */
  @ParameterizedTest(name = "{0}")
  @MethodSource("clients")
  void aDurableCallInAClusterFollowsTheSlot(Client client) {
    TestServers.Cluster c = TestServers.cluster(TestServers.Flavor.REDIS7);
    Limiter l = client.cluster.apply(c).withDurability(1, Duration.ofMillis(10));
    String key = "{d-" + client.name + "}:k";
    DurabilityException e = assertThrows(DurabilityException.class, () -> l.fixed(key, 10, MINUTE));
    assertEquals(0, e.acked());
    assertEquals(1, e.decision().count());
    int slot = Slot.of(key);
    TestServers.Server to = c.owner(slot) == c.nodes.get(0) ? c.nodes.get(1) : c.nodes.get(0);
    c.moveSlot(slot, to);
    c.resetStats();
    e = assertThrows(DurabilityException.class, () -> l.fixed(key, 10, MINUTE));
    assertEquals(2, e.decision().count());
    e = assertThrows(DurabilityException.class, () -> l.fixed(key, 10, MINUTE));
    assertEquals(3, e.decision().count());
    long moved = c.stats().get("moved");
    assertTrue(moved <= 2, "MOVED " + moved + " after one slot move");
    assertThrows(DurabilityException.class, () -> l.overrideSet(key + ":o", 1, SECOND));
    assertThrows(DurabilityException.class, () -> l.overrideDel(key + ":o"));
    // A durable acquire's lease stands on the primary: the exception carries it, and keepAlive
    // renews it though every renewal reports NOTDURABLE.
    Concurrent leases = Concurrent.of("{d-" + client.name + "}:c", 1, Duration.ofMillis(300));
    Lease lease = assertThrows(DurabilityException.class, () -> l.acquire(leases)).lease();
    assertTrue(lease.allowed() && lease.id() > 0, lease.toString());
    lease.keepAlive();
    TestServers.sleep(450); // past the lease's own end
    assertFalse(lease.isLost());
    Limiter plain = client.cluster.apply(c);
    assertFalse(plain.acquire(leases).allowed(), "the lease ended while kept alive");
    assertThrows(DurabilityException.class, lease::release);
    assertEquals(0, plain.decide(leases.cost(0)).count(), "the release did not stand");
  }
}
