package io.librl.http;

import java.util.Locale;
import java.util.Objects;

/**
 * One named limit (docs/http.md, Policies): its algorithm, limit and window, whose counter it uses,
 * what a request costs, and which responses it counts. The name is part of the key, so policies
 * with the same name share each subject's counter on every route that uses them. Built by the
 * configuration's reader, so every number is one the module accepts.
 *
 * @param name 1 to 64 of {@code A-Z a-z 0-9 - _ .}
 * @param algorithm which command checks it
 * @param limit units per window (for a token bucket, the rate: tokens added per window; for a
 *     concurrency policy, the slots held at once)
 * @param windowMs the window in milliseconds; a concurrency policy's lease (the longest one
 *     request holds its slots)
 * @param aligned a fixed window aligned to Unix time
 * @param burst a token bucket's capacity; null: the rate
 * @param key whose counter it uses
 * @param cost what one request costs
 * @param count which requests stay counted once the response is known
 * @param overridable the check sends {@code OVERRIDE <its override key>}
 */
public record Policy(
    String name,
    Algorithm algorithm,
    long limit,
    long windowMs,
    boolean aligned,
    Long burst,
    Key key,
    Cost cost,
    Count count,
    boolean overridable) {

  public Policy {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(algorithm, "algorithm");
    Objects.requireNonNull(key, "key");
    Objects.requireNonNull(cost, "cost");
    Objects.requireNonNull(count, "count");
  }

  /** Which RL.* command a policy calls. */
  public enum Algorithm {
    /** {@code RL.FIXED}. */
    FIXED,
    /** {@code RL.SLIDING}: the exact log. */
    SLIDING,
    /** {@code RL.SLIDING ... APPROX}. */
    APPROX,
    /** {@code RL.TOKEN}. */
    TOKEN,
    /**
     * {@code RL.CONCURRENT}: slots held from the request's check until its response is finished
     * (docs/http.md, Concurrency limits).
     */
    CONCURRENCY;

    /**
     * The configuration's name: {@code fixed}, {@code sliding}, {@code approx}, {@code token},
     * {@code concurrency}.
     */
    public String configName() {
      return name().toLowerCase(Locale.ROOT);
    }

    static Algorithm fromConfig(String name) {
      return valueOf(name.toUpperCase(Locale.ROOT));
    }
  }

  /** Whose counter a policy uses (docs/http.md, Identity). */
  public enum KeyKind {
    IP,
    API_KEY,
    USER,
    HEADER,
    GLOBAL
  }

  /**
   * A policy's {@code key}.
   *
   * @param kind ip, api-key, user, header or global
   * @param header the header's name as configured, for {@code header:<Name>}; else null
   */
  public record Key(KeyKind kind, String header) {
    /** Reads a text the walker has checked against the schema's pattern. */
    static Key fromConfig(String text) {
      switch (text) {
        case "ip":
          return new Key(KeyKind.IP, null);
        case "api-key":
          return new Key(KeyKind.API_KEY, null);
        case "user":
          return new Key(KeyKind.USER, null);
        case "global":
          return new Key(KeyKind.GLOBAL, null);
        default:
          return new Key(KeyKind.HEADER, text.substring("header:".length()));
      }
    }

    /** The configuration's text. */
    public String configText() {
      return kind == KeyKind.HEADER ? "header:" + header : kind.name().toLowerCase(Locale.ROOT).replace('_', '-');
    }
  }

  /** What a request costs: an integer, the body's bytes, or a header's integer. */
  public enum CostKind {
    UNITS,
    BODY_BYTES,
    HEADER
  }

  /**
   * A policy's {@code cost}.
   *
   * @param kind units, body-bytes or header
   * @param units for {@code UNITS}, every request's cost
   * @param header for {@code HEADER}, the header's name as configured (the 400's detail)
   */
  public record Cost(CostKind kind, long units, String header) {}

  /** Which requests stay counted once the response is known. */
  public enum Count {
    ALL,
    /** Refunded when the response status is below 400. */
    FAILED,
    /** Refunded when the response status is 400 or above. */
    SUCCEEDED;

    static Count fromConfig(String name) {
      return valueOf(name.toUpperCase(Locale.ROOT));
    }
  }

  /** Whether the policy holds slots until the response is finished: {@code concurrency}. */
  public boolean holdsSlots() {
    return algorithm == Algorithm.CONCURRENCY;
  }

  /** The window in whole seconds, rounded up, as the headers give it. */
  long windowSecs() {
    return (windowMs + 999) / 1000;
  }

  /**
   * The window as the refusals' detail writes it (docs/http.md, Refusals): whole seconds with
   * {@code s} when a multiple of 1000 ms ({@code 60s}), else {@code ms}.
   */
  String windowText() {
    return windowMs % 1000 == 0 ? (windowMs / 1000) + "s" : windowMs + "ms";
  }
}
