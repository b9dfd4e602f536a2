package io.librl.spring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.librl.http.TestRedis;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/** Real requests to the test's server, and its policy file. */
final class Http {
  private Http() {}

  private static final HttpClient CLIENT = HttpClient.newHttpClient();

  /** GET {@code path}, as {@code user} (HTTP Basic, password {@code pw}) when not null. */
  static HttpResponse<String> get(int port, String path, String user) throws IOException, InterruptedException {
    HttpRequest.Builder b = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path));
    if (user != null) {
      String basic = Base64.getEncoder().encodeToString((user + ":pw").getBytes(StandardCharsets.UTF_8));
      b.header("Authorization", "Basic " + basic);
    }
    return CLIENT.send(b.build(), HttpResponse.BodyHandlers.ofString());
  }

  /** GET {@code path} without waiting for the answer. */
  static CompletableFuture<HttpResponse<String>> getAsync(int port, String path) {
    return CLIENT.sendAsync(
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path)).build(),
        HttpResponse.BodyHandlers.ofString());
  }

  /**
   * A streamed response holds its concurrency slot until its last byte (docs/http.md, Concurrency
   * limits): {@code path} streams, under policy {@code slots} (1 at once, per address), until
   * {@code gate} completes. While it streams another request is refused; once it ends, the slot
   * is free again and the key is gone.
   */
  static void streamHoldsItsSlot(int port, String path, String key, CompletableFuture<Void> gate)
      throws Exception {
    CompletableFuture<HttpResponse<String>> first = getAsync(port, path);
    // The first request holds its lease once Redis has the key.
    for (int i = 0; i < 100 && !TestRedis.command("EXISTS", key).equals(":1"); i++) {
      Thread.sleep(20);
    }
    HttpResponse<String> refused = get(port, path, null);
    assertEquals(429, refused.statusCode(), refused.body());
    assertTrue(refused.body().contains("Concurrency limit \\\"slots\\\" (1 at once) reached"), refused.body());
    gate.complete(null);
    HttpResponse<String> streamed = first.get(10, TimeUnit.SECONDS);
    assertEquals(200, streamed.statusCode());
    assertEquals("\"slots\";q=1", streamed.headers().firstValue("RateLimit-Policy").orElse(null));
    assertEquals("\"slots\";r=0;t=60", streamed.headers().firstValue("RateLimit").orElse(null));
    // Released when the stream ended (the client may read its last byte a moment before).
    String exists = ":1";
    for (int i = 0; i < 100 && exists.equals(":1"); i++) {
      Thread.sleep(10);
      exists = TestRedis.command("EXISTS", key);
    }
    assertEquals(":0", exists);
  }

  /** The policy file the tests' apps read: a route for the file, a policy for the annotation. */
  static Path policies(String prefix) throws IOException {
    Path file = Files.createTempFile("librl-policies", ".yaml");
    file.toFile().deleteOnExit();
    Files.writeString(
        file,
        String.join(
            "\n",
            "prefix: \"" + prefix + "\"",
            // The tests' requests come from 127.0.0.1.
            "exempt_loopback: false",
            "policies:",
            "  - {name: per-user, algorithm: fixed, limit: 2, window: 60s, key: user}",
            "  - {name: search, algorithm: fixed, limit: 1, window: 60s, key: ip}",
            "  - {name: slots, algorithm: concurrency, limit: 1, lease: 60s, key: ip}",
            "routes:",
            "  - {path: /limited, policies: [per-user]}",
            ""));
    return file;
  }
}
