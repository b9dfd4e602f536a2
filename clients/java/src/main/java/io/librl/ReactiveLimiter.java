package io.librl;

import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import reactor.core.publisher.Mono;

/**
 * {@link AsyncLimiter}'s calls as Project Reactor {@link Mono}s ({@link LettuceLimiter#reactive()},
 * or {@link #of} over any {@link AsyncLimiter}). Each {@code Mono} is cold: the call is sent on
 * every subscription, not before. Reactor comes with Lettuce.
 */
public final class ReactiveLimiter {
  private final AsyncLimiter async;

  private ReactiveLimiter(AsyncLimiter async) {
    this.async = async;
  }

  /** The reactive form of {@code async}. */
  public static ReactiveLimiter of(AsyncLimiter async) {
    return new ReactiveLimiter(Objects.requireNonNull(async, "async"));
  }

  /** {@code RL.FIXED key limit window}. */
  public Mono<Decision> fixed(String key, long limit, Duration window) {
    return decide(Fixed.of(key, limit, window));
  }

  /** {@code RL.SLIDING key limit window}. */
  public Mono<Decision> sliding(String key, long limit, Duration window) {
    return decide(Sliding.of(key, limit, window));
  }

  /** {@code RL.TOKEN key rate window}. */
  public Mono<Decision> token(String key, long rate, Duration window) {
    return decide(Token.of(key, rate, window));
  }

  /** See {@link Limiter#decide}. */
  public Mono<Decision> decide(Clause<?> clause) {
    return Mono.fromCompletionStage(() -> async.decide(clause));
  }

  /**
   * See {@link Limiter#acquire(Concurrent)}. Release with {@code Mono.usingWhen}, so that the
   * lease is given back however the work ends: {@code Mono.usingWhen(limiter.acquire(c), lease ->
   * work(lease), lease -> Mono.fromCompletionStage(lease.releaseAsync()))}.
   */
  public Mono<Lease> acquire(Concurrent clause) {
    return Mono.fromCompletionStage(() -> async.acquire(clause));
  }

  /** See {@link Limiter#acquire(String, long, Duration)}. */
  public Mono<Lease> acquire(String key, long limit, Duration lease) {
    return acquire(Concurrent.of(key, limit, lease));
  }

  /** See {@link Limiter#heldLease(Concurrent, long)}. */
  public Lease heldLease(Concurrent clause, long id) {
    return async.heldLease(clause, id);
  }

  /** See {@link Limiter#all(Clause...)}. */
  public Mono<AllDecision> all(Clause<?>... clauses) {
    return all(List.of(clauses));
  }

  /** See {@link Limiter#all(List)}. */
  public Mono<AllDecision> all(List<? extends Clause<?>> clauses) {
    return Mono.fromCompletionStage(() -> async.all(clauses));
  }

  /** See {@link Limiter#peekAll(Clause...)}. */
  public Mono<AllDecision> peekAll(Clause<?>... clauses) {
    return peekAll(List.of(clauses));
  }

  /** See {@link Limiter#peekAll(List)}. */
  public Mono<AllDecision> peekAll(List<? extends Clause<?>> clauses) {
    return Mono.fromCompletionStage(() -> async.peekAll(clauses));
  }

  /** See {@link Limiter#overrideSet(LimitOverride)}; completes empty. */
  public Mono<Void> overrideSet(LimitOverride override) {
    return Mono.fromCompletionStage(() -> async.overrideSet(override));
  }

  /** See {@link Limiter#overrideGet}; empty when there is no override. */
  public Mono<OverrideValues> overrideGet(String okey) {
    return Mono.fromCompletionStage(() -> async.overrideGet(okey)).flatMap(Mono::justOrEmpty);
  }

  /** See {@link Limiter#overrideDel}. */
  public Mono<Long> overrideDel(String... okeys) {
    return Mono.fromCompletionStage(() -> async.overrideDel(okeys));
  }

  /** See {@link Limiter#overrideList(String, String, long)}. */
  public Mono<OverridePage> overrideList(String cursor, String match, long count) {
    return Mono.fromCompletionStage(() -> async.overrideList(cursor, match, count));
  }

  /** See {@link Limiter#overrideScan(String)}. */
  public Mono<List<OverrideEntry>> overrideScan(String match) {
    return Mono.fromCompletionStage(() -> async.overrideScan(match));
  }

  /** See {@link Limiter#withDenialCache(DenialCache)}. */
  public ReactiveLimiter withDenialCache(DenialCache cache) {
    return new ReactiveLimiter(async.withDenialCache(cache));
  }

  /** See {@link Limiter#denialCache()}. */
  public Optional<DenialCache> denialCache() {
    return async.denialCache();
  }

  /** See {@link Limiter#withDurability}. */
  public ReactiveLimiter withDurability(int replicas, Duration timeout) {
    return new ReactiveLimiter(async.withDurability(replicas, timeout));
  }
}
