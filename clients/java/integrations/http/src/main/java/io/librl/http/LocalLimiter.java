package io.librl.http;

import io.librl.AllDecision;
import io.librl.Decision;
import java.math.BigInteger;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

/**
 * The {@code local} fail mode's limiter (docs/http.md, Fail modes): while Redis cannot answer, the
 * process decides the checks itself with librl-core's algorithms, integer for integer (held to
 * them by conformance/vectors/algorithms.json), all-or-nothing as {@code RL.ALL} is. Limits then
 * hold per process; overrides are not read (they live in Redis); counts made here stay here when
 * Redis is back.
 *
 * <p>It takes each check as plain values ({@link Clause#of(Plan.Check)} makes one from a plan's
 * check) and answers what {@code RL.ALL} would, an {@link AllDecision}, so a request decided here
 * goes through the same headers, refusals and hook:
 *
 * <pre>{@code
 * LocalLimiter local = new LocalLimiter(maxKeys);               // local_max_keys
 * AllDecision all = local.check(LocalLimiter.clauses(checks), false);   // the wall clock
 * all.allowed(); all.decisions();                               // one Decision per clause
 * local.check(clauses, true);                                   // PEEK: decide, record nothing
 * local.release(clause, decision.leaseId());                    // a concurrency clause's slots
 * local.checkAt(clauses, false, nowMs);                         // tests: an explicit now (Unix ms)
 * }</pre>
 *
 * <p>A refused request is recorded by no clause, and its concurrency clauses report lease 0
 * (nothing taken). Policies' block and queue are not applied (a token clause is decided as a plain
 * call: a turn is never booked locally), as in the Rust integration's local limiter. A bad clause
 * or time throws {@link IllegalArgumentException} before anything is decided.
 *
 * <p>Memory is bounded: a key goes when its limiter would be empty again (as Redis expires it), and
 * at {@code maxKeys} keys the tenth closest to expiry is evicted at once (an evicted limiter starts
 * afresh, admitting more). Thread-safe: each call holds the limiter's lock.
 */
final class LocalLimiter {
  /** The largest limit, rate, burst or cost (librl-core's MAX_AMOUNT). */
  static final long MAX_AMOUNT = 1L << 50;
  /** The longest window or lease: 3650 days in ms (librl-core's MAX_WINDOW_MS). */
  static final long MAX_WINDOW_MS = 3650L * 24 * 60 * 60 * 1000;
  /** Lease ids stay below 2^53 (librl-core's MAX_LEASE_ID). */
  private static final long MAX_LEASE_ID = (1L << 53) - 1;
  /** Lease ids a key gives per millisecond before they run ahead of the clock. */
  private static final long IDS_PER_MS = 1000;

  /**
   * One policy's check as the local limiter reads it.
   *
   * @param key the limiter's key
   * @param algorithm the policy's algorithm
   * @param limit units per window (a token bucket: the rate; concurrency: the slots)
   * @param windowMs the window (concurrency: the lease), 1 ms to 3650 days
   * @param aligned a fixed window aligned to Unix time
   * @param burst a token bucket's capacity; 0: the rate
   * @param cost the request's cost, 1 to 2^50
   */
  record Clause(
      String key,
      Policy.Algorithm algorithm,
      long limit,
      long windowMs,
      boolean aligned,
      long burst,
      long cost) {

    /** A plan's check as a clause. */
    static Clause of(Plan.Check check) {
      Policy p = check.policy();
      long burst = p.burst() == null ? 0 : p.burst();
      return new Clause(check.key(), p.algorithm(), p.limit(), p.windowMs(), p.aligned(), burst, check.cost());
    }

    private void validate() {
      if (key == null || algorithm == null) {
        throw new IllegalArgumentException("local limiter: a clause without a key or an algorithm");
      }
      amount("limit", limit);
      amount("cost", cost);
      if (burst != 0) {
        amount("burst", burst);
      }
      if (windowMs < 1 || windowMs > MAX_WINDOW_MS) {
        throw new IllegalArgumentException(
            "local limiter: " + key + " window must be from 1 ms to 3650 days, not " + windowMs + " ms");
      }
    }

    private void amount(String name, long n) {
      if (n < 1 || n > MAX_AMOUNT) {
        throw new IllegalArgumentException(
            "local limiter: " + key + " " + name + " must be from 1 to 2^50, not " + n);
      }
    }

    private long capacity() {
      return burst == 0 ? limit : burst;
    }
  }

