package io.librl.http;

import io.librl.Decision;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Response headers (docs/http.md, Headers): the IETF RateLimit draft's {@code RateLimit-Policy}
 * and {@code RateLimit}, the legacy {@code X-RateLimit-*}, and {@code Retry-After} on a denial.
 */
public final class ResponseHeaders {
  private ResponseHeaders() {}

  /**
   * The index of the reply a client most needs to see, or -1 for none. Among denials, the longest
   * wait ("never" first). When all admit, the smallest share of its limit left, then the later
   * reset, then the first in check order.
   */
  public static int mostRestrictive(List<Decision> replies) {
    return mostRestrictive(null, replies, false);
  }

  /**
   * The same among checks of which some may be shadow (docs/http.md, Headers): for a refused
   * request, among the enforced checks' denials only, so that the refusal names a policy that
   * refused it; for a served one, among every denial (a shadow policy's would-be refusal).
   */
  public static int mostRestrictive(List<Plan.Check> checks, List<Decision> replies, boolean refused) {
    int denied = -1;
    for (int i = 0; i < replies.size(); i++) {
      Decision r = replies.get(i);
      if (!r.allowed()
          && !(refused && checks != null && checks.get(i).shadow())
          && (denied < 0 || waitOf(r) > waitOf(replies.get(denied)))) {
        denied = i;
      }
    }
    if (denied >= 0) {
      return denied;
    }
    int best = -1;
    for (int i = 0; i < replies.size(); i++) {
      if (best < 0 || tighter(replies.get(i), replies.get(best)) < 0) {
        best = i;
      }
    }
    return best;
  }

  private static long waitOf(Decision d) {
    return d.neverAdmits() ? Long.MAX_VALUE : d.retryAfter().toMillis();
  }

  /** Negative when {@code a} has less of its limit left than {@code b}, then when it resets later. */
  private static int tighter(Decision a, Decision b) {
    BigInteger leftA = BigInteger.valueOf(a.remaining()).multiply(BigInteger.valueOf(b.limit()));
    BigInteger leftB = BigInteger.valueOf(b.remaining()).multiply(BigInteger.valueOf(a.limit()));
    int c = leftA.compareTo(leftB);
    return c != 0 ? c : Long.compare(b.resetAfter().toMillis(), a.resetAfter().toMillis());
  }

  /**
   * The limit the headers and the problem body show: the reply's (the effective limit after an
   * override), except for a token policy with a burst whose capacity no override changed: its
   * rate.
   */
  public static long shownLimit(Policy policy, Decision reply) {
    if (policy.algorithm() == Policy.Algorithm.TOKEN
        && policy.burst() != null
        && reply.limit() == policy.burst()) {
      return policy.limit();
    }
    return reply.limit();
  }

  /** Seconds, rounded up. */
  static long ceilSecs(long ms) {
    return (ms + 999) / 1000;
  }

  /** {@code Retry-After}'s whole seconds, at least 1; -1 when no wait helps. */
  static long retryAfterSecs(Decision reply) {
    return reply.neverAdmits() ? -1 : Math.max(1, ceilSecs(reply.retryAfter().toMillis()));
  }

  /**
   * The headers {@code mode} asks for, for the checks and their replies (same order), in order,
   * {@code X-RateLimit-Reset} in seconds; {@code Retry-After} when the request is denied.
   */
  public static Map<String, String> of(
      Config.HeaderMode mode, List<Plan.Check> checks, List<Decision> replies, Hook.Outcome outcome) {
    return of(mode, Config.LegacyReset.SECONDS, 0, checks, replies, outcome);
  }

  /**
   * The headers {@code mode} asks for, for the checks and their replies (same order), in order;
   * {@code X-RateLimit-Reset} as {@code legacy} says ({@code nowMs}: the Unix clock, for {@code
   * unix}); {@code Retry-After} when the request is denied (never from a shadow policy, nor in
   * shadow mode, whose denials pass).
   */
  public static Map<String, String> of(
      Config.HeaderMode mode,
      Config.LegacyReset legacy,
      long nowMs,
      List<Plan.Check> checks,
      List<Decision> replies,
      Hook.Outcome outcome) {
    Map<String, String> out = new LinkedHashMap<>();
    boolean refused = outcome == Hook.Outcome.DENIED;
    int worst = mostRestrictive(checks, replies, refused);
    if (worst < 0 || worst >= checks.size()) {
      return out;
    }
    Plan.Check check = checks.get(worst);
    Decision reply = replies.get(worst);
    long resetMs = reply.resetAfter().toMillis();
    long reset = ceilSecs(resetMs);
    String limit = Long.toString(shownLimit(check.policy(), reply));
    if (mode == Config.HeaderMode.BOTH || mode == Config.HeaderMode.IETF) {
      List<String> items = new ArrayList<>();
      for (int i = 0; i < checks.size() && i < replies.size(); i++) {
        items.add(policyItem(checks.get(i), replies.get(i)));
      }
      out.put("RateLimit-Policy", String.join(", ", items));
      out.put(
          "RateLimit",
          "\"" + check.policy().name() + "\";r=" + reply.remaining() + ";t=" + reset);
    }
    if (mode == Config.HeaderMode.BOTH || mode == Config.HeaderMode.LEGACY) {
      out.put("X-RateLimit-Limit", limit);
      out.put("X-RateLimit-Remaining", Long.toString(reply.remaining()));
      out.put(
          "X-RateLimit-Reset",
          Long.toString(legacy == Config.LegacyReset.UNIX ? ceilSecs(nowMs + resetMs) : reset));
    }
    if (mode == Config.HeaderMode.DRAFT6) {
      out.put("RateLimit-Limit", limit);
      out.put("RateLimit-Remaining", Long.toString(reply.remaining()));
      out.put("RateLimit-Reset", Long.toString(reset));
      out.put(
          "RateLimit-Policy",
          check.policy().holdsSlots() ? limit : limit + ";w=" + check.policy().windowSecs());
    }
    if (refused && !check.shadow()) {
      long secs = retryAfterSecs(reply);
      if (secs >= 0) {
        out.put("Retry-After", Long.toString(secs));
      }
    }
    return out;
  }

  /**
   * {@code "name";q=<limit>;w=<window s>}, with {@code qu="content-bytes"} for body bytes; a
   * concurrency policy has no window: {@code "name";q=<limit>}.
   */
  private static String policyItem(Plan.Check check, Decision reply) {
    Policy p = check.policy();
    String window = p.holdsSlots() ? "" : ";w=" + p.windowSecs();
    String unit = p.cost().kind() == Policy.CostKind.BODY_BYTES ? ";qu=\"content-bytes\"" : "";
    return "\"" + p.name() + "\";q=" + shownLimit(p, reply) + window + unit;
  }
}
