package io.librl.gateway;

import io.librl.http.RateLimiter;
import io.librl.spring.LibrlAutoConfiguration;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.cloud.gateway.support.ConfigurationService;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Primary;

/**
 * {@link LibrlGatewayRateLimiter} as the gateway's rate limiter (docs/http/java.md, Spring Cloud
 * Gateway): configured before the gateway's own, so that the {@code RequestRateLimiter} filter
 * finds it, and primary over a {@code RedisRateLimiter} the Redis starter may also define, so that
 * routes without {@code rate-limiter:} use librl.
 */
@AutoConfiguration(
    after = LibrlAutoConfiguration.class,
    beforeName = {
      "org.springframework.cloud.gateway.config.GatewayAutoConfiguration",
      "org.springframework.cloud.gateway.config.GatewayRedisAutoConfiguration"
    })
@ConditionalOnClass(name = "org.springframework.cloud.gateway.filter.ratelimit.AbstractRateLimiter")
public class LibrlGatewayAutoConfiguration {
  @Bean
  @Primary
  @ConditionalOnBean(RateLimiter.class)
  @ConditionalOnMissingBean(LibrlGatewayRateLimiter.class)
  public LibrlGatewayRateLimiter librlGatewayRateLimiter(
      RateLimiter limiter, ConfigurationService configurationService) {
    return new LibrlGatewayRateLimiter(limiter, configurationService);
  }
}
