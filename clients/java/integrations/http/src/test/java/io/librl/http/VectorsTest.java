package io.librl.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.librl.Decision;
import java.io.IOException;
import java.math.BigDecimal;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * The shared vectors (conformance/vectors/README.md): every pure rule of docs/http.md as input and
 * expected output, run against the functions the integration calls on requests, without Redis.
 * Each function a file names has a thin adapter here that reads the input as the integration
 * would meet it (configuration through the configuration reader, header lines as {@link
 * RequestHeaders}); none is a second implementation.
 */
class VectorsTest {
  /** Every file the directory holds, and the function each one names. */
  static final Map<String, String> FILES =
      Map.ofEntries(
          Map.entry("algorithms.json", "algorithm"),
          Map.entry("client-ip.json", "client_ip"),
          Map.entry("config-errors.json", "config_error"),
          Map.entry("cost-headers.json", "cost_header"),
          Map.entry("durations.json", "duration"),
          Map.entry("headers.json", "response_headers"),
          Map.entry("keys.json", "key"),
          Map.entry("outcomes.json", "outcome"),
          Map.entry("override-keys.json", "override_key"),
          Map.entry("paths.json", "canonical_path"),
          Map.entry("rates.json", "rate"),
          Map.entry("refusals.json", "refusal"),
          Map.entry("routes.json", "route"),
          Map.entry("sources.json", "source"),
          Map.entry("substitution.json", "substitute"));

  static Path dir() {
    return TestSupport.root().resolve("conformance/vectors");
  }

  @Test
  void theDirectoryHoldsExactlyTheFilesRun() throws IOException {
    List<String> found;
    try (Stream<Path> files = Files.list(dir())) {
      found =
          files
              .map(p -> p.getFileName().toString())
              .filter(n -> n.endsWith(".json"))
              .filter(n -> FILES.containsKey(n) || !whollyPending(n))
              .sorted()
              .toList();
    }
    assertEquals(
        FILES.keySet().stream().sorted().toList(),
        found,
        "conformance/vectors holds a file this runner does not run, or lacks one it does");
  }

  /** A file of a function not implemented yet: every vector of it is pending for Java. */
  @SuppressWarnings("unchecked")
  private static boolean whollyPending(String file) {
    try {
      Set<String> pending = pending();
      Map<String, Object> doc =
          (Map<String, Object>) Documents.read(Files.readString(dir().resolve(file)));
      return ((List<Object>) doc.get("vectors"))
          .stream()
          .allMatch(v -> pending.contains(file + " " + ((Map<String, Object>) v).get("name")));
    } catch (IOException e) {
      return false;
    }
  }

  @Test
  void anUnknownFunctionFails() {
    try {
      call("no_such_function", Map.of());
      fail("an unknown function must fail the runner");
    } catch (AssertionError e) {
      assertTrue(e.getMessage().contains("unknown function"), e.getMessage());
    }
  }

  @TestFactory
  Stream<DynamicTest> everyVectorOfEveryFile() {
    return FILES.keySet().stream().sorted().map(file -> DynamicTest.dynamicTest(file, () -> run(file)));
  }

  /**
   * conformance/pending.json's Java vectors ("file name"): the rules that landed as data before
   * Java implements them (docs/http/java.md, Concurrency limits). Each is run; one that passes
   * fails the test, so it leaves the list with the change that makes it pass.
   */
  @SuppressWarnings("unchecked")
  private static Set<String> pending() throws IOException {
    Map<String, Object> doc =
        (Map<String, Object>) Documents.read(Files.readString(dir().resolveSibling("pending.json")));
    Map<String, Object> java =
        (Map<String, Object>) ((Map<String, Object>) doc.get("vectors")).getOrDefault("java", Map.of());
    Set<String> out = new java.util.HashSet<>();
    java.forEach((file, names) -> ((List<Object>) names).forEach(n -> out.add(file + " " + n)));
    return out;
  }

