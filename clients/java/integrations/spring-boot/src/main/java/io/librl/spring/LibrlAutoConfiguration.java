package io.librl.spring;

import io.librl.AsyncLimiter;
import io.librl.http.Config;
import io.librl.http.ConfigException;
import io.librl.http.Hook;
import io.librl.http.RateLimiter;
import io.librl.http.RedisConnection;
import io.librl.http.Resolvers;
import jakarta.servlet.DispatcherType;
import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnWebApplication;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.ApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.env.Environment;
import org.springframework.core.io.FileSystemResource;
import org.springframework.core.io.Resource;
import org.springframework.core.io.ResourceLoader;
import org.springframework.util.ResourceUtils;
import reactor.core.publisher.Mono;

/**
 * librl's auto-configuration (docs/http/java.md, Spring Boot): a {@link RateLimiter} from the
 * policy file {@code librl.policies} names (any Spring resource) against Redis, and the adapter
 * of the application's web stack: {@link LibrlServletFilter} for Spring MVC, {@link
 * LibrlWebFilter} for WebFlux. A bad policy file stops the start with the contract's message
 * ({@code librl: configuration: <path>: ...}). Beans the application declares are used: a {@link
 * Hook.DecisionHook}, a {@link ServletUserResolver} or {@link ReactiveUserResolver}, an {@link
 * AsyncLimiter} (its own Redis client), the {@link Resolvers.CostResolver}, {@link
 * Resolvers.LimitResolver} and {@link Resolvers.ModeResolver} beans the file names as {@code
 * code:<bean name>}, or a whole {@link RateLimiter}.
 */
@AutoConfiguration
@EnableConfigurationProperties(LibrlProperties.class)
@ConditionalOnProperty(prefix = "librl", name = "enabled", matchIfMissing = true)
public class LibrlAutoConfiguration {

  @Bean(destroyMethod = "close")
  @ConditionalOnMissingBean
  public RateLimiter librlRateLimiter(
      LibrlProperties properties,
      ResourceLoader resources,
      Environment environment,
      ObjectProvider<Hook.DecisionHook> hook,
      ObjectProvider<AsyncLimiter> redis,
      ListableBeanFactory beans) {
    Config config = load(resource(resources, properties.getPolicies()), properties.getPolicies());
    RateLimiter.Builder builder = RateLimiter.builder(config).hook(hook.getIfAvailable());
    // Resolvers are beans, registered under their bean names (docs/http/java.md, Resolvers).
    beans.getBeansOfType(Resolvers.CostResolver.class).forEach(builder::costResolver);
    beans.getBeansOfType(Resolvers.LimitResolver.class).forEach(builder::limitResolver);
    beans.getBeansOfType(Resolvers.ModeResolver.class).forEach(builder::modeResolver);
    AsyncLimiter own = redis.getIfAvailable();
    List<String> nodes = properties.getRedisClusterNodes();
    if (nodes.isEmpty()) {
      String fromSpring = environment.getProperty("spring.data.redis.cluster.nodes");
      if (fromSpring != null && !fromSpring.isBlank()) {
        nodes = Arrays.stream(fromSpring.split(",")).map(String::strip).toList();
      }
    }
    if (own != null) {
      builder.redis(RedisConnection.of(own));
    } else if (properties.getRedisUrl() == null && !nodes.isEmpty()) {
      builder.redisCluster(nodes);
    } else {
      builder.redisUrl(redisUrl(properties, environment));
    }
    return builder.build();
  }

  /**
   * Once every bean is made, before the web server takes requests: waits (at most 10 s) for the
   * Redis connection the limiter has been opening in the background meanwhile, so the first
   * requests are checked rather than meeting the fail mode. A Redis that is down does not hold the
   * start: a refused connection ends the wait at once, an unreachable one after the timeout.
   */
  @Bean
  public SmartInitializingSingleton librlConnected(RateLimiter limiter) {
    return () -> limiter.awaitConnection(Duration.ofSeconds(10));
  }

  private static String redisUrl(LibrlProperties properties, Environment environment) {
    if (properties.getRedisUrl() != null) {
      return properties.getRedisUrl();
    }
    String url = environment.getProperty("spring.data.redis.url");
    if (url != null && !url.isBlank()) {
      return url;
    }
    return "redis://"
        + environment.getProperty("spring.data.redis.host", "127.0.0.1")
        + ":"
        + environment.getProperty("spring.data.redis.port", "6379");
  }

  /**
   * {@code classpath:...}, {@code file:...} or any URL as Spring resolves it; a bare path is a
   * file (the environment variable {@code LIBRL_POLICIES=/etc/librl/policies.yaml} binds to {@code
   * librl.policies} as such).
   */
  static Resource resource(ResourceLoader resources, String location) {
    if (location.startsWith(ResourceLoader.CLASSPATH_URL_PREFIX) || ResourceUtils.isUrl(location)) {
      return resources.getResource(location);
    }
    return new FileSystemResource(location);
  }

  /** The policy file; a missing or unreadable one is a start-up error at {@code (file)}. */
  static Config load(Resource resource, String location) {
    if (!resource.exists()) {
      throw new ConfigException(
          "(file)", location + " does not exist (librl.policies names the policy file)");
    }
    try (InputStream in = resource.getInputStream()) {
      return Config.load(in, location);
    } catch (IOException e) {
      throw new ConfigException("(file)", "cannot read " + location + ": " + e.getMessage());
    }
  }

  /**
   * Spring MVC, or any servlet application. {@code librl.filter.enabled=false} keeps the limiter
   * and drops the filter (a gateway that limits through its routes' filters only).
   */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnProperty(prefix = "librl.filter", name = "enabled", matchIfMissing = true)
  @ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.SERVLET)
  @ConditionalOnClass(name = "jakarta.servlet.Filter")
  static class Servlet {
    @Bean
    @ConditionalOnMissingBean
    ServletUserResolver librlServletUserResolver() {
      return request -> Principals.user(request.getUserPrincipal());
    }

    @Bean
    LibrlServletFilter librlServletFilter(
        RateLimiter limiter, ServletUserResolver users, ApplicationContext context) {
      return new LibrlServletFilter(limiter, users, context);
    }

    @Bean
    FilterRegistrationBean<LibrlServletFilter> librlServletFilterRegistration(
        LibrlServletFilter filter, LibrlProperties properties) {
      FilterRegistrationBean<LibrlServletFilter> registration = new FilterRegistrationBean<>(filter);
      registration.setOrder(properties.getFilterOrder());
      registration.setDispatcherTypes(DispatcherType.REQUEST);
      registration.setName("librl");
      return registration;
    }
  }

  /** Spring WebFlux; {@code librl.filter.enabled=false} as above. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnProperty(prefix = "librl.filter", name = "enabled", matchIfMissing = true)
  @ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.REACTIVE)
  static class Reactive {
    @Bean
    @ConditionalOnMissingBean
    ReactiveUserResolver librlReactiveUserResolver() {
      return exchange -> exchange.getPrincipal().flatMap(p -> Mono.justOrEmpty(Principals.user(p)));
    }

    @Bean
    LibrlWebFilter librlWebFilter(
        RateLimiter limiter,
        ReactiveUserResolver users,
        ApplicationContext context,
        LibrlProperties properties) {
      return new LibrlWebFilter(limiter, users, context, properties.getFilterOrder());
    }
  }
}
