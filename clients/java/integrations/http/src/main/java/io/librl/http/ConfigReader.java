package io.librl.http;

import io.librl.http.Walker.WalkedObject;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The configuration's second step (docs/http.md, Start-up validation): the walked document as a
 * {@link Config}, with the rules that span fields, which the schema's description lists and this
 * file checks, each where its name is written.
 */
final class ConfigReader {
  private ConfigReader() {}

  /** The cross-field rules the schema's description lists: a test holds them to Schema.RULES. */
  static final List<String> CROSS_FIELD =
      List.of(
          "aligned-only-on-fixed",
          "burst-only-on-token",
          "code-limit-alone",
          "concurrency-has-lease",
          "deny-headers-are-extra",
          "deny-json-with-json-body",
          "exempt-are-networks",
          "fail-local-where-supported",
          "identity-names-not-reserved",
          "ip-source-last",
          "keys-name-identities",
          "policy-names-unique",
          "queue-only-on-token",
          "rate-or-limit-and-window",
          "resolvers-registered",
          "routes-name-defined-policies",
          "trusted-proxies-are-networks");

  /** The headers the integration sets itself, which a refusal's {@code headers} may not name. */
  private static final java.util.Set<String> OWN_HEADERS =
      java.util.Set.of(
          "ratelimit",
          "ratelimit-policy",
          "ratelimit-limit",
          "ratelimit-remaining",
          "ratelimit-reset",
          "x-ratelimit-limit",
          "x-ratelimit-remaining",
          "x-ratelimit-reset",
          "retry-after",
          "content-type",
          "content-length");

  static Config read(WalkedObject top) {
    String modeText = top.requiredText("mode");
    String modeResolver = modeText.startsWith("code:") ? modeText.substring("code:".length()) : null;
    // fail-local-where-supported: Java has the local fail mode (LocalLimiter).
    String fail = top.requiredText("fail");
    // trusted-proxies-are-networks: the pattern only bounds characters.
    List<IpAddress.Network> proxies = networks(top, "trusted_proxies");
    // exempt-are-networks
    List<IpAddress.Network> exempt = networks(top, "exempt");
    if (top.requiredBool("exempt_loopback")) {
      exempt.add(IpAddress.Network.parse("127.0.0.0/8"));
      exempt.add(IpAddress.Network.parse("::1/128"));
    }
    Map<String, Config.NamedIdentity> identities = identities(top);
    List<Policy> policies = new ArrayList<>();
    for (Object item : top.list("policies")) {
      if (!(item instanceof WalkedObject p)) {
        throw top.outOfStep("policies");
      }
      Policy policy = policy(p, identities.keySet());
      uniqueName(policies, policy, p);
      policies.add(policy);
    }
    Config.Deny deny = refusal(top.object("deny"), null);
    List<Config.Route> routes = new ArrayList<>();
    for (Object item : top.list("routes")) {
      if (!(item instanceof WalkedObject r)) {
        throw top.outOfStep("routes");
      }
      routes.add(route(r, policies, deny));
    }
    return new Config(
        top.requiredText("prefix"),
        modeResolver != null ? Config.Mode.ENFORCE : Config.Mode.valueOf(upper(modeText)),
        modeResolver,
        Config.FailMode.valueOf(upper(fail)),
        Duration.ofMillis(top.ms("timeout")),
        Config.HeaderMode.valueOf(upper(top.requiredText("headers"))),
        Config.LegacyReset.valueOf(upper(top.requiredText("legacy_reset"))),
        proxies,
        exempt,
        (int) top.requiredInteger("ipv6_prefix"),
        top.requiredText("api_key_header"),
        identities,
        top.requiredInteger("max_body_bytes"),
        top.requiredInteger("local_max_keys"),
        deny,
        refusal(top.object("fail_deny"), null),
        policies,
        routes);
  }

  /** A list of addresses and CIDR networks ({@code trusted_proxies}, {@code exempt}). */
  private static List<IpAddress.Network> networks(WalkedObject top, String field) {
    List<IpAddress.Network> out = new ArrayList<>();
    List<?> items = top.list(field);
    for (int i = 0; i < items.size(); i++) {
      IpAddress.Network net = items.get(i) instanceof String s ? IpAddress.Network.parse(s) : null;
      if (net == null) {
        throw new ConfigException(
            top.path(field) + "[" + i + "]", "must be an IP address or a CIDR network");
      }
      out.add(net);
    }
    return out;
  }

