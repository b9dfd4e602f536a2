package io.librl;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;

/**
 * A call a half-moved cluster slot refuses with {@code TRYAGAIN}, sent again as calls naming one
 * key each, which the slot always serves (docs/clients/java.md, While a slot moves). {@code
 * TRYAGAIN} means the server ran nothing, and while the slot is half-moved key by key it comes
 * back for as long as the move lasts when a key the call names exists nowhere, so retrying would
 * not help: the call is split at once instead.
 */
final class Split {
  private Split() {}

  /** Whether the call failed with {@code TRYAGAIN}: nothing ran, it may be sent again. */
  static boolean tryAgain(Throwable e) {
    return unwrap(e) instanceof LibrlCommandException c && "TRYAGAIN".equals(c.errorCode());
  }

  static Throwable unwrap(Throwable e) {
    return Stages.unwrap(e);
  }

  /**
   * The clause as one-key calls send it: without {@code OVERRIDE}, with the override's limit,
   * window and burst (a lease's length) in place of its own when one exists, read a moment before
   * rather than in the call's atomic step.
   */
  static CompletableFuture<Clause<?>> resolved(Engine engine, Clause<?> clause) {
    if (clause.override().isEmpty()) {
      return CompletableFuture.completedFuture(clause);
    }
    return engine
        .overrideGet(clause.override().get())
        .toCompletableFuture()
        .thenApply(
            o -> {
              Clause<?> plain = clause.withoutOverride();
              return o.isEmpty() ? plain : plain.withLimits(o.get().limit(), o.get().window(), o.get().burst());
            });
  }

  /** One limiter call with its override resolved: {@link #resolved}, then the call. */
  static CompletableFuture<Decision> oneKey(Engine engine, Clause<?> clause) {
    return resolved(engine, clause).thenCompose(plain -> engine.decideOnce(plain).toCompletableFuture());
  }

  /**
   * {@code RL.ALL} as single calls: the clauses that must admit now, then those reserving tokens
   * ({@code reserve}, and {@code waitUpTo} sent as a reservation the package then waits out, as the
   * server would), then refunds, which always admit. Once one denies, the clauses admitted are
   * given back ({@code REFUND} their cost, {@code RELEASE} their lease) and the rest answered with
   * {@code PEEK}; the decision is built as {@code RL.ALL}'s. All-or-nothing holds by compensation:
   * another client may see a clause's count for an instant.
   */
  static CompletableFuture<AllDecision> all(
      Engine engine, List<? extends Clause<?>> clauses, boolean peek) {
    State s = new State(clauses, peek);
    CompletableFuture<Void> chain = CompletableFuture.completedFuture(null);
    for (int i : order(clauses)) {
      chain = chain.thenCompose(v -> s.step(engine, i));
    }
    return chain
        .handle(
            (v, e) -> {
              if (e == null && !s.denied) {
                return CompletableFuture.<Void>completedFuture(null);
              }
              // A failure, or a denial: give back what was admitted, then report.
              return s.giveBack(engine)
                  .thenCompose(
                      gave ->
                          e == null
                              ? CompletableFuture.<Void>completedFuture(null)
                              : CompletableFuture.<Void>failedFuture(unwrap(e)));
            })
        .thenCompose(f -> f)
        .thenCompose(v -> s.decision());
  }

  private static boolean reserving(Clause<?> c) {
    return c instanceof Token t && (t.reserve().isPresent() || t.waitUpTo().isPresent());
  }

  /** The order the clauses are sent in: admitting now, reserving, refunding. */
  private static List<Integer> order(List<? extends Clause<?>> clauses) {
    List<Integer> now = new ArrayList<>();
    List<Integer> later = new ArrayList<>();
    List<Integer> refunds = new ArrayList<>();
    for (int i = 0; i < clauses.size(); i++) {
      Clause<?> c = clauses.get(i);
      (c.refund().isPresent() ? refunds : reserving(c) ? later : now).add(i);
    }
    now.addAll(later);
    now.addAll(refunds);
    return now;
  }

  /** Whether the clause's decision refuses the call. */
  private static boolean denies(Decision d, Clause<?> c) {
    return !d.allowed() || (!reserving(c) && !d.retryAfter().isZero());
  }

  /** One split call in progress. */
  private static final class State {
    final List<? extends Clause<?>> clauses;
    final boolean peek;
    final Decision[] decisions;
    /** The clause each one-key call was, its override resolved: what a give-back undoes. */
    final Clause<?>[] sent;
    final List<Integer> admitted = new ArrayList<>();
    boolean denied;
    DurabilityException durability;

    State(List<? extends Clause<?>> clauses, boolean peek) {
      this.clauses = clauses;
      this.peek = peek;
      this.decisions = new Decision[clauses.size()];
      this.sent = new Clause<?>[clauses.size()];
    }

