package io.librl.example;

import io.librl.http.RateLimiter;
import java.util.HashMap;
import java.util.Map;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;

/**
 * The app {@code scripts/serve-example java} serves (docs/http.md, Conformance and examples):
 * Spring MVC on Tomcat, every path and method answering {@code ok}, behind librl's starter, with
 * Spring Security authenticating {@code X-Conformance-User}. Its environment: {@code
 * LIBRL_POLICIES} (the policy file), {@code PORT}, {@code HOST} (default 127.0.0.1), {@code
 * REDIS_URL} or {@code REDIS_CLUSTER_NODES}, and {@code LIBRL_WEB=reactive} for the same app on
 * WebFlux ({@code scripts/serve-example java-webflux}). {@code SIGHUP} reloads the policy file.
 */
@SpringBootApplication
public class ExampleApplication {
  public static void main(String[] args) {
    Map<String, Object> props = new HashMap<>();
    String policies = System.getenv("LIBRL_POLICIES");
    if (policies != null) {
      props.put("librl.policies", policies);
    }
    props.put("server.port", env("PORT", "8080"));
    props.put("spring.main.web-application-type", env("LIBRL_WEB", "servlet"));
    props.put("server.address", env("HOST", "127.0.0.1"));
    String nodes = System.getenv("REDIS_CLUSTER_NODES");
    if (nodes != null && !nodes.isBlank()) {
      props.put("librl.redis-cluster-nodes", nodes);
    } else {
      props.put("librl.redis-url", env("REDIS_URL", "redis://127.0.0.1:6379"));
    }
    SpringApplication app = new SpringApplication(ExampleApplication.class);
    app.setDefaultProperties(props);
    RateLimiter limiter = app.run(args).getBean(RateLimiter.class);
    if (policies != null) {
      Reloads.onHangup(limiter, policies);
    }
  }

  private static String env(String name, String fallback) {
    String v = System.getenv(name);
    return v == null || v.isEmpty() ? fallback : v;
  }
}
