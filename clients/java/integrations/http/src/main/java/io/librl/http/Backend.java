package io.librl.http;

import io.librl.AllDecision;
import io.librl.AsyncLimiter;
import io.librl.Clause;
import io.librl.Concurrent;
import io.librl.Decision;
import io.librl.Fixed;
import io.librl.Sliding;
import io.librl.Token;
import io.netty.util.HashedWheelTimer;
import io.netty.util.Timeout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
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

  /**
   * The timeouts of refunds and lease releases (rarer than requests, each with its own start), on
   * one daemon thread started by the first: a timing wheel (as Lettuce times its commands) of 10 ms
   * ticks, where scheduling and cancelling a timeout take no lock. A request's exchange is timed by
   * {@link #DEADLINES} instead.
   */
  private static final HashedWheelTimer TIMER =
      new HashedWheelTimer(
          r -> {
            Thread thread = new Thread(r, "librl-timeout");
            thread.setDaemon(true);
            return thread;
          },
          10,
          TimeUnit.MILLISECONDS);

  /**
   * Each request's exchange, until it ends or its timeout passes, per timeout (every request has
   * its configuration's, so a queue is in deadline order): adding one is a single enqueue, with
   * nothing to cancel, where the timing wheel took an enqueue to schedule and another to cancel.
   * {@link #EXPIRY} takes the ended ones off the head and fails the ones past their deadline.
   */
  private static final ConcurrentHashMap<Long, ConcurrentLinkedQueue<Deadline>> DEADLINES =
      new ConcurrentHashMap<>();

  /** Looks at the queues' heads every 10 ms, as the timing wheel's tick did. */
  private static final ScheduledExecutorService EXPIRY =
      Executors.newSingleThreadScheduledExecutor(
          r -> {
            Thread thread = new Thread(r, "librl-deadlines");
            thread.setDaemon(true);
            return thread;
          });

  static {
    EXPIRY.scheduleWithFixedDelay(Backend::expire, 10, 10, TimeUnit.MILLISECONDS);
  }

  /** One exchange awaiting its verdict until {@code at} (System.nanoTime). */
  private record Deadline(long at, CompletableFuture<Verdict> out, Exchange exchange, Backend backend) {}

  private static void expire() {
    long now = System.nanoTime();
    for (ConcurrentLinkedQueue<Deadline> queue : DEADLINES.values()) {
      Deadline d;
      while ((d = queue.peek()) != null && (d.out().isDone() || d.at() - now <= 0)) {
        queue.poll();
        if (!d.out().isDone()) {
          try {
            failed(d.out(), d.exchange(), new TimeoutException(d.backend().timeout.toMillis() + " ms"));
          } catch (RuntimeException e) {
            // The fail mode's own work runs where the failure completes; one failing must not stop
            // the others' timeouts.
            LOG.log(System.Logger.Level.WARNING, "librl: ending a timed-out exchange failed: " + e);
          }
        }
      }
    }
  }

  private final RedisConnection connection;
  private final Duration timeout;
  private final long timeoutNanos;
  private final ConcurrentLinkedQueue<Deadline> deadlines;

  Backend(RedisConnection connection, Duration timeout) {
    this.connection = connection;
    this.timeout = timeout;
    this.timeoutNanos = timeout.toNanos();
    this.deadlines = DEADLINES.computeIfAbsent(timeoutNanos, t -> new ConcurrentLinkedQueue<>());
  }

  /**
   * The checks' verdict: whether every enforced group admitted the request, and every check's
   * reply in order (a shadow check's never refuses: docs/http.md, Shadow mode).
   */
  record Verdict(boolean admitted, List<Decision> replies) {}

  /**
   * Redis failed during the exchange: why, and the groups (indices of the checks, one subject
   * each) it had admitted before, which the fail mode keeps or refunds. A group whose reply never
   * came is in none: Redis may or may not have recorded it.
   */
  static final class Failure extends RuntimeException {
    private static final long serialVersionUID = 1L;
    final transient List<List<Integer>> admitted;
    /** Each check's reply so far (null where none came): the leases the admitted groups took. */
    final transient List<Decision> replies;
    /** The shadow groups Redis admitted: never refunded, their leases released all the same. */
    final transient List<List<Integer>> shadowAdmitted;

    Failure(Throwable cause, List<List<Integer>> admitted, List<Decision> replies) {
      this(cause, admitted, replies, List.of());
    }

    Failure(
        Throwable cause,
        List<List<Integer>> admitted,
        List<Decision> replies,
        List<List<Integer>> shadowAdmitted) {
      super(describe(cause), cause, false, false);
      this.admitted = admitted;
      this.replies = replies;
      this.shadowAdmitted = shadowAdmitted;
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
    if (e instanceof Breaker.Open) {
      return e.getMessage();
    }
    return "redis: " + e;
  }

  /**
   * One {@code RL.ALL} per subject, in the order subjects first appear. After a denial the later
   * subjects are peeked (every check gets a reply) and the earlier, admitted ones refunded, so a
   * refused request is counted by no policy. Shadow checks follow in groups of their own, sent
   * whatever the enforced ones answered, never peeked nor refunded. Completes exceptionally with
   * a {@link Failure}.
   */
  CompletableFuture<Verdict> check(List<Plan.Check> checks) {
    Exchange exchange = new Exchange(checks, this);
    CompletableFuture<AsyncLimiter> ready = connection.limiter();
    CompletableFuture<Verdict> run;
    if (ready.isDone() && !ready.isCompletedExceptionally()) {
      // Connected (every request after the first): the first call is sent from here.
      try {
        run = exchange.group(ready.join(), 0);
      } catch (RuntimeException e) {
        run = CompletableFuture.failedFuture(e);
      }
    } else {
      run = ready.thenCompose(limiter -> exchange.group(limiter, 0));
    }
    // The verdict, or the Failure with what Redis admitted so far: when the exchange fails, or
    // when the timeout passes first (no further call is sent then).
    CompletableFuture<Verdict> out = new CompletableFuture<>();
    if (!run.isDone()) {
      deadlines.add(new Deadline(System.nanoTime() + timeoutNanos, out, exchange, this));
    }
    run.whenComplete(
        (verdict, error) -> {
          if (error != null) {
            failed(out, exchange, error);
          } else {
            out.complete(verdict);
          }
        });
    return out;
  }

  /** Ends the exchange with a {@link Failure} (unless it ended already): no further call is sent. */
  private static void failed(CompletableFuture<Verdict> out, Exchange exchange, Throwable error) {
    if (out.isDone()) {
      return;
    }
    exchange.abandon();
    out.completeExceptionally(
        new Failure(error, exchange.admittedSnapshot(), exchange.repliesSnapshot(), exchange.shadowSnapshot()));
  }

  /**
   * Gives back what Redis admitted for a request that is refused after all (fail closed): per
   * group, one {@code RL.ALL} of {@code REFUND} clauses and the release of the leases its
   * concurrency checks took ({@code replies}: each check's reply, null where none came), with its
   * own timeout; a failure is logged.
   */
  CompletableFuture<Void> refundGroups(
      List<Plan.Check> checks, List<List<Integer>> groups, List<Decision> replies) {
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
                              return giveBack(limiter, checks, members, replies);
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
    return refundGroups(checks, bySubject(checks), List.of());
  }

  /**
   * Releases the leases (docs/http.md, Concurrency limits): each with {@code RL.CONCURRENT key
   * limit lease RELEASE id}, without {@code OVERRIDE}, within the timeout. A release that fails is
   * logged and otherwise ignored: the lease ends by itself.
   */
  CompletableFuture<Void> release(List<Leases.Held> leases) {
    if (leases.isEmpty()) {
      return CompletableFuture.completedFuture(null);
    }
    CompletableFuture<Void> run =
        connection
            .limiter()
            .thenCompose(
                limiter ->
                    CompletableFuture.allOf(
                        leases.stream()
                            .map(h -> release(limiter, h.check(), h.leaseId()))
                            .toArray(CompletableFuture[]::new)));
    return within(run, () -> {}).exceptionally(e -> releaseFailed(e));
  }

  /** One lease's release; a failure is logged, never passed on. */
  private static CompletableFuture<Void> release(AsyncLimiter limiter, Plan.Check check, long leaseId) {
    Policy p = check.policy();
    return limiter
        .decide(Concurrent.of(check.key(), p.limit(), Duration.ofMillis(p.windowMs())).release(leaseId))
        .toCompletableFuture()
        .handle((d, e) -> e == null ? null : releaseFailed(e));
  }

  private static Void releaseFailed(Throwable e) {
    LOG.log(
        System.Logger.Level.WARNING,
        "librl: could not release a concurrency lease; it ends by itself: " + describe(e));
    return null;
  }

  /** The leases the checks' replies hold: a concurrency check's lease id when it took one. */
  static List<Leases.Held> held(List<Plan.Check> checks, List<Integer> members, List<Decision> replies) {
    List<Leases.Held> out = new ArrayList<>();
    for (int i : members) {
      Decision d = i < replies.size() ? replies.get(i) : null;
      if (checks.get(i).policy().holdsSlots() && d != null && d.leaseId() != 0) {
        out.add(new Leases.Held(checks.get(i), d.leaseId()));
      }
    }
    return out;
  }

  /**
   * Gives a group back: one {@code RL.ALL} of {@code REFUND} clauses for its rate checks (none
   * when it has only concurrency checks), then the release of each lease it took. A failed refund
   * fails the stage; a failed release is logged.
   */
  private static CompletableFuture<Void> giveBack(
      AsyncLimiter limiter, List<Plan.Check> checks, List<Integer> members, List<Decision> replies) {
    List<Clause<?>> refunds = new ArrayList<>();
    for (int i : members) {
      if (!checks.get(i).policy().holdsSlots()) {
        refunds.add(clause(checks.get(i), true));
      }
    }
    CompletableFuture<Void> refunded =
        refunds.isEmpty()
            ? CompletableFuture.completedFuture(null)
            : limiter.all(refunds).toCompletableFuture().thenApply(d -> null);
    List<Leases.Held> leases = held(checks, members, replies);
    CompletableFuture<?>[] released =
        leases.stream().map(h -> release(limiter, h.check(), h.leaseId())).toArray(CompletableFuture[]::new);
    return CompletableFuture.allOf(released).thenCompose(v -> refunded);
  }

  /**
   * {@code run} bounded by the timeout: when it passes first, {@code onTimeout} runs and the
   * result fails with a {@link TimeoutException}, within a tick (10 ms) of it. The timer is
   * cancelled as soon as {@code run} completes.
   */
  private <T> CompletableFuture<T> within(CompletableFuture<T> run, Runnable onTimeout) {
    if (run.isDone()) {
      return run;
    }
    CompletableFuture<T> bounded = new CompletableFuture<>();
    Timeout timer =
        TIMER.newTimeout(
            t -> {
              if (!bounded.isDone()) {
                onTimeout.run();
                bounded.completeExceptionally(new TimeoutException(timeout.toMillis() + " ms"));
              }
            },
            timeout.toNanos(),
            TimeUnit.NANOSECONDS);
    run.whenComplete(
        (v, e) -> {
          timer.cancel();
          if (e != null) {
            bounded.completeExceptionally(e);
          } else {
            bounded.complete(v);
          }
        });
    return bounded;
  }

  /** One check's groups: most requests are checked against one policy. */
  private static final List<List<Integer>> ONE_GROUP = List.of(List.of(0));

  /** Indices of the checks per subject, in the order subjects first appear (one slot each). */
  static List<List<Integer>> bySubject(List<Plan.Check> checks) {
    return bySubject(checks, null);
  }

  /** The same among the checks whose {@code shadow} is as given (null: all of them). */
  static List<List<Integer>> bySubject(List<Plan.Check> checks, Boolean shadow) {
    if (checks.size() == 1 && (shadow == null || checks.get(0).shadow() == shadow)) {
      return ONE_GROUP;
    }
    List<List<Integer>> groups = new ArrayList<>();
    for (int i = 0; i < checks.size(); i++) {
      if (shadow != null && checks.get(i).shadow() != shadow) {
        continue;
      }
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
    private final Backend backend;
    /** The enforced groups, then the shadow ones. */
    private final List<List<Integer>> groups;
    private final int enforcedGroups;
    private final Decision[] replies;
    private final List<List<Integer>> admittedGroups = new ArrayList<>();
    private final List<List<Integer>> shadowAdmitted = new ArrayList<>();
    private boolean admitted = true;
    private boolean refunded;
    private boolean abandoned;

    Exchange(List<Plan.Check> checks, Backend backend) {
      this.checks = checks;
      this.backend = backend;
      boolean anyShadow = false;
      for (Plan.Check c : checks) {
        anyShadow |= c.shadow();
      }
      if (anyShadow) {
        this.groups = new ArrayList<>(bySubject(checks, false));
        this.enforcedGroups = groups.size();
        groups.addAll(bySubject(checks, true));
      } else {
        this.groups = bySubject(checks);
        this.enforcedGroups = groups.size();
      }
      this.replies = new Decision[checks.size()];
    }

    synchronized List<List<Integer>> shadowSnapshot() {
      return List.copyOf(shadowAdmitted);
    }

    synchronized void abandon() {
      abandoned = true;
    }

    synchronized List<List<Integer>> admittedSnapshot() {
      return List.copyOf(admittedGroups);
    }

    synchronized List<Decision> repliesSnapshot() {
      return Arrays.asList(replies.clone());
    }

    CompletableFuture<Verdict> group(AsyncLimiter limiter, int g) {
      boolean peek;
      boolean shadow = g >= enforcedGroups;
      synchronized (this) {
        if (abandoned) {
          return CompletableFuture.failedFuture(new TimeoutException("the exchange's timeout"));
        }
        if (g == enforcedGroups && !admitted && !refunded) {
          refunded = true;
          return refundAdmitted(limiter).thenCompose(v -> group(limiter, g));
        }
        if (g == groups.size()) {
          return CompletableFuture.completedFuture(new Verdict(admitted, Arrays.asList(replies.clone())));
        }
        peek = !admitted && !shadow;
      }
      List<Integer> members = groups.get(g);
      List<Clause<?>> clauses = new ArrayList<>();
      for (int i : members) {
        clauses.add(clause(checks.get(i), false, peek));
      }
      CompletionStage<AllDecision> sent = peek ? limiter.peekAll(clauses) : limiter.all(clauses);
      return sent.toCompletableFuture()
          .thenCompose(
              reply -> {
                boolean late;
                synchronized (this) {
                  for (int k = 0; k < members.size(); k++) {
                    replies[members.get(k)] = reply.decisions().get(k);
                  }
                  late = abandoned;
                  if (shadow) {
                    if (reply.allowed() && !late) {
                      shadowAdmitted.add(members);
                    }
                  } else if (admitted && reply.allowed() && !late) {
                    admittedGroups.add(members);
                  } else {
                    admitted = false;
                  }
                }
                if (late && reply.allowed()) {
                  // The fail mode decided the request while this call was under way: served
                  // unchecked or refused, either way it holds no slots.
                  backend.release(held(checks, members, repliesSnapshot()));
                }
                return group(limiter, g + 1);
              });
    }

    /**
     * Each group leaves the list as its refund is sent: were the timeout to stop the exchange
     * here, the fail mode refunds only the groups not yet refunded (never one twice).
     */
    private CompletableFuture<Void> refundAdmitted(AsyncLimiter limiter) {
      List<Integer> members;
      synchronized (this) {
        if (abandoned) {
          return CompletableFuture.failedFuture(new TimeoutException("the exchange's timeout"));
        }
        if (admittedGroups.isEmpty()) {
          return CompletableFuture.completedFuture(null);
        }
        members = admittedGroups.remove(0);
      }
      return giveBack(limiter, checks, members, repliesSnapshot())
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

  /**
   * The check as an {@code RL.ALL} clause: algorithm, key, limit, window (a concurrency policy:
   * its lease), options; a refund's clause gives back its cost.
   */
  static Clause<?> clause(Plan.Check check, boolean refund) {
    return clause(check, refund, false);
  }

  /**
   * The same, with the policy's {@code block} (never on a refund) and {@code queue} (a token
   * policy's {@code RESERVE}, neither on a refund nor in a peeked group, which books nothing).
   */
  static Clause<?> clause(Plan.Check check, boolean refund, boolean peek) {
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
      case CONCURRENCY:
        // Never refunded: its slots are given back by releasing the lease.
        return options(Concurrent.of(check.key(), p.limit(), window), check, false);
      case TOKEN:
      default:
        {
          Token t = Token.of(check.key(), p.limit(), window);
          t = p.burst() == null ? t : t.burst(p.burst());
          if (p.queueMs() != null && !refund && !peek) {
            t = t.reserve(Duration.ofMillis(p.queueMs()));
          }
          return options(t, check, refund);
        }
    }
  }

  private static <C extends Clause<C>> C options(C clause, Plan.Check check, boolean refund) {
    C c = refund ? clause.refund(check.cost()) : check.cost() == 1 ? clause : clause.cost(check.cost());
    if (!refund && check.policy().blockMs() != null) {
      c = c.block(Duration.ofMillis(check.policy().blockMs()));
    }
    return check.overrideKey() == null ? c : c.override(check.overrideKey());
  }
}
