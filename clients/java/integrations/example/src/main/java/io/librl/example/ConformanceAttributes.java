package io.librl.example;

import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import org.springframework.boot.autoconfigure.condition.ConditionalOnWebApplication;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.Ordered;
import org.springframework.core.annotation.Order;
import org.springframework.web.filter.OncePerRequestFilter;
import org.springframework.web.server.WebFilter;

/**
 * {@code X-Conformance-Attribute: NAME=VALUE} (conformance/README.md): the request attribute NAME
 * set to the string VALUE (split at the first {@code =}) by the application's own code before
 * librl's filter runs, where each web stack keeps per-request values (docs/http.md, Request
 * attributes): the servlet request's attributes, the WebFlux exchange's.
 */
public final class ConformanceAttributes {
  private ConformanceAttributes() {}

  /** NAME and VALUE of the header's value, or null when it has no {@code =}. */
  static String[] split(String header) {
    String text = Security.utf8(header);
    int eq = text == null ? -1 : text.indexOf('=');
    return eq < 0 ? null : new String[] {text.substring(0, eq), text.substring(eq + 1)};
  }

  /** Spring MVC: a filter before every other. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.SERVLET)
  static class Servlet {
    @Bean
    FilterRegistrationBean<OncePerRequestFilter> conformanceAttribute() {
      FilterRegistrationBean<OncePerRequestFilter> registration =
          new FilterRegistrationBean<>(
              new OncePerRequestFilter() {
                @Override
                protected void doFilterInternal(
                    HttpServletRequest request, HttpServletResponse response, FilterChain chain)
                    throws ServletException, IOException {
                  String[] pair = split(request.getHeader("X-Conformance-Attribute"));
                  if (pair != null) {
                    request.setAttribute(pair[0], pair[1]);
                  }
                  chain.doFilter(request, response);
                }
              });
      registration.setOrder(Ordered.HIGHEST_PRECEDENCE);
      registration.setName("conformance-attribute");
      return registration;
    }
  }

  /** WebFlux: a WebFilter before every other. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.REACTIVE)
  static class Reactive {
    @Bean
    @Order(Ordered.HIGHEST_PRECEDENCE)
    WebFilter conformanceAttribute() {
      return (exchange, chain) -> {
        String[] pair = split(exchange.getRequest().getHeaders().getFirst("X-Conformance-Attribute"));
        if (pair != null) {
          exchange.getAttributes().put(pair[0], pair[1]);
        }
        return chain.filter(exchange);
      };
    }
  }
}
