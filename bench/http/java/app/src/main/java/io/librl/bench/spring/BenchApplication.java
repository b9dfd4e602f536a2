package io.librl.bench.spring;

import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import org.apache.catalina.Service;
import org.apache.catalina.connector.Connector;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.tomcat.TomcatWebServer;
import org.springframework.boot.web.server.context.WebServerApplicationContext;
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
 * (at most this many requests per route before PORT opens, default 20,000; 0: none). The limits are that file's:
 * /open 1,000,000,000 a minute per client address (never refuses), /half 1 per 10 s per X-Client
 * header (the load sends a fresh subject and a spent one in turn).
 *
 * <p>The JIT needs more requests than the driver's warm-up run sends, so the app first serves its
 * own warm-up on a port of its own, then opens PORT on a second connector of the same Tomcat,
 * made as Spring Boot makes its first, and closes the first: one application context throughout,
 * so the code compiled during the warm-up is the code that serves the measured requests.
 */
@SpringBootApplication
public class BenchApplication {
  static final Set<String> VARIANTS = Set.of("none", "librl", "peer", "floor");

  public static void main(String[] args) throws Exception {
    if (args.length != 1 || !VARIANTS.contains(args[0])) {
      System.err.println("usage: BenchApplication none|librl|peer|floor");
      System.exit(2);
    }
    int warmup = Integer.parseInt(env("BENCH_WARMUP", "20000"));
    String port = env("PORT", "8080");
    ConfigurableApplicationContext context = start(args[0], warmup > 0 ? "0" : port);
    if (warmup > 0) {
      Service service =
          ((TomcatWebServer) ((WebServerApplicationContext) context).getWebServer()).getTomcat().getService();
      Connector first = service.findConnectors()[0];
      WarmUp.run(first.getLocalPort(), warmup);
      service.addConnector(context.getBean(BenchTomcat.class).connector(Integer.parseInt(port)));
      service.removeConnector(first);
    }
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
