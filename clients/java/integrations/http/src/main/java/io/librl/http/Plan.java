package io.librl.http;

import java.util.ArrayList;
import java.util.List;

/**
 * Which checks a request needs (docs/http.md, One decision per request, step 1): the route's
 * policies, each one's subject and keys (docs/http.md, Keys) and
 * its cost (docs/http.md, Cost). A request refused before any check (a bad cost header, a body too
 * large) is a {@link Refusal}.
 */
public final class Plan {
  private Plan() {}

  /** The most a cost may be: 2^50, the module's bound. */
  public static final long MAX_COST = 1L << 50;

  /**
   * A request as the adapter saw it.
   *
   * @param method the request's method, exactly
   * @param path the path as the framework hands it, raw or decoded (the canonical path is the
   *     same), its characters the bytes the client sent (Latin-1, as containers decode them)
   * @param headers the request's headers as bytes
   * @param peer the TCP peer's address as the server reports it, or null
   * @param user the authenticated user, or null
   * @param query the raw query string (after the {@code ?}, undecoded), or null
   * @param original the framework's own request ({@code HttpServletRequest}, {@code
   *     ServerWebExchange}), for resolvers; null where there is none
   * @param attributes what the application's code left on the request, for {@code
   *     attribute:<name>} sources (docs/http.md, Request attributes); null: none
   */
  public record Request(
      String method,
      String path,
      RequestHeaders headers,
      String peer,
      String user,
      String query,
      Object original,
      RequestAttributes attributes) {
    public Request {
      attributes = attributes == null ? RequestAttributes.NONE : attributes;
    }

    public Request(String method, String path, RequestHeaders headers, String peer, String user) {
      this(method, path, headers, peer, user, null, null, null);
    }

    /** A request without attributes. */
    public Request(
        String method, String path, RequestHeaders headers, String peer, String user, String query, Object original) {
      this(method, path, headers, peer, user, query, original, null);
    }

    /** The query string's bytes (as the client sent them: Latin-1 text), or null. */
    public byte[] queryBytes() {
      return query == null ? null : RequestHeaders.latin1(query);
    }

    /** The path's bytes. */
    public byte[] pathBytes() {
      return RequestHeaders.latin1(path);
    }
  }

  /** One policy with its subject, before costs are known. */
  public record Applying(Policy policy, Identity.Subject subject) {}

  /**
   * The policies a request gets, each with its subject.
   *
   * @param route the matched route's path as configured, or null
   * @param applying the policies, in check order
   * @param deny the matched route's own refusal, or null: the top-level {@code deny}
   * @param config the configuration it was planned with (its checks are made with it, whatever a
   *     reload swapped in meanwhile); null: the one in force
   */
  public record Planned(String route, List<Applying> applying, Config.Deny deny, Config config) {
    public Planned {
      applying = List.copyOf(applying);
    }

    public Planned(String route, List<Applying> applying) {
      this(route, applying, null, null);
    }

    /** Whether the body's size is needed (a {@code body-bytes} policy applies). */
    public boolean needsBodyLength() {
      for (Applying a : applying) {
        if (a.policy().cost().kind() == Policy.CostKind.BODY_BYTES) {
          return true;
        }
      }
      return false;
    }
  }

  /**
   * One policy checked for one request. {@code policy} holds the limit and window checked (a
   * limit resolver's, for {@code limit: code:<name>}); {@code shadow}: counted, never refusing
   * (docs/http.md, Shadow mode).
   */
  public record Check(
      Policy policy, Identity.Subject subject, String key, String overrideKey, long cost, boolean shadow) {
    public Check(Policy policy, Identity.Subject subject, String key, String overrideKey, long cost) {
      this(policy, subject, key, overrideKey, cost, false);
    }
  }

  /** A request refused before any policy is checked. */
  public sealed interface Refusal permits BadCost, TooLarge {}

