package io.librl.http;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Locale;
import java.util.Objects;

/**
 * The configuration (docs/http.md, One configuration and Configuration reference), read from a
 * YAML or JSON document, or from the language's own data (maps and lists), in two steps
 * (docs/http.md, Start-up validation): the schema's walker, then the rules that span fields.
 * Every error is a {@link ConfigException} naming the field.
 *
 * @param prefix put before every key the integration writes
 * @param mode enforce, or shadow: check and record, never refuse (with a mode resolver: the mode
 *     of a request it gives none for, never used)
 * @param modeResolver the name in {@code mode: code:<name>}, or null
 * @param fail what a request gets when Redis cannot answer within the timeout
 * @param timeout the Redis budget of one request's check
 * @param headers which rate-limit headers responses carry
 * @param legacyReset what {@code X-RateLimit-Reset} holds: seconds from now, or a Unix time
 * @param trustedProxies peers whose {@code X-Forwarded-For} and {@code X-Real-IP} are believed
 * @param exempt clients no policy limits ({@code exempt}, with the loopback networks when {@code
 *     exempt_loopback} is on)
 * @param ipv6Prefix the bits of an IPv6 client's address its {@code ip} subject keeps
 * @param apiKeyHeader the header carrying the API key
 * @param identities the named identities of {@code identities}, by name, in the file's order
 * @param maxBodyBytes the largest body a {@code body-bytes} policy accepts; larger: 413
 * @param localMaxKeys the most limiter keys the {@code local} fail mode holds
 * @param deny the response to a denied request
 * @param failDeny the response to a request refused by {@code fail: closed}
 * @param policies the named limits
 * @param routes the routes; empty: every policy applies to every request
 */
public record Config(
    String prefix,
    Mode mode,
    String modeResolver,
    FailMode fail,
    Duration timeout,
    HeaderMode headers,
    LegacyReset legacyReset,
    List<IpAddress.Network> trustedProxies,
    List<IpAddress.Network> exempt,
    int ipv6Prefix,
    String apiKeyHeader,
    Map<String, NamedIdentity> identities,
    long maxBodyBytes,
    long localMaxKeys,
    Deny deny,
    Deny failDeny,
    List<Policy> policies,
    List<Route> routes) {

  public Config {
    Objects.requireNonNull(prefix, "prefix");
    trustedProxies = List.copyOf(trustedProxies);
    exempt = List.copyOf(exempt);
    identities = Collections.unmodifiableMap(new LinkedHashMap<>(identities));
    policies = List.copyOf(policies);
    routes = List.copyOf(routes);
  }

  /** {@code enforce}, or {@code shadow}: check and record, never refuse. */
  public enum Mode {
    ENFORCE,
    SHADOW,
    /** A mode resolver's third answer: the request is not checked (never a configured mode). */
    OFF
  }

  /** What a request gets when Redis cannot answer. */
  public enum FailMode {
    /** Pass the request unlimited, and log a warning (at most every 10 s). */
    OPEN,
    /** Refuse it with {@code fail_deny} (503 with a problem body). */
    CLOSED,
    /** Decide it in the process with librl-core's algorithms ({@link LocalLimiter}). */
    LOCAL
  }

  /** Which rate-limit headers responses carry. */
  public enum HeaderMode {
    BOTH,
    IETF,
    LEGACY,
    /** express-rate-limit's {@code draft-6} names: {@code RateLimit-Limit}, ... */
    DRAFT6,
    NONE
  }

  /** What {@code X-RateLimit-Reset} holds. */
  public enum LegacyReset {
    /** Seconds from now, rounded up. */
    SECONDS,
    /** The Unix time in seconds at which it resets, rounded up. */
    UNIX
  }

  /** A refusal's body: RFC 9457 problem details, the message as text, or the configured JSON. */
  public enum DenyBody {
    PROBLEM,
    TEXT,
    JSON
  }

  /**
   * A refusal (docs/http.md, Refusals): a denied request's, or a {@code fail: closed} one's.
   *
   * @param status the status
   * @param body which body
   * @param message the {@code text} body
   * @param contentType the {@code text} body's Content-Type
   * @param json the {@code json} body, serialized once, or null
   * @param headers extra headers sent on the refusal, in order
   */
  public record Deny(
      int status, DenyBody body, String message, String contentType, String json, Map<String, String> headers) {
    public Deny {
      headers = Collections.unmodifiableMap(new LinkedHashMap<>(headers));
    }
  }

  /**
   * A named identity (docs/http.md, Named identities): its sources, tried in order.
   *
   * @param name the identity's name, the subject's first part
   * @param sources its sources; an {@code ip} source can only be last
   * @param hashed whether its values are always hashed ({@code api-key}, or an {@code
   *     authorization:} source)
   */
  public record NamedIdentity(String name, List<Source> sources, boolean hashed) {
    public NamedIdentity {
      sources = List.copyOf(sources);
    }
  }

  /**
   * Policies for the paths under {@code path} (whole segments, compared as canonical paths), for
   * {@code methods} (null: every method), refused with {@code deny} (null: the top-level one).
   */
  public record Route(String path, List<String> methods, List<String> policies, Deny deny) {
    public Route {
      methods = methods == null ? null : List.copyOf(methods);
      policies = List.copyOf(policies);
    }

    public Route(String path, List<String> methods, List<String> policies) {
      this(path, methods, policies, null);
    }
  }

  /** The document (maps, lists, strings, numbers, booleans), checked completely. */
  public static Config read(Object document) {
    return ConfigReader.read(Walker.document(document));
  }

  /** A YAML or JSON document's text, as given (no {@code ${VAR}} substitution). */
  public static Config parse(String text) {
    return read(Documents.read(text));
  }

  /**
   * A file, YAML or JSON, its {@code ${VAR}} and {@code ${VAR:-default}} replaced from the
   * environment first (docs/http.md, Environment variables); an unreadable file is an error at
   * {@code (file)}.
   */
  public static Config load(Path file) {
    String text;
    try {
      text = Files.readString(file, StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new ConfigException("(file)", "cannot read " + file + ": " + e.getMessage());
    }
    return parse(Substitution.apply(text, System::getenv));
  }

  /**
   * A stream's UTF-8 text (a classpath resource), substituted as a file is; {@code name} names it
   * in a read error.
   */
  public static Config load(InputStream in, String name) {
    try (InputStream stream = in) {
      return parse(
          Substitution.apply(new String(stream.readAllBytes(), StandardCharsets.UTF_8), System::getenv));
    } catch (IOException e) {
      throw new ConfigException("(file)", "cannot read " + name + ": " + e.getMessage());
    }
  }

  /** The policy of this name, or null. */
  public Policy policy(String name) {
    for (Policy p : policies) {
      if (p.name().equals(name)) {
        return p;
      }
    }
    return null;
  }

  static String lower(Enum<?> e) {
    return e.name().toLowerCase(Locale.ROOT);
  }
}
