package io.librl.http;

import io.librl.Decision;
import java.time.Duration;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;

/**
 * The framework-free part of the contract (docs/http.md): a {@code RateLimiter} holds the
 * configuration, the Redis connection and the hook, and turns one request into a {@link Decided}
 * (checks, replies, headers, and the refusal when there is one), then settles {@code count:
 * failed} / {@code succeeded} once the status is known. Each framework's adapter only moves
 * requests and responses: {@link #plan}, {@link #decide}, write {@link Decided#headers()}, send
 * the refusal or call the handler, {@link #settle}, and {@link #release} once the response is
 * finished.
 *
 * <pre>{@code
 * RateLimiter limiter = RateLimiter.builder(Config.load(Path.of("policies.yaml")))
 *     .redisUrl("redis://127.0.0.1:6379")
 *     .build();
 * }</pre>
 */
public final class RateLimiter implements AutoCloseable {
  private static final System.Logger LOG = System.getLogger("io.librl.http");

  private final RedisConnection connection;
  private final Hook.DecisionHook hook;
  private final Resolvers resolvers;
  private final Breaker breaker = new Breaker(() -> System.nanoTime() / 1_000_000);
  /** The configuration in force, swapped whole by {@link #reload}. */
  private volatile State state;
  /** The {@code local} fail mode's limiter, made when a configuration first asks for it. */
  private volatile LocalLimiter local;
  private Instant warned;

  /** A configuration with what is built from it: its routes, and its Redis exchange's timeout. */
  private record State(Config config, Routes routes, Backend backend) {}

  private RateLimiter(
      Config config, RedisConnection connection, Hook.DecisionHook hook, Resolvers resolvers) {
    this.connection = connection;
    this.hook = hook;
    this.resolvers = resolvers;
    this.state = state(config);
    this.local = config.fail() == Config.FailMode.LOCAL ? new LocalLimiter(config.localMaxKeys()) : null;
  }

  private State state(Config config) {
    return new State(config, new Routes(config.policies(), config.routes()), new Backend(connection, config.timeout()));
  }

  /**
   * Swaps the configuration while requests are served (docs/http.md, Reload): requests that
   * arrive from now on use {@code config}; requests in flight finish on the one they started
   * with. A configuration naming a resolver nobody registered is refused with the start-up error
   * and the old one stays. Read the new file with {@link Config#load(Path)}, whose errors are the
   * start-up ones too. The Redis connection is kept ({@code timeout} applies from now on);
   * routes a framework built from names ({@code @RateLimited}) keep their policies.
   *
   * @throws ConfigException when {@code config} is refused
   */
  public void reload(Config config) {
    resolvers.check(Objects.requireNonNull(config, "config"));
    if (config.fail() == Config.FailMode.LOCAL && local == null) {
      local = new LocalLimiter(config.localMaxKeys());
    }
    state = state(config);
  }

  public static Builder builder(Config config) {
    return new Builder(Objects.requireNonNull(config, "config"));
  }

  /** Builds a {@link RateLimiter}; Redis is {@code redis://127.0.0.1:6379} unless told. */
  public static final class Builder {
    private final Config config;
    private RedisConnection connection;
    private Hook.DecisionHook hook;
    private final Resolvers.Registry resolvers = new Resolvers.Registry();

    private Builder(Config config) {
      this.config = config;
    }

    /** Registers the cost resolver the file names as {@code cost: code:<name>}. */
    public Builder costResolver(String name, Resolvers.CostResolver resolver) {
      resolvers.costs.put(Objects.requireNonNull(name, "name"), Objects.requireNonNull(resolver, "resolver"));
      return this;
    }

    /** Registers the limit resolver the file names as {@code limit: code:<name>}. */
    public Builder limitResolver(String name, Resolvers.LimitResolver resolver) {
      resolvers.limits.put(Objects.requireNonNull(name, "name"), Objects.requireNonNull(resolver, "resolver"));
      return this;
    }

    /** Registers the mode resolver the file names as {@code mode: code:<name>}. */
    public Builder modeResolver(String name, Resolvers.ModeResolver resolver) {
      resolvers.modes.put(Objects.requireNonNull(name, "name"), Objects.requireNonNull(resolver, "resolver"));
      return this;
    }

    /** A standalone server's URL. */
    public Builder redisUrl(String url) {
      this.connection = RedisConnection.url(url, config.timeout());
      return this;
    }

