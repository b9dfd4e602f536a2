package io.librl;

import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisCredentials;
import io.lettuce.core.RedisCredentialsProvider;
import io.lettuce.core.RedisURI;
import io.lettuce.core.cluster.RedisClusterClient;
import java.time.Duration;
import java.util.Objects;

/**
 * librl over Lettuce, standalone ({@link RedisClient}) or cluster ({@link RedisClusterClient}):
 * {@link #sync()}, {@link #async()} and {@link #reactive()} views of one set of connections.
 *
 * <pre>{@code
 * try (LettuceLimiter lettuce = LettuceLimiter.create(RedisClient.create("redis://127.0.0.1"))) {
 *   Decision d = lettuce.sync().fixed("rl:user:42", 10, Duration.ofMinutes(1));
 *   lettuce.async().fixed("rl:user:42", 10, Duration.ofMinutes(1)).thenAccept(...);
 *   Mono<Decision> m = lettuce.reactive().fixed("rl:user:42", 10, Duration.ofMinutes(1));
 * }
 * }</pre>
 *
 * <p>Connections: one shared, multiplexed connection (a cluster connection, in a cluster) carries
 * every ordinary call, as Lettuce's own commands do. A call the server may hold ({@link
 * Token#waitUpTo}) and a durable call's {@code WAIT} would stall every other call queued behind
 * them on that connection, so they go on dedicated connections, each used by one call at a time
 * and kept for the next (docs/clients/java.md, Blocking calls).
 *
 * <p>Routing in a cluster: each call goes to the primary owning its key's slot, computed here,
 * on that node's connection; a MOVED reply makes the client reload the cluster's topology and the
 * call is sent again to the new owner, so calls go straight to their owner again at once; an ASK
 * is followed with ASKING. No {@code COMMAND GETKEYS} is ever sent.
 *
 * <p>Timeouts: every call fails with a {@link LibrlCommandException} whose cause is Lettuce's
 * {@code RedisCommandTimeoutException} when it is not answered within the connection's timeout
 * ({@code RedisURI}'s, 60 s by default), plus what the server may hold for it. A {@code
 * waitUpTo} within a second of that timeout or longer is refused before sending.
 *
 * <p>The limiter owns the connections it opens, not the client: close the limiter, then the
 * client.
 */
public final class LettuceLimiter implements AutoCloseable {
  private final Runnable closer;
  private final Engine engine;

  private LettuceLimiter(LettuceTransport<?> transport) {
    this.closer = transport::close;
    this.engine = new Engine(transport);
  }

  private LettuceLimiter(LeanStandalone transport) {
    this.closer = transport::close;
    this.engine = new Engine(transport);
  }

  /** A limiter over a standalone server; opens its shared connection now. */
  public static LettuceLimiter create(RedisClient client) {
    return new LettuceLimiter(new LettuceStandalone(Objects.requireNonNull(client, "client")));
  }

  /**
   * A limiter over the standalone server at {@code uri} whose ordinary calls (every call the
   * server answers at once: decisions, refunds, overrides) go on a plain socket of its own,
   * pipelined, rather than through Lettuce's connection: about half the client CPU per call
   * (docs/clients/java.md, Connections). Calls the server may hold, durable calls, and every call
   * while that socket is down (it connects again in the background) use {@code client}'s
   * connections as {@link #create(RedisClient)}'s do. A URI the socket cannot serve as Lettuce
   * does (TLS, a Unix socket, Sentinel, streamed credentials) gets {@link #create(RedisClient)}'s limiter.
   *
   * @param client the client for {@code uri}, whose options (timeouts, reconnection) apply
   * @param connectTimeout how long the socket's connection attempt may take
   */
  public static LettuceLimiter create(RedisClient client, RedisURI uri, Duration connectTimeout) {
    Objects.requireNonNull(client, "client");
    Objects.requireNonNull(connectTimeout, "connectTimeout");
    LettuceStandalone lettuce = new LettuceStandalone(client);
    RedisCredentialsProvider credentials = uri.getCredentialsProvider();
    if (uri.isSsl()
        || uri.getSocket() != null
        || !uri.getSentinels().isEmpty()
        || uri.getHost() == null
        || (credentials != null && credentials.supportsStreaming())) {
      return new LettuceLimiter(lettuce);
    }
    // The URI's own credentials (its user and password): resolved at once.
    RedisCredentials c = credentials == null ? null : credentials.resolveCredentials().block(connectTimeout);
    return new LettuceLimiter(
        new LeanStandalone(
            lettuce,
            uri.getHost(),
            uri.getPort(),
            c != null && c.hasUsername() ? c.getUsername() : null,
            c != null && c.hasPassword() ? c.getPassword() : null,
            uri.getDatabase(),
            connectTimeout));
  }

  /** A limiter over a cluster; opens its shared cluster connection now. */
  public static LettuceLimiter create(RedisClusterClient client) {
    return new LettuceLimiter(new LettuceCluster(Objects.requireNonNull(client, "client")));
  }

  /** The blocking view. */
  public Limiter sync() {
    return new SyncLimiter(engine);
  }

  /** The asynchronous view: {@code CompletionStage}s. */
  public AsyncLimiter async() {
    return engine;
  }

  /** The reactive view: Project Reactor {@code Mono}s. */
  public ReactiveLimiter reactive() {
    return ReactiveLimiter.of(engine);
  }

  /** Closes the connections this limiter opened (not the client); its views fail afterwards. */
  @Override
  public void close() {
    closer.run();
  }
}
