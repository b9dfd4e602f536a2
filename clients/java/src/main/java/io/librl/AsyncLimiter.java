package io.librl;

import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletionStage;

/**
 * {@link Limiter}'s calls without blocking, over Lettuce ({@link LettuceLimiter#async()}): each
 * returns a stage that completes with the decision, or exceptionally with the exception {@link
 * Limiter} would throw (a {@link LibrlArgumentException} for a call refused before sending, with
 * nothing sent).
 */
public interface AsyncLimiter {

  /** {@code RL.FIXED key limit window}. */
  default CompletionStage<Decision> fixed(String key, long limit, Duration window) {
    return decide(Fixed.of(key, limit, window));
  }

  /** {@code RL.SLIDING key limit window}. */
  default CompletionStage<Decision> sliding(String key, long limit, Duration window) {
    return decide(Sliding.of(key, limit, window));
  }

  /** {@code RL.TOKEN key rate window}. */
  default CompletionStage<Decision> token(String key, long rate, Duration window) {
    return decide(Token.of(key, rate, window));
  }

  /** See {@link Limiter#decide}. */
  CompletionStage<Decision> decide(Clause<?> clause);

  /** See {@link Limiter#acquire(Concurrent)}. */
  CompletionStage<Lease> acquire(Concurrent clause);

  /** See {@link Limiter#acquire(String, long, Duration)}. */
  default CompletionStage<Lease> acquire(String key, long limit, Duration lease) {
    return acquire(Concurrent.of(key, limit, lease));
  }

  /** See {@link Limiter#heldLease(Concurrent, long)}. */
  Lease heldLease(Concurrent clause, long id);

  /** See {@link Limiter#all(Clause...)}. */
  default CompletionStage<AllDecision> all(Clause<?>... clauses) {
    return all(List.of(clauses));
  }

  /** See {@link Limiter#all(List)}. */
  CompletionStage<AllDecision> all(List<? extends Clause<?>> clauses);

  /** See {@link Limiter#peekAll(Clause...)}. */
  default CompletionStage<AllDecision> peekAll(Clause<?>... clauses) {
    return peekAll(List.of(clauses));
  }

  /** See {@link Limiter#peekAll(List)}. */
  CompletionStage<AllDecision> peekAll(List<? extends Clause<?>> clauses);

  /** See {@link Limiter#overrideSet(LimitOverride)}. */
  CompletionStage<Void> overrideSet(LimitOverride override);

  /** See {@link Limiter#overrideGet}. */
  CompletionStage<Optional<OverrideValues>> overrideGet(String okey);

  /** See {@link Limiter#overrideDel}. */
  CompletionStage<Long> overrideDel(String... okeys);

  /** See {@link Limiter#overrideList(String, String, long)}. */
  CompletionStage<OverridePage> overrideList(String cursor, String match, long count);

  /** See {@link Limiter#overrideScan(String)}. */
  CompletionStage<List<OverrideEntry>> overrideScan(String match);

  /** See {@link Limiter#withDenialCache(DenialCache)}. */
  AsyncLimiter withDenialCache(DenialCache cache);

  /** See {@link Limiter#denialCache()}. */
  Optional<DenialCache> denialCache();

  /** See {@link Limiter#withDurability}. */
  AsyncLimiter withDurability(int replicas, Duration timeout);
}
