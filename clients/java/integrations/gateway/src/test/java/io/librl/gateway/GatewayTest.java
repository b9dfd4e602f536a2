package io.librl.gateway;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.librl.http.Config;
import io.librl.http.ConfigException;
import io.librl.http.RateLimiter;
import io.librl.http.TestRedis;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.web.server.context.WebServerApplicationContext;
import org.springframework.cloud.gateway.filter.ratelimit.KeyResolver;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Mono;

/**
 * A real Spring Cloud Gateway on Netty whose {@code RequestRateLimiter} filters use librl: one
 * route configured as {@code RedisRateLimiter} was ({@code replenish-rate}, {@code
 * burst-capacity}), one naming a policy of the file; the key from a {@code KeyResolver}.
 */
class GatewayTest {
  /**
   * HTTP/1.1 without an h2c upgrade attempt, and a deadline per request: a request to the gateway
   * once hung a whole build (a loaded machine; the upgrade is the suspect), where it should fail.
   */
  private static final HttpClient CLIENT =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
  private static ConfigurableApplicationContext app;
  private static int port;
  private static Path policies;

  @BeforeAll
  static void start() throws Exception {
    policies = Files.createTempFile("librl-gateway", ".yaml");
    policies.toFile().deleteOnExit();
    Files.writeString(
        policies,
        "prefix: \"gw:\"\npolicies:\n  - {name: per-minute, algorithm: fixed, limit: 1, window: 60s, key: ip}\n"
            + "  - {name: by-size, algorithm: fixed, limit: 100, window: 60s, key: ip, cost: body-bytes}\n"
            + "  - {name: slots, algorithm: concurrency, limit: 5, lease: 60s}\n");
    String r = "spring.cloud.gateway.server.webflux.routes";
    app =
        new SpringApplicationBuilder(GatewayApp.class)
            .properties(
                "server.port=0",
                "server.address=127.0.0.1",
                "spring.main.banner-mode=off",
                "librl.policies=" + policies,
                "librl.redis-url=" + TestRedis.url(),
                // Only the routes' filters limit here: no policy file routes for every request.
                "librl.filter.enabled=false",
                r + "[0].id=bucket",
                r + "[0].uri=forward:/",
                r + "[0].predicates[0]=Path=/bucket",
                r + "[0].filters[0].name=RequestRateLimiter",
                r + "[0].filters[0].args[librl.replenish-rate]=1",
                r + "[0].filters[0].args[librl.burst-capacity]=2",
                r + "[0].filters[1]=SetPath=/ok",
                r + "[1].id=named",
                r + "[1].uri=forward:/",
                r + "[1].predicates[0]=Path=/named",
                r + "[1].filters[0].name=RequestRateLimiter",
                r + "[1].filters[0].args[librl.policies]=per-minute",
                r + "[1].filters[1]=SetPath=/ok")
            .run();
    port = ((WebServerApplicationContext) app).getWebServer().getPort();
  }

  @AfterAll
  static void stop() {
    app.close();
  }

  private static HttpResponse<String> get(String path, String user) throws IOException, InterruptedException {
    return CLIENT.send(
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
            .header("X-User", user)
            .timeout(java.time.Duration.ofSeconds(30))
            .build(),
        HttpResponse.BodyHandlers.ofString());
  }

  @Test
  void redisRateLimitersArgumentsMakeATokenBucket() throws Exception {
    HttpResponse<String> first = get("/bucket", "alice");
    assertEquals(200, first.statusCode());
    assertEquals("ok", first.body());
    assertEquals("1", first.headers().firstValue("X-RateLimit-Remaining").orElse(null));
    assertEquals("1", first.headers().firstValue("X-RateLimit-Replenish-Rate").orElse(null));
    assertEquals("2", first.headers().firstValue("X-RateLimit-Burst-Capacity").orElse(null));
    assertEquals("1", first.headers().firstValue("X-RateLimit-Requested-Tokens").orElse(null));
    assertTrue(first.headers().firstValue("RateLimit-Policy").isPresent());
    assertEquals(200, get("/bucket", "alice").statusCode());
    HttpResponse<String> third = get("/bucket", "alice");
    assertEquals(429, third.statusCode());
    assertEquals("0", third.headers().firstValue("X-RateLimit-Remaining").orElse(null));
    assertEquals("1", third.headers().firstValue("Retry-After").orElse(null));
    assertEquals(200, get("/bucket", "bob").statusCode());
    assertEquals(":1", TestRedis.command("EXISTS", "gw:{key:alice}:bucket"));
  }

  @Test
  void aRouteCanNameThePolicyFilesPolicies() throws Exception {
    assertEquals(200, get("/named", "carol").statusCode());
    assertEquals(429, get("/named", "carol").statusCode());
    assertEquals(":1", TestRedis.command("EXISTS", "gw:{key:carol}:per-minute"));
  }

  @Test
  void badRouteArgumentsNameTheirPath() throws Exception {
    try (RateLimiter limiter =
        RateLimiter.builder(Config.load(policies)).redisUrl(TestRedis.url()).build()) {
      ConfigException unknown =
          assertThrows(
              ConfigException.class,
              () -> new LibrlGatewayRateLimiter.Config().setPolicies(List.of("nope")).resolve("r", limiter));
      assertEquals(
          "librl: configuration: gateway.routes[r].librl.policies[0]: no policy is named \"nope\"",
          unknown.getMessage());
      ConfigException bodyBytes =
          assertThrows(
              ConfigException.class,
              () -> new LibrlGatewayRateLimiter.Config().setPolicies(List.of("by-size")).resolve("r", limiter));
      assertTrue(bodyBytes.getMessage().startsWith("librl: configuration: gateway.routes[r].librl.policies[0]: "));
      ConfigException slots =
          assertThrows(
              ConfigException.class,
              () -> new LibrlGatewayRateLimiter.Config().setPolicies(List.of("slots")).resolve("r", limiter));
      assertEquals(
          "librl: configuration: gateway.routes[r].librl.policies[0]: policy \"slots\" is a concurrency"
              + " policy, which the gateway's rate limiter cannot release; limit it with the starter's WebFilter",
          slots.getMessage());
      ConfigException both =
          assertThrows(
              ConfigException.class,
              () ->
                  new LibrlGatewayRateLimiter.Config()
                      .setPolicies(List.of("per-minute"))
                      .setReplenishRate(5L)
                      .resolve("r", limiter));
      assertTrue(both.getMessage().startsWith("librl: configuration: gateway.routes[r].librl: "));
      ConfigException zero =
          assertThrows(
              ConfigException.class,
              () -> new LibrlGatewayRateLimiter.Config().setReplenishRate(0L).resolve("r", limiter));
      assertEquals(
          "librl: configuration: gateway.routes[r].librl.replenish-rate: must be an integer from 1 to 1125899906842624",
          zero.getMessage());
    }
  }

  @SpringBootConfiguration
  @EnableAutoConfiguration
  @Import(GatewayApp.Backend.class)
  static class GatewayApp {
    /** The key RedisRateLimiter users resolve: here, a header. */
    @Bean
    KeyResolver userKey() {
      return exchange -> Mono.justOrEmpty(exchange.getRequest().getHeaders().getFirst("X-User"));
    }

    /** What the routes forward to. */
    @RestController
    static class Backend {
      @GetMapping("/ok")
      Mono<String> ok() {
        return Mono.just("ok");
      }
    }
  }
}
