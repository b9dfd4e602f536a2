package io.librl;

import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * One limit: a call of {@code RL.FIXED}, {@code RL.SLIDING}, {@code RL.TOKEN} or {@code
 * RL.CONCURRENT} on its own, or a clause of {@code RL.ALL}. Built by {@link Fixed#of}, {@link
 * Sliding#of}, {@link Token#of} and {@link Concurrent#of};
 * immutable, so a clause can be kept in a constant and shared between threads. Each option method
 * returns a new clause; given twice, the last one counts.
 *
 * <p>The options every limiter takes are here; {@link Fixed#aligned()}, {@link Sliding#approx()},
 * {@link Token#burst(long)}, {@link Token#reserve(Duration)} and {@link Token#waitUpTo(Duration)}
 * are on their own command's clause. What each option does: docs/commands.md.
 *
 * @param <C> the clause's own type, which every option method returns
 */
public abstract sealed class Clause<C extends Clause<C>> permits Fixed, Sliding, Token, Concurrent {

  /** The options every limiter takes; null when not given. */
  record Common(Long cost, Long refund, Duration block, String override, boolean peek) {
    static final Common NONE = new Common(null, null, null, null, false);
  }

  final String key;
  final long limit;
  final Duration window;
  final Common common;

  Clause(String key, long limit, Duration window, Common common) {
    this.key = Objects.requireNonNull(key, "key");
    this.limit = limit;
    this.window = Objects.requireNonNull(window, "window");
    this.common = common;
  }

  /** The same clause with other common options. */
  abstract C with(Common common);

  /**
   * The same clause with another limit and window (and a token bucket's capacity: {@code burst},
   * or the limit when empty), as an override's values replace them: the split of a call a
   * half-moved slot refuses reads the override first (docs/clients/java.md, While a slot moves).
   */
  abstract C withLimits(long limit, Duration window, OptionalLong burst);

  /** The same clause without {@code OVERRIDE}. */
  C withoutOverride() {
    return with(new Common(common.cost(), common.refund(), common.block(), null, common.peek()));
  }

  /** The call that gives back what this one consumed: {@code REFUND} of its cost. */
  Clause<?> givenBack() {
    long units = common.cost() == null ? 1 : common.cost();
    return with(new Common(null, units, null, null, false));
  }

  /** Refuses, before sending, what this clause may not do inside {@code RL.ALL}. */
  void allWords(String where) {}

  /** FIXED, SLIDING, TOKEN or CONCURRENT: the clause's name in {@code RL.ALL}. */
  abstract String algorithm();

  /** Appends this algorithm's own options that come before COST: ALIGNED, APPROX, BURST. */
  abstract void ownWords(String where, Words words);

  /** Appends RESERVE or WAIT, which come after COST in the grammar; only a token bucket has them. */
  void queueWords(String where, Words words) {}

  /** The longest the server may hold the reply (WAIT), zero when it answers at once. */
  Duration serverWait() {
    return Duration.ZERO;
  }

  /**
   * Units this call consumes ({@code COST n}, default 1). {@code cost(0)} reads the limiter as it
   * stands and changes nothing. Not with {@link #refund(long)}.
   */
  public C cost(long n) {
    return with(new Common(n, common.refund(), common.block(), common.override(), common.peek()));
  }

  /**
   * Gives back up to {@code n} units this limiter recorded ({@code REFUND n}) instead of consuming:
   * the reply is the limiter after the refund. Not with {@link #cost(long)}.
   */
  public C refund(long n) {
    return with(new Common(common.cost(), n, common.block(), common.override(), common.peek()));
  }

  /** A denial starts a block of {@code duration} on the key ({@code BLOCK duration}). */
  public C block(Duration duration) {
    Objects.requireNonNull(duration, "duration");
    return with(new Common(common.cost(), common.refund(), duration, common.override(), common.peek()));
  }

  /**
   * Reads limit, window and burst from the override stored at {@code okey} when there is one
   * ({@code OVERRIDE okey}); in a cluster {@code okey} must share the key's slot.
   */
  public C override(String okey) {
    Objects.requireNonNull(okey, "okey");
    return with(new Common(common.cost(), common.refund(), common.block(), okey, common.peek()));
  }

  /**
   * Answers as if the call were made and changes nothing ({@code PEEK}). For a single call only:
   * an {@code RL.ALL} call peeks as a whole ({@link Limiter#peekAll}).
   */
  public C peek() {
    return with(new Common(common.cost(), common.refund(), common.block(), common.override(), true));
  }

  /** The limiter's key. */
  public String key() {
    return key;
  }

  /** The limit (for a token bucket, the rate per window). */
  public long limit() {
    return limit;
  }

  /** The window (for a token bucket, the time in which {@link #limit()} tokens refill). */
  public Duration window() {
    return window;
  }

  /** The {@code COST}, when given. */
  public OptionalLong cost() {
    return common.cost() == null ? OptionalLong.empty() : OptionalLong.of(common.cost());
  }

  /** The {@code REFUND}, when given. */
  public OptionalLong refund() {
    return common.refund() == null ? OptionalLong.empty() : OptionalLong.of(common.refund());
  }

  /** The {@code BLOCK} duration, when given. */
  public Optional<Duration> block() {
    return Optional.ofNullable(common.block());
  }

  /** The override key, when given. */
  public Optional<String> override() {
    return Optional.ofNullable(common.override());
  }

  /** Whether this call only peeks. */
  public boolean isPeek() {
    return common.peek();
  }

  /** Whether the call changes nothing on the server: a PEEK or COST 0. */
  boolean reads() {
    return common.peek() || (common.cost() != null && common.cost() == 0);
  }

  /** The keys this clause names: its key, and its override key when given. */
  List<String> keys() {
    return common.override() == null ? List.of(key) : List.of(key, common.override());
  }

  /**
   * Appends key, limit, window and the options (PEEK left to the caller), in the grammar's order;
   * {@code where} names the call in the errors of arguments refused before sending.
   */
  void words(String where, Words words) {
    if (common.cost() != null && common.refund() != null) {
      throw new LibrlArgumentException(
          where, "cost and refund exclude each other: a call consumes or gives back");
    }
    words.add(key).add(limit).add(Durations.word(where, "window", window, false));
    ownWords(where, words);
    if (common.cost() != null) {
      words.add("COST").add(common.cost());
    }
    if (common.refund() != null) {
      words.add("REFUND").add(common.refund());
    }
    queueWords(where, words);
    if (common.block() != null) {
      words.add("BLOCK").add(Durations.word(where, "block", common.block(), false));
    }
    if (common.override() != null) {
      words.add("OVERRIDE").add(common.override());
    }
  }

  @Override
  public String toString() {
    Words w = new Words("RL." + algorithm());
    try {
      words(algorithm(), w);
    } catch (LibrlArgumentException e) {
      return algorithm() + " " + key + " (" + e.getMessage() + ")";
    }
    if (common.peek()) {
      w.add("PEEK");
    }
    return String.join(" ", w.all());
  }
}
