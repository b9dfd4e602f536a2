package io.librl.example;

import io.librl.http.Config;
import io.librl.http.Resolvers;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Locale;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The test resolvers every example app registers (conformance/README.md, What the app behind the
 * middleware does), as Spring beans named as the file names them: {@code conformance-cost} reads
 * {@code X-Conformance-Cost}, {@code conformance-limit} {@code X-Conformance-Limit: <limit>/<window
 * ms>[/<burst>]}, {@code conformance-mode} {@code X-Conformance-Mode}.
 */
@Configuration(proxyBeanMethods = false)
public class ConformanceResolvers {

  /** The header's integer (absent: 1); any other text is no integer, which the integration refuses. */
  @Bean("conformance-cost")
  Resolvers.CostResolver conformanceCost() {
    return request -> {
      String text = header(request, "X-Conformance-Cost");
      if (text == null) {
        return 1L;
      }
      try {
        return Long.parseLong(text);
      } catch (NumberFormatException e) {
        return null;
      }
    };
  }

  /** {@code <limit>/<window ms>} or {@code <limit>/<window ms>/<burst>}; absent: nothing. */
  @Bean("conformance-limit")
  Resolvers.LimitResolver conformanceLimit() {
    return request -> {
      String text = header(request, "X-Conformance-Limit");
      if (text == null) {
        return null;
      }
      String[] parts = text.split("/");
      return new Resolvers.Limit(
          Long.parseLong(parts[0]),
          Duration.ofMillis(Long.parseLong(parts[1])),
          parts.length > 2 ? Long.valueOf(parts[2]) : null);
    };
  }

  /** {@code enforce}, {@code shadow} or {@code off}; absent: enforce. */
  @Bean("conformance-mode")
  Resolvers.ModeResolver conformanceMode() {
    return request -> {
      String text = header(request, "X-Conformance-Mode");
      return text == null ? Config.Mode.ENFORCE : Config.Mode.valueOf(text.toUpperCase(Locale.ROOT));
    };
  }

  private static String header(io.librl.http.Plan.Request request, String name) {
    byte[] value = request.headers().value(name);
    return value == null ? null : new String(value, StandardCharsets.ISO_8859_1);
  }
}
