package io.librl.http;

import io.librl.Decision;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The bodies of the responses the integration makes itself (docs/http.md, Refusals): RFC 9457
 * {@code application/problem+json} with {@code type} {@code about:blank}, or the deny message as
 * {@code text/plain}.
 */
public final class Refusals {
  private Refusals() {}

  public static final String PROBLEM_JSON = "application/problem+json";
  public static final String TEXT_PLAIN = "text/plain; charset=utf-8";

  /**
   * A response the integration makes: status, Content-Type and body, and the body's {@code detail}
   * (or the deny message).
   */
  public record Reply(int status, String contentType, byte[] body, String detail) {}

  private static Reply problem(int status, String title, String detail, Map<String, Object> extra) {
    Map<String, Object> body = new LinkedHashMap<>();
    body.put("type", "about:blank");
    body.put("title", title);
    body.put("status", status);
    body.put("detail", detail);
    body.putAll(extra);
    return new Reply(status, PROBLEM_JSON, Json.write(body).getBytes(StandardCharsets.UTF_8), detail);
  }

  /**
   * The denial for the most restrictive denying check: {@code deny.status}, a problem body naming
   * the policy ({@code retry_after} in ms, null when no wait helps), or the deny message as text.
   */
  public static Reply denied(Config.Deny deny, Plan.Check check, Decision reply) {
    if (deny.body() == Config.DenyBody.TEXT) {
      return new Reply(
          deny.status(), TEXT_PLAIN, deny.message().getBytes(StandardCharsets.UTF_8), deny.message());
    }
    Policy policy = check.policy();
    long limit = ResponseHeaders.shownLimit(policy, reply);
    long secs = ResponseHeaders.retryAfterSecs(reply);
    String detail;
    if (policy.holdsSlots()) {
      detail =
          secs >= 0
              ? "Concurrency limit \"" + policy.name() + "\" (" + limit + " at once) reached; retry in "
                  + secs + " s."
              : "This request costs " + check.cost() + ", more than concurrency limit \""
                  + policy.name() + "\" (" + limit + " at once) ever admits.";
    } else {
      detail =
          secs >= 0
              ? "Rate limit \"" + policy.name() + "\" (" + limit + " per " + policy.windowText()
                  + ") exceeded; retry in " + secs + " s."
              : "This request costs " + check.cost() + ", more than rate limit \"" + policy.name()
                  + "\" (" + limit + " per " + policy.windowText() + ") ever admits at once.";
    }
    Map<String, Object> extra = new LinkedHashMap<>();
    extra.put("policy", policy.name());
    extra.put("limit", limit);
    extra.put("retry_after", reply.neverAdmits() ? null : reply.retryAfter().toMillis());
    return problem(deny.status(), "Too Many Requests", detail, extra);
  }

  /** 503 when Redis cannot answer and the fail mode is closed. */
  public static Reply unavailable() {
    return problem(
        503,
        "Service Unavailable",
        "The rate limiter is unavailable, and this service does not admit unlimited requests.",
        Map.of());
  }

  /** 400 for a bad cost header, 413 for a body too large to measure. */
  public static Reply refused(Plan.Refusal refusal) {
    if (refusal instanceof Plan.BadCost bad) {
      Map<String, Object> extra = new LinkedHashMap<>();
      extra.put("policy", bad.policy());
      return problem(400, "Bad Request", bad.header() + " must be an integer from 1 to 2^50.", extra);
    }
    Plan.TooLarge large = (Plan.TooLarge) refusal;
    return problem(
        413, "Content Too Large", "The body may be at most " + large.max() + " bytes.", Map.of());
  }
}
