package io.librl.spring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.librl.http.Config;
import io.librl.http.ConfigException;
import io.librl.http.RateLimiter;
import io.librl.http.TestRedis;
import java.net.http.HttpResponse;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.web.server.context.WebServerApplicationContext;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.security.config.Customizer;
import org.springframework.security.config.web.server.ServerHttpSecurity;
import org.springframework.security.core.userdetails.MapReactiveUserDetailsService;
import org.springframework.security.core.userdetails.User;
import org.springframework.security.web.server.SecurityWebFilterChain;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The starter in a real WebFlux application on Netty, with Spring Security's HTTP Basic users:
 * the same behaviour as on Spring MVC, through the {@code WebFilter}.
 */
class WebFilterTest {
  private static ConfigurableApplicationContext app;
  private static int port;

  @BeforeAll
  static void start() throws Exception {
    app =
        new SpringApplicationBuilder(FluxApp.class)
            .properties(
                "server.port=0",
                "server.address=127.0.0.1",
                "spring.main.web-application-type=reactive",
                "spring.main.banner-mode=off",
                "librl.policies=" + Http.policies("flux:"),
                "librl.redis-url=" + TestRedis.url())
            .run();
    port = ((WebServerApplicationContext) app).getWebServer().getPort();
  }

  @AfterAll
  static void stop() {
    app.close();
  }

  @Test
  void fileRouteCountsSpringSecuritysUser() throws Exception {
    assertEquals(200, Http.get(port, "/limited", "alice").statusCode());
    assertEquals(200, Http.get(port, "/limited", "alice").statusCode());
    HttpResponse<String> third = Http.get(port, "/limited", "alice");
    assertEquals(429, third.statusCode());
    // What is left of the 60 s window the first request opened, in whole seconds.
    long retry = Long.parseLong(third.headers().firstValue("Retry-After").orElse("-1"));
    assertTrue(retry >= 1 && retry <= 60, "Retry-After " + retry);
    assertTrue(third.body().contains("\"status\":429"), third.body());
    assertEquals(200, Http.get(port, "/limited", "bob").statusCode());
    assertEquals(":1", TestRedis.command("EXISTS", "flux:{user:alice}:per-user"));
  }

  @Test
  void annotatedHandlerIsCheckedWithItsOwnPolicies() throws Exception {
    assertEquals(200, Http.get(port, "/search", null).statusCode());
    assertEquals(429, Http.get(port, "/search", null).statusCode());
  }

  @Test
  void pathsNoRouteCoversAreNotChecked() throws Exception {
    HttpResponse<String> free = Http.get(port, "/free", null);
    assertEquals(200, free.statusCode());
    assertNull(free.headers().firstValue("RateLimit").orElse(null));
  }

  /** An annotation naming a policy the file lacks stops the start, naming the handler. */
  @Test
  void annotationNamingAnUnknownPolicyIsAStartupError() throws Exception {
    Config config = Config.load(Http.policies("x:"));
    try (RateLimiter limiter = RateLimiter.builder(config).redisUrl(TestRedis.url()).build()) {
      ConfigException e =
          assertThrows(
              ConfigException.class,
              () -> new Handlers().add(limiter, Unknown.class.getDeclaredMethod("get"), Unknown.class));
      assertEquals(
          "librl: configuration: @RateLimited(" + Unknown.class.getName() + ".get)[1]: no policy is named \"nope\"",
          e.getMessage());
    }
  }

  @Test
  void streamedResponseHoldsItsSlotUntilItEnds() throws Exception {
    Http.streamHoldsItsSlot(port, "/stream", "flux:{ip:127.0.0.1}:slots", FluxApp.Endpoints.GATE);
  }

  static class Unknown {
    @RateLimited({"search", "nope"})
    String get() {
      return "ok";
    }
  }

  @SpringBootConfiguration
  @EnableAutoConfiguration
  @Import(FluxApp.Endpoints.class)
  static class FluxApp {
    @Bean
    SecurityWebFilterChain chain(ServerHttpSecurity http) {
      return http.authorizeExchange(a -> a.anyExchange().permitAll())
          .httpBasic(Customizer.withDefaults())
          .build();
    }

    @Bean
    MapReactiveUserDetailsService users() {
      return new MapReactiveUserDetailsService(
          User.withUsername("alice").password("{noop}pw").build(),
          User.withUsername("bob").password("{noop}pw").build());
    }

    @RestController
    static class Endpoints {
      @GetMapping("/limited")
      Mono<String> limited() {
        return Mono.just("ok");
      }

      @RateLimited("search")
      @GetMapping("/search")
      Mono<String> search() {
        return Mono.just("ok");
      }

      @GetMapping("/free")
      Mono<String> free() {
        return Mono.just("ok");
      }

      /** Completed by the test: the stream's last item comes then. */
      static final CompletableFuture<Void> GATE = new CompletableFuture<>();

      @RateLimited("slots")
      @GetMapping("/stream")
      Flux<String> stream() {
        return Flux.concat(Mono.just("o"), Mono.fromFuture(GATE).thenReturn("k"));
      }
    }
  }
}
