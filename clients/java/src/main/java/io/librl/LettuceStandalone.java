package io.librl;

import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.protocol.AsyncCommand;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.Supplier;

/** Lettuce on a standalone server: every call on one connection, there is nothing to route. */
final class LettuceStandalone extends LettuceTransport<StatefulRedisConnection<String, String>> {

  LettuceStandalone(RedisClient client) {
    super(
        client.connect(StringCodec.UTF8),
        // RedisClient connects asynchronously only to a URI it does not hand out: its blocking
        // connect runs on the client's own executor instead.
        () ->
            CompletableFuture.supplyAsync(
                () -> client.connect(StringCodec.UTF8), client.getResources().eventExecutorGroup()));
  }

  @Override
  public boolean cluster() {
    return false;
  }

  @Override
  CompletableFuture<List<Object>> exchange(
      StatefulRedisConnection<String, String> connection,
      Call call,
      Supplier<List<AsyncCommand<String, String, Object>>> after) {
    List<AsyncCommand<String, String, Object>> commands = new ArrayList<>();
    commands.add(command(call));
    commands.addAll(after.get());
    return dispatch(connection, commands);
  }

  @Override
  CompletableFuture<Object> sendShared(Call call) {
    AsyncCommand<String, String, Object> command = command(call);
    try {
      shared.dispatch(command);
    } catch (RuntimeException e) {
      return CompletableFuture.failedFuture(e); // a closed connection, say
    }
    return command.handle(
        (reply, e) -> {
          if (e != null) {
            throw error(call.name(), e);
          }
          return reply;
        });
  }

  @Override
  public CompletableFuture<List<Object>> primaries() {
    return CompletableFuture.completedFuture(List.of(shared));
  }

  @Override
  public CompletableFuture<Object> sendTo(Object node, Call call) {
    return send(call);
  }
}
