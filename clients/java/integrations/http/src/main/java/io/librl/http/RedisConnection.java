package io.librl.http;

import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.SocketOptions;
import io.lettuce.core.TimeoutOptions;
import io.lettuce.core.cluster.ClusterClientOptions;
import io.lettuce.core.cluster.RedisClusterClient;
import io.librl.AsyncLimiter;
import io.librl.LettuceLimiter;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.function.Supplier;

/**
 * Where the limiter's calls go: an {@link AsyncLimiter} the application made, or one this class
 * makes over Lettuce from a URL or a cluster's nodes. A made one connects on first use (so the
 * application starts while Redis is down), one attempt at a time, and a failed attempt is made
 * again by the next request; Lettuce reconnects a lost connection by itself, refusing calls at
 * once meanwhile rather than queueing them. Each request's exchange is bounded by the
 * configuration's timeout ({@code Backend}); Lettuce times each command out at the connection's
 * own (its URI's) on its timing wheel, so the client package adds no timer per call. A URL's
 * decisions go on a plain socket of the limiter's own, Lettuce's connection carrying them while
 * that socket is down (docs/clients/java.md, Connections).
 */
public final class RedisConnection implements AutoCloseable {
  private final Supplier<Object> clientFactory;
  private final Duration timeout;
  private final ExecutorService connector;
  private final AsyncLimiter given;
  /** A standalone URL's URI, for the limiter's own socket; null otherwise. */
  private final RedisURI uri;
  private Object client;
  private LettuceLimiter made;
  private CompletableFuture<AsyncLimiter> connecting;
  /** The limiter once there is one, read without the lock by every request. */
  private volatile CompletableFuture<AsyncLimiter> ready;

  private RedisConnection(
      AsyncLimiter given, Supplier<Object> clientFactory, Duration timeout, RedisURI uri) {
    this.given = given;
    this.uri = uri;
    this.clientFactory = clientFactory;
    this.timeout = timeout;
    this.ready = given != null ? CompletableFuture.completedFuture(given) : null;
    this.connector =
        given != null
            ? null
            : Executors.newSingleThreadExecutor(
                r -> {
                  Thread t = new Thread(r, "librl-connect");
                  t.setDaemon(true);
                  return t;
                });
  }

  /** Calls through the application's own limiter (any client the package supports). */
  public static RedisConnection of(AsyncLimiter limiter) {
    return new RedisConnection(java.util.Objects.requireNonNull(limiter, "limiter"), null, null, null);
  }

  /**
   * A standalone server, {@code redis://host:port/db}; {@code timeout} bounds each attempt. Its
   * decisions go on a socket of the limiter's own ({@link LettuceLimiter#create(RedisClient,
   * RedisURI, Duration)}), the rest through Lettuce.
   */
  public static RedisConnection url(String url, Duration timeout) {
    RedisURI uri = RedisURI.create(url);
    return new RedisConnection(
        null,
        () -> {
          RedisClient c = RedisClient.create(uri);
          c.setOptions(
              ClientOptions.builder()
                  .autoReconnect(true)
                  .disconnectedBehavior(ClientOptions.DisconnectedBehavior.REJECT_COMMANDS)
                  .socketOptions(SocketOptions.builder().connectTimeout(timeout).build())
                  .timeoutOptions(TimeoutOptions.enabled())
                  .build());
          return c;
        },
        timeout,
        uri);
  }

  /** A cluster's nodes, {@code host:port} or {@code redis://host:port} (some of them suffice). */
  public static RedisConnection cluster(List<String> nodes, Duration timeout) {
    List<RedisURI> uris = new ArrayList<>();
    for (String n : nodes) {
      uris.add(RedisURI.create(n.contains("://") ? n : "redis://" + n));
    }
    return new RedisConnection(
        null,
        () -> {
          RedisClusterClient c = RedisClusterClient.create(uris);
          c.setOptions(
              ClusterClientOptions.builder()
                  .autoReconnect(true)
                  .disconnectedBehavior(ClientOptions.DisconnectedBehavior.REJECT_COMMANDS)
                  .socketOptions(SocketOptions.builder().connectTimeout(timeout).build())
                  .timeoutOptions(TimeoutOptions.enabled())
                  .build());
          return c;
        },
        timeout,
        null);
  }

  /** The limiter, connecting first if needed; fails with the connection's error. */
  public CompletableFuture<AsyncLimiter> limiter() {
    CompletableFuture<AsyncLimiter> r = ready;
    return r != null ? r : connecting();
  }

  private synchronized CompletableFuture<AsyncLimiter> connecting() {
    if (ready != null) {
      return ready;
    }
    if (connecting == null) {
      CompletableFuture<AsyncLimiter> attempt =
          CompletableFuture.supplyAsync(this::connect, connector);
      connecting = attempt;
      attempt.whenComplete(
          (limiter, error) -> {
            synchronized (this) {
              connecting = null;
            }
          });
      return attempt;
    }
    return connecting;
  }

  /** One attempt, on the connector thread (Lettuce's connect blocks). */
  private AsyncLimiter connect() {
    Object c;
    synchronized (this) {
      if (client == null) {
        client = clientFactory.get();
      }
      c = client;
    }
    LettuceLimiter limiter =
        c instanceof RedisClusterClient cluster
            ? LettuceLimiter.create(cluster)
            : LettuceLimiter.create((RedisClient) c, uri, timeout);
    synchronized (this) {
      made = limiter;
      ready = CompletableFuture.completedFuture(limiter.async());
    }
    return limiter.async();
  }

  /** The per-attempt timeout a made connection uses; null for the application's limiter. */
  Duration timeout() {
    return timeout;
  }

  /** Closes what this class made (never the application's limiter). */
  @Override
  public synchronized void close() {
    ready = null;
    if (made != null) {
      made.close();
      made = null;
    }
    if (client instanceof RedisClusterClient c) {
      c.shutdown();
    } else if (client instanceof RedisClient c) {
      c.shutdown();
    }
    client = null;
    if (connector != null) {
      connector.shutdownNow();
    }
  }
}
