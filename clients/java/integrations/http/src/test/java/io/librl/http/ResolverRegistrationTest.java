package io.librl.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * A {@code code:<name>} limit, cost or mode names a resolver the application registers on the
 * builder (docs/http.md, Resolvers); one nobody registered stops the build naming its field.
 */
class ResolverRegistrationTest {
  @ParameterizedTest
  @CsvSource(
      delimiter = '|',
      value = {
        "{\"policies\":[{\"name\":\"p\",\"algorithm\":\"fixed\",\"limit\":\"code:plan\"}]}|policies[0].limit: no limit resolver is registered as \"plan\"",
        "{\"policies\":[{\"name\":\"p\",\"algorithm\":\"fixed\",\"limit\":5,\"window\":\"60s\",\"cost\":\"code:rows\"}]}|policies[0].cost: no cost resolver is registered as \"rows\"",
        "{\"mode\":\"code:switch\",\"policies\":[{\"name\":\"p\",\"algorithm\":\"fixed\",\"limit\":5,\"window\":\"60s\"}]}|mode: no mode resolver is registered as \"switch\""
      })
  void anUnregisteredResolverStopsTheBuildNamingItsField(String document, String message) {
    RateLimiter.Builder builder = RateLimiter.builder(Config.parse(document)).redisUrl("redis://127.0.0.1:1");
    ConfigException e = assertThrows(ConfigException.class, builder::build);
    assertEquals("librl: configuration: " + message, e.getMessage());
  }

  @Test
  void registeredResolversBuild() {
    Config config =
        Config.parse(
            "{\"mode\":\"code:switch\",\"policies\":[{\"name\":\"p\",\"algorithm\":\"fixed\","
                + "\"limit\":\"code:plan\",\"cost\":\"code:rows\"}]}");
    try (RateLimiter limiter =
        RateLimiter.builder(config)
            .redisUrl("redis://127.0.0.1:1")
            .limitResolver("plan", r -> Resolvers.Limit.of(5, Duration.ofMinutes(1)))
            .costResolver("rows", r -> 1L)
            .modeResolver("switch", r -> Config.Mode.ENFORCE)
            .build()) {
      assertEquals("plan", limiter.config().policies().get(0).limitResolver());
    }
  }
}
