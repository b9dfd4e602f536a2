package io.librl;

import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * {@code RL.TOKEN}: a bucket of {@link #burst(long)} tokens (default the rate) that refills {@code
 * rate} tokens per window; {@link #reserve(Duration)} and {@link #waitUpTo(Duration)} queue callers
 * instead of refusing them. docs/commands.md, RL.TOKEN, and docs/request-life.md.
 */
public final class Token extends Clause<Token> {
  private final Long burst;
  private final Duration reserve;
  private final Duration waitUpTo;

  private Token(
      String key,
      long rate,
      Duration window,
      Common common,
      Long burst,
      Duration reserve,
      Duration waitUpTo) {
    super(key, rate, window, common);
    this.burst = burst;
    this.reserve = reserve;
    this.waitUpTo = waitUpTo;
  }

  /** A bucket on {@code key} refilling {@code rate} tokens per {@code window}. */
  public static Token of(String key, long rate, Duration window) {
    return new Token(key, rate, window, Common.NONE, null, null, null);
  }

  /** The bucket's capacity ({@code BURST capacity}; default the rate). */
  public Token burst(long capacity) {
    return new Token(key, limit, window, common, capacity, reserve, waitUpTo);
  }

  /**
   * Admits the call now against tokens that will exist within {@code maxWait} ({@code RESERVE
   * max_wait}, zero allowed): the decision's {@link Decision#retryAfter()} is the wait before
   * acting. Not with {@link #waitUpTo(Duration)}.
   */
  public Token reserve(Duration maxWait) {
    Objects.requireNonNull(maxWait, "maxWait");
    return new Token(key, limit, window, common, burst, maxWait, waitUpTo);
  }

  /**
   * {@link #reserve(Duration)}, with the server holding the reply until the reserved time ({@code
   * WAIT max_wait}, zero allowed): the call returns when the caller may act. The reply holds the
   * connection it is sent on, so the package sends it on a connection of its own, never on one a
   * multiplexed client shares (docs/clients/java.md, Blocking calls). Not with {@link
   * #reserve(Duration)}.
   */
  public Token waitUpTo(Duration maxWait) {
    Objects.requireNonNull(maxWait, "maxWait");
    return new Token(key, limit, window, common, burst, reserve, maxWait);
  }

  /** The capacity, when given. */
  public OptionalLong burst() {
    return burst == null ? OptionalLong.empty() : OptionalLong.of(burst);
  }

  /** The {@code RESERVE} max_wait, when given. */
  public Optional<Duration> reserve() {
    return Optional.ofNullable(reserve);
  }

  /** The {@code WAIT} max_wait, when given. */
  public Optional<Duration> waitUpTo() {
    return Optional.ofNullable(waitUpTo);
  }

  @Override
  Duration serverWait() {
    return waitUpTo == null ? Duration.ZERO : waitUpTo;
  }

  @Override
  Token with(Common common) {
    return new Token(key, limit, window, common, burst, reserve, waitUpTo);
  }

  /** This clause with {@code waitUpTo} sent as {@code reserve}: the caller does the waiting. */
  Token asReserve() {
    return waitUpTo == null ? this : new Token(key, limit, window, common, burst, waitUpTo, null);
  }

  @Override
  Clause<?> givenBack() {
    long units = common.cost() == null ? 1 : common.cost();
    // A reservation's tokens are refunded the same way: its debt is repaid first.
    return new Token(key, limit, window, new Common(null, units, null, null, false), burst, null, null);
  }

  @Override
  Token withLimits(long rate, Duration window, OptionalLong burst) {
    return new Token(key, rate, window, common, burst.orElse(rate), reserve, waitUpTo);
  }

  @Override
  String algorithm() {
    return "TOKEN";
  }

  @Override
  void ownWords(String where, Words words) {
    if (burst != null) {
      words.add("BURST").add(burst);
    }
  }

  @Override
  void queueWords(String where, Words words) {
    if (reserve != null && waitUpTo != null) {
      throw new LibrlArgumentException(
          where, "reserve and waitUpTo exclude each other: WAIT is RESERVE plus the server's wait");
    }
    if (reserve != null) {
      words.add("RESERVE").add(Durations.word(where, "reserve", reserve, true));
    }
    if (waitUpTo != null) {
      words.add("WAIT").add(Durations.word(where, "waitUpTo", waitUpTo, true));
    }
  }
}