  /**
   * {@code identities}: each name's sources (identity-names-not-reserved, ip-source-last); a
   * value is always hashed in {@code api-key} and in an identity with an {@code authorization:}
   * source.
   */
  private static Map<String, Config.NamedIdentity> identities(WalkedObject top) {
    Map<String, Config.NamedIdentity> out = new LinkedHashMap<>();
    for (Map.Entry<String, Object> e : top.map("identities").entrySet()) {
      String name = e.getKey();
      String at = top.path("identities") + "." + name;
      if (name.equals("ip") || name.equals("global")) {
        throw new ConfigException(at, "ip and global are reserved");
      }
      List<Source> sources = new ArrayList<>();
      boolean hashed = name.equals("api-key");
      List<?> items = (List<?>) e.getValue();
      for (int j = 0; j < items.size(); j++) {
        if (!sources.isEmpty() && sources.get(sources.size() - 1).kind() == Source.Kind.IP) {
          throw new ConfigException(at + "[" + j + "]", "a source after ip is never read");
        }
        Source source = Source.parse((String) items.get(j));
        hashed |= source.kind() == Source.Kind.AUTHORIZATION;
        sources.add(source);
      }
      out.put(name, new Config.NamedIdentity(name, sources, hashed));
    }
    return out;
  }

  /**
   * A refusal: {@code deny}, {@code fail_deny} (both with the schema's defaults), or a route's
   * {@code deny} over the top-level one ({@code base}), each field it gives replacing {@code
   * base}'s (deny-json-with-json-body, deny-headers-are-extra).
   */
  static Config.Deny refusal(WalkedObject d, Config.Deny base) {
    int status = d.has("status") ? (int) d.requiredInteger("status") : base.status();
    Config.DenyBody body =
        d.has("body") ? Config.DenyBody.valueOf(upper(d.requiredText("body"))) : base.body();
    String json = d.has("json") ? Json.write(d.value("json")) : base == null ? null : base.json();
    if (d.has("json") && body != Config.DenyBody.JSON) {
      throw new ConfigException(d.path("json"), "json is sent only with body: json");
    }
    if (body == Config.DenyBody.JSON && json == null) {
      throw new ConfigException(d.path("json"), "missing (body: json sends it)");
    }
    Map<String, String> headers;
    if (d.has("headers")) {
      headers = new LinkedHashMap<>();
      java.util.Set<String> seen = new java.util.HashSet<>();
      for (Map.Entry<String, Object> h : d.map("headers").entrySet()) {
        String name = h.getKey();
        String lower = name.toLowerCase(Locale.ROOT);
        String at = d.path("headers") + "." + name;
        if (OWN_HEADERS.contains(lower)) {
          throw new ConfigException(at, "the integration sets this header itself");
        }
        if (!seen.add(lower)) {
          throw new ConfigException(at, "\"" + name + "\" is given twice");
        }
        headers.put(name, (String) h.getValue());
      }
    } else {
      headers = base == null ? Map.of() : base.headers();
    }
    return new Config.Deny(
        status,
        body,
        d.has("message") ? d.requiredText("message") : base.message(),
        d.has("content_type") ? d.requiredText("content_type") : base.contentType(),
        json,
        headers);
  }

  /**
   * A concurrency policy (concurrency-has-lease): limit and lease, no window or rate, count all,
   * and neither aligned nor burst, each mistake named where it is.
   */
  private static Policy concurrency(WalkedObject p, String name, Policy.Key key) {
    for (String field : List.of("rate", "window", "block")) {
      if (p.has(field)) {
        throw new ConfigException(
            p.path(field), "a concurrency policy has no " + field + "; give limit and lease");
      }
    }
    Long limit = p.integer("limit");
    Long lease = p.ms("lease");
    if (limit == null || lease == null) {
      throw new ConfigException(
          p.path(limit == null ? "limit" : "lease"),
          "missing (a concurrency policy gives limit and lease)");
    }
    if (!p.requiredText("count").equals("all")) {
      throw new ConfigException(
          p.path("count"),
          "must be all on a concurrency policy (its slots are freed when the response is finished)");
    }
    if (Boolean.TRUE.equals(p.bool("aligned"))) {
      throw new ConfigException(p.path("aligned"), "aligned is for fixed policies, not concurrency");
    }
    if (p.has("burst")) {
      throw new ConfigException(p.path("burst"), "burst is for token policies, not concurrency");
    }
    if (p.has("queue")) {
      throw new ConfigException(p.path("queue"), "queue is for token policies, not concurrency");
    }
    return new Policy(
        name,
        Policy.Algorithm.CONCURRENCY,
        limit,
        lease,
        false,
        null,
        key,
        cost(p),
        Policy.Count.ALL,
        p.requiredBool("overridable"),
        mode(p),
        null,
        null,
        null);
  }

