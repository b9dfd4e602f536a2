package io.librl;

import io.lettuce.core.RedisCommandExecutionException;
import io.lettuce.core.RedisCommandTimeoutException;
import io.lettuce.core.TimeoutOptions;
import io.lettuce.core.api.StatefulConnection;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.protocol.AsyncCommand;
import io.lettuce.core.protocol.Command;
import io.lettuce.core.protocol.CommandArgs;
import io.lettuce.core.protocol.ProtocolKeyword;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Supplier;

/**
 * What Lettuce's standalone and cluster transports share: commands built from calls, several
 * commands written together on one connection, the dedicated connections of blocking calls, and
 * every call bounded by the connection's timeout.
 *
 * @param <C> the kind of connection: a server's, or a cluster's
 */
abstract class LettuceTransport<C extends StatefulConnection<String, String>> implements Transport {
  /** Dedicated connections kept idle for the next blocking call, at most. */
  private static final int MAX_IDLE = 8;

  private static final Map<String, Keyword> KEYWORDS = new ConcurrentHashMap<>();

  final C shared;
  private final Duration timeout;
  /**
   * Whether Lettuce itself fails each command at the connection's timeout (its {@code
   * TimeoutOptions}, on by default), on a timing wheel: then a call that the server answers at
   * once needs no timer of this package's as well.
   */
  private final boolean lettuceTimesOut;
  private final Supplier<CompletableFuture<C>> open;
  private final ConcurrentLinkedDeque<C> idle = new ConcurrentLinkedDeque<>();
  private volatile boolean closed;

  LettuceTransport(C shared, Supplier<CompletableFuture<C>> open) {
    this.shared = shared;
    this.timeout = shared.getTimeout();
    this.open = open;
    TimeoutOptions options = shared.getOptions().getTimeoutOptions();
    this.lettuceTimesOut = options.isTimeoutCommands() && options.isApplyConnectionTimeout();
  }

  /**
   * Sends the call (then the commands {@code after} makes, written with it) on {@code connection},
   * routed to the node owning its key; completes with the outcome of the call and of each of {@code after}: a reply,
   * or the {@code Throwable} it failed with.
   */
  abstract CompletableFuture<List<Object>> exchange(
      C connection, Call call, Supplier<List<AsyncCommand<String, String, Object>>> after);

  /** A command's name as Lettuce writes it. */
  private record Keyword(String name, byte[] bytes) implements ProtocolKeyword {
    @Override
    public byte[] getBytes() {
      return bytes;
    }

    @Override
    public String toString() {
      return name;
    }

    /** Lettuce before 6.5 asks name() rather than toString(). */
    @Override
    @SuppressWarnings("deprecation")
    public String name() {
      return name;
    }
  }

  static AsyncCommand<String, String, Object> command(String name, List<String> args) {
    Keyword keyword =
        KEYWORDS.computeIfAbsent(name, n -> new Keyword(n, n.getBytes(StandardCharsets.UTF_8)));
    CommandArgs<String, String> a = new CommandArgs<>(StringCodec.UTF8);
    // As bytes: the JDK encodes a whole string at once, where Lettuce writes a String argument
    // to its buffer one character at a time.
    for (String arg : args) {
      a.add(arg.getBytes(StandardCharsets.UTF_8));
    }
    return new AsyncCommand<>(new Command<>(keyword, new LettuceReply(), a));
  }

  static AsyncCommand<String, String, Object> command(Call call) {
    return command(call.command(), call.args());
  }

  /**
   * Writes the commands on {@code connection} together (nothing else between them), and
   * completes with each one's outcome: its reply, or the {@code Throwable} it failed with.
   */
  static CompletableFuture<List<Object>> dispatch(
      StatefulRedisConnection<String, String> connection,
      List<AsyncCommand<String, String, Object>> commands) {
    try {
      connection.dispatch(commands);
    } catch (RuntimeException e) {
      return CompletableFuture.failedFuture(e); // a closed connection, say
    }
    if (commands.size() == 1) {
      return commands.get(0).handle((r, e) -> Collections.singletonList(e == null ? r : unwrap(e)));
    }
    CompletableFuture<?>[] all = commands.toArray(CompletableFuture<?>[]::new);
    return CompletableFuture.allOf(all)
        .handle(
            (v, e) -> {
              List<Object> out = new ArrayList<>(commands.size());
              for (AsyncCommand<String, String, Object> c : commands) {
                out.add(c.handle((r, err) -> err == null ? r : unwrap(err)).join());
              }
              return out;
            });
  }

