package io.librl;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * How one client sends a checked call: the only code that knows Lettuce or Jedis. Every future
 * fails with a {@link LibrlCommandException} wrapping the client's exception.
 */
interface Transport {

  /** Whether the client is a cluster client: calls then route by slot, and keys must share one. */
  boolean cluster();

  /**
   * The longest the client waits for a reply, when it has such a limit: a call the server may
   * hold about as long is refused before sending. Null when the client waits as long as it takes.
   */
  Duration replyTimeout();

  /**
   * Sends the call to the node owning its route key (any node for a call without one). A call
   * that may be held by the server ({@link Call#holds()}) goes on a connection no other call
   * shares meanwhile.
   */
  CompletableFuture<Object> send(Call call);

  /**
   * Sends the call and then {@code WAIT replicas timeout} on the same connection, one the two
   * calls hold alone, in one round trip; in a cluster on the connection to the owning primary,
   * following MOVED and ASK.
   */
  CompletableFuture<Durable> sendDurable(Call call, int replicas, Duration timeout);

  /** The call's reply and WAIT's: the replicas that acknowledged, or WAIT's own failure. */
  record Durable(Object reply, long acked, Throwable waitError) {}

  /** The primaries of a cluster, as handles for {@link #sendTo}; the server alone standalone. */
  CompletableFuture<List<Object>> primaries();

  /** Sends a call to one node of {@link #primaries()}. */
  CompletableFuture<Object> sendTo(Object node, Call call);
}
