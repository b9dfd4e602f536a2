package io.librl.spring;

import org.springframework.web.server.ServerWebExchange;
import reactor.core.publisher.Mono;

/**
 * Where {@code key: user} finds a WebFlux request's user (docs/http.md, Identity). Declare one as
 * a bean to replace the default, which is the exchange's principal: Spring Security's
 * authenticated user (anonymous is no user).
 */
@FunctionalInterface
public interface ReactiveUserResolver {
  /** The user's name; empty for no user. */
  Mono<String> user(ServerWebExchange exchange);
}
