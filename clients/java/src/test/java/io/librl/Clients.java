package io.librl;

import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.cluster.ClusterClientOptions;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.protocol.ProtocolVersion;
import io.lettuce.core.resource.ClientResources;
import io.lettuce.core.resource.DefaultClientResources;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.JedisCluster;
import redis.clients.jedis.JedisPooled;
import redis.clients.jedis.RedisProtocol;

/**
 * The tests' clients, each closed when the JVM's tests are done: Jedis and Lettuce, RESP2 or
 * RESP3, over a server or a cluster. Lettuce's event loops are shared by every test client.
 */
final class Clients {
  private Clients() {}

  private static final ClientResources RESOURCES =
      DefaultClientResources.builder().ioThreadPoolSize(2).computationThreadPoolSize(2).build();
  private static final List<AutoCloseable> OPEN = new ArrayList<>();

  static {
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  synchronized (OPEN) {
                    for (int i = OPEN.size() - 1; i >= 0; i--) {
                      try {
                        OPEN.get(i).close();
                      } catch (Exception e) {
                        // the JVM is going: nothing left to tell
                      }
                    }
                  }
                  RESOURCES.shutdown();
                }));
  }

  private static <T extends AutoCloseable> T keep(T c) {
    synchronized (OPEN) {
      OPEN.add(c);
    }
    return c;
  }

  static JedisPooled jedisPooled(TestServers.Server s, RedisProtocol protocol) {
    return keep(
        new JedisPooled(
            new HostAndPort("127.0.0.1", s.port),
            DefaultJedisClientConfig.builder().protocol(protocol).build()));
  }

  static Limiter jedis(TestServers.Server s, RedisProtocol protocol) {
    return JedisLimiter.of(jedisPooled(s, protocol));
  }

  static JedisCluster jedisCluster(TestServers.Cluster c) {
    Set<HostAndPort> nodes = new HashSet<>();
    c.nodes.forEach(n -> nodes.add(new HostAndPort("127.0.0.1", n.port)));
    return keep(new JedisCluster(nodes, DefaultJedisClientConfig.builder().build()));
  }

  static RedisClient redisClient(TestServers.Server s, ProtocolVersion protocol, Duration timeout) {
    RedisClient client =
        RedisClient.create(
            RESOURCES, RedisURI.builder().withHost("127.0.0.1").withPort(s.port).withTimeout(timeout).build());
    client.setOptions(ClientOptions.builder().protocolVersion(protocol).build());
    return keep(new Shutdown(client)).client;
  }

  static LettuceLimiter lettuce(TestServers.Server s, ProtocolVersion protocol) {
    return keep(LettuceLimiter.create(redisClient(s, protocol, Duration.ofSeconds(60))));
  }

  /** The limiter whose ordinary calls go on its own socket (LettuceLimiter's lean path). */
  static LettuceLimiter lean(TestServers.Server s, ProtocolVersion protocol) {
    RedisURI uri = RedisURI.builder().withHost("127.0.0.1").withPort(s.port).withTimeout(Duration.ofSeconds(60)).build();
    return keep(LettuceLimiter.create(redisClient(s, protocol, Duration.ofSeconds(60)), uri, Duration.ofSeconds(5)));
  }

  static RedisClusterClient redisClusterClient(TestServers.Cluster c) {
    List<RedisURI> uris = new ArrayList<>();
    c.nodes.forEach(n -> uris.add(RedisURI.create("127.0.0.1", n.port)));
    RedisClusterClient client = RedisClusterClient.create(RESOURCES, uris);
    client.setOptions(ClusterClientOptions.builder().build());
    keep(client::shutdown);
    return client;
  }

  static LettuceLimiter lettuce(TestServers.Cluster c) {
    return keep(LettuceLimiter.create(redisClusterClient(c)));
  }

  /** A RedisClient shut down with the tests, after the limiters over it are closed. */
  private record Shutdown(RedisClient client) implements AutoCloseable {
    @Override
    public void close() {
      client.shutdown();
    }
  }
}
