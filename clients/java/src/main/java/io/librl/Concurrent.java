package io.librl;

import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * {@code RL.CONCURRENT}: at most {@code limit} slots held at once, each call taking {@code COST}
 * slots (default 1) as one lease that ends by itself {@code lease} after it was taken unless it is
 * renewed; {@link #release(long)} gives the slots back. docs/commands.md, RL.CONCURRENT.
 *
 * <p>The usual way is {@link Limiter#acquire(Concurrent)}, which returns a {@link Lease} to close;
 * through {@link Limiter#decide} this clause is the raw command, its decision's {@link
 * Decision#leaseId()} the lease. In {@code RL.ALL} it takes its lease with the other limits, all
 * or nothing; there {@link #waitUpTo}, {@link #release} and {@link #renew} are refused before
 * sending (they are {@code RL.CONCURRENT}'s alone). {@link #refund} and {@link #block} are not
 * options of {@code RL.CONCURRENT}: a call with them is refused before sending.
 */
public final class Concurrent extends Clause<Concurrent> {
  /** What the call does with a lease. */
  private enum Op {
    ACQUIRE,
    RELEASE,
    RENEW
  }

  private final Duration waitUpTo;
  private final Op op;
  private final long id;

  private Concurrent(
      String key, long limit, Duration lease, Common common, Duration waitUpTo, Op op, long id) {
    super(key, limit, lease, common);
    this.waitUpTo = waitUpTo;
    this.op = op;
    this.id = id;
  }

  /** At most {@code limit} slots of {@code key} held at once, each lease lasting {@code lease}. */
  public static Concurrent of(String key, long limit, Duration lease) {
    return new Concurrent(key, limit, lease, Common.NONE, null, Op.ACQUIRE, 0);
  }

  /**
   * A refused acquire waits for free slots, the server holding its reply, at most {@code maxWait}
   * ({@code WAIT max_wait}, zero allowed), and is admitted as soon as a release or the end of a
   * lease frees them. The reply holds the connection it is sent on, so the package sends it on a
   * connection of its own, never on one a multiplexed client shares (docs/clients/java.md, Blocking
   * calls).
   */
  public Concurrent waitUpTo(Duration maxWait) {
    Objects.requireNonNull(maxWait, "maxWait");
    return new Concurrent(key, limit, window, common, maxWait, op, id);
  }

  /** {@code RELEASE id}: gives the lease's slots back; allowed 0 when it was not held. */
  public Concurrent release(long id) {
    return new Concurrent(key, limit, window, common, waitUpTo, Op.RELEASE, id);
  }

  /** {@code RENEW id}: the lease lasts {@code lease} from now; allowed 0 when it has ended. */
  public Concurrent renew(long id) {
    return new Concurrent(key, limit, window, common, waitUpTo, Op.RENEW, id);
  }

  /** This call as an acquire: without {@code RELEASE} or {@code RENEW}. */
  public Concurrent acquire() {
    return new Concurrent(key, limit, window, common, waitUpTo, Op.ACQUIRE, 0);
  }

  /** The lease's length (the window of the other limiters). */
  public Duration lease() {
    return window;
  }

  /** The {@code WAIT} max_wait, when given. */
  public Optional<Duration> waitUpTo() {
    return Optional.ofNullable(waitUpTo);
  }

  /** The lease this call releases, when it is a {@code RELEASE}. */
  public OptionalLong releases() {
    return op == Op.RELEASE ? OptionalLong.of(id) : OptionalLong.empty();
  }

  /** The lease this call renews, when it is a {@code RENEW}. */
  public OptionalLong renews() {
    return op == Op.RENEW ? OptionalLong.of(id) : OptionalLong.empty();
  }

  /** The call a lease is released and renewed with: key, limit, lease and override alone. */
  Concurrent forLease() {
    Common c = new Common(null, null, null, common.override(), false);
    return new Concurrent(key, limit, window, c, null, Op.ACQUIRE, 0);
  }

  @Override
  Duration serverWait() {
    return waitUpTo == null || op != Op.ACQUIRE ? Duration.ZERO : waitUpTo;
  }

  @Override
  Concurrent with(Common common) {
    return new Concurrent(key, limit, window, common, waitUpTo, op, id);
  }

  @Override
  Concurrent withLimits(long limit, Duration window, OptionalLong burst) {
    return new Concurrent(key, limit, window, common, waitUpTo, op, id);
  }

  @Override
  String algorithm() {
    return "CONCURRENT";
  }

  @Override
  void ownWords(String where, Words words) {
    if (common.refund() != null) {
      throw new LibrlArgumentException(where, "refund is not an option of RL.CONCURRENT: release the lease");
    }
    if (common.block() != null) {
      throw new LibrlArgumentException(where, "block is not an option of RL.CONCURRENT");
    }
  }

  @Override
  void queueWords(String where, Words words) {
    if (op != Op.ACQUIRE) {
      if (common.cost() != null || waitUpTo != null) {
        throw new LibrlArgumentException(
            where,
            (common.cost() != null ? "cost" : "waitUpTo")
                + " applies to an acquire, not to "
                + (op == Op.RELEASE ? "release" : "renew"));
      }
      if (id < 1) {
        throw new LibrlArgumentException(where, "a lease id is positive, got " + id);
      }
      words.add(op.name()).add(id);
      return;
    }
    if (waitUpTo != null) {
      words.add("WAIT").add(Durations.word(where, "waitUpTo", waitUpTo, true));
    }
  }

  @Override
  void allWords(String where) {
    if (op != Op.ACQUIRE || waitUpTo != null) {
      throw new LibrlArgumentException(
          where,
          "waitUpTo, release and renew are RL.CONCURRENT's alone, not options of an RL.ALL clause:"
              + " acquire with waitUpTo first, then call all with the other limits");
    }
  }
}
