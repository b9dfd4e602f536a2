package io.librl;

import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The answer of an {@code RL.CONCURRENT} acquire ({@link Limiter#acquire}): admitted or not, and
 * the lease it took. Closing it releases the lease, so try-with-resources always gives the slots
 * back, however the work ends:
 *
 * <pre>{@code
 * try (Lease lease = limiter.acquire(Concurrent.of("llm:{key:7f3a}", 5, Duration.ofMinutes(1)))) {
 *   if (!lease.allowed()) {
 *     return tooBusy(lease.decision().retryAfter());
 *   }
 *   return generate(prompt);
 * }
 * }</pre>
 *
 * <p>A refused acquire, and one admitted in {@code monitor} or {@code off} mode, holds no lease
 * ({@link #id()} 0): releasing or renewing it sends nothing. The lease is released once: later
 * releases (and {@link #close()}) return the first answer. {@link #keepAlive()} renews it in the
 * background for long work. Thread-safe.
 *
 * <p>{@link #close()}, {@link #release()} and {@link #renew()} wait for the server: on a Lettuce
 * event-loop thread (inside a {@code thenApply} of the async view, a reactive operator) use {@link
 * #releaseAsync()} and {@link #renewAsync()} instead.
 */
public final class Lease implements AutoCloseable {
  /** Starts the renewals of every lease kept alive; they run on {@link #RENEWING}. */
  private static final ScheduledExecutorService TIMER =
      Executors.newSingleThreadScheduledExecutor(daemon("librl-lease-timer"));

  /** Runs renewals: over Jedis a renewal blocks its thread for a round trip. */
  private static final ExecutorService RENEWING =
      Executors.newCachedThreadPool(daemon("librl-lease-renewal"));

  /** Threads that never keep the JVM running: a lease ends by itself anyway. */
  private static ThreadFactory daemon(String name) {
    return r -> {
      Thread t = new Thread(r, name);
      t.setDaemon(true);
      return t;
    };
  }

  private final AsyncLimiter limiter;
  private final Concurrent clause;
  private final Decision decision;
  private final AtomicReference<CompletableFuture<Boolean>> released = new AtomicReference<>();
  private final CompletableFuture<LeaseLostException> lost = new CompletableFuture<>();
  private ScheduledFuture<?> renewals;
  private long periodNanos;
  /** How long the lease lasts: its length, or the acquire's resetAfter when shorter (an override). */
  private final Duration length;
  /** When the lease ends unless renewed, by {@link System#nanoTime()}, as last renewed. */
  private long endsAt;

  Lease(AsyncLimiter limiter, Concurrent clause, Decision decision) {
    this.limiter = limiter;
    this.clause = clause.forLease();
    this.decision = decision;
    Duration reset = decision.resetAfter();
    this.length = reset.isZero() || reset.compareTo(clause.lease()) >= 0 ? clause.lease() : reset;
    this.endsAt = System.nanoTime() + length.toNanos();
  }

  /** Whether the acquire was admitted. */
  public boolean allowed() {
    return decision.allowed();
  }

  /** The lease's id; 0 when it holds none. */
  public long id() {
    return decision.leaseId();
  }

  /** The acquire's decision: slots held ({@code count}), {@code remaining}, {@code retryAfter}. */
  public Decision decision() {
    return decision;
  }

  /** The call that releases or renews this lease: its key, limit, lease and override. */
  public Concurrent clause() {
    return clause;
  }

  /**
   * Gives the slots back at once ({@code RELEASE id}) and stops {@link #keepAlive()}. True if the
   * lease was held; false if it had ended (its slots were free anyway) or held none.
   */
  public boolean release() {
    return SyncLimiter.await(releaseAsync());
  }

  /** {@link #release()} without waiting. */
  public CompletionStage<Boolean> releaseAsync() {
    CompletableFuture<Boolean> mine = new CompletableFuture<>();
    CompletableFuture<Boolean> first = released.compareAndExchange(null, mine);
    if (first != null) {
      return first;
    }
    stopRenewing();
    if (id() == 0) {
      mine.complete(false);
      return mine;
    }
    // Without OVERRIDE, which only changes the limit the reply reports: a call naming one key
    // never meets TRYAGAIN while its slot moves.
    limiter
        .decide(clause.withoutOverride().release(id()))
        .whenComplete(
            (d, e) -> {
              if (e != null) {
                mine.completeExceptionally(e);
              } else {
                mine.complete(d.allowed());
              }
            });
    return mine;
  }

  /** Releases the lease: {@link #release()}. */
  @Override
  public void close() {
    release();
  }

  /**
   * Makes the lease last its length from now ({@code RENEW id}): the heartbeat of long work. False
   * when it is no longer held (it ended first, or was released): stop the work, its slots may be
   * someone else's. A lease that holds none because it was admitted in {@code monitor} or {@code
   * off} mode renews as true, sending nothing.
   */
  public boolean renew() {
    return SyncLimiter.await(renewAsync());
  }

  /** {@link #renew()} without waiting. */
  public CompletionStage<Boolean> renewAsync() {
    if (id() == 0) {
      return CompletableFuture.completedFuture(decision.allowed());
    }
    if (released.get() != null) {
      return CompletableFuture.completedFuture(false);
    }
    long sent = System.nanoTime();
    return limiter
        .decide(clause.renew(id()))
        .handle(
            (d, e) -> {
              Decision renewal = d == null ? standing(e) : d;
              if (renewal != null && renewal.allowed()) {
                synchronized (this) {
                  // The server counts the new length from when it ran the call, after sending.
                  endsAt = Math.max(endsAt, sent + length.toNanos());
                }
              }
              if (e != null) {
                throw e instanceof CompletionException c ? c : new CompletionException(e);
              }
              return renewal.allowed();
            });
  }

  /**
   * The decision a durable limiter's call made though too few replicas have it: it stands on the
   * primary. Null for any other failure.
   */
  private static Decision standing(Throwable e) {
    return Stages.unwrap(e) instanceof DurabilityException d && d.result() instanceof Decision kept
        ? kept
        : null;
  }

  /**
   * Renews the lease in the background every third of its length (of the shorter of its length
   * and the acquire's {@code resetAfter}, so that an override shortening leases is followed) until
   * it is released. A renewal that fails on the way is tried again at the next period; once the
   * server says the lease is not held, or its end comes with no renewal getting through, renewing
   * stops and {@link #lost()} completes. Returns this lease; calling it again changes nothing.
   */
  public Lease keepAlive() {
    if (id() == 0) {
      return this;
    }
    synchronized (this) {
      if (renewals != null || released.get() != null) {
        return this;
      }
      periodNanos = Math.max(1, length.toNanos() / 3);
      renewals =
          TIMER.scheduleAtFixedRate(
              () -> RENEWING.execute(this::renewInBackground),
              periodNanos,
              periodNanos,
              TimeUnit.NANOSECONDS);
      return this;
    }
  }

  private void renewInBackground() {
    if (lost.isDone() || released.get() != null) {
      return;
    }
    boolean held;
    try {
      held = renewAsync().toCompletableFuture().join();
    } catch (RuntimeException e) {
      Decision renewal = standing(e);
      if (renewal != null) {
        held = renewal.allowed(); // renewed on the primary: the replicas lag, not the lease
      } else {
        failedOnTheWay(e);
        return;
      }
    }
    if (!held && released.get() == null) {
      lose(new LeaseLostException(clause.key, id(), null));
    }
  }

  /** A renewal failed on the way: the lease is lost if the next one would come after its end. */
  private void failedOnTheWay(RuntimeException e) {
    synchronized (this) {
      if (System.nanoTime() + periodNanos - endsAt < 0) {
        return; // the next renewal still comes before the lease ends
      }
    }
    lose(new LeaseLostException(clause.key, id(), Stages.unwrap(e)));
  }

  private void lose(LeaseLostException e) {
    stopRenewing();
    lost.complete(e);
  }

  private synchronized void stopRenewing() {
    if (renewals != null) {
      renewals.cancel(false);
    }
  }

  /**
   * Completes, with why, when {@link #keepAlive()} finds the lease lost: the server says it is not
   * held (a {@code DEL} of the key, a pause longer than the lease), or its end came with no renewal
   * getting through (the error of the last one is the cause). Never completes while the lease is
   * held, nor after a release: {@code lease.lost().thenRun(work::cancel)}.
   */
  public CompletionStage<LeaseLostException> lost() {
    return lost.minimalCompletionStage();
  }

  /** Whether {@link #keepAlive()} has found the lease lost. */
  public boolean isLost() {
    return lost.isDone();
  }

  @Override
  public String toString() {
    return "Lease[" + clause.key + " id " + id() + (allowed() ? "" : " refused") + "]";
  }

  static Lease of(AsyncLimiter limiter, Concurrent clause, Decision decision) {
    return new Lease(Objects.requireNonNull(limiter), clause, decision);
  }
}