  /** The plan's checks as clauses, in order. */
  static List<Clause> clauses(List<Plan.Check> checks) {
    List<Clause> out = new ArrayList<>(checks.size());
    for (Plan.Check c : checks) {
      out.add(Clause.of(c));
    }
    return out;
  }

  /** One key's limiter as the module would store it. */
  private sealed interface State permits Fixed, Approx, Log, Bucket, Leases {}

  private record Fixed(long startMs, long endMs, long count) implements State {}

  private record Approx(long startMs, long current, long previous) implements State {}

  /** The exact log: times and costs, oldest first, times strictly increasing. */
  private record Log(long[] times, long[] costs) implements State {}

  /** {@code missing} units (1/windowMs of a token each) short of full, as of {@code atMs}. */
  private record Bucket(long atMs, long windowMs, BigInteger missing) implements State {}

  private record Lease(long id, long endMs, long slots) {}

  private record Leases(long nextId, List<Lease> leases) implements State {}

  /** One clause decided: its six integers, and for an admitted one the state to store. */
  private record Outcome(long[] six, State commit, long expiresAtMs, long leaseId) {}

  private record Entry(State state, long expiresAtMs) {}

  private final Map<String, Entry> keys = new HashMap<>();
  private final int capacity;

  /** Holds at most {@code maxKeys} keys (at least 1). */
  LocalLimiter(long maxKeys) {
    this.capacity = (int) Math.max(1, Math.min(maxKeys, Integer.MAX_VALUE));
  }

  /** Decides now (the wall clock); see {@link #checkAt}. */
  AllDecision check(List<Clause> clauses, boolean peek) {
    return checkAt(clauses, peek, System.currentTimeMillis());
  }

  /**
   * As {@code RL.ALL} at {@code nowMs} (Unix ms): admitted only if every clause admits, then
   * recorded by each (unless {@code peek}); a refused request is recorded by none. Each decision is
   * the one the clause alone gives.
   */
  AllDecision checkAt(List<Clause> clauses, boolean peek, long nowMs) {
    if (nowMs < 0) {
      throw new IllegalArgumentException("local limiter: now must be >= 0 ms, not " + nowMs);
    }
    for (Clause c : clauses) {
      c.validate();
    }
    List<Outcome> outcomes = new ArrayList<>(clauses.size());
    boolean allowed = true;
    synchronized (keys) {
      for (Clause c : clauses) {
        Outcome o = decide(c, live(c.key(), nowMs), nowMs);
        outcomes.add(o);
        allowed &= o.six()[0] == 1;
      }
      if (allowed && !peek) {
        for (int i = 0; i < clauses.size(); i++) {
          Outcome o = outcomes.get(i);
          if (o.commit() != null) {
            insert(clauses.get(i).key(), new Entry(o.commit(), o.expiresAtMs()), nowMs);
          }
        }
      }
    }
    boolean taken = allowed && !peek;
    List<Decision> decisions = new ArrayList<>(outcomes.size());
    long retry = 0;
    for (Outcome o : outcomes) {
      long[] s = o.six();
      decisions.add(
          new Decision(s[0] == 1, s[1], millis(s[2]), s[3], s[4], millis(s[5]), taken ? o.leaseId() : 0));
      if (s[0] == 0 && retry != -1) {
        retry = s[2] == -1 ? -1 : Math.max(retry, s[2]);
      }
    }
    return new AllDecision(allowed, millis(retry), decisions);
  }

  /** Frees lease {@code leaseId} of a concurrency clause's key now; see {@link #releaseAt}. */
  boolean release(Clause clause, long leaseId) {
    return releaseAt(clause, leaseId, System.currentTimeMillis());
  }

