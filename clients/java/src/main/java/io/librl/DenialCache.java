package io.librl;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

/**
 * The opt-in denial cache ({@code withDenialCache}): after a call is denied with a {@code
 * retryAfter} above zero, the same call (the same command and arguments) is answered here until
 * that time has passed or the cache's max age has ({@value #DEFAULT_MAX_AGE_MS} ms unless given),
 * whichever comes first, so a client refused at a high rate stays off the server.
 *
 * <p>Exactness: {@code retryAfter} is the least wait after which the same call is admitted, and
 * other callers' admitted calls can only push that moment later, so a cached denial is never
 * wrong, and the call goes back to the server no earlier than the server would admit it. That
 * holds while no one else refunds on, deletes or overrides that key meanwhile; a refund or an
 * override change made through the same limiter forgets the denials it may end, and a change made
 * elsewhere ({@code RL.OVERRIDE SET} or {@code DEL} from another process, a {@code DEL} of a
 * blocked key, {@code CONFIG SET rl.mode}) applies within the max age, or at once after {@link
 * #forgetKey} or {@link #clear}. A cached
 * decision's {@code retryAfter} and {@code resetAfter} are reduced by the time elapsed since it
 * arrived (rounded up to the millisecond); its count and remaining are the denial's. An entry
 * expires counted from when the call was sent, so it never outlives the server's denial.
 *
 * <p>Thread-safe; one cache may serve several limiters of the same server or cluster.
 */
public final class DenialCache {
  /** The capacity of {@link #DenialCache()}. */
  public static final int DEFAULT_CAPACITY = 10_000;

  /** The max age of {@link #DenialCache()} and {@link #DenialCache(int)}, in milliseconds. */
  public static final long DEFAULT_MAX_AGE_MS = 1000;

  /** The longest a denial is answered here by default: a second. */
  public static final Duration DEFAULT_MAX_AGE = Duration.ofMillis(DEFAULT_MAX_AGE_MS);

  private final int capacity;
  private final Duration maxAge;
  private final long maxAgeNanos;
  private final Map<String, Entry> entries = new HashMap<>();
  /**
   * Counts refunds and override changes: a denial whose call was sent before one of them may
   * predate it, and is not kept.
   */
  private long forgets;

  /** A decision of a call, and what it names. */
  record Entry(long receivedNanos, long validUntilNanos, Object decision, List<String> keys) {}

  /** A cache of at most {@value #DEFAULT_CAPACITY} denials, each kept at most a second. */
  public DenialCache() {
    this(DEFAULT_CAPACITY);
  }

  /**
   * A cache of at most {@code capacity} denials, each kept at most a second. When full, expired
   * ones are dropped, and if none has expired a new denial is not kept.
   */
  public DenialCache(int capacity) {
    this(capacity, DEFAULT_MAX_AGE);
  }

  /**
   * A cache of at most {@code capacity} denials, each kept at most {@code maxAge} (at least 1 ms)
   * from when its call was sent, however long its {@code retryAfter}: how long a change made
   * elsewhere may go unseen.
   */
  public DenialCache(int capacity, Duration maxAge) {
    if (capacity < 1) {
      throw new IllegalArgumentException("capacity must be at least 1, got " + capacity);
    }
    java.util.Objects.requireNonNull(maxAge, "maxAge");
    if (maxAge.compareTo(Duration.ofMillis(1)) < 0) {
      throw new IllegalArgumentException("maxAge must be at least 1 ms, got " + maxAge);
    }
    this.capacity = capacity;
    this.maxAge = maxAge;
    // Beyond a century, as long as a denial lasts (a duration's nanoseconds overflow a long).
    this.maxAgeNanos =
        maxAge.compareTo(Duration.ofDays(36_500)) > 0 ? Long.MAX_VALUE : maxAge.toNanos();
  }

  /** The longest a denial is kept. */
  public Duration maxAge() {
    return maxAge;
  }

  /** The denials held, expired ones included until next looked at. */
  public synchronized int size() {
    return entries.size();
  }

  /** Forgets every denial. */
  public synchronized void clear() {
    entries.clear();
    forgets++;
  }

  /**
   * Forgets the denials of calls that named {@code key} (as key or override key): after an
   * operator's change to that key made elsewhere.
   */
  public synchronized void forgetKey(String key) {
    entries.values().removeIf(e -> e.keys.contains(key));
    forgets++;
  }

  /** The cache id of a call: its words, each length-prefixed so no two calls share one. */
  static String id(Call call) {
    StringBuilder b = new StringBuilder();
    for (String w : call.words()) {
      b.append(w.length()).append(':').append(w);
    }
    return b.toString();
  }

  synchronized long generation() {
    return forgets;
  }

  /** The decision still denying this call at {@code nowNanos}, aged; null if none. */
  synchronized Object lookup(String id, long nowNanos) {
    Entry e = entries.get(id);
    if (e == null) {
      return null;
    }
    if (nowNanos - e.validUntilNanos >= 0) {
      entries.remove(id);
      return null;
    }
    long elapsed = nowNanos - e.receivedNanos;
    if (e.decision instanceof AllDecision a) {
      List<Decision> aged = new ArrayList<>(a.decisions().size());
      a.decisions().forEach(d -> aged.add(aged(d, elapsed)));
      return new AllDecision(false, left(a.retryAfter(), elapsed), aged);
    }
    return aged((Decision) e.decision, elapsed);
  }

  /**
   * Keeps a denial whose retry is above zero, of a call sent at {@code sentNanos} and answered at
   * {@code receivedNanos}, unless a refund or override change happened since it was sent.
   */
  synchronized void keep(
      String id, long generation, long sentNanos, long receivedNanos, Duration retry, Object decision,
      List<String> keys) {
    if (retry.isNegative() || retry.isZero() || forgets != generation) {
      return;
    }
    if (entries.size() >= capacity) {
      for (Iterator<Entry> it = entries.values().iterator(); it.hasNext(); ) {
        if (receivedNanos - it.next().validUntilNanos >= 0) {
          it.remove();
        }
      }
      if (entries.size() >= capacity) {
        return;
      }
    }
    long keptNanos = Math.min(retry.toNanos(), maxAgeNanos);
    entries.put(id, new Entry(receivedNanos, sentNanos + keptNanos, decision, keys));
  }

  /** Notes what a sent call changes: a refund forgets its keys' denials, an override change all. */
  void after(Call call) {
    switch (call.effect()) {
      case REFUND -> {
        synchronized (this) {
          call.keys().forEach(k -> entries.values().removeIf(e -> e.keys.contains(k)));
          forgets++;
        }
      }
      case CLEAR_ALL -> clear();
      default -> {}
    }
  }

  private static Decision aged(Decision d, long elapsedNanos) {
    return new Decision(
        d.allowed(),
        d.count(),
        left(d.retryAfter(), elapsedNanos),
        d.limit(),
        d.remaining(),
        left(d.resetAfter(), elapsedNanos),
        d.leaseId());
  }

  /** What remains of {@code d} after {@code elapsedNanos}, rounded up to the millisecond. */
  static Duration left(Duration d, long elapsedNanos) {
    if (Decision.NEVER.equals(d)) {
      return d;
    }
    long r = d.toNanos() - elapsedNanos;
    if (r <= 0) {
      return Duration.ZERO;
    }
    return Duration.ofMillis((r + 999_999) / 1_000_000);
  }
}
