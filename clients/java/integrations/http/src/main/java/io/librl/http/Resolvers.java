package io.librl.http;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * What only the application's code knows (docs/http.md, Resolvers), registered by name on {@link
 * RateLimiter.Builder} (or as Spring beans, by bean name) and named in the file as {@code cost:
 * code:<name>}, {@code limit: code:<name>} and {@code mode: code:<name>}. Each receives the
 * request ({@link Plan.Request}: method, path, headers, query, user, and {@link
 * Plan.Request#original()}, the framework's own request), on the thread that checks it.
 */
public final class Resolvers {
  /** A request's cost: an integer from 1 to 2^50; null, anything else or a throw is a 400. */
  @FunctionalInterface
  public interface CostResolver {
    Long cost(Plan.Request request);
  }

  /** The subject's own limit for this request, or null: the policy does not apply to it. */
  @FunctionalInterface
  public interface LimitResolver {
    Limit limit(Plan.Request request);
  }

  /** The request's mode: {@code ENFORCE}, {@code SHADOW} or {@code OFF} (null: enforce). */
  @FunctionalInterface
  public interface ModeResolver {
    Config.Mode mode(Plan.Request request);
  }

  /**
   * A limit resolver's answer: the limit and window sent inline with the check, and for a token
   * policy optionally its burst (null: the rate).
   *
   * @param limit 1 to 2^50
   * @param window 1 ms to 3650 days
   * @param burst null, or 1 to 2^50 (token policies only)
   */
  public record Limit(long limit, Duration window, Long burst) {
    private static final long MAX_WINDOW_MS = 3650L * 24 * 3600 * 1000;

    public Limit {
      Objects.requireNonNull(window, "window");
      if (limit < 1 || limit > Plan.MAX_COST) {
        throw new IllegalArgumentException("a limit is an integer from 1 to 2^50, not " + limit);
      }
      if (window.toMillis() < 1 || window.toMillis() > MAX_WINDOW_MS) {
        throw new IllegalArgumentException("a window is 1 ms to 3650 days, not " + window);
      }
      if (burst != null && (burst < 1 || burst > Plan.MAX_COST)) {
        throw new IllegalArgumentException("a burst is an integer from 1 to 2^50, not " + burst);
      }
    }

    public static Limit of(long limit, Duration window) {
      return new Limit(limit, window, null);
    }
  }

  static final Resolvers NONE = new Resolvers(Map.of(), Map.of(), Map.of());

  private final Map<String, CostResolver> costs;
  private final Map<String, LimitResolver> limits;
  private final Map<String, ModeResolver> modes;

  Resolvers(
      Map<String, CostResolver> costs, Map<String, LimitResolver> limits, Map<String, ModeResolver> modes) {
    this.costs = Map.copyOf(costs);
    this.limits = Map.copyOf(limits);
    this.modes = Map.copyOf(modes);
  }

  /** Mutable maps a builder fills. */
  static final class Registry {
    final Map<String, CostResolver> costs = new LinkedHashMap<>();
    final Map<String, LimitResolver> limits = new LinkedHashMap<>();
    final Map<String, ModeResolver> modes = new LinkedHashMap<>();

    Resolvers build() {
      return new Resolvers(costs, limits, modes);
    }
  }

  /**
   * resolvers-registered: every {@code code:<name>} of the configuration names a resolver of its
   * kind, else a {@link ConfigException} at the field ({@code policies[2].cost: no cost resolver
   * is registered as "elements"}).
   */
  void check(Config config) {
    if (config.modeResolver() != null && !modes.containsKey(config.modeResolver())) {
      throw unregistered("mode", "mode", config.modeResolver());
    }
    List<Policy> policies = config.policies();
    for (int i = 0; i < policies.size(); i++) {
      Policy p = policies.get(i);
      if (p.limitResolver() != null && !limits.containsKey(p.limitResolver())) {
        throw unregistered("policies[" + i + "].limit", "limit", p.limitResolver());
      }
      if (p.cost().kind() == Policy.CostKind.CODE && !costs.containsKey(p.cost().resolver())) {
        throw unregistered("policies[" + i + "].cost", "cost", p.cost().resolver());
      }
    }
  }

  private static ConfigException unregistered(String path, String kind, String name) {
    return new ConfigException(path, "no " + kind + " resolver is registered as \"" + name + "\"");
  }

  /** The resolver's cost, or -1 when it gave no integer from 1 to 2^50 (or threw). */
  long cost(String name, Plan.Request request) {
    Long cost;
    try {
      cost = costs.get(name).cost(request);
    } catch (RuntimeException e) {
      return -1;
    }
    return cost == null || cost < 1 || cost > Plan.MAX_COST ? -1 : cost;
  }

  /** The policy with the resolver's limit, window and burst, or null: it does not apply. */
  Policy limit(Policy p, Plan.Request request) {
    Limit l = limits.get(p.limitResolver()).limit(request);
    if (l == null) {
      return null;
    }
    Long burst = p.algorithm() == Policy.Algorithm.TOKEN ? l.burst() : null;
    return new Policy(
        p.name(), p.algorithm(), l.limit(), l.window().toMillis(), p.aligned(), burst, p.key(), p.cost(),
        p.count(), false, p.mode(), p.blockMs(), p.queueMs(), p.limitResolver());
  }

  /** The request's mode: the mode resolver's, or the configuration's. */
  Config.Mode mode(Config config, Plan.Request request) {
    if (config.modeResolver() == null) {
      return config.mode();
    }
    Config.Mode mode = modes.get(config.modeResolver()).mode(request);
    return mode == null ? Config.Mode.ENFORCE : mode;
  }
}
