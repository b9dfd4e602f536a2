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
          Map.entry("paths.json", "canonical_path"),
          Map.entry("rates.json", "rate"),
          Map.entry("refusals.json", "refusal"),
          Map.entry("routes.json", "route"));

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

  /** The document's policies as checks (cost 1, keyed {@code k}, the global subject). */
  static List<Plan.Check> checks(Config config) {
    List<Plan.Check> out = new ArrayList<>();
    for (Policy p : config.policies()) {
      out.add(new Plan.Check(p, new Identity.Subject(Identity.Subject.Kind.GLOBAL, null), "k", null, 1));
    }
    return out;
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
    String user = null;
    if (request.get("user") != null) {
      byte[] b = bytes(request.get("user"));
      Object text = bytesValue(b);
      if (!(text instanceof String s)) {
        throw new AssertionError("a user is a string in Java");
      }
      user = s;
    }
    Identity.Client client = Identity.Client.of((String) request.get("peer"), headers, config, user);
    Identity.Subject subject = client.subject(policy.key(), headers);
    boolean exempt = Plan.applying(List.of(policy), client, headers, config.exemptLoopback()).isEmpty();
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
            doc("headers", input.get("headers"), "mode", input.get("mode"), "policies", input.get("policies")));
    List<Decision> replies = new ArrayList<>();
    for (Object r : (List<?>) input.get("replies")) {
      replies.add(reply(r));
    }
    boolean denied = (Boolean) input.get("denied");
    Hook.Outcome outcome = Hook.Outcome.of(!denied, config.mode());
    Map<String, String> sent = ResponseHeaders.of(config.headers(), checks(config), replies, outcome);
    List<String> all =
        List.of("RateLimit-Policy", "RateLimit", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After");
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
    int worst = ResponseHeaders.mostRestrictive(replies);
    out.put("most_restrictive", worst < 0 ? null : (long) worst);
    out.put("headers", headers);
    out.put("absent", absent);
    return out;
  }

  private static Object refusal(Map<String, Object> input) {
    Map<String, Object> top = doc("deny", input.get("deny"), "max_body_bytes", input.get("max_body_bytes"));
    top.put("policies", input.get("policy") == null ? List.of() : List.of(input.get("policy")));
    Config config = Config.read(top);
    Refusals.Reply reply;
    switch ((String) input.get("kind")) {
      case "denied":
        {
          Plan.Check c = checks(config).get(0);
          Plan.Check check =
              new Plan.Check(c.policy(), c.subject(), c.key(), null, ((Number) input.get("cost")).longValue());
          reply = Refusals.denied(config.deny(), check, reply(input.get("reply")));
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
          try {
            Plan.checks(planned, config.prefix(), headers(List.of(List.of(header, "x"))), -1);
            throw new AssertionError("a bad cost header was planned");
          } catch (Plan.RefusedException e) {
            reply = Refusals.refused(e.refusal());
          }
          break;
        }
      case "too-large":
        reply = Refusals.refused(new Plan.TooLarge(config.maxBodyBytes()));
        break;
      case "unavailable":
        reply = Refusals.unavailable();
        break;
      default:
        throw new AssertionError("unknown kind " + input.get("kind"));
    }
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("status", (long) reply.status());
    out.put("content_type", reply.contentType());
    String body = new String(reply.body(), StandardCharsets.UTF_8);
    if (reply.contentType().equals(Refusals.PROBLEM_JSON)) {
      out.put("body", Documents.read(body));
    } else {
      out.put("body_text", body);
    }
    return out;
  }

  private static Object configError(Map<String, Object> input) {
    try {
      Config.read(input.get("config"));
      return "accepted";
    } catch (ConfigException e) {
      return e.getMessage();
    }
  }
}