    /** A cluster's nodes ({@code host:port}); some of them suffice. */
    public Builder redisCluster(List<String> nodes) {
      this.connection = RedisConnection.cluster(nodes, config.timeout());
      return this;
    }

    /** Calls through this connection (for instance {@link RedisConnection#of} your limiter). */
    public Builder redis(RedisConnection connection) {
      this.connection = Objects.requireNonNull(connection, "connection");
      return this;
    }

    /** Called once per checked request (docs/http.md, Decision hook). */
    public Builder hook(Hook.DecisionHook hook) {
      this.hook = hook;
      return this;
    }

    /**
     * The limiter. Redis is connected in the background now (so the first request does not wait
     * for it) and again on demand; a Redis that is down does not stop the start. A resolver the
     * configuration names and no one registered is a {@link ConfigException} naming its field.
     */
    public RateLimiter build() {
      Resolvers registered = resolvers.build();
      registered.check(config);
      RateLimiter limiter =
          new RateLimiter(
              config,
              connection != null
                  ? connection
                  : RedisConnection.url("redis://127.0.0.1:6379", config.timeout()),
              hook,
              registered);
      limiter.connection.limiter();
      return limiter;
    }
  }

  /** The configuration in force. */
  public Config config() {
    return state.config();
  }

  /**
   * Waits at most {@code max} for the connection {@link Builder#build} started (or a new attempt,
   * when that one failed): an application calls it before it takes requests, so that its first
   * ones do not meet the fail mode while Redis is still being connected. A Redis that refuses the
   * connection ends the wait at once. Returns whether Redis is connected.
   */
  public boolean awaitConnection(Duration max) {
    try {
      connection.limiter().get(max.toNanos(), java.util.concurrent.TimeUnit.NANOSECONDS);
      return true;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
      return false;
    }
  }

  /** The configuration's own routes. */
  public Routes routes() {
    return state.routes();
  }

  /**
   * Routes for one handler checking the configuration's policies of these names, in this order,
   * whatever the file's routes say; an unknown name is a {@link ConfigException} at {@code
   * where[i]}.
   */
  public Routes named(List<String> names, String where) {
    List<Policy> policies = new ArrayList<>();
    for (int i = 0; i < names.size(); i++) {
      Policy p = state.config().policy(names.get(i));
      if (p == null) {
        throw new ConfigException(
            where + "[" + i + "]", "no policy is named \"" + names.get(i) + "\"");
      }
      policies.add(p);
    }
    return new Routes(policies, List.of());
  }

  /**
   * The applying policies with their subjects, or null when the request is not checked (no route,
   * an exempt client: docs/http.md, Exemptions).
   */
  public Plan.Planned plan(Routes routes, Plan.Request request) {
    Config config = state.config();
    Routes.Selection selection = routes.select(request.method(), request.pathBytes());
    if (selection == null || selection.policies().isEmpty()) {
      return null;
    }
    Identity.Client client =
        Identity.Client.of(
            request.peer(), request.headers(), request.queryBytes(), config, request.user(),
            request.attributes());
    if (client.exempt()) {
      return null;
    }
    return new Plan.Planned(
        selection.path(),
        Plan.applying(selection.policies(), client, request.headers()),
        selection.deny(),
        config);
  }

  /**
   * The limiter key and override key the middleware uses for {@code policy} and a subject's raw
   * value (docs/http.md, Keys from code): an address, an API key, a user name, a header's,
   * cookie's or query parameter's value (its UTF-8 bytes), ignored for a {@code global} policy.
   * The override key is given whether or not the policy is {@code overridable}: {@code
   * RL.OVERRIDE SET <it> 1000 1m} gives that subject its own plan.
   *
   * @throws IllegalArgumentException for a policy the configuration does not have, or a value
   *     that cannot be its subject (an {@code ip} value that is no address)
   */
  public Keys keys(String policy, String value) {
    return keys(policy, value == null ? null : value.getBytes(java.nio.charset.StandardCharsets.UTF_8));
  }