  static Throwable unwrap(Throwable e) {
    return Stages.unwrap(e);
  }

  static LibrlException error(String command, Throwable e) {
    e = unwrap(e);
    if (e instanceof LibrlException l) {
      return l;
    }
    return new LibrlCommandException(command, e, e instanceof RedisCommandExecutionException);
  }

  @Override
  public Duration replyTimeout() {
    return timeout;
  }

  @Override
  public CompletableFuture<Object> send(Call call) {
    if (!call.holds()) {
      if (lettuceTimesOut) {
        return sendShared(call);
      }
      return first(call, bounded(exchange(shared, call, List::of), call, Duration.ZERO));
    }
    return onDedicated(call, Duration.ZERO, List::of).thenApply(out -> out.get(0)).thenCompose(
        reply -> reply instanceof Throwable t
            ? CompletableFuture.failedFuture(error(call.name(), t))
            : CompletableFuture.completedFuture(reply));
  }

  @Override
  public CompletableFuture<Durable> sendDurable(Call call, int replicas, Duration waitTimeout) {
    List<String> wait = List.of(Integer.toString(replicas), Long.toString(waitTimeout.toMillis()));
    return onDedicated(call, waitTimeout, () -> List.of(command("WAIT", wait)))
        .thenApply(
            out -> {
              Object reply = out.get(0);
              if (reply instanceof Throwable t) {
                throw error(call.name(), t);
              }
              Object acked = out.get(1);
              if (acked instanceof Throwable t) {
                return new Durable(reply, 0, t);
              }
              return new Durable(reply, Replies.integer("WAIT", acked), null);
            });
  }

  /**
   * An ordinary call on the shared connection, which Lettuce times out itself: the exchange and
   * its outcome. A standalone server's transport writes the one command and reads its outcome in
   * the command's own stage (every check a request makes goes this way).
   */
  CompletableFuture<Object> sendShared(Call call) {
    return first(call, exchange(shared, call, List::of));
  }

  /** The call's own outcome: its reply, or its error. */
  private static CompletableFuture<Object> first(Call call, CompletableFuture<List<Object>> out) {
    return out.thenApply(
        list -> {
          Object reply = list.get(0);
          if (reply instanceof Throwable t) {
            throw error(call.name(), t);
          }
          return reply;
        });
  }

  /**
   * The exchange on a dedicated connection, which goes back to the idle ones when it is free
   * again; one that timed out (the server may still be holding it) is closed instead.
   */
  private CompletableFuture<List<Object>> onDedicated(
      Call call, Duration extra, Supplier<List<AsyncCommand<String, String, Object>>> after) {
    return borrow()
        .exceptionally(
            e -> {
              throw error(call.name(), e);
            })
        .thenCompose(
            conn ->
                bounded(exchange(conn, call, after), call, extra)
                    .whenComplete((out, e) -> release(conn, e == null)));
  }

  /** Bounds the exchange by the connection's timeout, plus what the server may hold it. */
  private <T> CompletableFuture<T> bounded(CompletableFuture<T> f, Call call, Duration extra) {
    Duration limit = timeout.plus(call.serverWait()).plus(extra);
    return f.orTimeout(limit.toMillis(), TimeUnit.MILLISECONDS)
        .exceptionally(
            e -> {
              Throwable cause = unwrap(e);
              if (cause instanceof TimeoutException) {
                cause =
                    new RedisCommandTimeoutException(
                        "Command timed out after " + limit.toMillis() + " millisecond(s)");
              }
              throw error(call.name(), cause);
            });
  }

  private CompletableFuture<C> borrow() {
    if (closed) {
      return CompletableFuture.failedFuture(new IllegalStateException("the limiter is closed"));
    }
    for (C c = idle.poll(); c != null; c = idle.poll()) {
      if (c.isOpen()) {
        return CompletableFuture.completedFuture(c);
      }
      c.closeAsync();
    }
    return open.get();
  }

  private void release(C c, boolean reusable) {
    if (reusable && !closed && c.isOpen() && idle.size() < MAX_IDLE) {
      idle.push(c);
      if (!closed) {
        return;
      }
      idle.remove(c); // closed meanwhile
    }
    c.closeAsync();
  }

  /** Closes the shared connection and the idle dedicated ones; busy ones close when released. */
  void close() {
    closed = true;
    for (C c = idle.poll(); c != null; c = idle.poll()) {
      c.close();
    }
    shared.close();
  }
}
