package io.librl.bench.spring;

import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import io.lettuce.core.codec.ByteArrayCodec;
import io.lettuce.core.output.ArrayOutput;
import io.lettuce.core.protocol.CommandArgs;
import io.lettuce.core.protocol.ProtocolKeyword;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.stereotype.Component;

/**
 * The floor: librl's RL.ALL for one key, sent as simply as Lettuce (the client librl's starter
 * uses) allows, on one shared connection, the servlet thread waiting for the reply as librl's
 * filter does. What the middleware adds on top of this is the difference.
 */
@Component
@ConditionalOnProperty(name = "bench.variant", havingValue = "floor")
class Floor implements AutoCloseable {
  private static final byte[] RL_ALL_BYTES = "RL.ALL".getBytes(StandardCharsets.US_ASCII);
  private static final ProtocolKeyword RL_ALL =
      new ProtocolKeyword() {
        @Override
        public byte[] getBytes() {
          return RL_ALL_BYTES;
        }

        @Override
        public String toString() {
          return "RL.ALL";
        }
      };

  private final RedisClient client;
  private final StatefulRedisConnection<byte[], byte[]> connection;
  private final RedisCommands<byte[], byte[]> commands;

  Floor(@Value("${bench.redis-url}") String url) {
    client = RedisClient.create(url);
    connection = client.connect(ByteArrayCodec.INSTANCE);
    commands = connection.sync();
  }

  /** Whether RL.ALL FIXED key limit window COST 1 admitted the request (its reply's first field). */
  boolean admits(String key, long limit, String window) {
    CommandArgs<byte[], byte[]> args =
        new CommandArgs<>(ByteArrayCodec.INSTANCE)
            .add("FIXED")
            .addKey(key.getBytes(StandardCharsets.UTF_8))
            .add(limit)
            .add(window)
            .add("COST")
            .add(1);
    List<Object> reply = commands.dispatch(RL_ALL, new ArrayOutput<>(ByteArrayCodec.INSTANCE), args);
    return reply.get(0) instanceof Long allowed && allowed == 1L;
  }

  @Override
  public void close() {
    connection.close();
    client.shutdown();
  }
}
