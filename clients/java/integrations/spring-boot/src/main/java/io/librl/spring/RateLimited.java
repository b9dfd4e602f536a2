package io.librl.spring;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * A handler's own policies (docs/http/java.md, Per handler): the requests a Spring MVC or WebFlux
 * handler method serves are checked against the policies of the policy file with these names, in
 * this order, all together, instead of the file's {@code routes}. On a controller class it covers
 * every handler method of it that has none of its own. A name the file does not define stops the
 * application's start.
 *
 * <pre>{@code
 * @RateLimited({"ip-second", "search"})
 * @GetMapping("/search")
 * List<Result> search(@RequestParam String q) { ... }
 * }</pre>
 */
@Target({ElementType.METHOD, ElementType.TYPE})
@Retention(RetentionPolicy.RUNTIME)
@Documented
public @interface RateLimited {
  /** Names of policies in the policy file; empty: the handler is not limited at all. */
  String[] value();
}