  /** {@link #keys(String, String)} for a value given as bytes. */
  public Keys keys(String policy, byte[] value) {
    Config config = state.config();
    Policy p = config.policy(policy);
    if (p == null) {
      throw new IllegalArgumentException("no policy is named \"" + policy + "\"");
    }
    Identity.Subject subject = Identity.ofValue(config, p.key(), value);
    if (subject == null) {
      throw new IllegalArgumentException(
          "policy \"" + policy + "\" is keyed by " + p.key().configText() + ", which this value cannot be");
    }
    return Keys.of(config.prefix(), subject, p.name(), true);
  }

  /** The 413 a planned request gets when its body is larger than {@code max_body_bytes}. */
  public Refusals.Reply tooLarge() {
    return Refusals.refused(new Plan.TooLarge(state.config().maxBodyBytes()));
  }

  /**
   * Costs, then one {@code RL.ALL} per subject (or the fail mode), the hook, and what to answer.
   * {@code bodyLength}: the body's size when {@link Plan.Planned#needsBodyLength} asked for it,
   * else -1. Never completes exceptionally for Redis's sake: the fail mode decides.
   */
  public CompletableFuture<Decided> decide(Plan.Planned planned, Plan.Request request, long bodyLength) {
    State current = state;
    // A request planned before a reload finishes on the configuration it was planned with.
    State st =
        planned.config() == null || planned.config() == current.config()
            ? current
            : new State(planned.config(), current.routes(), new Backend(connection, planned.config().timeout()));
    Config config = st.config();
    Config.Mode mode = resolvers.mode(config, request);
    if (mode == Config.Mode.OFF) {
      return CompletableFuture.completedFuture(Decided.UNCHECKED);
    }
    List<Plan.Check> checks;
    try {
      checks = Plan.checks(planned, config.prefix(), request, bodyLength, mode, resolvers);
    } catch (Plan.RefusedException e) {
      return CompletableFuture.completedFuture(
          new Decided(
              List.of(), List.of(), null, Refusals.refused(e.refusal()), Map.of(), Leases.NONE, 0));
    }
    if (checks.isEmpty()) {
      return CompletableFuture.completedFuture(Decided.UNCHECKED);
    }
    return exchange(
        new Asked(planned.route(), request.method(), request.path(), mode,
            planned.deny() == null ? config.deny() : planned.deny(), st),
        checks);
  }

  /**
   * The same decision for checks a caller built itself, without a request to plan from (Spring
   * Cloud Gateway's {@code RateLimiter} has a route and a key, nothing else): {@code route} is
   * what the hook and the logs name.
   */
  public CompletableFuture<Decided> decide(String route, List<Plan.Check> checks) {
    State st = state;
    return exchange(
        new Asked(route, null, null, st.config().mode(), st.config().deny(), st), List.copyOf(checks));
  }

  /**
   * What the hook and the logs say about the request (its route, method and path, or nulls), its
   * mode, and the refusal a denial gets (the route's {@code deny}, or the top-level one).
   */
  private record Asked(
      String route, String method, String path, Config.Mode mode, Config.Deny deny, State state) {}

  private CompletableFuture<Decided> exchange(Asked asked, List<Plan.Check> checks) {
    if (!breaker.asks()) {
      return fail(asked, checks, new Backend.Failure(new Breaker.Open(), List.of(), List.of()));
    }
    // One stage after the exchange: the answer is made where Redis's reply completes it.
    CompletableFuture<Decided> out = new CompletableFuture<>();
    asked.state().backend()
        .check(checks)
        .whenComplete(
            (verdict, error) -> {
              breaker.ended(error);
              if (error == null) {
                try {
                  out.complete(
                      respond(asked, checks, verdict.replies(),
                          verdict.admitted()
                              ? Hook.Outcome.of(checks, verdict.replies(), asked.mode())
                              : Hook.Outcome.of(false, asked.mode()),
                          null));
                } catch (RuntimeException e) {
                  out.completeExceptionally(e);
                }
                return;
              }
              // A stage before may have wrapped the Failure (and its admitted groups) in a
              // CompletionException.
              Throwable cause =
                  error instanceof CompletionException && error.getCause() != null
                      ? error.getCause()
                      : error;
              Backend.Failure failure =
                  cause instanceof Backend.Failure f ? f : new Backend.Failure(cause, List.of(), List.of());
              CompletableFuture<Decided> failed;
              try {
                failed = fail(asked, checks, failure);
              } catch (RuntimeException e) {
                out.completeExceptionally(e);
                return;
              }
              failed.whenComplete(
                      (decided, e) -> {
                        if (e != null) {
                          out.completeExceptionally(e);
                        } else {
                          out.complete(decided);
                        }
                      });
            });
    return out;
  }