  @SuppressWarnings("unchecked")
  private static void run(String file) throws IOException {
    Map<String, Object> doc =
        (Map<String, Object>) Documents.read(Files.readString(dir().resolve(file)));
    String function = (String) doc.get("function");
    assertEquals(FILES.get(file), function, file + ": function");
    List<Object> vectors = (List<Object>) doc.get("vectors");
    Set<String> pending = pending();
    assertFalse(vectors.isEmpty(), file + ": no vectors");
    List<String> failures = new ArrayList<>();
    for (Object o : vectors) {
      Map<String, Object> v = (Map<String, Object>) o;
      boolean isPending = pending.contains(file + " " + v.get("name"));
      Object got;
      try {
        got = call(function, (Map<String, Object>) v.get("input"));
      } catch (RuntimeException e) {
        if (!isPending) {
          failures.add(file + " " + v.get("name") + ": " + e);
        }
        continue;
      }
      boolean passes = same(got, v.get("expect"));
      if (isPending && passes) {
        failures.add(file + " " + v.get("name") + " passes: remove it from conformance/pending.json");
      } else if (!isPending && !passes) {
        failures.add(
            file + " " + v.get("name") + ": got " + Json.write(got) + ", expected "
                + Json.write(v.get("expect")));
      }
    }
    assertTrue(
        failures.isEmpty(),
        failures.size() + " of " + vectors.size() + " vectors differ:\n" + String.join("\n", failures));
  }

  private static Object call(String function, Map<String, Object> input) {
    switch (function) {
      case "algorithm":
        return LocalLimiterTest.algorithm(input);
      case "client_ip":
        return clientIp(input);
      case "config_error":
        return configError(input);
      case "cost_header":
        return costHeader(input);
      case "duration":
        return duration(input);
      case "response_headers":
        return responseHeaders(input);
      case "key":
        return key(input);
      case "canonical_path":
        return bytesValue(Routes.canonicalPath(bytes(input.get("path"))));
      case "rate":
        return rate(input);
      case "refusal":
        return refusal(input);
      case "route":
        return route(input);
      case "outcome":
        return outcome(input);
      case "override_key":
        return overrideKey(input);
      case "source":
        return source(input);
      case "substitute":
        return substitute(input);
      default:
        throw new AssertionError("unknown function " + function);
    }
  }

  /** Exact equality, numbers by value, byte strings given as {@code {"hex": ...}} as bytes. */
  static boolean same(Object got, Object want) {
    if (want instanceof Map<?, ?> w && w.size() == 1 && w.get("hex") instanceof String hex) {
      if (got instanceof Map<?, ?> g && hex.equals(g.get("hex"))) {
        return true;
      }
      return got instanceof String s && java.util.Arrays.equals(s.getBytes(StandardCharsets.UTF_8), unhex(hex));
    }
    if (got instanceof Number g && want instanceof Number w) {
      return new BigDecimal(g.toString()).compareTo(new BigDecimal(w.toString())) == 0;
    }
    if (got instanceof List<?> g && want instanceof List<?> w) {
      if (g.size() != w.size()) {
        return false;
      }
      for (int i = 0; i < g.size(); i++) {
        if (!same(g.get(i), w.get(i))) {
          return false;
        }
      }
      return true;
    }
    if (got instanceof Map<?, ?> g && want instanceof Map<?, ?> w) {
      if (g.size() != w.size()) {
        return false;
      }
      for (Map.Entry<?, ?> e : w.entrySet()) {
        if (!g.containsKey(e.getKey()) || !same(g.get(e.getKey()), e.getValue())) {
          return false;
        }
      }
      return true;
    }
    return got == null ? want == null : got.equals(want);
  }

