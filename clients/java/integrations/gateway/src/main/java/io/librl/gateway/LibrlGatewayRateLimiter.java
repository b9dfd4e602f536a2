package io.librl.gateway;

import io.librl.http.ConfigException;
import io.librl.http.Identity;
import io.librl.http.Keys;
import io.librl.http.Plan;
import io.librl.http.Policy;
import io.librl.http.RateLimiter;
import io.librl.http.ResponseHeaders;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import org.springframework.cloud.gateway.event.FilterArgsEvent;
import org.springframework.cloud.gateway.filter.ratelimit.AbstractRateLimiter;
import org.springframework.cloud.gateway.route.RouteDefinitionRouteLocator;
import org.springframework.cloud.gateway.support.ConfigurationService;
import reactor.core.publisher.Mono;

/**
 * Spring Cloud Gateway's {@code RequestRateLimiter} filter on librl (docs/http/java.md, Spring
 * Cloud Gateway): where {@code RedisRateLimiter} sends its Lua token bucket, this sends one {@code
 * RL.ALL} for the {@code KeyResolver}'s key, through the application's {@link RateLimiter} (its
 * policy file's prefix, timeout, mode, fail mode, headers and hook). A route's arguments, under
 * {@code librl.}, are either {@code policies} (names of the policy file's policies, checked
 * together) or {@code RedisRateLimiter}'s own {@code replenish-rate}, {@code burst-capacity} and
 * {@code requested-tokens} (a token bucket of that rate per second and that capacity). The key is
 * {@code <prefix>{key:<resolved key>}:<policy>} (a policy from the arguments is named after the
 * route's id).
 */
public class LibrlGatewayRateLimiter extends AbstractRateLimiter<LibrlGatewayRateLimiter.Config> {
  /** The arguments' prefix: {@code librl.policies}, {@code librl.replenish-rate}... */
  public static final String CONFIGURATION_PROPERTY_NAME = "librl";

  /** {@code RedisRateLimiter}'s headers, sent alongside the contract's. */
  public static final String REMAINING_HEADER = "X-RateLimit-Remaining";

  public static final String REPLENISH_RATE_HEADER = "X-RateLimit-Replenish-Rate";
  public static final String BURST_CAPACITY_HEADER = "X-RateLimit-Burst-Capacity";
  public static final String REQUESTED_TOKENS_HEADER = "X-RateLimit-Requested-Tokens";

  private final RateLimiter limiter;
  private final Map<String, Route> routes = new ConcurrentHashMap<>();
  private Config defaultConfig;

  public LibrlGatewayRateLimiter(RateLimiter limiter, ConfigurationService configurationService) {
    super(Config.class, CONFIGURATION_PROPERTY_NAME, configurationService);
    this.limiter = Objects.requireNonNull(limiter, "limiter");
  }

  /** The configuration of routes that give none (as {@code RedisRateLimiter(rate, capacity)}). */
  public LibrlGatewayRateLimiter withDefaultConfig(Config config) {
    this.defaultConfig = config;
    return this;
  }

  /** Reads a route's arguments as the gateway builds it: a bad one stops the route there. */
  @Override
  public void onApplicationEvent(FilterArgsEvent event) {
    super.onApplicationEvent(event);
    Config c = getConfig().get(event.getRouteId());
    if (c != null) {
      routes.put(event.getRouteId(), c.resolve(event.getRouteId(), limiter));
    }
  }

  @Override
  public Mono<Response> isAllowed(String routeId, String id) {
    Route route = routes.computeIfAbsent(routeId, this::route);
    Identity.Subject subject =
        new Identity.Subject(
            Identity.Subject.Kind.KEY, Keys.keySafe(id.getBytes(StandardCharsets.UTF_8)));
    List<Plan.Check> checks = new ArrayList<>();
    for (Policy p : route.policies()) {
      Keys keys = Keys.of(limiter.config().prefix(), subject, p.name(), p.overridable());
      checks.add(new Plan.Check(p, subject, keys.key(), keys.overrideKey(), route.cost(p)));
    }
    return Mono.fromFuture(() -> limiter.decide(routeId, checks))
        .map(decided -> new Response(decided.refusal() == null, headers(decided)));
  }

  /** The contract's headers, then the gateway's own for the most restrictive check. */
  private static Map<String, String> headers(RateLimiter.Decided decided) {
    Map<String, String> out = new LinkedHashMap<>(decided.headers());
    int worst = ResponseHeaders.mostRestrictive(decided.replies());
    if (worst < 0 || worst >= decided.checks().size()) {
      return out;
    }
    Plan.Check check = decided.checks().get(worst);
    Policy p = check.policy();
    out.put(REMAINING_HEADER, Long.toString(decided.replies().get(worst).remaining()));
    out.put(REPLENISH_RATE_HEADER, Long.toString(p.limit()));
    out.put(BURST_CAPACITY_HEADER, Long.toString(p.burst() != null ? p.burst() : p.limit()));
    out.put(REQUESTED_TOKENS_HEADER, Long.toString(check.cost()));
    return out;
  }