  /**
   * Redis could not answer (docs/http.md, Fail modes), maybe after it admitted some groups: a
   * request that is served keeps them counted, one that is refused has them refunded first.
   */
  private CompletableFuture<Decided> fail(Asked asked, List<Plan.Check> checks, Backend.Failure failure) {
    String error = failure.getMessage();
    Config config = asked.state().config();
    Backend backend = asked.state().backend();
    if (config.fail() == Config.FailMode.LOCAL && local != null) {
      return local(asked, checks, failure, error);
    }
    if (config.fail() == Config.FailMode.OPEN) {
      warnOpen(error);
      // Served unchecked, it holds no slots: the leases admitted groups took go at once.
      backend.release(takenBefore(checks, failure, true));
      return CompletableFuture.completedFuture(
          respond(asked, checks, List.of(), Hook.Outcome.FAIL_OPEN, error));
    }
    LOG.log(System.Logger.Level.ERROR, "librl: request refused (fail closed): " + error);
    backend.release(takenBefore(checks, failure, false));
    return backend
        .refundGroups(checks, failure.admitted, failure.replies)
        .thenApply(v -> respond(asked, checks, List.of(), Hook.Outcome.FAIL_CLOSED, error));
  }

  /**
   * The leases Redis took before it failed: the shadow groups' (never refunded, released all the
   * same), and with {@code enforced} the admitted enforced groups' (a refusal's refund gives
   * those back itself).
   */
  private static List<Leases.Held> takenBefore(
      List<Plan.Check> checks, Backend.Failure failure, boolean enforced) {
    List<Leases.Held> out = new ArrayList<>();
    for (List<Integer> members : failure.shadowAdmitted) {
      out.addAll(Backend.held(checks, members, failure.replies));
    }
    if (enforced) {
      for (List<Integer> members : failure.admitted) {
        out.addAll(Backend.held(checks, members, failure.replies));
      }
    }
    return out;
  }

  /**
   * The {@code local} fail mode (docs/http.md, Fail modes): the enforced checks decided in the
   * process all-or-nothing, the shadow ones apart, as Redis would. What Redis admitted before it
   * failed stays counted when the request is served, and is refunded when it is refused; the
   * leases Redis took go at once (the request's slots are the local ones now).
   */
  private CompletableFuture<Decided> local(
      Asked asked, List<Plan.Check> checks, Backend.Failure failure, String error) {
    Backend backend = asked.state().backend();
    Decision[] replies = new Decision[checks.size()];
    boolean admitted = true;
    for (boolean shadow : new boolean[] {false, true}) {
      List<Integer> indices = new ArrayList<>();
      List<Plan.Check> part = new ArrayList<>();
      for (int i = 0; i < checks.size(); i++) {
        if (checks.get(i).shadow() == shadow) {
          indices.add(i);
          part.add(checks.get(i));
        }
      }
      if (part.isEmpty()) {
        continue;
      }
      io.librl.AllDecision all = local.check(LocalLimiter.clauses(part), false);
      for (int k = 0; k < indices.size(); k++) {
        replies[indices.get(k)] = all.decisions().get(k);
      }
      admitted &= shadow || all.allowed();
    }
    List<Decision> decided = java.util.Arrays.asList(replies);
    Hook.Outcome outcome =
        admitted ? Hook.Outcome.of(checks, decided, asked.mode()) : Hook.Outcome.of(false, asked.mode());
    // Redis's leases go now: served, the request's slots are the local ones; refused, the
    // refund below releases the admitted groups' own.
    backend.release(takenBefore(checks, failure, outcome != Hook.Outcome.DENIED));
    if (outcome != Hook.Outcome.DENIED) {
      return CompletableFuture.completedFuture(respond(asked, checks, decided, outcome, error, true));
    }
    return backend
        .refundGroups(checks, failure.admitted, failure.replies)
        .thenApply(v -> respond(asked, checks, decided, outcome, error, true));
  }

  private Decided respond(
      Asked asked,
      List<Plan.Check> checks,
      List<Decision> replies,
      Hook.Outcome outcome,
      String error) {
    return respond(asked, checks, replies, outcome, error, false);
  }