  /**
   * Frees lease {@code leaseId} of a concurrency clause's key at {@code nowMs}; false when it is
   * not held (released, ended, or its key evicted).
   */
  boolean releaseAt(Clause clause, long leaseId, long nowMs) {
    if (clause.algorithm() != Policy.Algorithm.CONCURRENCY || leaseId <= 0) {
      return false;
    }
    synchronized (keys) {
      Entry entry = keys.get(clause.key());
      if (entry == null || !(entry.state() instanceof Leases leases)) {
        return false;
      }
      boolean found = false;
      List<Lease> kept = new ArrayList<>();
      long expiresAt = idsCaughtUpMs(leases.nextId());
      for (Lease x : leases.leases()) {
        if (x.endMs() <= nowMs) {
          continue;
        }
        if (x.id() == leaseId) {
          found = true;
        } else {
          kept.add(x);
          expiresAt = Math.max(expiresAt, x.endMs());
        }
      }
      if (!found) {
        return false;
      }
      if (expiresAt <= nowMs) {
        keys.remove(clause.key());
      } else {
        keys.put(clause.key(), new Entry(new Leases(leases.nextId(), List.copyOf(kept)), expiresAt));
      }
      return true;
    }
  }

  /** Keys held, expired ones included until they are next looked at. */
  int size() {
    synchronized (keys) {
      return keys.size();
    }
  }

  /** The key's state unless it has expired (an expired one is dropped). */
  private State live(String key, long now) {
    Entry entry = keys.get(key);
    if (entry == null) {
      return null;
    }
    if (entry.expiresAtMs() <= now) {
      keys.remove(key);
      return null;
    }
    return entry.state();
  }

  private void insert(String key, Entry entry, long now) {
    if (!keys.containsKey(key) && keys.size() >= capacity) {
      keys.values().removeIf(e -> e.expiresAtMs() <= now);
    }
    if (!keys.containsKey(key) && keys.size() >= capacity) {
      // Evict the tenth closest to expiry at once, so that a full store sorts once per many
      // inserts, not on each.
      long[] expiries = keys.values().stream().mapToLong(Entry::expiresAtMs).sorted().toArray();
      long threshold = expiries[Math.min(Math.max(1, capacity / 10), expiries.length - 1)];
      keys.values().removeIf(e -> e.expiresAtMs() <= threshold);
      // Many keys with the same expiry: drop arbitrary ones.
      Iterator<String> it = keys.keySet().iterator();
      while (keys.size() >= capacity && it.hasNext()) {
        it.next();
        it.remove();
      }
    }
    keys.put(key, entry);
  }

  private static Duration millis(long ms) {
    return ms < 0 ? Decision.NEVER : Duration.ofMillis(ms);
  }

  /** One clause on the state its key holds (another algorithm's state counts as none). */
  private static Outcome decide(Clause c, State state, long now) {
    switch (c.algorithm()) {
      case FIXED:
        return fixed(c, state instanceof Fixed f ? f : null, now);
      case SLIDING:
        return sliding(c, state instanceof Log l ? l : null, now);
      case APPROX:
        return approx(c, state instanceof Approx a ? a : null, now);
      case TOKEN:
        return token(c, state instanceof Bucket b ? b : null, now);
      case CONCURRENCY:
        return concurrent(c, state instanceof Leases l ? l : null, now);
      default:
        throw new IllegalArgumentException("local limiter: no algorithm " + c.algorithm());
    }
  }

  private static Outcome admit(long count, long limit, long resetAfter, State state, long expiresAt) {
    return new Outcome(
        new long[] {1, count, 0, limit, Math.max(0, limit - count), resetAfter}, state, expiresAt, 0);
  }

  /** A denial; retryAfter -1: never. */
  private static Outcome deny(long count, long retryAfter, long limit, long resetAfter) {
    return new Outcome(
        new long[] {0, count, retryAfter, limit, Math.max(0, limit - count), resetAfter}, null, 0, 0);
  }

  /**
   * FIXED: a counter per window {@code [start, start + window)}. A clock that steps back stands
   * still at the window's start.
   */
  private static Outcome fixed(Clause c, Fixed state, long now) {
    boolean live = state != null && Math.max(now, state.startMs()) < state.endMs();
    Fixed w;
    if (live) {
      w = state;
      now = Math.max(now, state.startMs());
    } else {
      long start = c.aligned() ? now - now % c.windowMs() : now;
      w = new Fixed(start, start + c.windowMs(), 0);
    }
    long untilEnd = w.endMs() - now;
    long count = w.count() + c.cost();
    if (count <= c.limit()) {
      return admit(count, c.limit(), untilEnd, new Fixed(w.startMs(), w.endMs(), count), w.endMs());
    }
    // The next window starts empty: any cost within the limit fits then.
    return deny(w.count(), c.cost() > c.limit() ? -1 : untilEnd, c.limit(), live ? untilEnd : 0);
  }

