package io.librl.spring;

import io.librl.http.RateLimiter;
import io.librl.http.Routes;
import java.lang.reflect.Method;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import org.springframework.core.annotation.AnnotatedElementUtils;

/**
 * The handler methods that carry {@link RateLimited}, each with the routes (its named policies)
 * it is checked with, built when the application starts so that a name the policy file lacks
 * stops the start (a {@link io.librl.http.ConfigException} at {@code
 * @RateLimited(<class>.<method>)[i]}).
 */
final class Handlers {
  private final Map<Method, Routes> annotated = new HashMap<>();

  /** Adds a handler method; nothing when neither it nor its class carries the annotation. */
  void add(RateLimiter limiter, Method method, Class<?> beanType) {
    RateLimited on = AnnotatedElementUtils.findMergedAnnotation(method, RateLimited.class);
    if (on == null) {
      on = AnnotatedElementUtils.findMergedAnnotation(beanType, RateLimited.class);
    }
    if (on == null) {
      return;
    }
    String where = "@RateLimited(" + beanType.getName() + "." + method.getName() + ")";
    annotated.put(method, limiter.named(Arrays.asList(on.value()), where));
  }

  boolean isEmpty() {
    return annotated.isEmpty();
  }

  /** The handler's own routes, or null when it has none. */
  Routes of(Method method) {
    return annotated.get(method);
  }
}
