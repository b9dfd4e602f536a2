package io.librl;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * The one flow every client shares: build and check the call, answer from the denial cache while
 * it holds the call's denial, else send it (with WAIT behind it when durable), read the reply and
 * keep a denial. Immutable: {@code with...} returns a new engine over the same transport.
 */
final class Engine implements AsyncLimiter {
  private final Transport transport;
  private final DenialCache cache;
  private final int replicas;
  private final Duration durableTimeout;

  Engine(Transport transport) {
    this(transport, null, 0, Duration.ZERO);
  }

  private Engine(Transport transport, DenialCache cache, int replicas, Duration durableTimeout) {
    this.transport = transport;
    this.cache = cache;
    this.replicas = replicas;
    this.durableTimeout = durableTimeout;
  }

  @Override
  public CompletionStage<Decision> decide(Clause<?> clause) {
    CompletableFuture<Decision> once = decideOnce(clause);
    boolean split = clause.override().isPresent();
    boolean held = !clause.serverWait().isZero();
    if (!transport.cluster() || (!split && !held)) {
      return once;
    }
    // TRYAGAIN ran nothing (docs/clients/java.md, While a slot moves). A half-moved slot refuses
    // a call naming an override it does not hold: read the override, then call without it. A
    // waiting call whose slot moved away while it waited is sent again, once: to the key's node.
    return once.exceptionallyCompose(
        e -> {
          if (!Split.tryAgain(e)) {
            return failed(Split.unwrap(e));
          }
          return split ? Split.oneKey(this, clause) : decideOnce(clause);
        });
  }

  /** One limiter call, as it is: not split when it meets {@code TRYAGAIN}. */
  CompletableFuture<Decision> decideOnce(Clause<?> clause) {
    boolean leased = clause instanceof Concurrent;
    return checked(() -> Calls.single(clause))
        .thenCompose(k -> decision(k, reply -> Replies.decision(k.name(), reply, leased)));
  }

  @Override
  public CompletionStage<AllDecision> all(List<? extends Clause<?>> clauses) {
    return all(clauses, false);
  }

  @Override
  public CompletionStage<AllDecision> peekAll(List<? extends Clause<?>> clauses) {
    return all(clauses, true);
  }

  private CompletionStage<AllDecision> all(List<? extends Clause<?>> clauses, boolean peek) {
    Call k;
    try {
      k = Calls.all(clauses, peek);
    } catch (LibrlArgumentException e) {
      return failed(e);
    }
    boolean[] leased = new boolean[clauses.size()];
    for (int i = 0; i < leased.length; i++) {
      leased[i] = clauses.get(i) instanceof Concurrent;
    }
    CompletableFuture<AllDecision> once = decision(k, reply -> Replies.all(reply, leased));
    if (!transport.cluster()) {
      return once;
    }
    // A half-moved slot refuses an RL.ALL naming a key it does not hold: one clause at a time.
    return once.exceptionallyCompose(
        e -> Split.tryAgain(e) ? Split.all(this, clauses, peek) : failed(Split.unwrap(e)));
  }

  @Override
  public CompletionStage<Lease> acquire(Concurrent clause) {
    Objects.requireNonNull(clause, "clause");
    if (clause.releases().isPresent() || clause.renews().isPresent()) {
      return failed(
          new LibrlArgumentException(
              "acquire", "takes an acquire: release and renew through the Lease it returns"));
    }
    return decide(clause)
        .handle(
            (d, e) -> {
              if (e == null) {
                return new Lease(this, clause, d);
              }
              // Durable, too few replicas: the lease stands on the primary; the exception carries
              // it, to release.
              if (Stages.unwrap(e) instanceof DurabilityException de
                  && de.result() instanceof Decision taken) {
                throw new DurabilityException(
                    de.command(),
                    new Lease(this, clause, taken),
                    de.wanted(),
                    de.acked(),
                    de.timeout(),
                    de.getCause());
              }
              throw e instanceof CompletionException c ? c : new CompletionException(e);
            });
  }

  @Override
  public Lease heldLease(Concurrent clause, long id) {
    Objects.requireNonNull(clause, "clause");
    if (id < 1) {
      throw new LibrlArgumentException("heldLease", "a lease id is positive, got " + id);
    }
    return new Lease(
        this, clause, new Decision(true, 0, Duration.ZERO, clause.limit, 0, clause.lease(), id));
  }

