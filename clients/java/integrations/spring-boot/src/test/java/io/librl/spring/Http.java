package io.librl.spring;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;

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
            "routes:",
            "  - {path: /limited, policies: [per-user]}",
            ""));
    return file;
  }
}
