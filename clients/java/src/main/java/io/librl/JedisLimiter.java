package io.librl;

import java.util.Objects;
import redis.clients.jedis.UnifiedJedis;

/**
 * librl over Jedis: a {@link Limiter} over a {@code JedisPooled} or a {@code JedisCluster} (any
 * {@code UnifiedJedis}; Jedis 7.1's {@code RedisClient} and {@code RedisClusterClient} too).
 *
 * <pre>{@code
 * Limiter limiter = JedisLimiter.of(new JedisPooled("127.0.0.1", 6379));
 * Limiter clustered = JedisLimiter.of(new JedisCluster(Set.of(new HostAndPort("127.0.0.1", 7000))));
 * }</pre>
 *
 * <p>In a cluster every call is sent with its key as Jedis's sample key, so Jedis routes it by
 * slot straight to the primary owning it, and follows MOVED (reloading its slot map) and ASK
 * itself. A call the server may hold ({@link Token#waitUpTo}) is sent as a blocking command, on a
 * connection of the pool that it holds alone, with Jedis's infinite socket timeout, as Jedis does
 * for {@code BLPOP}. The limiter does not own the client: close the client when done.
 */
public final class JedisLimiter {
  private JedisLimiter() {}

  /** A limiter sending through {@code client}. */
  public static Limiter of(UnifiedJedis client) {
    return new SyncLimiter(new Engine(new JedisTransport(Objects.requireNonNull(client, "client"))));
  }
}