  /**
   * The policy's cost is not an integer from 1 to 2^50: its cost header ({@code header} as
   * configured) or its cost resolver ({@code resolver}, the name in {@code code:<name>}) said
   * otherwise.
   */
  public record BadCost(String policy, String header, String resolver) implements Refusal {
    public BadCost(String policy, String header) {
      this(policy, header, null);
    }
  }

  /** The body is larger than {@code max_body_bytes}. */
  public record TooLarge(long max) implements Refusal {}

  /** Thrown by {@link #checks} for a request refused before any check. */
  public static final class RefusedException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final transient Refusal refusal;

    RefusedException(Refusal refusal) {
      super(refusal.toString(), null, false, false);
      this.refusal = refusal;
    }

    public Refusal refusal() {
      return refusal;
    }
  }

  /** The policies that apply to this client, each with its subject, in check order. */
  public static List<Applying> applying(
      List<Policy> policies, Identity.Client client, RequestHeaders headers) {
    List<Applying> out = new ArrayList<>(policies.size());
    for (Policy p : policies) {
      out.add(new Applying(p, client.subject(p.key(), headers)));
    }
    return out;
  }

  /**
   * The checks, keyed {@code <prefix>{<subject>}:<policy>}; {@code bodyLength} is the body's size
   * when {@link Planned#needsBodyLength} asked for it (else -1). A policy whose limit resolver
   * gives nothing is left out; a policy whose own mode is shadow is a shadow check, unless the
   * request's {@code mode} is shadow already.
   *
   * @throws RefusedException for a bad cost header or resolver's cost
   */
  public static List<Check> checks(
      Planned planned,
      String prefix,
      Request request,
      long bodyLength,
      Config.Mode mode,
      Resolvers resolvers) {
    List<Check> out = new ArrayList<>(planned.applying().size());
    for (Applying a : planned.applying()) {
      Policy policy = a.policy();
      long cost;
      switch (policy.cost().kind()) {
        case UNITS:
          cost = policy.cost().units();
          break;
        case BODY_BYTES:
          // At least 1; max_body_bytes already bounds it below 2^50.
          cost = Math.max(1, Math.min(bodyLength, MAX_COST));
          break;
        case CODE:
          cost = resolvers.cost(policy.cost().resolver(), request);
          if (cost < 0) {
            throw new RefusedException(new BadCost(policy.name(), null, policy.cost().resolver()));
          }
          break;
        case HEADER:
        default:
          cost = costHeader(request.headers().joined(policy.cost().header()));
          if (cost < 0) {
            throw new RefusedException(new BadCost(policy.name(), policy.cost().header()));
          }
      }
      if (policy.limitResolver() != null) {
        policy = resolvers.limit(policy, request);
        if (policy == null) {
          continue;
        }
      }
      Keys keys = Keys.of(prefix, a.subject(), policy.name(), policy.overridable());
      // A shadow request checks every policy exactly as enforce would (its outcome never
      // refuses); in an enforced one, a shadow policy has RL.ALLs of its own.
      boolean shadow = mode != Config.Mode.SHADOW && policy.mode() == Config.Mode.SHADOW;
      out.add(new Check(policy, a.subject(), keys.key(), keys.overrideKey(), cost, shadow));
    }
    return out;
  }

  /**
   * The cost a request declares (docs/http.md, Cost), from the header's lines joined and trimmed:
   * absent (null) costs 1; otherwise ASCII digits (leading zeros allowed) from 1 to 2^50, or -1:
   * the request is refused.
   */
  public static long costHeader(byte[] value) {
    if (value == null) {
      return 1;
    }
    if (value.length == 0) {
      return -1;
    }
    long n = 0;
    for (byte b : value) {
      if (b < '0' || b > '9') {
        return -1;
      }
      n = n * 10 + (b - '0');
      if (n > MAX_COST) {
        return -1;
      }
    }
    return n >= 1 ? n : -1;
  }
}
