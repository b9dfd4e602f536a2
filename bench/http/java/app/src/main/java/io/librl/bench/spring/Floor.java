package io.librl.bench.spring;

import io.librl.AsyncLimiter;
import io.librl.Fixed;
import io.librl.http.RedisConnection;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.ExecutionException;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.stereotype.Component;

/**
 * The floor: librl's RL.ALL for one key, sent through the client path librl's starter uses (a
 * {@link RedisConnection} made from the URL, as the starter makes its own, and the client
 * package's {@code AsyncLimiter.all} over its one shared Lettuce connection), the servlet thread
 * waiting for the reply as librl's filter does. What the middleware adds on top of this is the
 * difference.
 */
@Component
@ConditionalOnProperty(name = "bench.variant", havingValue = "floor")
class Floor implements AutoCloseable {
  /** The policies file's timeout, which the starter's connection is made with. */
  private static final Duration TIMEOUT = Duration.ofSeconds(5);

  private final RedisConnection connection;
  private final AsyncLimiter limiter;

  Floor(@Value("${bench.redis-url}") String url) {
    connection = RedisConnection.url(url, TIMEOUT);
    limiter = connection.limiter().join();
  }

  /** Whether RL.ALL FIXED key limit window admitted the request (its reply's first field). */
  boolean admits(String key, long limit, Duration window) {
    try {
      return limiter.all(List.of(Fixed.of(key, limit, window))).toCompletableFuture().get().allowed();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    } catch (ExecutionException e) {
      throw new IllegalStateException(e.getCause());
    }
  }

  @Override
  public void close() {
    connection.close();
  }
}
