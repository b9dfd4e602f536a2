package io.librl.spring;

import jakarta.servlet.http.HttpServletRequest;

/**
 * Where {@code key: user} finds a Spring MVC request's user (docs/http.md, Identity). Declare one
 * as a bean to replace the default, which is the request's principal: Spring Security's
 * authenticated user (anonymous is no user), or the servlet container's.
 */
@FunctionalInterface
public interface ServletUserResolver {
  /** The user's name, or null for no user. */
  String user(HttpServletRequest request);
}
