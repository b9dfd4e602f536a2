package io.librl.example;

import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.springframework.boot.autoconfigure.condition.ConditionalOnWebApplication;
import org.springframework.boot.tomcat.TomcatConnectorCustomizer;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.security.authentication.UsernamePasswordAuthenticationToken;
import org.springframework.security.config.annotation.web.builders.HttpSecurity;
import org.springframework.security.config.web.server.SecurityWebFiltersOrder;
import org.springframework.security.config.web.server.ServerHttpSecurity;
import org.springframework.security.core.context.ReactiveSecurityContextHolder;
import org.springframework.security.core.context.SecurityContextHolder;
import org.springframework.security.web.SecurityFilterChain;
import org.springframework.security.web.authentication.AnonymousAuthenticationFilter;
import org.springframework.security.web.firewall.DefaultHttpFirewall;
import org.springframework.security.web.firewall.HttpFirewall;
import org.springframework.security.web.server.SecurityWebFilterChain;
import org.springframework.security.web.server.firewall.ServerWebExchangeFirewall;
import org.springframework.web.filter.OncePerRequestFilter;
import org.springframework.web.server.WebFilter;

/**
 * Spring Security as an application has it: {@code X-Conformance-User: NAME} authenticates NAME
 * (docs/http.md, Conformance and examples: the framework's own idiom), every request is
 * permitted. The firewalls and Tomcat let every spelling of a path through to the handler
 * ({@code //}, {@code ;}, {@code %2F}), so the conformance cases test librl's canonical path
 * rather than being refused first (docs/http/java.md, Paths).
 */
public final class Security {
  private Security() {}

  /** Spring MVC. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.SERVLET)
  static class Servlet {
    @Bean
    SecurityFilterChain chain(HttpSecurity http) throws Exception {
      return http.csrf(c -> c.disable())
          .authorizeHttpRequests(a -> a.anyRequest().permitAll())
          .addFilterBefore(new ConformanceUser(), AnonymousAuthenticationFilter.class)
          .build();
    }

    @Bean
    HttpFirewall firewall() {
      DefaultHttpFirewall firewall = new DefaultHttpFirewall();
      firewall.setAllowUrlEncodedSlash(true);
      return firewall;
    }

    @Bean
    TomcatConnectorCustomizer encodedSlashes() {
      return connector -> connector.setEncodedSolidusHandling("passthrough");
    }
  }

  /** WebFlux. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.REACTIVE)
  static class Reactive {
    @Bean
    SecurityWebFilterChain chain(ServerHttpSecurity http) {
      return http.csrf(c -> c.disable())
          .authorizeExchange(a -> a.anyExchange().permitAll())
          .addFilterAt(conformanceUser(), SecurityWebFiltersOrder.AUTHENTICATION)
          .build();
    }

    @Bean
    ServerWebExchangeFirewall firewall() {
      return ServerWebExchangeFirewall.INSECURE_NOOP;
    }

    /** {@code X-Conformance-User: NAME}: authenticated as NAME for the rest of the chain. */
    private static WebFilter conformanceUser() {
      return (exchange, chain) -> {
        String user = utf8(exchange.getRequest().getHeaders().getFirst("X-Conformance-User"));
        if (user == null || user.isEmpty()) {
          return chain.filter(exchange);
        }
        return chain
            .filter(exchange)
            .contextWrite(
                ReactiveSecurityContextHolder.withAuthentication(
                    UsernamePasswordAuthenticationToken.authenticated(user, null, List.of())));
      };
    }
  }

  /**
   * The header's bytes as UTF-8: Tomcat and Netty hand header values as Latin-1 text, one char per
   * byte (conformance/README.md: a non-ASCII name is the same user everywhere).
   */
  static String utf8(String latin1) {
    return latin1 == null
        ? null
        : new String(latin1.getBytes(StandardCharsets.ISO_8859_1), StandardCharsets.UTF_8);
  }

  /** {@code X-Conformance-User: NAME}: authenticated as NAME. */
  static final class ConformanceUser extends OncePerRequestFilter {
    @Override
    protected void doFilterInternal(
        HttpServletRequest request, HttpServletResponse response, FilterChain chain)
        throws ServletException, IOException {
      String user = utf8(request.getHeader("X-Conformance-User"));
      if (user != null && !user.isEmpty()) {
        SecurityContextHolder.getContext()
            .setAuthentication(UsernamePasswordAuthenticationToken.authenticated(user, null, List.of()));
      }
      chain.doFilter(request, response);
    }
  }
}
