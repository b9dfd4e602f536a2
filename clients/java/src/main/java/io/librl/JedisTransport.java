package io.librl;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import redis.clients.jedis.CommandArguments;
import redis.clients.jedis.Connection;
import redis.clients.jedis.ConnectionPool;
import redis.clients.jedis.JedisCluster;
import redis.clients.jedis.Protocol;
import redis.clients.jedis.UnifiedJedis;
import redis.clients.jedis.commands.ProtocolCommand;
import redis.clients.jedis.exceptions.JedisAskDataException;
import redis.clients.jedis.exceptions.JedisDataException;
import redis.clients.jedis.exceptions.JedisMovedDataException;
import redis.clients.jedis.exceptions.JedisRedirectionException;
import redis.clients.jedis.util.Pool;

/**
 * Sends calls through a Jedis {@code UnifiedJedis}: routed by sample key, blocking calls as Jedis's
 * blocking commands, and durable calls as a pipeline of the call and WAIT on one connection of the
 * pool (in a cluster, of the owning primary's pool).
 */
final class JedisTransport implements Transport {
  private static final Map<String, ProtocolCommand> COMMANDS = new ConcurrentHashMap<>();

  private final UnifiedJedis client;
  /** The cluster's connection to a slot's primary; null for a standalone client. */
  private final SlotConnections slots;

  /** A cluster client's connections: Jedis's JedisCluster, or any client with the same methods. */
  private interface SlotConnections {
    Connection forSlot(int slot);

    Map<String, ConnectionPool> nodes();
  }

  JedisTransport(UnifiedJedis client) {
    this.client = client;
    this.slots = slotConnections(client);
  }

  private static SlotConnections slotConnections(UnifiedJedis client) {
    if (client instanceof JedisCluster c) {
      return new SlotConnections() {
        @Override
        public Connection forSlot(int slot) {
          return c.getConnectionFromSlot(slot);
        }

        @Override
        public Map<String, ConnectionPool> nodes() {
          return c.getClusterNodes();
        }
      };
    }
    // Jedis 7.1's RedisClusterClient has the same two methods, but is no JedisCluster.
    Method forSlot = publicMethod(client, "getConnectionFromSlot", int.class);
    Method nodes = publicMethod(client, "getClusterNodes");
    if (forSlot == null || nodes == null) {
      return null;
    }
    return new SlotConnections() {
      @Override
      public Connection forSlot(int slot) {
        return (Connection) invoke(forSlot, client, slot);
      }

      @Override
      @SuppressWarnings("unchecked") // getClusterNodes() is Map<String, ConnectionPool> in Jedis
      public Map<String, ConnectionPool> nodes() {
        return (Map<String, ConnectionPool>) invoke(nodes, client);
      }
    };
  }

  private static Method publicMethod(Object target, String name, Class<?>... params) {
    try {
      return target.getClass().getMethod(name, params);
    } catch (NoSuchMethodException e) {
      return null;
    }
  }

  private static Object invoke(Method m, Object target, Object... args) {
    try {
      return m.invoke(target, args);
    } catch (InvocationTargetException e) {
      if (e.getCause() instanceof RuntimeException r) {
        throw r;
      }
      throw new IllegalStateException(e.getCause());
    } catch (IllegalAccessException e) {
      throw new IllegalStateException(e);
    }
  }

  @Override
  public boolean cluster() {
    return slots != null;
  }

  @Override
  public Duration replyTimeout() {
    return null; // blocking calls lift the socket timeout, as Jedis's own blocking commands do
  }

  private static ProtocolCommand command(String name) {
    return COMMANDS.computeIfAbsent(
        name,
        n -> {
          byte[] raw = n.getBytes(StandardCharsets.UTF_8);
          return () -> raw;
        });
  }

  private static String[] args(Call call) {
    return call.args().toArray(String[]::new);
  }

  @Override
  public CompletableFuture<Object> send(Call call) {
    ProtocolCommand cmd = command(call.command());
    String[] args = args(call);
    String key = call.routeKey();
    try {
      Object reply;
      if (key == null) {
        reply = call.holds() ? client.sendBlockingCommand(cmd, args) : client.sendCommand(cmd, args);
      } else {
        reply =
            call.holds()
                ? client.sendBlockingCommand(key, cmd, args)
                : client.sendCommand(key, cmd, args);
      }
      return CompletableFuture.completedFuture(reply);
    } catch (RuntimeException e) {
      return CompletableFuture.failedFuture(error(call.name(), e));
    }
  }

  static LibrlCommandException error(String command, RuntimeException e) {
    boolean server = e instanceof JedisDataException && !(e instanceof JedisRedirectionException);
    return new LibrlCommandException(command, e, server);
  }

  @Override
  public CompletableFuture<Durable> sendDurable(Call call, int replicas, Duration timeout) {
    try {
      return CompletableFuture.completedFuture(durable(call, replicas, timeout));
    } catch (RuntimeException e) {
      return CompletableFuture.failedFuture(
          e instanceof LibrlException ? e : error(call.name(), e));
    }
  }

