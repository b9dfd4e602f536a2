package io.librl.http;

import io.librl.http.Walker.WalkedObject;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

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
          "concurrency-has-lease",
          "fail-local-where-supported",
          "policy-names-unique",
          "rate-or-limit-and-window",
          "routes-name-defined-policies",
          "trusted-proxies-are-networks");

  static Config read(WalkedObject top) {
    noResolver(top, "mode");
    String fail = top.requiredText("fail");
    // fail-local-where-supported: the local fail mode is the Rust integration's.
    if (fail.equals("local")) {
      throw new ConfigException(
          top.path("fail"), "local is the Rust integration's mode; use open or closed");
    }
    List<IpAddress.Network> proxies = new ArrayList<>();
    List<?> items = top.list("trusted_proxies");
    for (int i = 0; i < items.size(); i++) {
      // trusted-proxies-are-networks: the pattern only bounds characters.
      IpAddress.Network net =
          items.get(i) instanceof String s ? IpAddress.Network.parse(s) : null;
      if (net == null) {
        throw new ConfigException(
            top.path("trusted_proxies") + "[" + i + "]", "must be an IP address or a CIDR network");
      }
      proxies.add(net);
    }
    List<Policy> policies = new ArrayList<>();
    for (Object item : top.list("policies")) {
      if (!(item instanceof WalkedObject p)) {
        throw top.outOfStep("policies");
      }
      Policy policy = policy(p);
      uniqueName(policies, policy, p);
      policies.add(policy);
    }
    List<Config.Route> routes = new ArrayList<>();
    for (Object item : top.list("routes")) {
      if (!(item instanceof WalkedObject r)) {
        throw top.outOfStep("routes");
      }
      routes.add(route(r, policies));
    }
    WalkedObject deny = top.object("deny");
    return new Config(
        top.requiredText("prefix"),
        Config.Mode.valueOf(upper(top.requiredText("mode"))),
        Config.FailMode.valueOf(upper(fail)),
        Duration.ofMillis(top.ms("timeout")),
        Config.HeaderMode.valueOf(upper(top.requiredText("headers"))),
        proxies,
        top.requiredBool("exempt_loopback"),
        top.requiredText("api_key_header"),
        top.requiredInteger("max_body_bytes"),
        new Config.Deny(
            (int) deny.requiredInteger("status"),
            Config.DenyBody.valueOf(upper(deny.requiredText("body"))),
            deny.requiredText("message")),
        policies,
        routes);
  }

  /**
   * A concurrency policy (concurrency-has-lease): limit and lease, no window or rate, count all,
   * and neither aligned nor burst, each mistake named where it is.
   */
  private static Policy concurrency(WalkedObject p, String name) {
    for (String field : List.of("rate", "window")) {
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
    return new Policy(
        name,
        Policy.Algorithm.CONCURRENCY,
        limit,
        lease,
        false,
        null,
        Policy.Key.fromConfig(p.requiredText("key")),
        cost(p),
        Policy.Count.ALL,
        p.requiredBool("overridable"));
  }

  /** A policy, with the cross-field rules within one policy. */
  static Policy policy(WalkedObject p) {
    for (String field : List.of("limit", "cost", "mode")) {
      noResolver(p, field);
    }
    key(p);
    String name = p.requiredText("name");
    String algorithmName = p.requiredText("algorithm");
    if (algorithmName.equals("concurrency")) {
      return concurrency(p, name);
    }
    // concurrency-has-lease: lease only on a concurrency policy
    if (p.has("lease")) {
      throw new ConfigException(
          p.path("lease"), "lease is for concurrency policies, not " + algorithmName);
    }
    Policy.Algorithm algorithm = Policy.Algorithm.fromConfig(algorithmName);
    // rate-or-limit-and-window
    long limit;
    long windowMs;
    TimeText.Rate rate = p.rate("rate");
    if (rate != null) {
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
    return new Policy(
        name,
        algorithm,
        limit,
        windowMs,
        aligned,
        burst,
        Policy.Key.fromConfig(p.requiredText("key")),
        cost(p),
        Policy.Count.fromConfig(p.requiredText("count")),
        p.requiredBool("overridable"));
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

  private static Config.Route route(WalkedObject r, List<Policy> policies) {
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
    return new Config.Route(path, methods, names);
  }

  private static String upper(String text) {
    return text.toUpperCase(Locale.ROOT);
  }

  /**
   * Refuses a {@code code:<name>} value (docs/http.md, Resolvers in code) at start-up, naming the
   * field, until Java registers resolvers: read as a number, a header or a mode it would fail.
   */
  private static void noResolver(WalkedObject o, String field) {
    if (o.value(field) instanceof String s && s.startsWith("code:")) {
      throw new ConfigException(
          o.path(field), "resolvers (" + s + ") are not read by the Java integrations yet");
    }
  }

  /**
   * A policy's key names a built-in identity or a header: named identities and inline cookie:,
   * query: and authorization: sources are refused until Java reads them, never keyed otherwise.
   */
  private static void key(WalkedObject p) {
    String key = p.requiredText("key");
    int colon = key.indexOf(':');
    if (colon < 0 && !List.of("ip", "api-key", "user", "global").contains(key)) {
      throw new ConfigException(p.path("key"), "no identity is named \"" + key + "\"");
    }
    if (colon >= 0 && !key.startsWith("header:")) {
      throw new ConfigException(
          p.path("key"),
          key.substring(0, colon) + ": sources are not read by the Java integrations yet");
    }
  }
}
