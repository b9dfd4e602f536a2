package io.librl.http;

import io.librl.AllDecision;
import io.librl.AsyncLimiter;
import io.librl.Clause;
import io.librl.Decision;
import io.librl.Fixed;
import io.librl.Sliding;
import io.librl.Token;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * The Redis exchange of one request (docs/http.md, One decision per request): one {@code RL.ALL}
 * per subject, {@code PEEK} after a denial, refunds across subjects; and, when Redis fails
 * part-way, which groups it had admitted, so the fail mode can keep or refund them. The whole
 * exchange has the configuration's timeout; when it passes, no further call is sent.
 */
final class Backend {
  private static final System.Logger LOG = System.getLogger("io.librl.http");

  private final RedisConnection connection;
  private final Duration timeout;

  Backend(RedisConnection connection, Duration timeout) {
    this.connection = connection;
    this.timeout = timeout;
  }

  /** The checks' verdict: admitted or not, and every check's reply in order. */
  record Verdict(boolean admitted, List<Decision> replies) {}

  /**
   * Redis failed during the exchange: why, and the groups (indices of the checks, one subject
   * each) it had admitted before, which the fail mode keeps or refunds. A group whose reply never
   * came is in none: Redis may or may not have recorded it.
   */
  static final class Failure extends RuntimeException {
    private static final long serialVersionUID = 1L;
    final transient List<List<Integer>> admitted;

    Failure(Throwable cause, List<List<Integer>> admitted) {
      super(describe(cause), cause, false, false);
      this.admitted = admitted;
    }
  }

  static String describe(Throwable error) {
    Throwable e = error;
    while ((e instanceof CompletionException || e instanceof java.util.concurrent.ExecutionException)
        && e.getCause() != null) {
      e = e.getCause();
    }
    if (e instanceof TimeoutException) {
      return "redis gave no answer within " + e.getMessage();
    }
    return "redis: " + e;
  }

  /**
   * One {@code RL.ALL} per subject, in the order subjects first appear. After a denial the later
   * subjects are peeked (every check gets a reply) and the earlier, admitted ones refunded, so a
   * refused request is counted by no policy. Completes exceptionally with a {@link Failure}.
   */
  CompletableFuture<Verdict> check(List<Plan.Check> checks) {
    Exchange exchange = new Exchange(checks);
    CompletableFuture<Verdict> run =
        connection.limiter().thenCompose(limiter -> exchange.group(limiter, 0));
    return within(run, exchange::abandon)
        .handle(
            (verdict, error) -> {
              if (error != null) {
                throw new Failure(error, exchange.admittedSnapshot());
              }
              return verdict;
            });
  }

  /**
   * Gives back what Redis admitted for a request that is refused after all (fail closed): one
   * {@code RL.ALL} of {@code REFUND} clauses per group, with its own timeout; a failure is logged.
   */
  CompletableFuture<Void> refundGroups(List<Plan.Check> checks, List<List<Integer>> groups) {
    if (groups.isEmpty()) {
      return CompletableFuture.completedFuture(null);
    }
    boolean[] stop = {false};
    CompletableFuture<Void> run =
        connection
            .limiter()
            .thenCompose(
                limiter -> {
                  CompletableFuture<Void> chain = CompletableFuture.completedFuture(null);
                  for (List<Integer> members : groups) {
                    chain =
                        chain.thenCompose(
                            v -> {
                              if (stop[0]) {
                                return CompletableFuture.completedFuture(null);
                              }
                              return limiter
                                  .all(refunds(checks, members))
                                  .toCompletableFuture()
                                  .thenApply(d -> null);
                            });
                  }
                  return chain;
                });
    return within(run, () -> stop[0] = true)
        .exceptionally(
            e -> {
              LOG.log(
                  System.Logger.Level.WARNING,
                  "librl: could not refund what Redis admitted before it failed: " + describe(e));
              return null;
            });
  }

  /**
   * Gives back each check's cost (one {@code RL.ALL} of {@code REFUND} clauses per subject):
   * {@code count: failed} / {@code succeeded} after the response; a failure is logged.
   */
  CompletableFuture<Void> refund(List<Plan.Check> checks) {
    return refundGroups(checks, bySubject(checks));
  }

  private <T> CompletableFuture<T> within(CompletableFuture<T> run, Runnable onTimeout) {
    CompletableFuture<T> bounded = new CompletableFuture<>();
    run.whenComplete(
        (v, e) -> {
          if (e != null) {
            bounded.completeExceptionally(e);
          } else {
            bounded.complete(v);
          }
        });
    CompletableFuture.delayedExecutor(timeout.toNanos(), TimeUnit.NANOSECONDS)
        .execute(
            () -> {
              if (!bounded.isDone()) {
                onTimeout.run();
                bounded.completeExceptionally(new TimeoutException(timeout.toMillis() + " ms"));
              }
            });
    return bounded;
  }

