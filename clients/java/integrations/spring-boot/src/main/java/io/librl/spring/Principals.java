package io.librl.spring;

import java.security.Principal;
import org.springframework.util.ClassUtils;

/** A principal's name as a user, or null when it is no user (Spring Security's anonymous one). */
final class Principals {
  private Principals() {}

  private static final boolean SECURITY =
      ClassUtils.isPresent(
          "org.springframework.security.authentication.AuthenticationTrustResolverImpl",
          Principals.class.getClassLoader());

  static String user(Principal principal) {
    if (principal == null) {
      return null;
    }
    if (SECURITY && Security.anonymous(principal)) {
      return null;
    }
    String name = principal.getName();
    return name == null || name.isEmpty() ? null : name;
  }

  /** Loaded only when Spring Security is there. */
  private static final class Security {
    private static final org.springframework.security.authentication.AuthenticationTrustResolver
        TRUST = new org.springframework.security.authentication.AuthenticationTrustResolverImpl();

    static boolean anonymous(Principal principal) {
      if (principal instanceof org.springframework.security.core.Authentication a) {
        return TRUST.isAnonymous(a) || !a.isAuthenticated();
      }
      return false;
    }
  }
}