  private Durable durable(Call call, int replicas, Duration timeout) {
    if (slots == null) {
      return pipeline(standaloneConnection(), call, false, replicas, timeout);
    }
    int slot = Slot.of(call.routeKey());
    Connection conn = slots.forSlot(slot);
    boolean asking = false;
    for (int attempt = 0; ; attempt++) {
      Durable d = pipeline(conn, call, asking, replicas, timeout);
      if (!(d.reply() instanceof JedisRedirectionException r) || attempt >= 3) {
        return d;
      }
      if (r instanceof JedisMovedDataException) {
        // Jedis reloads its slot map when a routed command meets MOVED; a keyed EXISTS through
        // the client is such a command, so the next durable call goes straight to the new owner.
        client.sendCommand(call.routeKey(), Protocol.Command.EXISTS, call.routeKey());
        conn = slots.forSlot(slot);
        asking = false;
      } else {
        ConnectionPool pool = slots.nodes().get(r.getTargetNode().toString());
        if (pool == null) {
          throw error(call.name(), r);
        }
        conn = pool.getResource();
        asking = r instanceof JedisAskDataException;
      }
    }
  }

  /**
   * A connection of a standalone client's pool, held by the caller alone until closed. JedisPooled
   * and Jedis 7.1's RedisClient both have getPool(), but share no type that declares it (and Jedis
   * 8 has no JedisPooled), so it is looked up by name.
   */
  @SuppressWarnings("unchecked") // getPool() is Pool<Connection> wherever Jedis has it
  private Connection standaloneConnection() {
    Method getPool = publicMethod(client, "getPool");
    if (getPool == null) {
      throw new LibrlArgumentException(
          "withDurability",
          "durability needs a pooled client (JedisPooled or JedisCluster), not a "
              + client.getClass().getName());
    }
    return ((Pool<Connection>) invoke(getPool, client)).getResource();
  }

  /**
   * ASKING (when redirected by ASK), the call and WAIT on one connection, in one round trip; the
   * connection goes back to its pool. A redirection comes back as the reply, for the caller to
   * follow; any other error reply of the call is thrown.
   */
  private static Durable pipeline(
      Connection conn, Call call, boolean asking, int replicas, Duration timeout) {
    List<Object> replies;
    try (conn) {
      conn.setTimeoutInfinite(); // WAIT's own timeout bounds the wait
      try {
        if (asking) {
          conn.sendCommand(Protocol.Command.ASKING);
        }
        conn.sendCommand(command(call.command()), args(call));
        conn.sendCommand(
            Protocol.Command.WAIT, Integer.toString(replicas), Long.toString(timeout.toMillis()));
        replies = conn.getMany(asking ? 3 : 2);
      } finally {
        conn.rollbackTimeout();
      }
    }
    if (asking) {
      replies = replies.subList(1, replies.size());
    }
    Object reply = replies.get(0);
    if (reply instanceof JedisRedirectionException r) {
      return new Durable(r, 0, null);
    }
    if (reply instanceof JedisDataException e) {
      throw error(call.name(), e);
    }
    Object wait = replies.get(1);
    if (wait instanceof RuntimeException e) {
      return new Durable(reply, 0, e);
    }
    return new Durable(reply, Replies.integer("WAIT", wait), null);
  }

  @Override
  public CompletableFuture<List<Object>> primaries() {
    if (slots == null) {
      return CompletableFuture.completedFuture(List.of(client));
    }
    try {
      // CLUSTER SLOTS names each range's primary first; getClusterNodes() holds replicas too.
      Object reply = client.sendCommand(Protocol.Command.CLUSTER, "SLOTS");
      Set<String> addrs = new LinkedHashSet<>();
      if (reply instanceof List<?> ranges) {
        for (Object range : ranges) {
          if (range instanceof List<?> r && r.size() >= 3 && r.get(2) instanceof List<?> node
              && node.size() >= 2) {
            addrs.add(text(node.get(0)) + ":" + node.get(1));
          }
        }
      }
      Map<String, ConnectionPool> pools = slots.nodes();
      List<Object> out = new ArrayList<>();
      for (String addr : addrs) {
        ConnectionPool pool = pools.get(addr);
        if (pool == null) {
          throw new LibrlCommandException(
              "RL.OVERRIDE LIST", "the cluster client has no connection to the primary " + addr);
        }
        out.add(pool);
      }
      return CompletableFuture.completedFuture(out);
    } catch (LibrlException e) {
      return CompletableFuture.failedFuture(e);
    } catch (RuntimeException e) {
      return CompletableFuture.failedFuture(error("CLUSTER SLOTS", e));
    }
  }

  private static String text(Object v) {
    return v instanceof byte[] b ? new String(b, StandardCharsets.UTF_8) : String.valueOf(v);
  }

  @Override
  public CompletableFuture<Object> sendTo(Object node, Call call) {
    if (!(node instanceof ConnectionPool pool)) {
      return send(call);
    }
    try (Connection conn = pool.getResource()) {
      return CompletableFuture.completedFuture(
          conn.executeCommand(
              new CommandArguments(command(call.command())).addObjects((Object[]) args(call))));
    } catch (RuntimeException e) {
      return CompletableFuture.failedFuture(error(call.name(), e));
    }
  }
}
