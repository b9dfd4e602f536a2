package io.librl.bench.spring;

import io.github.bucket4j.BucketConfiguration;
import io.github.bucket4j.ConsumptionProbe;
import io.github.bucket4j.distributed.ExpirationAfterWriteStrategy;
import io.github.bucket4j.distributed.proxy.ProxyManager;
import io.github.bucket4j.redis.lettuce.Bucket4jLettuce;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.codec.ByteArrayCodec;
import io.lettuce.core.codec.RedisCodec;
import io.lettuce.core.codec.StringCodec;
import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.time.Duration;
import java.util.function.Function;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The peer a Spring MVC user would pick for a limit shared through Redis: Bucket4j 8 with its
 * Lettuce proxy manager (each check a compare-and-swap of the bucket's state in Redis), in a
 * servlet filter per route as Bucket4j's servlet example has it, the same limits as the policies
 * file as an interval-refilled bandwidth (a fixed window: the whole limit back at once when the
 * window ends), writing X-RateLimit-Limit, -Remaining and -Reset (seconds) from the consumption
 * probe, and Retry-After on a 429.
 */
@Configuration(proxyBeanMethods = false)
@ConditionalOnProperty(name = "bench.variant", havingValue = "peer")
class Bucket4jPeer {
  @Bean(destroyMethod = "shutdown")
  RedisClient bucket4jRedis(@Value("${bench.redis-url}") String url) {
    return RedisClient.create(url);
  }

  @Bean(destroyMethod = "close")
  StatefulRedisConnection<String, byte[]> bucket4jConnection(RedisClient client) {
    return client.connect(RedisCodec.of(StringCodec.UTF8, ByteArrayCodec.INSTANCE));
  }

  @Bean
  ProxyManager<String> buckets(StatefulRedisConnection<String, byte[]> connection) {
    return Bucket4jLettuce.casBasedBuilder(connection)
        .expirationAfterWrite(
            ExpirationAfterWriteStrategy.basedOnTimeForRefillingBucketUpToMax(Duration.ofSeconds(10)))
        .build();
  }

  @Bean
  FilterRegistrationBean<Limit> bucket4jOpen(ProxyManager<String> buckets) {
    return route(
        "/open",
        new Limit(buckets, "bucket4j:open:", Routes.OPEN_LIMIT, Duration.ofMinutes(1), ServletRequest::getRemoteAddr));
  }

  @Bean
  FilterRegistrationBean<Limit> bucket4jHalf(ProxyManager<String> buckets) {
    return route(
        "/half",
        new Limit(
            buckets,
            "bucket4j:half:",
            Routes.HALF_LIMIT,
            Duration.ofSeconds(10),
            request -> String.valueOf(request.getHeader("X-Client"))));
  }

  private static FilterRegistrationBean<Limit> route(String path, Limit limit) {
    FilterRegistrationBean<Limit> registration = new FilterRegistrationBean<>(limit);
    registration.addUrlPatterns(path);
    registration.setName("bucket4j" + path.replace('/', '-'));
    return registration;
  }

  /** One route's limit: a bucket per subject. */
  static final class Limit implements Filter {
    private final ProxyManager<String> buckets;
    private final String prefix;
    private final String limitText;
    private final BucketConfiguration configuration;
    private final Function<HttpServletRequest, String> subject;

    Limit(
        ProxyManager<String> buckets,
        String prefix,
        long limit,
        Duration window,
        Function<HttpServletRequest, String> subject) {
      this.buckets = buckets;
      this.prefix = prefix;
      this.limitText = Long.toString(limit);
      this.configuration =
          BucketConfiguration.builder()
              .addLimit(b -> b.capacity(limit).refillIntervally(limit, window))
              .build();
      this.subject = subject;
    }

    @Override
    public void doFilter(ServletRequest req, ServletResponse res, FilterChain chain)
        throws IOException, ServletException {
      HttpServletRequest request = (HttpServletRequest) req;
      HttpServletResponse response = (HttpServletResponse) res;
      ConsumptionProbe probe =
          buckets
              .builder()
              .build(prefix + subject.apply(request), () -> configuration)
              .tryConsumeAndReturnRemaining(1);
      response.setHeader("X-RateLimit-Limit", limitText);
      response.setHeader("X-RateLimit-Remaining", Long.toString(probe.getRemainingTokens()));
      response.setHeader("X-RateLimit-Reset", Long.toString(seconds(probe.getNanosToWaitForReset())));
      if (probe.isConsumed()) {
        chain.doFilter(req, res);
        return;
      }
      response.setHeader("Retry-After", Long.toString(seconds(probe.getNanosToWaitForRefill())));
      // As Bucket4j's servlet example answers a refusal.
      response.setStatus(429);
      response.setContentType("text/plain");
      response.getWriter().append("Too many requests");
    }

    /** Whole seconds, rounded up. */
    private static long seconds(long nanos) {
      return (nanos + 999_999_999L) / 1_000_000_000L;
    }
  }
}