  @Override
  public CompletionStage<Void> overrideSet(LimitOverride override) {
    return checked(() -> Calls.overrideSet(override)).thenCompose(k -> send(k, reply -> null));
  }

  @Override
  public CompletionStage<Optional<OverrideValues>> overrideGet(String okey) {
    return checked(() -> Calls.overrideGet(okey)).thenCompose(k -> send(k, Replies::override));
  }

  @Override
  public CompletionStage<Long> overrideDel(String... okeys) {
    Objects.requireNonNull(okeys, "okeys");
    if (okeys.length == 0) {
      return failed(new LibrlArgumentException("overrideDel", "needs at least one okey"));
    }
    // In a cluster one command per slot: a DEL of keys in two slots would be CROSSSLOT.
    Map<Integer, List<String>> groups = new LinkedHashMap<>();
    for (String k : okeys) {
      Objects.requireNonNull(k, "okey");
      groups.computeIfAbsent(transport.cluster() ? Slot.of(k) : 0, s -> new ArrayList<>()).add(k);
    }
    CompletableFuture<Long> total = CompletableFuture.completedFuture(0L);
    for (List<String> group : groups.values()) {
      total = total.thenCompose(sum -> overrideDelGroup(group).thenApply(n -> sum + n));
    }
    return total;
  }

  /** One DEL of keys sharing a slot; key by key when a half-moved slot refuses it. */
  private CompletableFuture<Long> overrideDelGroup(List<String> group) {
    Call k = Calls.overrideDel(group);
    CompletableFuture<Long> once = send(k, reply -> Replies.integer(k.name(), reply));
    if (group.size() < 2) {
      return once;
    }
    return once.exceptionallyCompose(
        e -> {
          if (!Split.tryAgain(e)) {
            return failed(Split.unwrap(e));
          }
          CompletableFuture<Long> sum = CompletableFuture.completedFuture(0L);
          for (String key : group) {
            sum = sum.thenCompose(n -> overrideDelGroup(List.of(key)).thenApply(m -> n + m));
          }
          return sum;
        });
  }

  @Override
  public CompletionStage<OverridePage> overrideList(String cursor, String match, long count) {
    if (transport.cluster()) {
      return failed(
          new LibrlArgumentException(
              "overrideList",
              "a cluster's overrides are listed per node, each with its own cursor: use overrideScan"));
    }
    return checked(() -> Calls.overrideList(cursor, match, count))
        .thenCompose(k -> send(k, Replies::page));
  }

  @Override
  public CompletionStage<List<OverrideEntry>> overrideScan(String match) {
    return transport
        .primaries()
        .thenCompose(
            nodes -> {
              List<OverrideEntry> all = new ArrayList<>();
              CompletableFuture<Void> done = CompletableFuture.completedFuture(null);
              for (Object node : nodes) {
                done = done.thenCompose(v -> scanNode(node, "0", match, all));
              }
              return done.thenApply(v -> List.copyOf(all));
            });
  }

  /**
   * Every page of one node's cursor. A loop, not a chain of stages: over Jedis every page arrives
   * before the next is asked, and a node with many keys (SCAN's count is per key, not per override)
   * would nest a stage per page until the stack overflowed.
   */
  private CompletableFuture<Void> scanNode(
      Object node, String cursor, String match, List<OverrideEntry> into) {
    CompletableFuture<Void> done = new CompletableFuture<>();
    scanFrom(node, cursor, match, into, done);
    return done;
  }

  private void scanFrom(
      Object node, String cursor, String match, List<OverrideEntry> into, CompletableFuture<Void> done) {
    while (true) {
      CompletableFuture<OverridePage> next =
          transport.sendTo(node, Calls.overrideList(cursor, match, 0)).thenApply(Replies::page);
      if (!next.isDone()) {
        next.whenComplete(
            (page, e) -> {
              if (e != null) {
                done.completeExceptionally(Split.unwrap(e));
              } else if (takeLast(page, into)) {
                done.complete(null);
              } else {
                scanFrom(node, page.cursor(), match, into, done);
              }
            });
        return;
      }
      OverridePage page;
      try {
        page = next.join();
      } catch (RuntimeException e) {
        done.completeExceptionally(Split.unwrap(e));
        return;
      }
      if (takeLast(page, into)) {
        done.complete(null);
        return;
      }
      cursor = page.cursor();
    }
  }