  /** {@code decidedLocally}: by the {@code local} fail mode, whose leases it holds. */
  private Decided respond(
      Asked asked,
      List<Plan.Check> checks,
      List<Decision> replies,
      Hook.Outcome outcome,
      String error,
      boolean decidedLocally) {
    Config config = asked.state().config();
    Backend backend = asked.state().backend();
    boolean refused = outcome == Hook.Outcome.DENIED;
    int worst = ResponseHeaders.mostRestrictive(checks, replies, refused);
    if (outcome == Hook.Outcome.WOULD_DENY && worst >= 0) {
      LOG.log(
          System.Logger.Level.WARNING,
          "librl: shadow: policy \"" + checks.get(worst).policy().name() + "\" would deny "
              + (asked.method() == null ? "route " + asked.route() : asked.method() + " " + asked.path()));
    }
    if (hook != null) {
      List<Hook.CheckReport> reports = new ArrayList<>();
      for (int i = 0; i < checks.size(); i++) {
        Plan.Check c = checks.get(i);
        reports.add(
            new Hook.CheckReport(
                c.policy().name(), c.subject().toString(), c.key(), c.cost(),
                i < replies.size() ? replies.get(i) : null));
      }
      Hook.call(
          hook,
          new Hook.DecisionEvent(
              outcome, decidedLocally, asked.method(), asked.path(), asked.route(), reports, error));
    }
    Refusals.Reply refusal = null;
    if (refused) {
      refusal =
          worst >= 0
              ? Refusals.denied(asked.deny(), checks.get(worst), replies.get(worst))
              : Refusals.unavailable(config.failDeny());
    } else if (outcome == Hook.Outcome.FAIL_CLOSED) {
      refusal = Refusals.unavailable(config.failDeny());
    }
    Map<String, String> headers =
        replies.size() == checks.size() && !replies.isEmpty()
            ? ResponseHeaders.of(
                config.headers(), config.legacyReset(),
                config.legacyReset() == Config.LegacyReset.UNIX ? System.currentTimeMillis() : 0,
                checks, replies, outcome)
            : Map.of();
    Leases leases = Leases.NONE;
    if ((outcome == Hook.Outcome.ALLOWED || outcome == Hook.Outcome.WOULD_DENY || refused)
        && anyHoldsSlots(checks)) {
      // What the request holds: every admitted check's lease when the enforced groups admitted
      // it, else only the shadow ones' (the enforced ones were given back after the denial).
      List<Integer> holding = new ArrayList<>();
      boolean enforcedAdmitted = !refused && enforcedAllowed(checks, replies);
      for (int i = 0; i < checks.size(); i++) {
        if (checks.get(i).shadow() || enforcedAdmitted) {
          holding.add(i);
        }
      }
      List<Leases.Held> held = Backend.held(checks, holding, replies);
      if (decidedLocally) {
        List<Leases.Held> own = new ArrayList<>(held.size());
        for (Leases.Held h : held) {
          own.add(new Leases.Held(h.check(), h.leaseId(), local));
        }
        held = own;
      }
      if (refused) {
        // Refused now: its response is finished, and what a shadow group took goes at once.
        release(backend, held);
      } else {
        leases = held.isEmpty() ? Leases.NONE : new Leases(held);
      }
    }
    return new Decided(checks, replies, outcome, refusal, headers, leases, queuedMs(checks, replies, refusal));
  }

  /**
   * How long a served request waits for its turn (docs/http.md, Lockouts and queues): the latest
   * turn its {@code queue} policies booked with {@code RESERVE}; 0 without one.
   */
  private static long queuedMs(List<Plan.Check> checks, List<Decision> replies, Refusals.Reply refusal) {
    long wait = 0;
    if (refusal != null || replies.size() != checks.size()) {
      return 0;
    }
    for (int i = 0; i < checks.size(); i++) {
      Decision d = replies.get(i);
      if (checks.get(i).policy().queueMs() != null && d.allowed()) {
        wait = Math.max(wait, d.retryAfter().toMillis());
      }
    }
    return wait;
  }

  /** Whether a check takes slots (a concurrency policy's lease); most requests have none. */
  private static boolean anyHoldsSlots(List<Plan.Check> checks) {
    for (Plan.Check c : checks) {
      if (c.policy().holdsSlots()) {
        return true;
      }
    }
    return false;
  }

