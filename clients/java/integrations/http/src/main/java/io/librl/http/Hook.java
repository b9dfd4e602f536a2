package io.librl.http;

import io.librl.Decision;
import java.util.List;

/**
 * The decision hook (docs/http.md, Decision hook): one call per checked request with the subject,
 * each policy's decision and the outcome, for logs and metrics. docs/http/java.md shows a
 * Micrometer counter fed by it.
 */
public final class Hook {
  private Hook() {}

  /** What happened to a checked request. */
  public enum Outcome {
    ALLOWED,
    DENIED,
    /** Shadow mode: a denial that let the request pass. */
    WOULD_DENY,
    /** Redis could not answer; the request passed unchecked. */
    FAIL_OPEN,
    /** Redis could not answer; the request was refused with 503. */
    FAIL_CLOSED;

    /** {@code allowed}, {@code denied}, {@code would_deny}, {@code fail_open}, {@code fail_closed}. */
    public String label() {
      return name().toLowerCase(java.util.Locale.ROOT);
    }

    static Outcome of(boolean admitted, Config.Mode mode) {
      if (admitted) {
        return ALLOWED;
      }
      return mode == Config.Mode.SHADOW ? WOULD_DENY : DENIED;
    }

    /**
     * The outcome of checks and their replies (docs/http.md, Shadow mode): denied when an
     * enforced check denied ({@code would_deny} in a shadow request), would_deny when only shadow
     * checks did, else allowed.
     */
    static Outcome of(List<Plan.Check> checks, List<Decision> replies, Config.Mode mode) {
      boolean enforcedDenied = false;
      boolean shadowDenied = false;
      for (int i = 0; i < replies.size(); i++) {
        if (!replies.get(i).allowed()) {
          if (checks.get(i).shadow()) {
            shadowDenied = true;
          } else {
            enforcedDenied = true;
          }
        }
      }
      if (enforcedDenied) {
        return of(false, mode);
      }
      return shadowDenied ? WOULD_DENY : ALLOWED;
    }
  }

  /**
   * One policy's part in the decision.
   *
   * @param policy its name
   * @param subject the key's middle part, e.g. {@code ip:203.0.113.7}
   * @param key the limiter key
   * @param cost what this request cost against it
   * @param decision the module's reply; null when Redis could not answer
   */
  public record CheckReport(String policy, String subject, String key, long cost, Decision decision) {}

  /**
   * Everything the hook learns about one checked request.
   *
   * @param outcome what happened
   * @param local decided in this process (the {@code local} fail mode), not by Redis
   * @param method the request's method; null where the framework gives none (Spring Cloud Gateway's
   *     rate limiter)
   * @param path the request's path as the framework handed it; null likewise
   * @param route the matched route's path, or null; the gateway route's id for Spring Cloud Gateway
   * @param checks one per checked policy, in check order
   * @param error why Redis could not answer, or null
   */
  public record DecisionEvent(
      Outcome outcome,
      boolean local,
      String method,
      String path,
      String route,
      List<CheckReport> checks,
      String error) {
    public DecisionEvent {
      checks = List.copyOf(checks);
    }
  }

  /**
   * Called once per checked request, after the decision and before the handler runs (or the
   * refusal is sent). An exception it throws is logged and the request goes on.
   */
  @FunctionalInterface
  public interface DecisionHook {
    void onDecision(DecisionEvent event);
  }

  private static final System.Logger LOG = System.getLogger("io.librl.http");

  /** Runs the hook; a hook that throws is logged and the request goes on. */
  static void call(DecisionHook hook, DecisionEvent event) {
    try {
      hook.onDecision(event);
    } catch (RuntimeException e) {
      LOG.log(System.Logger.Level.ERROR, "librl: the decision hook threw; the request goes on", e);
    }
  }
}
