package io.librl;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * Reads the replies, as both clients hand them over: an array is a {@code List}, an integer a
 * {@code Long}, a string a {@code String} (Lettuce, through this package's output) or a {@code
 * byte[]} (Jedis), nil is null. A reply longer than this package knows (a limiter reply of more
 * than six integers, {@code RL.CONCURRENT}'s of more than seven, an override of more than four) is
 * read for what it knows and the rest ignored, whatever its type; anything else unexpected is a
 * {@link LibrlCommandException}, never a {@code ClassCastException}.
 */
final class Replies {
  private Replies() {}

  /** A limiter reply of six integers, what follows ignored. */
  static Decision decision(String command, Object reply) {
    return decision(command, reply, false);
  }

  /**
   * A limiter reply: six integers, and when {@code leased} ({@code RL.CONCURRENT}) the seventh,
   * the lease; what follows ignored.
   */
  static Decision decision(String command, Object reply, boolean leased) {
    long[] v = ints(command, reply, leased ? 7 : 6);
    return new Decision(
        v[0] == 1,
        v[1],
        Durations.fromReply(v[2]),
        v[3],
        v[4],
        Durations.fromReply(v[5]),
        leased ? v[6] : 0);
  }

  /** {@code RL.ALL}'s reply, no clause of it a {@code CONCURRENT} one. */
  static AllDecision all(Object reply) {
    return all(reply, new boolean[0]);
  }

  /**
   * {@code RL.ALL}'s reply: {@code [allowed, retry_after, reply...]}, clause {@code i}'s reply
   * read with its lease when {@code leased[i]}.
   */
  static AllDecision all(Object reply, boolean[] leased) {
    if (!(reply instanceof List<?> arr) || arr.size() < 3) {
      throw unexpected("RL.ALL", reply);
    }
    if (!(arr.get(0) instanceof Long allowed) || !(arr.get(1) instanceof Long retry)) {
      throw unexpected("RL.ALL", reply);
    }
    List<Decision> decisions = new ArrayList<>(arr.size() - 2);
    for (int i = 2; i < arr.size(); i++) {
      decisions.add(decision("RL.ALL", arr.get(i), i - 2 < leased.length && leased[i - 2]));
    }
    return new AllDecision(allowed == 1, Durations.fromReply(retry), decisions);
  }

  /** RL.OVERRIDE GET: nil, or {@code [limit, window_ms, burst, ttl_ms]}. */
  static Optional<OverrideValues> override(Object reply) {
    if (reply == null) {
      return Optional.empty();
    }
    return Optional.of(values(ints("RL.OVERRIDE GET", reply, 4), 0));
  }

  private static OverrideValues values(long[] v, int from) {
    return new OverrideValues(
        v[from],
        Duration.ofMillis(v[from + 1]),
        v[from + 2] == 0 ? OptionalLong.empty() : OptionalLong.of(v[from + 2]),
        v[from + 3] < 0 ? Optional.empty() : Optional.of(Duration.ofMillis(v[from + 3])));
  }

  /** RL.OVERRIDE LIST: {@code [cursor, [[okey, limit, window_ms, burst, ttl_ms], ...]]}. */
  static OverridePage page(Object reply) {
    if (!(reply instanceof List<?> arr) || arr.size() != 2 || !(arr.get(1) instanceof List<?> items)) {
      throw unexpected("RL.OVERRIDE LIST", reply);
    }
    String cursor = arr.get(0) instanceof Long n ? Long.toUnsignedString(n) : text(arr.get(0));
    if (cursor == null) {
      throw unexpected("RL.OVERRIDE LIST", reply);
    }
    List<OverrideEntry> entries = new ArrayList<>(items.size());
    for (Object item : items) {
      if (!(item instanceof List<?> row) || row.size() < 5 || text(row.get(0)) == null) {
        throw unexpected("RL.OVERRIDE LIST", reply);
      }
      long[] v = ints("RL.OVERRIDE LIST", row.subList(1, row.size()), 4);
      entries.add(new OverrideEntry(text(row.get(0)), values(v, 0)));
    }
    return new OverridePage(cursor, entries);
  }

  /** An integer reply (RL.OVERRIDE DEL, WAIT). */
  static long integer(String command, Object reply) {
    if (reply instanceof Long n) {
      return n;
    }
    throw unexpected(command, reply);
  }

  /** A string or a byte string as text; null for anything else. */
  private static String text(Object v) {
    if (v instanceof String s) {
      return s;
    }
    if (v instanceof byte[] b) {
      return new String(b, StandardCharsets.UTF_8);
    }
    return null;
  }

  /** The first {@code n} integers of an array of at least {@code n} integers. */
  private static long[] ints(String command, Object reply, int n) {
    if (!(reply instanceof List<?> arr) || arr.size() < n) {
      throw unexpected(command, reply);
    }
    long[] out = new long[n];
    for (int i = 0; i < n; i++) {
      if (!(arr.get(i) instanceof Long x)) {
        throw unexpected(command, reply);
      }
      out[i] = x;
    }
    return out;
  }

  static LibrlCommandException unexpected(String command, Object reply) {
    return new LibrlCommandException(command, "unexpected reply " + show(reply));
  }

  private static String show(Object reply) {
    if (reply instanceof byte[] b) {
      return "\"" + new String(b, StandardCharsets.UTF_8) + "\"";
    }
    if (reply instanceof List<?> l) {
      List<String> parts = new ArrayList<>();
      l.forEach(x -> parts.add(show(x)));
      return parts.toString();
    }
    return reply instanceof String s ? "\"" + s + "\"" : String.valueOf(reply);
  }
}