  /** Indices of the checks per subject, in the order subjects first appear (one slot each). */
  static List<List<Integer>> bySubject(List<Plan.Check> checks) {
    List<List<Integer>> groups = new ArrayList<>();
    for (int i = 0; i < checks.size(); i++) {
      List<Integer> found = null;
      for (List<Integer> g : groups) {
        if (checks.get(g.get(0)).subject().equals(checks.get(i).subject())) {
          found = g;
          break;
        }
      }
      if (found == null) {
        found = new ArrayList<>();
        groups.add(found);
      }
      found.add(i);
    }
    return groups;
  }

  /** One request's exchange: its groups, what Redis admitted so far, and whether time ran out. */
  private static final class Exchange {
    private final List<Plan.Check> checks;
    private final List<List<Integer>> groups;
    private final Decision[] replies;
    private final List<List<Integer>> admittedGroups = new ArrayList<>();
    private boolean admitted = true;
    private boolean abandoned;

    Exchange(List<Plan.Check> checks) {
      this.checks = checks;
      this.groups = bySubject(checks);
      this.replies = new Decision[checks.size()];
    }

    synchronized void abandon() {
      abandoned = true;
    }

    synchronized List<List<Integer>> admittedSnapshot() {
      return List.copyOf(admittedGroups);
    }

    CompletableFuture<Verdict> group(AsyncLimiter limiter, int g) {
      boolean peek;
      synchronized (this) {
        if (abandoned) {
          return CompletableFuture.failedFuture(new TimeoutException("the exchange's timeout"));
        }
        if (g == groups.size()) {
          return admitted
              ? CompletableFuture.completedFuture(new Verdict(true, Arrays.asList(replies.clone())))
              : refundAdmitted(limiter);
        }
        peek = !admitted;
      }
      List<Integer> members = groups.get(g);
      List<Clause<?>> clauses = new ArrayList<>();
      for (int i : members) {
        clauses.add(clause(checks.get(i), false));
      }
      CompletionStage<AllDecision> sent = peek ? limiter.peekAll(clauses) : limiter.all(clauses);
      return sent.toCompletableFuture()
          .thenCompose(
              reply -> {
                synchronized (this) {
                  for (int k = 0; k < members.size(); k++) {
                    replies[members.get(k)] = reply.decisions().get(k);
                  }
                  if (admitted && reply.allowed()) {
                    admittedGroups.add(members);
                  } else {
                    admitted = false;
                  }
                }
                return group(limiter, g + 1);
              });
    }

    /**
     * Each group leaves the list as its refund is sent: were the timeout to stop the exchange
     * here, the fail mode refunds only the groups not yet refunded (never one twice).
     */
    private CompletableFuture<Verdict> refundAdmitted(AsyncLimiter limiter) {
      List<Integer> members;
      synchronized (this) {
        if (abandoned) {
          return CompletableFuture.failedFuture(new TimeoutException("the exchange's timeout"));
        }
        if (admittedGroups.isEmpty()) {
          return CompletableFuture.completedFuture(new Verdict(false, Arrays.asList(replies.clone())));
        }
        members = admittedGroups.remove(0);
      }
      return limiter
          .all(refunds(checks, members))
          .toCompletableFuture()
          .handle(
              (d, e) -> {
                if (e != null) {
                  LOG.log(
                      System.Logger.Level.WARNING,
                      "librl: could not refund a request another subject refused: " + describe(e));
                }
                return null;
              })
          .thenCompose(v -> refundAdmitted(limiter));
    }
  }

  private static List<Clause<?>> refunds(List<Plan.Check> checks, List<Integer> members) {
    List<Clause<?>> out = new ArrayList<>();
    for (int i : members) {
      out.add(clause(checks.get(i), true));
    }
    return out;
  }

  /** The check as an {@code RL.ALL} clause: algorithm, key, limit, window, options. */
  static Clause<?> clause(Plan.Check check, boolean refund) {
    Policy p = check.policy();
    Duration window = Duration.ofMillis(p.windowMs());
    switch (p.algorithm()) {
      case FIXED:
        {
          Fixed f = Fixed.of(check.key(), p.limit(), window);
          return options(p.aligned() ? f.aligned() : f, check, refund);
        }
      case SLIDING:
        return options(Sliding.of(check.key(), p.limit(), window), check, refund);
      case APPROX:
        return options(Sliding.of(check.key(), p.limit(), window).approx(), check, refund);
      case TOKEN:
      default:
        {
          Token t = Token.of(check.key(), p.limit(), window);
          return options(p.burst() == null ? t : t.burst(p.burst()), check, refund);
        }
    }
  }

  private static <C extends Clause<C>> C options(C clause, Plan.Check check, boolean refund) {
    C c = refund ? clause.refund(check.cost()) : check.cost() == 1 ? clause : clause.cost(check.cost());
    return check.overrideKey() == null ? c : c.override(check.overrideKey());
  }
}
