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
 * @param mode its own mode ({@code enforce} or {@code shadow}); null: the request's
 * @param blockMs once it denies a subject, the lockout in milliseconds (the module's {@code
 *     BLOCK}); null: none
 * @param queueMs a token policy's longest wait for a turn ({@code RESERVE}); null: none
 * @param limitResolver the name in {@code limit: code:<name>}: the limit and window come from
 *     that resolver per request (limit and window are then unused); null: the configured ones
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
    boolean overridable,
    Config.Mode mode,
    Long blockMs,
    Long queueMs,
    String limitResolver) {

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
    /** The built-in {@code api-key} (the {@code api_key_header}). */
    API_KEY,
    /** The built-in {@code user} (the user, then the API key, then the address). */
    USER,
    GLOBAL,
    /** A named identity of {@code identities} (docs/http.md, Named identities). */
    IDENTITY,
    /**
     * One source inline: {@code header:}, {@code cookie:}, {@code query:}, {@code authorization:},
     * {@code attribute:}.
     */
    SOURCE
  }

  /**
   * A policy's {@code key}.
   *
   * @param kind ip, api-key, user, global, a named identity or one source inline
   * @param identity for {@code IDENTITY}, the identity's name; else null
   * @param source for {@code SOURCE}, the source; else null
   */
  public record Key(KeyKind kind, String identity, Source source) {
    /** A built-in key: ip, api-key, user or global. */
    public Key(KeyKind kind) {
      this(kind, null, null);
    }

    /**
     * Reads a text the walker has checked against the schema's pattern; {@code api-key} and
     * {@code user} are named identities when {@code identities} redefines them.
     */
    static Key fromConfig(String text, java.util.Set<String> identities) {
      if (text.indexOf(':') >= 0) {
        return new Key(KeyKind.SOURCE, null, Source.parse(text));
      }
      if (identities.contains(text)) {
        return new Key(KeyKind.IDENTITY, text, null);
      }
      switch (text) {
        case "ip":
          return new Key(KeyKind.IP);
        case "api-key":
          return new Key(KeyKind.API_KEY);
        case "user":
          return new Key(KeyKind.USER);
        default:
          return new Key(KeyKind.GLOBAL);
      }
    }

    /** The configuration's text. */
    public String configText() {
      switch (kind) {
        case IDENTITY:
          return identity;
        case SOURCE:
          return source.kind().name().toLowerCase(Locale.ROOT) + ":" + source.name();
        default:
          return kind.name().toLowerCase(Locale.ROOT).replace('_', '-');
      }
    }
  }

  /** What a request costs: an integer, the body's bytes, a header's integer, or a resolver's. */
  public enum CostKind {
    UNITS,
    BODY_BYTES,
    HEADER,
    /** {@code code:<name>}: a cost resolver (docs/http.md, Resolvers). */
    CODE
  }

  /**
   * A policy's {@code cost}.
   *
   * @param kind units, body-bytes, header or code
   * @param units for {@code UNITS}, every request's cost
   * @param header for {@code HEADER}, the header's name as configured (the 400's detail)
   * @param resolver for {@code CODE}, the resolver's name
   */
  public record Cost(CostKind kind, long units, String header, String resolver) {
    public Cost(CostKind kind, long units, String header) {
      this(kind, units, header, null);
    }
  }

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
