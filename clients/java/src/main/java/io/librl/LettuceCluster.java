package io.librl;

import io.lettuce.core.RedisCommandExecutionException;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.models.partitions.RedisClusterNode;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.protocol.AsyncCommand;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;

/**
 * Lettuce on a cluster: each call on the connection to the primary owning its key's slot,
 * computed here. Lettuce's own routing follows a MOVED but keeps its slot map (unless adaptive
 * topology refresh is on), so every later call to a moved slot would meet MOVED again; here a
 * MOVED reloads the topology before the call is sent again, so calls go straight to the owner
 * from then on.
 */
final class LettuceCluster extends LettuceTransport<StatefulRedisClusterConnection<String, String>> {
  /** Redirections followed for one call before its MOVED or ASK is its error. */
  private static final int MAX_REDIRECTS = 5;

  private final RedisClusterClient client;
  /** The topology reload in flight: a burst of MOVED replies waits for one reload. */
  private final AtomicReference<CompletableFuture<Void>> reloading = new AtomicReference<>();

  LettuceCluster(RedisClusterClient client) {
    super(client.connect(StringCodec.UTF8), () -> client.connectAsync(StringCodec.UTF8));
    this.client = client;
    connectPrimaries();
  }

  /**
   * Opens a connection to every primary now, in parallel, waiting at most the connection's
   * timeout: Lettuce opens a node's connection on the first call to it, so otherwise the first call
   * to each primary would also pay a TCP connect and handshake within its own timeout. A primary
   * that cannot be reached is tried again by the first call that needs it.
   */
  private void connectPrimaries() {
    List<CompletableFuture<?>> opening = new ArrayList<>();
    for (RedisClusterNode n : shared.getPartitions()) {
      if (n.is(RedisClusterNode.NodeFlag.UPSTREAM)) {
        opening.add(shared.getConnectionAsync(n.getNodeId()).exceptionally(e -> null));
      }
    }
    try {
      CompletableFuture.allOf(opening.toArray(CompletableFuture[]::new))
          .get(shared.getTimeout().toNanos(), TimeUnit.NANOSECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (ExecutionException | TimeoutException e) {
      // Left to the first call that needs the node.
    }
  }

  @Override
  public boolean cluster() {
    return true;
  }

  @Override
  CompletableFuture<List<Object>> exchange(
      StatefulRedisClusterConnection<String, String> connection,
      Call call,
      Supplier<List<AsyncCommand<String, String, Object>>> after) {
    return attempt(connection, call, after, 0, null, false);
  }

  /**
   * One try: on the owner of the call's slot as the connection's topology says, or on {@code
   * redirected} (host:port of a MOVED or ASK), after ASKING when {@code asking}.
   */
  private CompletableFuture<List<Object>> attempt(
      StatefulRedisClusterConnection<String, String> connection,
      Call call,
      Supplier<List<AsyncCommand<String, String, Object>>> after,
      int redirects,
      String redirected,
      boolean asking) {
    CompletableFuture<StatefulRedisConnection<String, String>> node;
    try {
      node = redirected == null ? owner(connection, call) : at(connection, redirected);
    } catch (RuntimeException e) {
      return CompletableFuture.failedFuture(e);
    }
    return node.thenCompose(
        conn -> {
          List<AsyncCommand<String, String, Object>> commands = new ArrayList<>();
          if (asking) {
            commands.add(command("ASKING", List.of()));
          }
          commands.add(command(call));
          commands.addAll(after.get());
          return dispatch(conn, commands)
              .thenCompose(
                  out -> {
                    List<Object> outcomes = asking ? out.subList(1, out.size()) : out;
                    String[] redirect = redirection(outcomes.get(0));
                    if (redirect == null || redirects >= MAX_REDIRECTS) {
                      return CompletableFuture.completedFuture(outcomes);
                    }
                    if (redirect[0].equals("ASK")) {
                      return attempt(connection, call, after, redirects + 1, redirect[1], true);
                    }
                    // MOVED: the slot has a new owner; reload the topology and route again.
                    return reload()
                        .thenCompose(
                            v -> attempt(connection, call, after, redirects + 1, null, false));
                  });
        });
  }

  /** {@code [MOVED|ASK, host:port]} of a redirection error, else null. */
  private static String[] redirection(Object outcome) {
    if (!(outcome instanceof RedisCommandExecutionException e) || e.getMessage() == null) {
      return null;
    }
    String[] f = e.getMessage().split(" ");
    if (f.length == 3 && (f[0].equals("MOVED") || f[0].equals("ASK"))) {
      return new String[] {f[0], f[2]};
    }
    return null;
  }

  private static CompletableFuture<StatefulRedisConnection<String, String>> owner(
      StatefulRedisClusterConnection<String, String> connection, Call call) {
    RedisClusterNode node = connection.getPartitions().getMasterBySlot(Slot.of(call.routeKey()));
    if (node == null) {
      throw new LibrlCommandException(
          call.name(), "no primary owns slot " + Slot.of(call.routeKey()) + " in the cluster's topology");
    }
    return connection.getConnectionAsync(node.getNodeId());
  }

  private static CompletableFuture<StatefulRedisConnection<String, String>> at(
      StatefulRedisClusterConnection<String, String> connection, String hostPort) {
    int colon = hostPort.lastIndexOf(':');
    return connection.getConnectionAsync(
        hostPort.substring(0, colon), Integer.parseInt(hostPort.substring(colon + 1)));
  }

  private CompletableFuture<Void> reload() {
    CompletableFuture<Void> mine = new CompletableFuture<>();
    CompletableFuture<Void> running = reloading.compareAndExchange(null, mine);
    if (running != null) {
      return running;
    }
    client
        .refreshPartitionsAsync()
        .whenComplete(
            (v, e) -> {
              reloading.set(null);
              if (e == null) {
                mine.complete(null);
              } else {
                mine.completeExceptionally(e);
              }
            });
    return mine;
  }

  @Override
  public CompletableFuture<List<Object>> primaries() {
    List<Object> ids = new ArrayList<>();
    for (RedisClusterNode n : shared.getPartitions()) {
      if (n.is(RedisClusterNode.NodeFlag.UPSTREAM)) {
        ids.add(n.getNodeId());
      }
    }
    return CompletableFuture.completedFuture(ids);
  }

  @Override
  public CompletableFuture<Object> sendTo(Object node, Call call) {
    return shared
        .getConnectionAsync((String) node)
        .thenCompose(conn -> dispatch(conn, List.of(command(call))))
        .thenApply(
            out -> {
              if (out.get(0) instanceof Throwable t) {
                throw error(call.name(), t);
              }
              return out.get(0);
            });
  }
}
