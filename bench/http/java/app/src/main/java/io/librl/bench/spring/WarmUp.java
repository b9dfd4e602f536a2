package io.librl.bench.spring;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * Requests to the app on its warm-up port, as the load sends them: {@code /open}, and {@code
 * /half} with a fresh subject and a spent one in turn (so the refusal path is compiled too), from
 * a few threads at once. Its subjects are its own, apart from any run's.
 */
final class WarmUp {
  private static final int THREADS = 4;

  private WarmUp() {}

  static void run(int port, int perRoute) throws Exception {
    HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
    String base = "http://127.0.0.1:" + port;
    String nonce = "warmup-" + ProcessHandle.current().pid() + "-" + System.nanoTime();
    HttpRequest open = HttpRequest.newBuilder(URI.create(base + "/open")).build();
    HttpRequest spent = HttpRequest.newBuilder(URI.create(base + "/half")).header("X-Client", nonce).build();
    ExecutorService pool = Executors.newFixedThreadPool(THREADS);
    try {
      List<Future<?>> done = new ArrayList<>();
      for (int t = 0; t < THREADS; t++) {
        int thread = t;
        done.add(
            pool.submit(
                () -> {
                  for (int i = thread; i < perRoute; i += THREADS) {
                    send(client, open);
                    HttpRequest half =
                        i % 2 == 0
                            ? HttpRequest.newBuilder(URI.create(base + "/half"))
                                .header("X-Client", nonce + "-" + i)
                                .build()
                            : spent;
                    send(client, half);
                  }
                  return null;
                }));
      }
      for (Future<?> f : done) {
        f.get();
      }
    } finally {
      pool.shutdownNow();
    }
  }

  private static void send(HttpClient client, HttpRequest request) throws IOException, InterruptedException {
    HttpResponse<Void> response = client.send(request, HttpResponse.BodyHandlers.discarding());
    if (response.statusCode() != 200 && response.statusCode() != 429) {
      throw new IOException(request.uri() + " answered " + response.statusCode() + " during the warm-up");
    }
  }
}
