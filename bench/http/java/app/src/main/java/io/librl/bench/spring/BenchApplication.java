package io.librl.bench.spring;

import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * make bench-http's Spring MVC app (bench/README.md, "make bench-http"): the routes {@code /open}
 * and {@code /half} on Tomcat, served one of four ways, chosen by the first argument:
 *
 * <ul>
 *   <li>{@code none}: no limiter
 *   <li>{@code librl}: librl's Spring Boot starter (its servlet filter) on the policies file
 *   <li>{@code peer}: Bucket4j with its Lettuce proxy manager, a servlet filter per route
 *       ({@link Bucket4jPeer})
 *   <li>{@code floor}: a bare handler sending the same RL.ALL through the same client ({@link
 *       Floor})
 * </ul>
 *
 * <p>Env: PORT, REDIS_URL, LIBRL_POLICIES (the policies file the driver writes), BENCH_WARMUP
 * (requests per route before PORT opens, default 5,000; 0: none). The limits are that file's:
 * /open 1,000,000,000 a minute per client address (never refuses), /half 1 per 10 s per X-Client
 * header (the load sends a fresh subject and a spent one in turn).
 */
@SpringBootApplication
public class BenchApplication {
  static final Set<String> VARIANTS = Set.of("none", "librl", "peer", "floor");

  public static void main(String[] args) throws Exception {
    if (args.length != 1 || !VARIANTS.contains(args[0])) {
      System.err.println("usage: BenchApplication none|librl|peer|floor");
      System.exit(2);
    }
    int warmup = Integer.parseInt(env("BENCH_WARMUP", "5000"));
    if (warmup > 0) {
      // The JIT compiles the request path while the same app serves a warm-up on a port of its
      // own; the compiled code outlives that context, so the app the driver measures starts warm.
      try (ConfigurableApplicationContext first = start(args[0], "0")) {
        WarmUp.run(Integer.parseInt(first.getEnvironment().getRequiredProperty("local.server.port")), warmup);
      }
    }
    start(args[0], env("PORT", "8080"));
  }

  private static ConfigurableApplicationContext start(String variant, String port) {
    Map<String, Object> props = new HashMap<>();
    props.put("bench.variant", variant);
    props.put("bench.redis-url", env("REDIS_URL", "redis://127.0.0.1:6379"));
    props.put("server.port", port);
    props.put("server.address", "127.0.0.1");
    // The starter is on every variant's classpath; only the librl app turns it on.
    props.put("librl.enabled", Boolean.toString(variant.equals("librl")));
    props.put("librl.policies", env("LIBRL_POLICIES", "policies.json"));
    props.put("librl.redis-url", env("REDIS_URL", "redis://127.0.0.1:6379"));
    SpringApplication app = new SpringApplication(BenchApplication.class);
    app.setDefaultProperties(props);
    return app.run();
  }

  private static String env(String name, String fallback) {
    String v = System.getenv(name);
    return v == null || v.isEmpty() ? fallback : v;
  }
}