  static byte[] unhex(String hex) {
    byte[] out = new byte[hex.length() / 2];
    for (int i = 0; i < out.length; i++) {
      out[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
    }
    return out;
  }

  /** A JSON string's UTF-8 bytes, or {@code {"hex": ...}}'s bytes. */
  static byte[] bytes(Object v) {
    if (v instanceof String s) {
      return s.getBytes(StandardCharsets.UTF_8);
    }
    if (v instanceof Map<?, ?> m && m.get("hex") instanceof String hex) {
      return unhex(hex);
    }
    throw new AssertionError(v + " is not bytes");
  }

  /** Bytes as the vectors write them: text when UTF-8, else {@code {"hex": ...}}. */
  static Object bytesValue(byte[] b) {
    try {
      return StandardCharsets.UTF_8.newDecoder().decode(java.nio.ByteBuffer.wrap(b)).toString();
    } catch (CharacterCodingException e) {
      StringBuilder hex = new StringBuilder();
      for (byte x : b) {
        hex.append(String.format("%02x", x & 0xff));
      }
      return Map.of("hex", hex.toString());
    }
  }

  /** {@code [[name, value], ...]}, one pair per header line, in order, values bytes. */
  static RequestHeaders headers(Object pairs) {
    List<Map.Entry<String, byte[]>> out = new ArrayList<>();
    for (Object o : (List<?>) pairs) {
      List<?> pair = (List<?>) o;
      out.add(Map.entry((String) pair.get(0), bytes(pair.get(1))));
    }
    return RequestHeaders.of(out);
  }

  private static Map<String, Object> doc(Object... kv) {
    Map<String, Object> m = new LinkedHashMap<>();
    for (int i = 0; i < kv.length; i += 2) {
      if (kv[i + 1] != null) {
        m.put((String) kv[i], kv[i + 1]);
      }
    }
    return m;
  }

  /**
   * The document's policies as checks (cost 1, keyed {@code k}, the global subject), planned as
   * a request of the document's mode is.
   */
  static List<Plan.Check> checks(Config config) {
    Plan.Planned planned =
        new Plan.Planned(
            null,
            config.policies().stream()
                .map(p -> new Plan.Applying(p, new Identity.Subject(Identity.Subject.Kind.GLOBAL, null)))
                .toList());
    List<Plan.Check> out = new ArrayList<>();
    for (Plan.Check c : Plan.checks(planned, "", request(List.of(), null), -1, config.mode(), Resolvers.NONE)) {
      out.add(new Plan.Check(c.policy(), c.subject(), "k", null, 1, c.shadow()));
    }
    return out;
  }

  /** A request of these headers and raw query string, nothing else. */
  static Plan.Request request(Object headers, String query) {
    return new Plan.Request("GET", "/", headers(headers), null, null, query, null);
  }

  /** The conformance resolvers (conformance/README.md), registered as the example app does. */
  static Resolvers conformanceResolvers() {
    Resolvers.Registry r = new Resolvers.Registry();
    r.costs.put("conformance-cost", req -> null);
    r.limits.put("conformance-limit", req -> null);
    r.modes.put("conformance-mode", req -> Config.Mode.ENFORCE);
    return r.build();
  }

  @SuppressWarnings("unchecked")
  private static Object outcome(Map<String, Object> input) {
    Config config = Config.read(doc("mode", input.get("mode"), "policies", input.get("policies")));
    List<Decision> replies = new ArrayList<>();
    for (Object r : (List<?>) input.get("replies")) {
      replies.add(reply(r));
    }
    List<Plan.Check> checks = checks(config);
    boolean enforcedDenied = false;
    for (int i = 0; i < checks.size(); i++) {
      enforcedDenied |= !checks.get(i).shadow() && !replies.get(i).allowed();
    }
    Hook.Outcome outcome =
        enforcedDenied ? Hook.Outcome.of(false, config.mode()) : Hook.Outcome.of(checks, replies, config.mode());
    return Map.of("outcome", outcome.label());
  }

  private static Object overrideKey(Map<String, Object> input) {
    Config config = Config.read(input.get("config"));
    RateLimiter limiter = RateLimiter.builder(config).redisUrl("redis://127.0.0.1:1").build();
    try (limiter) {
      Object value = input.get("value");
      Keys keys = limiter.keys((String) input.get("policy"), value == null ? null : bytes(value));
      return Map.of("key", keys.key(), "override_key", keys.overrideKey());
    } catch (IllegalArgumentException e) {
      return Map.of("error", true);
    }
  }

  @SuppressWarnings("unchecked")
  private static Object source(Map<String, Object> input) {
    Map<String, Object> request = (Map<String, Object>) input.get("request");
    byte[] query = request.get("query") == null ? null : bytes(request.get("query"));
    byte[] v =
        Source.parse((String) input.get("source"))
            .read(headers(request.get("headers")), query, user(request), attributes(request));
    return v == null ? null : bytesValue(v);
  }

  @SuppressWarnings("unchecked")
  private static Object substitute(Map<String, Object> input) {
    Map<String, Object> env = (Map<String, Object>) input.get("env");
    try {
      return Map.of("text", Substitution.apply((String) input.get("text"), name -> (String) env.get(name)));
    } catch (ConfigException e) {
      return e.getMessage().endsWith(": not set") ? Map.of("error", e.getMessage()) : Map.of("error", true);
    }
  }

  /** The request's attributes (docs/http.md, Request attributes), as the vector gives them. */
  @SuppressWarnings("unchecked")
  private static RequestAttributes attributes(Map<String, Object> request) {
    Map<String, Object> attributes = (Map<String, Object>) request.get("attributes");
    return attributes == null ? RequestAttributes.NONE : attributes::get;
  }

  /** The request's user: a string, or bytes that must be UTF-8 (a Java user is a string). */
  private static String user(Map<String, Object> request) {
    if (request.get("user") == null) {
      return null;
    }
    Object text = bytesValue(bytes(request.get("user")));
    if (!(text instanceof String s)) {
      throw new AssertionError("a user is a string in Java");
    }
    return s;
  }

  private static Object duration(Map<String, Object> input) {
    String field = (String) input.get("field");
    String object = field.equals("timeout") ? "config" : "policy";
    try {
      Object walked = Walker.field(field, input.get("value"), object, field);
      return Map.of("ms", ((Walker.Ms) walked).ms());
    } catch (ConfigException e) {
      return Map.of("error", true);
    }
  }

  private static Object rate(Map<String, Object> input) {
    try {
      TimeText.Rate r = (TimeText.Rate) Walker.field("rate", input.get("value"), "policy", "rate");
      return Map.of("limit", r.count(), "window_ms", r.periodMs());
    } catch (ConfigException e) {
      return Map.of("error", true);
    }
  }

  private static Object costHeader(Map<String, Object> input) {
    List<Object> pairs = new ArrayList<>();
    for (Object line : (List<?>) input.get("lines")) {
      pairs.add(List.of("X-Cost", line));
    }
    long cost = Plan.costHeader(headers(pairs).joined("x-cost"));
    return cost < 0 ? Map.of("error", "bad-cost") : Map.of("cost", cost);
  }

  private static Object route(Map<String, Object> input) {
    List<Object> policies = new ArrayList<>();
    for (Object n : (List<?>) input.get("policies")) {
      policies.add(doc("name", n, "algorithm", "fixed", "limit", 1L, "window", "1s"));
    }
    Config config = Config.read(doc("policies", policies, "routes", input.get("routes")));
    Routes routes = new Routes(config.policies(), config.routes());
    Routes.Selection s = routes.select((String) input.get("method"), bytes(input.get("path")));
    if (s == null) {
      return null;
    }
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("route", s.route() < 0 ? null : (long) s.route());
    out.put("policies", s.policies().stream().map(Policy::name).toList());
    return out;
  }

  private static Object clientIp(Map<String, Object> input) {
    Config config = Config.read(doc("policies", List.of(), "trusted_proxies", input.get("trusted_proxies")));
    IpAddress peer = input.get("peer") == null ? null : IpAddress.parse((String) input.get("peer"));
    if (peer == null) {
      return null;
    }
    return Identity.clientIp(peer, headers(input.get("headers")), config.trustedProxies()).toString();
  }

  @SuppressWarnings("unchecked")
  private static Object key(Map<String, Object> input) {
    Map<String, Object> top = new LinkedHashMap<>((Map<String, Object>) input.get("config"));
    top.put("policies", List.of(input.get("policy")));
    Config config = Config.read(top);
    Policy policy = config.policies().get(0);
    Map<String, Object> request = (Map<String, Object>) input.get("request");
    RequestHeaders headers = headers(request.get("headers"));
    byte[] query = request.get("query") == null ? null : bytes(request.get("query"));
    Identity.Client client =
        Identity.Client.of((String) request.get("peer"), headers, query, config, user(request), attributes(request));
    Identity.Subject subject = client.subject(policy.key(), headers);
    boolean exempt = client.exempt();
    Keys keys = Keys.of(config.prefix(), subject, policy.name(), policy.overridable());
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("subject", subject.toString());
    out.put("key", keys.key());
    out.put("override_key", keys.overrideKey());
    out.put("exempt", exempt);
    return out;
  }

  /** {@code [allowed, count, retry_after, limit, remaining, reset_after]}. */
  static Decision reply(Object v) {
    List<?> r = (List<?>) v;
    long[] n = new long[6];
    for (int i = 0; i < 6; i++) {
      n[i] = ((Number) r.get(i)).longValue();
    }
    return new Decision(
        n[0] == 1,
        n[1],
        n[2] < 0 ? Decision.NEVER : Duration.ofMillis(n[2]),
        n[3],
        n[4],
        Duration.ofMillis(n[5]));
  }

  private static Object responseHeaders(Map<String, Object> input) {
    Config config =
        Config.read(
            doc(
                "headers", input.get("headers"),
                "mode", input.get("mode"),
                "legacy_reset", input.get("legacy_reset"),
                "policies", input.get("policies")));
    List<Decision> replies = new ArrayList<>();
    for (Object r : (List<?>) input.get("replies")) {
      replies.add(reply(r));
    }
    boolean denied = (Boolean) input.get("denied");
    List<Plan.Check> checks = checks(config);
    Hook.Outcome outcome =
        denied ? Hook.Outcome.of(false, config.mode()) : Hook.Outcome.of(checks, replies, config.mode());
    long now = input.get("now_ms") == null ? 0 : ((Number) input.get("now_ms")).longValue();
    Map<String, String> sent =
        ResponseHeaders.of(config.headers(), config.legacyReset(), now, checks, replies, outcome);
    List<String> all =
        List.of(
            "RateLimit-Policy", "RateLimit", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset",
            "Retry-After", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset");
    Map<String, Object> headers = new LinkedHashMap<>();
    List<Object> absent = new ArrayList<>();
    for (String name : all) {
      if (sent.containsKey(name)) {
        headers.put(name, sent.get(name));
      } else {
        absent.add(name);
      }
    }
    assertEquals(sent.size(), headers.size(), "a header outside the six: " + sent);
    Map<String, Object> out = new LinkedHashMap<>();
    int worst = ResponseHeaders.mostRestrictive(checks, replies, outcome == Hook.Outcome.DENIED);
    out.put("most_restrictive", worst < 0 ? null : (long) worst);
    out.put("headers", headers);
    // The six the vectors list as absent; the draft-6 names, when not sent, go unlisted.
    absent.removeAll(List.of("RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"));
    out.put("absent", absent);
    return out;
  }

  private static Object refusal(Map<String, Object> input) {
    Map<String, Object> top =
        doc(
            "deny", input.get("deny"),
            "fail_deny", input.get("fail_deny"),
            "max_body_bytes", input.get("max_body_bytes"));
    top.put("policies", input.get("policy") == null ? List.of() : List.of(input.get("policy")));
    if (input.get("route_deny") != null && input.get("policy") != null) {
      String name = (String) ((Map<?, ?>) input.get("policy")).get("name");
      top.put("routes", List.of(doc("path", "/", "policies", List.of(name), "deny", input.get("route_deny"))));
    }
    Config config = Config.read(top);
    Config.Deny deny = config.routes().isEmpty() ? config.deny() : config.routes().get(0).deny();
    Refusals.Reply reply;
    switch ((String) input.get("kind")) {
      case "denied":
        {
          Plan.Check c = checks(config).get(0);
          Plan.Check check =
              new Plan.Check(c.policy(), c.subject(), c.key(), null, ((Number) input.get("cost")).longValue());
          reply = Refusals.denied(deny, check, reply(input.get("reply")));
          break;
        }
      case "bad-cost":
        {
          // Planned as a request is, with a cost header that is no integer.
          Plan.Planned planned =
              new Plan.Planned(
                  null,
                  List.of(new Plan.Applying(config.policies().get(0), new Identity.Subject(Identity.Subject.Kind.GLOBAL, null))));
          String header = (String) input.get("header");
          Resolvers.Registry resolvers = new Resolvers.Registry();
          resolvers.costs.put(String.valueOf(input.get("resolver")), req -> 0L);
          try {
            Plan.checks(
                planned,
                config.prefix(),
                request(header == null ? List.of() : List.of(List.of(header, "x")), null),
                -1,
                config.mode(),
                resolvers.build());
            throw new AssertionError("a bad cost was planned");
          } catch (Plan.RefusedException e) {
            reply = Refusals.refused(e.refusal());
          }
          break;
        }
      case "too-large":
        reply = Refusals.refused(new Plan.TooLarge(config.maxBodyBytes()));
        break;
      case "unavailable":
        reply = Refusals.unavailable(config.failDeny());
        break;
      default:
        throw new AssertionError("unknown kind " + input.get("kind"));
    }
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("status", (long) reply.status());
    out.put("content_type", reply.contentType());
    String body = new String(reply.body(), StandardCharsets.UTF_8);
    // A text body's reply carries its message as detail; a JSON one none; a problem its detail.
    boolean text = !reply.contentType().equals(Refusals.PROBLEM_JSON) && reply.detail() != null;
    if (!text) {
      out.put("body", Documents.read(body));
    } else {
      out.put("body_text", body);
    }
    if (!reply.headers().isEmpty()) {
      out.put("headers", reply.headers());
    }
    return out;
  }

  private static Object configError(Map<String, Object> input) {
    try {
      conformanceResolvers().check(Config.read(input.get("config")));
      return "accepted";
    } catch (ConfigException e) {
      return e.getMessage();
    }
  }
}
