package io.librl.http;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Objects;

/**
 * The configuration (docs/http.md, One configuration and Configuration reference), read from a
 * YAML or JSON document, or from the language's own data (maps and lists), in two steps
 * (docs/http.md, Start-up validation): the schema's walker, then the rules that span fields.
 * Every error is a {@link ConfigException} naming the field.
 *
 * @param prefix put before every key the integration writes
 * @param mode enforce, or shadow: check and record, never refuse
 * @param fail what a request gets when Redis cannot answer within the timeout
 * @param timeout the Redis budget of one request's check
 * @param headers which rate-limit headers responses carry
 * @param trustedProxies peers whose {@code X-Forwarded-For} and {@code X-Real-IP} are believed
 * @param exemptLoopback skip every policy whose subject is a loopback address
 * @param apiKeyHeader the header carrying the API key
 * @param maxBodyBytes the largest body a {@code body-bytes} policy accepts; larger: 413
 * @param deny the response to a denied request
 * @param policies the named limits
 * @param routes the routes; empty: every policy applies to every request
 */
public record Config(
    String prefix,
    Mode mode,
    FailMode fail,
    Duration timeout,
    HeaderMode headers,
    List<IpAddress.Network> trustedProxies,
    boolean exemptLoopback,
    String apiKeyHeader,
    long maxBodyBytes,
    Deny deny,
    List<Policy> policies,
    List<Route> routes) {

  public Config {
    Objects.requireNonNull(prefix, "prefix");
    trustedProxies = List.copyOf(trustedProxies);
    policies = List.copyOf(policies);
    routes = List.copyOf(routes);
  }

  /** {@code enforce}, or {@code shadow}: check and record, never refuse. */
  public enum Mode {
    ENFORCE,
    SHADOW
  }

  /** What a request gets when Redis cannot answer. */
  public enum FailMode {
    /** Pass the request unlimited, and log a warning (at most every 10 s). */
    OPEN,
    /** Answer 503 with a problem body. */
    CLOSED
  }

  /** Which rate-limit headers responses carry. */
  public enum HeaderMode {
    BOTH,
    IETF,
    LEGACY,
    NONE
  }

  /** A denial's body: RFC 9457 problem details, or the deny message as text. */
  public enum DenyBody {
    PROBLEM,
    TEXT
  }

  /** The response to a denied request. */
  public record Deny(int status, DenyBody body, String message) {}

  /**
   * Policies for the paths under {@code path} (whole segments, compared as canonical paths), for
   * {@code methods} (null: every method).
   */
  public record Route(String path, List<String> methods, List<String> policies) {
    public Route {
      methods = methods == null ? null : List.copyOf(methods);
      policies = List.copyOf(policies);
    }
  }

  /** The document (maps, lists, strings, numbers, booleans), checked completely. */
  public static Config read(Object document) {
    return ConfigReader.read(Walker.document(document));
  }

  /** A YAML or JSON document's text. */
  public static Config parse(String text) {
    return read(Documents.read(text));
  }

  /** A file, YAML or JSON; an unreadable file is an error at {@code (file)}. */
  public static Config load(Path file) {
    String text;
    try {
      text = Files.readString(file, StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new ConfigException("(file)", "cannot read " + file + ": " + e.getMessage());
    }
    return parse(text);
  }

  /** A stream's UTF-8 text (a classpath resource); {@code name} names it in a read error. */
  public static Config load(InputStream in, String name) {
    try (InputStream stream = in) {
      return parse(new String(stream.readAllBytes(), StandardCharsets.UTF_8));
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