  /** A policy, with the cross-field rules within one policy; {@code identities}' names. */
  static Policy policy(WalkedObject p, java.util.Set<String> identities) {
    Policy.Key key = key(p, identities);
    String name = p.requiredText("name");
    String algorithmName = p.requiredText("algorithm");
    if (algorithmName.equals("concurrency")) {
      return concurrency(p, name, key);
    }
    // concurrency-has-lease: lease only on a concurrency policy
    if (p.has("lease")) {
      throw new ConfigException(
          p.path("lease"), "lease is for concurrency policies, not " + algorithmName);
    }
    Policy.Algorithm algorithm = Policy.Algorithm.fromConfig(algorithmName);
    long limit = 0;
    long windowMs = 0;
    String limitResolver = null;
    TimeText.Rate rate = p.rate("rate");
    if (p.value("limit") instanceof String code) {
      // code-limit-alone: the resolver gives the limit and window (and a burst).
      for (String field : List.of("window", "rate", "burst", "overridable")) {
        if (p.has(field) && !(field.equals("overridable") && !p.requiredBool(field))) {
          throw new ConfigException(
              p.path(field), "a policy whose limit is " + code + " has no " + field);
        }
      }
      limitResolver = code.substring("code:".length());
    } else if (rate != null) {
      // rate-or-limit-and-window
      if (p.has("limit") || p.has("window")) {
        throw new ConfigException(p.path("rate"), "give rate, or limit and window, not both");
      }
      limit = rate.count();
      windowMs = rate.periodMs();
    } else {
      Long l = p.integer("limit");
      if (l == null) {
        throw new ConfigException(p.path("limit"), "missing (give limit and window, or rate)");
      }
      Long w = p.ms("window");
      if (w == null) {
        throw new ConfigException(p.path("window"), "missing (give limit and window, or rate)");
      }
      limit = l;
      windowMs = w;
    }
    // aligned-only-on-fixed
    boolean aligned = Boolean.TRUE.equals(p.bool("aligned"));
    if (aligned && algorithm != Policy.Algorithm.FIXED) {
      throw new ConfigException(
          p.path("aligned"), "aligned is for fixed policies, not " + algorithm.configName());
    }
    // burst-only-on-token
    Long burst = p.integer("burst");
    if (burst != null && algorithm != Policy.Algorithm.TOKEN) {
      throw new ConfigException(
          p.path("burst"), "burst is for token policies, not " + algorithm.configName());
    }
    // queue-only-on-token
    Long queue = p.ms("queue");
    if (queue != null && algorithm != Policy.Algorithm.TOKEN) {
      throw new ConfigException(
          p.path("queue"), "queue is for token policies, not " + algorithm.configName());
    }
    return new Policy(
        name,
        algorithm,
        limit,
        windowMs,
        aligned,
        burst,
        key,
        cost(p),
        Policy.Count.fromConfig(p.requiredText("count")),
        p.requiredBool("overridable"),
        mode(p),
        p.ms("block"),
        queue,
        limitResolver);
  }

  /** A policy's own mode, or null: the request's. */
  private static Config.Mode mode(WalkedObject p) {
    String mode = p.text("mode");
    return mode == null ? null : Config.Mode.valueOf(upper(mode));
  }

  /** A policy's cost: units, the body's bytes, or a header's integer. */
  private static Policy.Cost cost(WalkedObject p) {
    Object cost = p.value("cost");
    if (cost instanceof Long n) {
      return new Policy.Cost(Policy.CostKind.UNITS, n, null);
    } else if ("body-bytes".equals(cost)) {
      return new Policy.Cost(Policy.CostKind.BODY_BYTES, 0, null);
    } else if (cost instanceof String s && s.startsWith("header:")) {
      return new Policy.Cost(Policy.CostKind.HEADER, 0, s.substring("header:".length()));
    } else if (cost instanceof String s && s.startsWith("code:")) {
      return new Policy.Cost(Policy.CostKind.CODE, 0, null, s.substring("code:".length()));
    }
    throw p.outOfStep("cost");
  }

  /** policy-names-unique */
  static void uniqueName(List<Policy> earlier, Policy policy, WalkedObject walked) {
    for (Policy e : earlier) {
      if (e.name().equals(policy.name())) {
        throw new ConfigException(
            walked.path("name"), "\"" + policy.name() + "\" is used by an earlier policy");
      }
    }
  }

  private static Config.Route route(WalkedObject r, List<Policy> policies, Config.Deny deny) {
    String path = r.requiredText("path");
    List<String> methods = null;
    if (r.has("methods")) {
      methods = new ArrayList<>();
      for (Object m : r.list("methods")) {
        methods.add((String) m);
      }
    }
    List<String> names = new ArrayList<>();
    List<?> items = r.list("policies");
    for (int j = 0; j < items.size(); j++) {
      String name = (String) items.get(j);
      // routes-name-defined-policies
      if (policies.stream().noneMatch(p -> p.name().equals(name))) {
        throw new ConfigException(
            r.path("policies") + "[" + j + "]", "no policy is named \"" + name + "\"");
      }
      names.add(name);
    }
    WalkedObject own = r.optionalObject("deny");
    return new Config.Route(path, methods, names, own == null ? null : refusal(own, deny));
  }

  private static String upper(String text) {
    return text.toUpperCase(Locale.ROOT);
  }

  /** keys-name-identities: a key that is a name is a built-in or one of {@code identities}. */
  private static Policy.Key key(WalkedObject p, java.util.Set<String> identities) {
    String key = p.requiredText("key");
    if (key.indexOf(':') < 0
        && !identities.contains(key)
        && !List.of("ip", "api-key", "user", "global").contains(key)) {
      throw new ConfigException(p.path("key"), "no identity is named \"" + key + "\"");
    }
    return Policy.Key.fromConfig(key, identities);
  }
}