  /** Whether every enforced check's reply admitted the request. */
  private static boolean enforcedAllowed(List<Plan.Check> checks, List<Decision> replies) {
    for (int i = 0; i < checks.size() && i < replies.size(); i++) {
      if (!checks.get(i).shadow() && (replies.get(i) == null || !replies.get(i).allowed())) {
        return false;
      }
    }
    return true;
  }

  /**
   * Releases the slots an admitted request holds (its concurrency policies' leases): call it once
   * its response is finished (sent, the client gone, or the handler failed); later calls send
   * nothing. Completes within the timeout, never exceptionally: a release that fails is logged,
   * and the lease ends by itself (docs/http.md, Concurrency limits).
   */
  public CompletableFuture<Void> release(Decided decided) {
    return release(state.backend(), decided.leases().take());
  }

  /** Releases leases where they were taken: in Redis, or in the local fail mode's limiter. */
  private static CompletableFuture<Void> release(Backend backend, List<Leases.Held> leases) {
    List<Leases.Held> inRedis = new ArrayList<>(leases.size());
    for (Leases.Held h : leases) {
      if (h.local() == null) {
        inRedis.add(h);
      } else {
        h.local().release(LocalLimiter.Clause.of(h.check()), h.leaseId());
      }
    }
    return backend.release(inRedis);
  }

  /**
   * {@code count: failed} refunds below 400, {@code count: succeeded} from 400: call it before the
   * response goes out, so the client's next request sees it. A failed refund is logged.
   */
  public CompletableFuture<Void> settle(Decided decided, int status) {
    if (!decided.settles()) {
      return CompletableFuture.completedFuture(null);
    }
    List<Plan.Check> refund = new ArrayList<>();
    for (int i = 0; i < decided.checks().size(); i++) {
      Plan.Check c = decided.checks().get(i);
      Policy.Count count = c.policy().count();
      // A check whose own reply denied (a shadow policy's) counted nothing to give back.
      if (((count == Policy.Count.FAILED && status < 400)
              || (count == Policy.Count.SUCCEEDED && status >= 400))
          && decided.replies().get(i).allowed()) {
        refund.add(c);
      }
    }
    if (refund.isEmpty()) {
      return CompletableFuture.completedFuture(null);
    }
    return state.backend().refund(refund);
  }

  private synchronized void warnOpen(String error) {
    Instant now = Instant.now();
    if (warned == null || Duration.between(warned, now).compareTo(Duration.ofSeconds(10)) >= 0) {
      warned = now;
      LOG.log(System.Logger.Level.WARNING, "librl: rate limiting skipped (fail open): " + error);
    }
  }

  /** Closes the Redis connection this limiter made (never one the application gave). */
  @Override
  public void close() {
    connection.close();
  }

  /**
   * One request's decision and what to answer.
   *
   * @param checks the policies checked, in order
   * @param replies each check's reply (empty when Redis could not answer)
   * @param outcome what happened; null for a request refused before any check (400, 413)
   * @param refusal the response to send instead of calling the handler, or null
   * @param headers the rate-limit headers for the response (refusal or handler's), in order
   * @param leases the slots an admitted request holds until {@link #release}
   * @param waitMs how long the adapter waits before serving it: its {@code queue} turn (a sleep
   *     of the request's thread, or an asynchronous delay), never a wait on Redis; 0: none
   */
  public record Decided(
      List<Plan.Check> checks,
      List<Decision> replies,
      Hook.Outcome outcome,
      Refusals.Reply refusal,
      Map<String, String> headers,
      Leases leases,
      long waitMs) {

    /**
     * A request nothing checked (a mode resolver said off, every limit resolver gave nothing): no
     * headers, no hook call, nothing to settle or release.
     */
    public static final Decided UNCHECKED =
        new Decided(List.of(), List.of(), null, null, Map.of(), Leases.NONE, 0);

    /** Whether the request holds slots that {@link #release} gives back once it is finished. */
    public boolean holdsSlots() {
      return !leases.isEmpty();
    }

    /** Whether {@link #settle} may refund something once the status is known. */
    public boolean settles() {
      if (outcome != Hook.Outcome.ALLOWED
          && !(outcome == Hook.Outcome.WOULD_DENY && enforcedAllowed(checks, replies))) {
        return false;
      }
      for (Plan.Check c : checks) {
        if (c.policy().count() != Policy.Count.ALL) {
          return true;
        }
      }
      return false;
    }
  }
}
