package io.librl.http;

import io.librl.Decision;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The bodies of the responses the integration makes itself (docs/http.md, Refusals): RFC 9457
 * {@code application/problem+json} with {@code type} {@code about:blank}, or, as {@code deny} and
 * {@code fail_deny} say, the message as text or the configured JSON, with their extra headers.
 */
public final class Refusals {
  private Refusals() {}

  public static final String PROBLEM_JSON = "application/problem+json";
  public static final String TEXT_PLAIN = "text/plain; charset=utf-8";
  public static final String JSON = "application/json";

  /**
   * A response the integration makes: status, Content-Type and body, the body's {@code detail}
   * (or the deny message), and the refusal's extra headers ({@code deny.headers}).
   */
  public record Reply(int status, String contentType, byte[] body, String detail, Map<String, String> headers) {
    public Reply(int status, String contentType, byte[] body, String detail) {
      this(status, contentType, body, detail, Map.of());
    }
  }

  private static Reply problem(int status, String title, String detail, Map<String, Object> extra) {
    StringBuilder body = problemHead(status, title, detail);
    for (Map.Entry<String, Object> e : extra.entrySet()) {
      body.append(',');
      Json.string(body, e.getKey());
      body.append(':').append(Json.write(e.getValue()));
    }
    return problemReply(status, body, detail);
  }

  /** {@code {"type":"about:blank","title":...,"status":...,"detail":...}} without its closing brace. */
  private static StringBuilder problemHead(int status, String title, String detail) {
    StringBuilder body = new StringBuilder(128 + detail.length());
    body.append("{\"type\":\"about:blank\",\"title\":");
    Json.string(body, title);
    body.append(",\"status\":").append(status).append(",\"detail\":");
    Json.string(body, detail);
    return body;
  }

  private static Reply problemReply(int status, StringBuilder body, String detail) {
    body.append('}');
    return new Reply(status, PROBLEM_JSON, body.toString().getBytes(StandardCharsets.UTF_8), detail);
  }

  /**
   * The refusal {@code deny} configures: the message as text, its JSON, or else the problem body
   * {@code problem} builds; with its status and extra headers.
   */
  private static Reply configured(Config.Deny deny, java.util.function.Supplier<Reply> problem) {
    Reply out;
    switch (deny.body()) {
      case TEXT:
        out = new Reply(
            deny.status(), deny.contentType(), deny.message().getBytes(StandardCharsets.UTF_8), deny.message());
        break;
      case JSON:
        out = new Reply(deny.status(), JSON, deny.json().getBytes(StandardCharsets.UTF_8), null);
        break;
      case PROBLEM:
      default:
        out = problem.get();
    }
    return new Reply(out.status(), out.contentType(), out.body(), out.detail(), deny.headers());
  }

  /**
   * The denial for the most restrictive denying check: {@code deny.status}, a problem body naming
   * the policy ({@code retry_after} in ms, null when no wait helps), or the body {@code deny}
   * configures, with its extra headers.
   */
  public static Reply denied(Config.Deny deny, Plan.Check check, Decision reply) {
    return configured(deny, () -> deniedProblem(deny, check, reply));
  }

  private static Reply deniedProblem(Config.Deny deny, Plan.Check check, Decision reply) {
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
    // Written directly, as problem() would write these members: every refusal makes one.
    StringBuilder body = problemHead(deny.status(), "Too Many Requests", detail);
    body.append(",\"policy\":");
    Json.string(body, policy.name());
    body.append(",\"limit\":").append(limit).append(",\"retry_after\":");
    if (reply.neverAdmits()) {
      body.append("null");
    } else {
      body.append(reply.retryAfter().toMillis());
    }
    return problemReply(deny.status(), body, detail);
  }

  /** The refusal of {@code fail: closed} when Redis cannot answer: {@code fail_deny}'s. */
  public static Reply unavailable(Config.Deny failDeny) {
    return configured(
        failDeny,
        () ->
            problem(
                failDeny.status(),
                "Service Unavailable",
                "The rate limiter is unavailable, and this service does not admit unlimited requests.",
                Map.of()));
  }

  /** 400 for a bad cost header, 413 for a body too large to measure. */
  public static Reply refused(Plan.Refusal refusal) {
    if (refusal instanceof Plan.BadCost bad) {
      Map<String, Object> extra = new LinkedHashMap<>();
      extra.put("policy", bad.policy());
      String detail =
          bad.resolver() != null
              ? "The cost \"" + bad.resolver() + "\" must be an integer from 1 to 2^50."
              : bad.header() + " must be an integer from 1 to 2^50.";
      return problem(400, "Bad Request", detail, extra);
    }
    Plan.TooLarge large = (Plan.TooLarge) refusal;
    return problem(
        413, "Content Too Large", "The body may be at most " + large.max() + " bytes.", Map.of());
  }
}
