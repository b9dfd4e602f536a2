package io.librl.spring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.librl.http.TestRedis;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
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
import org.springframework.security.config.annotation.web.builders.HttpSecurity;
import org.springframework.security.core.userdetails.User;
import org.springframework.security.provisioning.InMemoryUserDetailsManager;
import org.springframework.security.web.SecurityFilterChain;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.servlet.mvc.method.annotation.StreamingResponseBody;

/**
 * The starter in a real Spring MVC application on Tomcat, with Spring Security's HTTP Basic users:
 * the file's routes count the authenticated user, a {@link RateLimited} handler its own policies.
 */
class ServletFilterTest {
  private static ConfigurableApplicationContext app;
  private static int port;

  @BeforeAll
  static void start() throws Exception {
    app =
        new SpringApplicationBuilder(MvcApp.class)
            .properties(
                "server.port=0",
                "server.address=127.0.0.1",
                "spring.main.web-application-type=servlet",
                "spring.main.banner-mode=off",
                "librl.policies=" + Http.policies("mvc:"),
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
    HttpResponse<String> second = Http.get(port, "/limited", "alice");
    assertEquals(200, second.statusCode());
    assertEquals("0", second.headers().firstValue("X-RateLimit-Remaining").orElse(null));
    HttpResponse<String> third = Http.get(port, "/limited", "alice");
    assertEquals(429, third.statusCode());
    assertTrue(third.headers().firstValue("Content-Type").orElse("").startsWith("application/problem+json"));
    assertTrue(third.body().contains("Rate limit \\\"per-user\\\" (2 per 60s) exceeded"), third.body());
    // Another user has a counter of its own.
    assertEquals(200, Http.get(port, "/limited", "bob").statusCode());
    assertEquals(":1", TestRedis.command("EXISTS", "mvc:{user:bob}:per-user"));
  }

  @Test
  void annotatedHandlerIsCheckedWithItsOwnPolicies() throws Exception {
    HttpResponse<String> first = Http.get(port, "/search", null);
    assertEquals(200, first.statusCode());
    assertEquals("\"search\";q=1;w=60", first.headers().firstValue("RateLimit-Policy").orElse(null));
    assertEquals(429, Http.get(port, "/search", null).statusCode());
  }

  @Test
  void streamedResponseHoldsItsSlotUntilItEnds() throws Exception {
    Http.streamHoldsItsSlot(port, "/stream", "mvc:{ip:127.0.0.1}:slots", MvcApp.Endpoints.GATE);
  }

  @Test
  void pathsNoRouteCoversAreNotChecked() throws Exception {
    HttpResponse<String> free = Http.get(port, "/free", "alice");
    assertEquals(200, free.statusCode());
    assertNull(free.headers().firstValue("RateLimit-Policy").orElse(null));
  }

  @SpringBootConfiguration
  @EnableAutoConfiguration
  @Import(MvcApp.Endpoints.class)
  static class MvcApp {
    @Bean
    SecurityFilterChain chain(HttpSecurity http) throws Exception {
      return http.authorizeHttpRequests(a -> a.anyRequest().permitAll())
          .httpBasic(Customizer.withDefaults())
          .build();
    }

    @Bean
    InMemoryUserDetailsManager users() {
      return new InMemoryUserDetailsManager(
          User.withUsername("alice").password("{noop}pw").build(),
          User.withUsername("bob").password("{noop}pw").build());
    }

    @RestController
    static class Endpoints {
      @GetMapping("/limited")
      String limited() {
        return "ok";
      }

      @RateLimited("search")
      @GetMapping("/search")
      String search() {
        return "ok";
      }

      @GetMapping("/free")
      String free() {
        return "ok";
      }

      /** Completed by the test: the stream's body is written then. */
      static final CompletableFuture<Void> GATE = new CompletableFuture<>();

      /** An asynchronous response: the servlet filter returns before its body is written. */
      @RateLimited("slots")
      @GetMapping("/stream")
      StreamingResponseBody stream() {
        return out -> {
          GATE.join();
          out.write("ok".getBytes(StandardCharsets.UTF_8));
        };
      }
    }
  }
}
