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
    Reply out = deny.body() == Config.DenyBody.PROBLEM ? problem.get() : fixed(deny);
    return withHeaders(out, deny);
  }

  /** {@code deny}'s own body: the message as text, or its JSON. */
  private static Reply fixed(Config.Deny deny) {
    if (deny.body() == Config.DenyBody.TEXT) {
      return new Reply(
          deny.status(), deny.contentType(), deny.message().getBytes(StandardCharsets.UTF_8), deny.message());
    }
    return new Reply(deny.status(), JSON, deny.json().getBytes(StandardCharsets.UTF_8), null);
  }

  /** The reply with {@code deny}'s extra headers (the reply itself when it has none). */
  private static Reply withHeaders(Reply out, Config.Deny deny) {
    return deny.headers().isEmpty() && out.headers().isEmpty()
        ? out
        : new Reply(out.status(), out.contentType(), out.body(), out.detail(), deny.headers());
  }

  /**
   * The denial for the most restrictive denying check: {@code deny.status}, a problem body naming
   * the policy ({@code retry_after} in ms, null when no wait helps), or the body {@code deny}
   * configures, with its extra headers; made without a closure: every refusal
   * makes one.
   */
  public static Reply denied(Config.Deny deny, Plan.Check check, Decision reply) {
    return withHeaders(
        deny.body() == Config.DenyBody.PROBLEM ? deniedProblem(deny, check, reply) : fixed(deny), deny);
  }

  private static Reply deniedProblem(Config.Deny deny, Plan.Check check, Decision reply) {
    Policy policy = check.policy();
    long limit = ResponseHeaders.shownLimit(policy, reply);
    long secs = ResponseHeaders.retryAfterSecs(reply);
    if (secs >= 0) {
      // The common denial: a wait helps. Its body differs from the last one's for this policy
      // only in the two numbers, so the rest is encoded once, not per refusal.
      return deniedTemplate(deny, policy, limit).reply(secs, reply.retryAfter().toMillis());
    }
    String detail =
        policy.holdsSlots()
            ? "This request costs " + check.cost() + ", more than concurrency limit \""
                + policy.name() + "\" (" + limit + " at once) ever admits."
            : "This request costs " + check.cost() + ", more than rate limit \"" + policy.name()
                + "\" (" + limit + " per " + policy.windowText() + ") ever admits at once.";
    StringBuilder body = deniedHead(deny, policy, limit, detail);
    body.append("null");
    return problemReply(deny.status(), body, detail);
  }

  /** The problem body of a denial up to its {@code retry_after} value. */
  private static StringBuilder deniedHead(Config.Deny deny, Policy policy, long limit, String detail) {
    // Written directly, as problem() would write these members: every refusal makes one.
    StringBuilder body = problemHead(deny.status(), "Too Many Requests", detail);
    body.append(",\"policy\":");
    Json.string(body, policy.name());
    body.append(",\"limit\":").append(limit).append(",\"retry_after\":");
    return body;
  }

  /**
   * The templates of the latest denials with a wait, newest first: a few, so that policies
   * refusing in turn (several routes, an override's limit beside the policy's own) each keep
   * theirs; compared by identity, so no policy is hashed per refusal.
   */
  private static volatile DeniedTemplate[] recentDenied = new DeniedTemplate[0];

  private static final int RECENT_DENIED = 16;

  private static DeniedTemplate deniedTemplate(Config.Deny deny, Policy policy, long limit) {
    DeniedTemplate[] recent = recentDenied;
    for (DeniedTemplate t : recent) {
      if (t.deny == deny && t.policy == policy && t.limit == limit) {
        return t;
      }
    }
    DeniedTemplate made = new DeniedTemplate(deny, policy, limit);
    DeniedTemplate[] next = new DeniedTemplate[Math.min(recent.length + 1, RECENT_DENIED)];
    next[0] = made;
    System.arraycopy(recent, 0, next, 1, next.length - 1);
    recentDenied = next;
    return made;
  }

  /**
   * A denial's problem body for one {@code deny}, policy and limit, around its two numbers: the
   * seconds in {@code detail} and {@code retry_after}'s milliseconds. {@code detail} is JSON
   * escaped once here, and the digits need no escaping.
   */
  private static final class DeniedTemplate {
    private static final String SECS_MARK = "\0";
    final Config.Deny deny;
    final Policy policy;
    final long limit;
    private final String detailHead;
    private final byte[] head;
    private final byte[] middle;

    DeniedTemplate(Config.Deny deny, Policy policy, long limit) {
      this.deny = deny;
      this.policy = policy;
      this.limit = limit;
      this.detailHead =
          policy.holdsSlots()
              ? "Concurrency limit \"" + policy.name() + "\" (" + limit + " at once) reached; retry in "
              : "Rate limit \"" + policy.name() + "\" (" + limit + " per " + policy.windowText()
                  + ") exceeded; retry in ";
      // The body as it would be for a mark in place of the seconds, split there.
      String whole = deniedHead(deny, policy, limit, detailHead + SECS_MARK + " s.").toString();
      String escapedMark = "\\u0000";
      int at = whole.indexOf(escapedMark);
      this.head = whole.substring(0, at).getBytes(StandardCharsets.UTF_8);
      this.middle = whole.substring(at + escapedMark.length()).getBytes(StandardCharsets.UTF_8);
    }

    Reply reply(long secs, long retryMs) {
      byte[] s = Long.toString(secs).getBytes(StandardCharsets.ISO_8859_1);
      byte[] r = Long.toString(retryMs).getBytes(StandardCharsets.ISO_8859_1);
      byte[] body = new byte[head.length + s.length + middle.length + r.length + 1];
      int at = 0;
      for (byte[] part : new byte[][] {head, s, middle, r}) {
        System.arraycopy(part, 0, body, at, part.length);
        at += part.length;
      }
      body[at] = '}';
      return new Reply(deny.status(), PROBLEM_JSON, body, detailHead + secs + " s.");
    }
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