    CompletableFuture<Void> step(Engine engine, int i) {
      Clause<?> c = clauses.get(i);
      // waitUpTo goes as a reservation; the package waits, below, as the server would have.
      Clause<?> queued = c instanceof Token t ? t.asReserve() : c;
      Clause<?> call = peek || denied ? queued.peek() : queued;
      return resolved(engine, call)
          .thenCompose(
              plain -> {
                sent[i] = plain;
                return engine
                    .decideOnce(plain)
                    .toCompletableFuture()
                    .exceptionallyCompose(
                        e -> {
                          if (unwrap(e) instanceof DurabilityException d
                              && d.result() instanceof Decision kept) {
                            durability = durability == null ? d : durability;
                            return CompletableFuture.completedFuture(kept);
                          }
                          return CompletableFuture.failedFuture(unwrap(e));
                        });
              })
          .thenAccept(
              d -> {
                decisions[i] = d;
                if (!peek && !denied) {
                  if (denies(d, c)) {
                    denied = true;
                  } else {
                    admitted.add(i);
                  }
                }
              });
    }

    /** Gives back every clause admitted: its cost refunded, its lease released. */
    CompletableFuture<Void> giveBack(Engine engine) {
      CompletableFuture<Void> chain = CompletableFuture.completedFuture(null);
      for (int i : admitted) {
        Clause<?> c = sent[i];
        Clause<?> undo;
        if (c instanceof Concurrent k) {
          long id = decisions[i].leaseId();
          if (id == 0) {
            continue;
          }
          undo = k.forLease().release(id);
          Decision d = decisions[i];
          decisions[i] =
              new Decision(
                  d.allowed(), d.count(), d.retryAfter(), d.limit(), d.remaining(), d.resetAfter(), 0);
        } else if (c.reads() || c.refund().isPresent()) {
          continue;
        } else {
          undo = c.givenBack();
        }
        chain =
            chain.thenCompose(
                v ->
                    engine
                        .decideOnce(undo)
                        .toCompletableFuture()
                        .handle(
                            (d, e) -> {
                              // A give-back the replicas missed still stands on the primary.
                              if (e != null && !(unwrap(e) instanceof DurabilityException)) {
                                throw new CompletionException(unwrap(e));
                              }
                              return null;
                            }));
      }
      admitted.clear();
      return chain;
    }

    /** The {@code RL.ALL} decision the replies make, after the wait of {@code waitUpTo} clauses. */
    CompletableFuture<AllDecision> decision() {
      boolean allowed = true;
      boolean denying = false;
      Duration retry = Duration.ZERO;
      for (int i = 0; i < decisions.length; i++) {
        Decision d = decisions[i];
        allowed &= d.allowed();
        if (denies(d, clauses.get(i))) {
          if (!denying
              || (!Decision.NEVER.equals(retry)
                  && (Decision.NEVER.equals(d.retryAfter()) || d.retryAfter().compareTo(retry) > 0))) {
            retry = d.retryAfter();
          }
          denying = true;
        }
      }
      if (peek || denied || denying) {
        return finish(new AllDecision(allowed && !denied, retry, List.of(decisions)));
      }
      Duration hold = Duration.ZERO;
      for (int i = 0; i < decisions.length; i++) {
        if (clauses.get(i) instanceof Token t
            && t.waitUpTo().isPresent()
            && decisions[i].retryAfter().compareTo(hold) > 0) {
          hold = decisions[i].retryAfter();
        }
      }
      long started = System.nanoTime();
      Duration held = hold;
      return CompletableFuture.runAsync(
              () -> {}, CompletableFuture.delayedExecutor(held.toNanos(), TimeUnit.NANOSECONDS))
          .thenCompose(
              v -> {
                long waited = System.nanoTime() - started;
                Duration top = Duration.ZERO;
                for (int i = 0; i < decisions.length; i++) {
                  Decision d = decisions[i];
                  if (reserving(clauses.get(i))) {
                    Duration left = DenialCache.left(d.retryAfter(), waited);
                    decisions[i] =
                        new Decision(
                            d.allowed(), d.count(), left, d.limit(), d.remaining(), d.resetAfter(), d.leaseId());
                    top = left.compareTo(top) > 0 ? left : top;
                  }
                }
                return finish(new AllDecision(true, top, List.of(decisions)));
              });
    }

    /** The decision, or the durability failure of one of the single calls, carrying it. */
    private CompletableFuture<AllDecision> finish(AllDecision a) {
      if (durability == null) {
        return CompletableFuture.completedFuture(a);
      }
      DurabilityException d = durability;
      return CompletableFuture.failedFuture(
          new DurabilityException(
              "RL.ALL", a, d.wanted(), d.acked(), d.timeout(), d.getCause()));
    }
  }
}