  /** SLIDING (exact): the costs logged in {@code (now - window, now]}. */
  private static Outcome sliding(Clause c, Log log, long now) {
    long[] times = log == null ? new long[0] : log.times();
    long[] costs = log == null ? new long[0] : log.costs();
    int n = times.length;
    long newest = n > 0 ? times[n - 1] : 0;
    now = Math.max(now, newest);
    long cutoff = Math.max(0, now - c.windowMs());
    int first = 0;
    while (first < n && times[first] <= cutoff) {
      first++;
    }
    long count = 0;
    for (int i = first; i < n; i++) {
      count += costs[i];
    }
    if (count + c.cost() <= c.limit()) {
      boolean merge = n > first && times[n - 1] == now;
      int size = n - first + (merge ? 0 : 1);
      long[] t = Arrays.copyOf(Arrays.copyOfRange(times, first, n), size);
      long[] k = Arrays.copyOf(Arrays.copyOfRange(costs, first, n), size);
      t[size - 1] = now;
      k[size - 1] += c.cost();
      return admit(count + c.cost(), c.limit(), c.windowMs(), new Log(t, k), now + c.windowMs());
    }
    long retry = -1;
    if (c.cost() <= c.limit()) {
      // The oldest entries leave first: wait until enough of them have.
      long mustLeave = count + c.cost() - c.limit();
      long passed = 0;
      retry = c.windowMs();
      for (int i = first; i < n; i++) {
        passed += costs[i];
        if (passed >= mustLeave) {
          retry = Math.max(0, times[i] + c.windowMs() - now);
          break;
        }
      }
    }
    long reset = count > 0 ? Math.max(0, newest + c.windowMs() - now) : 0;
    return deny(count, retry, c.limit(), reset);
  }

  /**
   * SLIDING APPROX: {@code current + floor(previous * left / window)} over windows aligned on the
   * clock.
   */
  private static Outcome approx(Clause c, Approx state, long now) {
    long window = c.windowMs();
    now = Math.max(now, state == null ? 0 : state.startMs());
    long start = now - now % window;
    long current = 0;
    long previous = 0;
    if (state != null && state.startMs() == start) {
      current = state.current();
      previous = state.previous();
    } else if (state != null && state.startMs() + window == start) {
      previous = state.current();
    }
    long left = window - (now - start);
    long count = current + big(previous).multiply(big(left)).divide(big(window)).longValueExact();
    // The counters matter until the window after this one ends.
    long expiresAt = start + 2 * window;
    if (count + c.cost() <= c.limit()) {
      return admit(
          count + c.cost(), c.limit(), expiresAt - now, new Approx(start, current + c.cost(), previous), expiresAt);
    }
    long retry = c.cost() > c.limit() ? -1 : approxWait(current, previous, left, window, c.limit() - c.cost());
    long reset = current > 0 ? expiresAt - now : previous > 0 ? start + window - now : 0;
    return deny(count, retry, c.limit(), reset);
  }

  /**
   * The most ms left in a window at which {@code floor(previous * left / window) <= room}; -1 when
   * even 1 ms left is too many.
   */
  private static long maxLeft(long previous, long room, long window) {
    if (previous == 0) {
      return window;
    }
    long x =
        big(room + 1).multiply(big(window)).subtract(BigInteger.ONE).divide(big(previous)).min(big(window)).longValueExact();
    return x >= 1 ? x : -1;
  }

  /**
   * The least wait after which {@code count + cost <= limit}, {@code room} being {@code limit -
   * cost}, nothing else admitted meanwhile.
   */
  private static long approxWait(long current, long previous, long left, long window, long room) {
    if (room >= current) {
      // Later in this window: the previous window's weight shrinks.
      long x = maxLeft(previous, room - current, window);
      if (x != -1) {
        return left - Math.min(x, left);
      }
    }
    // In the next window, this window's count becomes the weighted one.
    long x = maxLeft(current, room, window);
    return x != -1 ? left + window - x : left + window;
  }

