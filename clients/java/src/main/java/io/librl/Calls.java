package io.librl;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Locale;
import java.util.Objects;

/** Builds each command's {@link Call} from its typed request: the one grammar every client sends. */
final class Calls {
  private Calls() {}

  /** What a clause's refusal names until {@link #all} says which clause it is. */
  private static final String CLAUSE = "all clause";

  /** {@code RL.FIXED}, {@code RL.SLIDING}, {@code RL.TOKEN} or {@code RL.CONCURRENT} alone. */
  static Call single(Clause<?> clause) {
    Objects.requireNonNull(clause, "clause");
    String name = "RL." + clause.algorithm();
    Words words = new Words(name);
    clause.words(clause.algorithm().toLowerCase(Locale.ROOT), words);
    if (clause.common.peek()) {
      words.add("PEEK");
    }
    // A lease's denial is never kept: a release elsewhere frees a slot before its retry_after.
    Call.Effect effect =
        clause.common.refund() != null
            ? Call.Effect.REFUND
            : clause.common.peek() || clause instanceof Concurrent
                ? Call.Effect.NONE
                : Call.Effect.CACHEABLE;
    return new Call(
        name, words.all(), clause.key, clause.keys(), effect, !clause.reads(), clause.serverWait());
  }

  /** {@code RL.ALL clause... [PEEK]}. */
  static Call all(Collection<? extends Clause<?>> clauses, boolean peek) {
    Objects.requireNonNull(clauses, "clauses");
    if (clauses.isEmpty()) {
      throw new LibrlArgumentException(
          peek ? "peekAll" : "all",
          "needs at least one clause (Fixed, Sliding, Token or Concurrent)");
    }
    Words words = new Words("RL.ALL");
    List<String> keys = new ArrayList<>();
    boolean refund = false;
    boolean writes = false;
    boolean leases = false;
    Duration serverWait = Duration.ZERO;
    int i = 0;
    for (Clause<?> c : clauses) {
      Objects.requireNonNull(c, "clause");
      try {
        if (c.common.peek()) {
          throw new LibrlArgumentException(
              CLAUSE, "peek applies to a whole RL.ALL call: use peekAll instead of a peeking clause");
        }
        c.allWords(CLAUSE);
        words.add(c.algorithm());
        c.words(CLAUSE, words);
      } catch (LibrlArgumentException e) {
        // Named only when refused: the name is text made from the clause's place and key.
        throw e.at("all clause " + i + " (" + c.algorithm() + " " + c.key + ")");
      }
      leases |= c instanceof Concurrent;
      keys.addAll(c.keys());
      refund |= c.common.refund() != null;
      writes |= !c.reads();
      if (c.serverWait().compareTo(serverWait) > 0) {
        serverWait = c.serverWait();
      }
      i++;
    }
    if (peek) {
      words.add("PEEK");
    }
    Call.Effect effect =
        peek || (leases && !refund)
            ? Call.Effect.NONE
            : refund ? Call.Effect.REFUND : Call.Effect.CACHEABLE;
    return new Call(
        "RL.ALL", words.all(), keys.get(0), List.copyOf(keys), effect, writes && !peek, serverWait);
  }

  static Call overrideSet(LimitOverride o) {
    Objects.requireNonNull(o, "override");
    Words words = new Words("RL.OVERRIDE");
    o.words(words);
    return override("SET", words, o.okey(), List.of(o.okey()), Call.Effect.CLEAR_ALL, true);
  }

  static Call overrideGet(String okey) {
    Objects.requireNonNull(okey, "okey");
    Words words = new Words("RL.OVERRIDE").add("GET").add(okey);
    return override("GET", words, okey, List.of(okey), Call.Effect.NONE, false);
  }

  /** One {@code RL.OVERRIDE DEL} of keys that share a slot (or any keys, standalone). */
  static Call overrideDel(List<String> okeys) {
    Words words = new Words("RL.OVERRIDE").add("DEL");
    okeys.forEach(words::add);
    return override("DEL", words, okeys.get(0), List.copyOf(okeys), Call.Effect.CLEAR_ALL, true);
  }

  static Call overrideList(String cursor, String match, long count) {
    Objects.requireNonNull(cursor, "cursor");
    Words words = new Words("RL.OVERRIDE").add("LIST").add(cursor);
    if (match != null) {
      words.add("MATCH").add(match);
    }
    if (count > 0) {
      words.add("COUNT").add(count);
    }
    return override("LIST", words, null, List.of(), Call.Effect.NONE, false);
  }

  private static Call override(
      String sub, Words words, String routeKey, List<String> keys, Call.Effect effect, boolean writes) {
    return new Call(
        "RL.OVERRIDE " + sub, words.all(), routeKey, keys, effect, writes, Duration.ZERO);
  }
}