  /** Keeps the page's entries; whether it was the cursor's last. */
  private static boolean takeLast(OverridePage page, List<OverrideEntry> into) {
    into.addAll(page.entries());
    return page.isLast();
  }

  @Override
  public Engine withDenialCache(DenialCache cache) {
    return new Engine(transport, Objects.requireNonNull(cache, "cache"), replicas, durableTimeout);
  }

  @Override
  public Optional<DenialCache> denialCache() {
    return Optional.ofNullable(cache);
  }

  @Override
  public Engine withDurability(int replicas, Duration timeout) {
    Objects.requireNonNull(timeout, "timeout");
    if (replicas < 1) {
      throw new LibrlArgumentException(
          "withDurability", "replicas must be at least 1, got " + replicas);
    }
    if (timeout.compareTo(Duration.ofMillis(1)) < 0 || timeout.getNano() % 1_000_000 != 0) {
      throw new LibrlArgumentException(
          "withDurability",
          "the timeout must be a whole number of milliseconds, at least 1 ms (WAIT with 0 waits"
              + " forever), got "
              + timeout);
    }
    return new Engine(transport, cache, replicas, timeout);
  }

  /** A limiter call or RL.ALL: from the denial cache while it holds the call's denial. */
  private <T> CompletableFuture<T> decision(Call k, Function<Object, T> parse) {
    if (cache == null || k.effect() != Call.Effect.CACHEABLE) {
      return send(k, parse);
    }
    String id = DenialCache.id(k);
    long generation = cache.generation();
    long sent = System.nanoTime();
    Object hit = cache.lookup(id, sent);
    if (hit != null) {
      @SuppressWarnings("unchecked") // the id names the command, which says the decision's type
      T cached = (T) hit;
      return CompletableFuture.completedFuture(cached);
    }
    return send(
        k,
        reply -> {
          T result = parse.apply(reply);
          Duration retry = null;
          if (result instanceof Decision d && !d.allowed()) {
            retry = d.retryAfter();
          } else if (result instanceof AllDecision a && !a.allowed()) {
            retry = a.retryAfter();
          }
          if (retry != null) {
            cache.keep(id, generation, sent, System.nanoTime(), retry, result, k.keys());
          }
          return result;
        });
  }

  /**
   * Routes and sends a checked call and reads its reply; durable, with WAIT behind it. The
   * denial cache learns what the call changed once it is answered.
   */
  private <T> CompletableFuture<T> send(Call k, Function<Object, T> parse) {
    try {
      if (transport.cluster()) {
        Slot.check(k.name(), k.keys());
      }
      Duration limit = transport.replyTimeout();
      if (k.holds() && limit != null && k.serverWait().plusSeconds(1).compareTo(limit) > 0) {
        throw new LibrlArgumentException(
            k.name(),
            "waitUpTo("
                + k.serverWait().toMillis()
                + " ms) holds the reply about as long as the client's timeout ("
                + limit.toMillis()
                + " ms) or longer: raise the client's timeout above it, or use reserve and wait"
                + " in the caller");
      }
    } catch (LibrlArgumentException e) {
      return failed(e);
    }
    CompletableFuture<T> out;
    if (replicas > 0 && k.writes()) {
      out =
          transport
              .sendDurable(k, replicas, durableTimeout)
              .thenApply(
                  d -> {
                    T result = parse.apply(d.reply());
                    if (d.waitError() != null || d.acked() < replicas) {
                      throw new DurabilityException(
                          k.name(), result, replicas, d.acked(), durableTimeout, d.waitError());
                    }
                    return result;
                  });
    } else {
      out = transport.send(k).thenApply(parse);
    }
    if (cache != null) {
      out = out.whenComplete((r, e) -> cache.after(k));
    }
    return out;
  }

  private static CompletableFuture<Call> checked(Supplier<Call> build) {
    try {
      return CompletableFuture.completedFuture(build.get());
    } catch (LibrlArgumentException e) {
      return failed(e);
    }
  }

  private static <T> CompletableFuture<T> failed(Throwable e) {
    return CompletableFuture.failedFuture(e);
  }
}
