package io.librl;

import java.time.Duration;
import java.util.List;
import java.util.Optional;

/**
 * librl's commands, typed, over a blocking client: {@link JedisLimiter#of} (a {@code JedisPooled}
 * or {@code JedisCluster}) or {@link LettuceLimiter#sync()}. Every call goes straight to the node
 * owning its key in a cluster. Thread-safe, as the clients are.
 *
 * <pre>{@code
 * Limiter limiter = JedisLimiter.of(new JedisPooled("127.0.0.1", 6379));
 * Decision d = limiter.fixed("rl:user:42", 10, Duration.ofMinutes(1));
 * if (!d.allowed()) {
 *   System.out.println("retry in " + d.retryAfter().toMillis() + " ms");
 * }
 * }</pre>
 *
 * <p>A call refused before sending throws {@link LibrlArgumentException}; one that failed on the
 * server or on the way {@link LibrlCommandException}, whose cause is the client's exception; a
 * durable limiter's call that too few replicas acknowledged {@link DurabilityException}, carrying
 * the call's result.
 */
public interface Limiter {

  /** {@code RL.FIXED key limit window}: see {@link Fixed}; options through {@link #decide}. */
  default Decision fixed(String key, long limit, Duration window) {
    return decide(Fixed.of(key, limit, window));
  }

  /** {@code RL.SLIDING key limit window}: see {@link Sliding}. */
  default Decision sliding(String key, long limit, Duration window) {
    return decide(Sliding.of(key, limit, window));
  }

  /** {@code RL.TOKEN key rate window}: see {@link Token}. */
  default Decision token(String key, long rate, Duration window) {
    return decide(Token.of(key, rate, window));
  }

  /**
   * One limiter call with its options: {@code
   * decide(Fixed.of("login:203.0.113.7", 5, Duration.ofMinutes(15)).block(Duration.ofHours(1)))}.
   */
  Decision decide(Clause<?> clause);

  /**
   * {@code RL.CONCURRENT}: takes a lease of the clause's {@code cost} slots (default 1), or is
   * refused; either way a {@link Lease} to close, which gives the slots back (a refused one holds
   * none, and closing it sends nothing):
   *
   * <pre>{@code
   * try (Lease lease = limiter.acquire(Concurrent.of("export:{customer:7}", 2, Duration.ofMinutes(10)))) {
   *   if (!lease.allowed()) {
   *     return busy(lease.decision().retryAfter());
   *   }
   *   export(customer);
   * }
   * }</pre>
   *
   * With {@link Concurrent#waitUpTo} a refused acquire waits for a slot, on a connection of its
   * own (docs/clients/java.md, Blocking calls). Its denials are never kept by the denial cache: a
   * release elsewhere frees a slot before their {@code retryAfter}.
   */
  Lease acquire(Concurrent clause);

  /** {@link #acquire(Concurrent)} of one slot of {@code key}, at most {@code limit} at once. */
  default Lease acquire(String key, long limit, Duration lease) {
    return acquire(Concurrent.of(key, limit, lease));
  }

  /**
   * A {@link Lease} for an id taken elsewhere: an {@code RL.ALL} call's {@code CONCURRENT} clause
   * (its decision's {@link Decision#leaseId()}), another thread or process, a queued job. {@code
   * clause} names the key, limit, lease length and override it was taken with; the lease's {@link
   * Lease#decision()} stands in for the acquire's (allowed, the id, the lease's length as {@code
   * resetAfter}).
   */
  Lease heldLease(Concurrent clause, long id);

  /**
   * {@code RL.ALL}: admitted only if every clause admits the call, and then every clause records
   * it; otherwise nothing is recorded anywhere. In a cluster every key and override key of the
   * call must share a slot (a hash tag: {@code {user42}:min}, {@code {user42}:day}); otherwise
   * the call is refused before sending with a {@link LibrlArgumentException} saying so.
   */
  default AllDecision all(Clause<?>... clauses) {
    return all(List.of(clauses));
  }

  /** {@link #all(Clause...)} over a list. */
  AllDecision all(List<? extends Clause<?>> clauses);

  /** {@code RL.ALL ... PEEK}: the answer {@link #all(Clause...)} would give, changing nothing. */
  default AllDecision peekAll(Clause<?>... clauses) {
    return peekAll(List.of(clauses));
  }

  /** {@link #peekAll(Clause...)} over a list. */
  AllDecision peekAll(List<? extends Clause<?>> clauses);

  /**
   * {@code RL.OVERRIDE SET}: stores an override, replacing any. It clears the limiter's denial
   * cache: the new limit may admit calls that were denied.
   */
  void overrideSet(LimitOverride override);

  /** {@code RL.OVERRIDE SET okey limit window}. */
  default void overrideSet(String okey, long limit, Duration window) {
    overrideSet(LimitOverride.of(okey, limit, window));
  }

  /** {@code RL.OVERRIDE GET}: the override at {@code okey}, if there is one. */
  Optional<OverrideValues> overrideGet(String okey);

  /**
   * {@code RL.OVERRIDE DEL}: deletes the overrides at {@code okeys} and says how many existed. In a
   * cluster the keys are grouped by slot, one command per slot. It clears the denial cache.
   */
  long overrideDel(String... okeys);

  /**
   * One step of {@code RL.OVERRIDE LIST} over a standalone server ({@code match} null for every
   * override, {@code count} 0 for the server's default). Cursors belong to one node: on a cluster
   * use {@link #overrideScan(String)}.
   */
  OverridePage overrideList(String cursor, String match, long count);

  /** {@link #overrideList(String, String, long)} of every override. */
  default OverridePage overrideList(String cursor) {
    return overrideList(cursor, null, 0);
  }

  /**
   * Every override of the server, or of every primary of a cluster, whose key matches {@code
   * match} (a glob-style pattern; null for all), with SCAN's contract: an override present the
   * whole time is listed at least once.
   */
  List<OverrideEntry> overrideScan(String match);

  /** {@link #overrideScan(String)} of every override. */
  default List<OverrideEntry> overrideScan() {
    return overrideScan(null);
  }

  /**
   * This limiter with a denial cache: a repeated denied call is answered locally until its {@code
   * retryAfter} has passed, or the cache's max age has (see {@link DenialCache} for when that is
   * exact, and how a change made elsewhere reaches it).
   */
  Limiter withDenialCache(DenialCache cache);

  /** {@link #withDenialCache(DenialCache)} with a new cache of 10,000 entries, each kept at most 1 s. */
  default Limiter withDenialCache() {
    return withDenialCache(new DenialCache());
  }

  /** The denial cache, if this limiter has one. */
  Optional<DenialCache> denialCache();

  /**
   * This limiter with every call that may write followed by {@code WAIT replicas timeout} on the
   * same connection, in the same round trip: a call returns once that many replicas hold it, or
   * throws a {@link DurabilityException} carrying its result. {@code replicas} at least 1, {@code
   * timeout} at least 1 ms in whole milliseconds ({@code WAIT} with 0 would wait forever).
   */
  Limiter withDurability(int replicas, Duration timeout);
}