  /**
   * TOKEN: the shortfall kept in 1/window ms tokens, so one ms refills exactly {@code rate} units:
   * exact integers; waits round up, tokens down.
   */
  private static Outcome token(Clause c, Bucket state, long now) {
    BigInteger window = big(c.windowMs());
    BigInteger rate = big(c.limit());
    long capacity = c.capacity();
    BigInteger full = big(capacity).multiply(window);
    BigInteger shortfall = BigInteger.ZERO;
    if (state != null) {
      now = Math.max(now, state.atMs());
      BigInteger missing = state.missing();
      if (state.windowMs() != c.windowMs()) {
        // A changed window rescales the shortfall, towards fewer tokens.
        missing = ceilDiv(missing.multiply(window), big(state.windowMs()));
      }
      shortfall = missing.subtract(big(now - state.atMs()).multiply(rate)).max(BigInteger.ZERO).min(full);
    }
    BigInteger after = shortfall.add(big(c.cost()).multiply(window));
    if (after.compareTo(full) <= 0) {
      long count = saturated(ceilDiv(after, window));
      long reset = saturated(ceilDiv(after, rate));
      return admit(count, capacity, reset, new Bucket(now, c.windowMs(), after), saturatedAdd(now, reset));
    }
    long retry = c.cost() > capacity ? -1 : Math.max(1, saturated(ceilDiv(after.subtract(full), rate)));
    return deny(saturated(ceilDiv(shortfall, window)), retry, capacity, saturated(ceilDiv(shortfall, rate)));
  }

  private static BigInteger big(long v) {
    return BigInteger.valueOf(v);
  }

  private static BigInteger ceilDiv(BigInteger a, BigInteger b) {
    return a.add(b).subtract(BigInteger.ONE).divide(b);
  }

  /** The value, or the largest long when it does not fit (the reply's integers saturate). */
  private static long saturated(BigInteger v) {
    return v.bitLength() < 64 ? v.longValue() : Long.MAX_VALUE;
  }

  private static long saturatedAdd(long a, long b) {
    long s = a + b;
    return s < 0 ? Long.MAX_VALUE : s;
  }

  /** The ms from which a key that starts afresh gives ids of at least {@code nextId}. */
  private static long idsCaughtUpMs(long nextId) {
    long n = Math.max(0, nextId - 1);
    return n / IDS_PER_MS + (n % IDS_PER_MS == 0 ? 0 : 1);
  }

  /**
   * CONCURRENT: {@code cost} slots as one lease, held {@code [now, now + lease)} unless released
   * first.
   */
  private static Outcome concurrent(Clause c, Leases state, long now) {
    List<Lease> held = new ArrayList<>();
    long count = 0;
    long latest = 0;
    if (state != null) {
      for (Lease x : state.leases()) {
        if (x.endMs() > now) {
          held.add(x);
          count += x.slots();
          latest = Math.max(latest, x.endMs());
        }
      }
    }
    long nextId = state == null ? 0 : state.nextId();
    long reset = Math.max(0, Math.max(latest, idsCaughtUpMs(nextId)) - now);
    if (count + c.cost() <= c.limit()) {
      // A new key's first id comes from the clock, the others from the counter.
      long id = nextId == 0 ? saturatedAdd(saturatedMul(now, IDS_PER_MS), 1) : nextId;
      if (id > MAX_LEASE_ID) {
        return deny(count, -1, c.limit(), reset);
      }
      long end = saturatedAdd(now, c.windowMs());
      long expiresAt = Math.max(Math.max(latest, end), idsCaughtUpMs(id + 1));
      held.add(new Lease(id, end, c.cost()));
      Outcome o =
          admit(count + c.cost(), c.limit(), expiresAt - now, new Leases(id + 1, List.copyOf(held)), expiresAt);
      return new Outcome(o.six(), o.commit(), o.expiresAtMs(), id);
    }
    if (c.cost() > c.limit()) {
      return deny(count, -1, c.limit(), reset);
    }
    // The least wait after which enough slots have ended for the cost.
    held.sort(Comparator.comparingLong(Lease::endMs).thenComparingLong(Lease::slots));
    long mustEnd = count + c.cost() - c.limit();
    long ended = 0;
    long retry = 0;
    for (Lease x : held) {
      ended += x.slots();
      if (ended >= mustEnd) {
        retry = x.endMs() - now;
        break;
      }
    }
    return deny(count, retry, c.limit(), reset);
  }

  private static long saturatedMul(long a, long b) {
    long hi = Math.multiplyHigh(a, b);
    long lo = a * b;
    return hi == 0 && lo >= 0 ? lo : Long.MAX_VALUE;
  }
}