  /** A route's policies, resolved once: a name the file lacks is refused on first use. */
  private Route route(String routeId) {
    Config c = getConfig().get(routeId);
    if (c == null) {
      c = defaultConfig;
    }
    if (c == null) {
      c = getConfig().get(RouteDefinitionRouteLocator.DEFAULT_FILTERS);
    }
    if (c == null) {
      throw new IllegalArgumentException("No Configuration found for route " + routeId + " or defaultFilters");
    }
    return c.resolve(routeId, limiter);
  }

  /** One route's checks: its policies and, for the bucket form, the tokens a request asks. */
  record Route(List<Policy> policies, Long requestedTokens) {
    long cost(Policy p) {
      return requestedTokens != null ? requestedTokens : p.cost().units();
    }
  }

  /**
   * A route's arguments: either {@code policies} or {@code replenishRate} (with {@code
   * burstCapacity} and {@code requestedTokens}, as {@code RedisRateLimiter} reads them).
   */
  public static class Config {
    private List<String> policies = new ArrayList<>();
    private Long replenishRate;
    private Long burstCapacity;
    private Long requestedTokens;

    public List<String> getPolicies() {
      return policies;
    }

    public Config setPolicies(List<String> policies) {
      this.policies = policies;
      return this;
    }

    public Long getReplenishRate() {
      return replenishRate;
    }

    public Config setReplenishRate(Long replenishRate) {
      this.replenishRate = replenishRate;
      return this;
    }

    public Long getBurstCapacity() {
      return burstCapacity;
    }

    public Config setBurstCapacity(Long burstCapacity) {
      this.burstCapacity = burstCapacity;
      return this;
    }

    public Long getRequestedTokens() {
      return requestedTokens;
    }

    public Config setRequestedTokens(Long requestedTokens) {
      this.requestedTokens = requestedTokens;
      return this;
    }

    Route resolve(String routeId, RateLimiter limiter) {
      String where = "gateway.routes[" + routeId + "].librl";
      boolean bucket = replenishRate != null || burstCapacity != null || requestedTokens != null;
      if (bucket && !policies.isEmpty()) {
        throw new ConfigException(where, "policies, or replenish-rate with burst-capacity: not both");
      }
      if (!bucket) {
        if (policies.isEmpty()) {
          throw new ConfigException(where + ".policies", "must not be empty");
        }
        List<Policy> named = new ArrayList<>();
        for (int i = 0; i < policies.size(); i++) {
          Policy p = limiter.config().policy(policies.get(i));
          if (p == null) {
            throw new ConfigException(
                where + ".policies[" + i + "]", "no policy is named \"" + policies.get(i) + "\"");
          }
          if (p.holdsSlots()) {
            // The gateway's RateLimiter answers before the route runs and never learns when the
            // response is finished, so it could not release the slots.
            throw new ConfigException(
                where + ".policies[" + i + "]",
                "policy \"" + p.name() + "\" is a concurrency policy, which the gateway's rate limiter"
                    + " cannot release; limit it with the starter's WebFilter");
          }
          if (p.queueMs() != null || p.limitResolver() != null) {
            // Its answer is allowed or not, at once: it can neither wait for a queued turn nor
            // hand a limit resolver the request it never sees.
            throw new ConfigException(
                where + ".policies[" + i + "]",
                "policy \"" + p.name() + "\" has a queue or a code limit, which the gateway's rate"
                    + " limiter cannot serve; limit it with the starter's WebFilter");
          }
          if (p.cost().kind() != Policy.CostKind.UNITS) {
            // The gateway's RateLimiter sees a route and a key, never the request.
            throw new ConfigException(
                where + ".policies[" + i + "]",
                "policy \"" + p.name() + "\" costs by body-bytes or a header, which the gateway's rate limiter cannot read");
          }
          named.add(p);
        }
        return new Route(named, null);
      }
      long rate = positive(replenishRate, where + ".replenish-rate");
      long capacity = burstCapacity == null ? rate : positive(burstCapacity, where + ".burst-capacity");
      long tokens = requestedTokens == null ? 1 : positive(requestedTokens, where + ".requested-tokens");
      String name = Keys.keySafe(routeId.getBytes(StandardCharsets.UTF_8));
      Policy p =
          new Policy(
              name,
              Policy.Algorithm.TOKEN,
              rate,
              1000,
              false,
              capacity,
              new Policy.Key(Policy.KeyKind.GLOBAL),
              new Policy.Cost(Policy.CostKind.UNITS, tokens, null),
              Policy.Count.ALL,
              false,
              null,
              null,
              null,
              null);
      return new Route(List.of(p), tokens);
    }

    private static long positive(Long value, String where) {
      if (value == null || value < 1 || value > Plan.MAX_COST) {
        throw new ConfigException(where, "must be an integer from 1 to " + Plan.MAX_COST);
      }
      return value;
    }
  }
}
