package io.librl;

import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;

/** {@link Limiter} over an {@link Engine}: each call waits for its stage. */
final class SyncLimiter implements Limiter {
  private final Engine engine;

  SyncLimiter(Engine engine) {
    this.engine = engine;
  }

  /**
   * The stage's value, or its exception unwrapped. The transports bound every stage by the
   * client's own timeout, so this never waits forever.
   */
  static <T> T await(CompletionStage<T> stage) {
    try {
      return stage.toCompletableFuture().join();
    } catch (CompletionException e) {
      if (e.getCause() instanceof RuntimeException r) {
        throw r;
      }
      if (e.getCause() instanceof Error err) {
        throw err;
      }
      throw e;
    }
  }

  @Override
  public Decision decide(Clause<?> clause) {
    return await(engine.decide(clause));
  }

  @Override
  public Lease acquire(Concurrent clause) {
    return await(engine.acquire(clause));
  }

  @Override
  public Lease heldLease(Concurrent clause, long id) {
    return engine.heldLease(clause, id);
  }

  @Override
  public AllDecision all(List<? extends Clause<?>> clauses) {
    return await(engine.all(clauses));
  }

  @Override
  public AllDecision peekAll(List<? extends Clause<?>> clauses) {
    return await(engine.peekAll(clauses));
  }

  @Override
  public void overrideSet(LimitOverride override) {
    await(engine.overrideSet(override));
  }

  @Override
  public Optional<OverrideValues> overrideGet(String okey) {
    return await(engine.overrideGet(okey));
  }

  @Override
  public long overrideDel(String... okeys) {
    return await(engine.overrideDel(okeys));
  }

  @Override
  public OverridePage overrideList(String cursor, String match, long count) {
    return await(engine.overrideList(cursor, match, count));
  }

  @Override
  public List<OverrideEntry> overrideScan(String match) {
    return await(engine.overrideScan(match));
  }

  @Override
  public Limiter withDenialCache(DenialCache cache) {
    return new SyncLimiter(engine.withDenialCache(cache));
  }

  @Override
  public Optional<DenialCache> denialCache() {
    return engine.denialCache();
  }

  @Override
  public Limiter withDurability(int replicas, Duration timeout) {
    return new SyncLimiter(engine.withDurability(replicas, timeout));
  }
}
