package io.librl.bench.spring;

import java.io.IOException;
import java.lang.management.CompilationMXBean;
import java.lang.management.ManagementFactory;
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
 * two threads at once (more would only add Bucket4j's compare-and-swap retries on the one /open
 * bucket). Its subjects are its own, apart from any run's. It sends batches until one adds little
 * to the JIT's compilation time (the request path is compiled: some 30,000 requests on a quiet
 * core), at most {@code maxPerRoute} per route and at most 20 s (the driver waits 180 s for its
 * apps to answer, and on a loaded machine four JVMs share one core), then waits up to 5 s for the
 * JIT to finish what they queued, so that as little compilation as possible is counted against a
 * measured run.
 */
final class WarmUp {
  private static final int THREADS = 2;
  private static final int BATCH_PER_ROUTE = 1_000;
  private static final long QUIET_BATCH_COMPILE_MS = 50;
  private static final long BUDGET_NS = 20_000_000_000L;
  private static final long JIT_QUIET_MS = 1_000;
  private static final long JIT_WAIT_MAX_MS = 5_000;

  private WarmUp() {}

  static void run(int port, int maxPerRoute) throws Exception {
    HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
    String base = "http://127.0.0.1:" + port;
    String nonce = "warmup-" + ProcessHandle.current().pid() + "-" + System.nanoTime();
    CompilationMXBean jit = ManagementFactory.getCompilationMXBean();
    boolean timed = jit != null && jit.isCompilationTimeMonitoringSupported();
    long deadline = System.nanoTime() + BUDGET_NS;
    ExecutorService pool = Executors.newFixedThreadPool(THREADS);
    try {
      for (int sent = 0; sent < maxPerRoute && System.nanoTime() < deadline; sent += BATCH_PER_ROUTE) {
        long compiled = timed ? jit.getTotalCompilationTime() : 0;
        batch(pool, client, base, nonce, sent, Math.min(sent + BATCH_PER_ROUTE, maxPerRoute));
        if (timed && sent > 0 && jit.getTotalCompilationTime() - compiled < QUIET_BATCH_COMPILE_MS) {
          break;
        }
      }
    } finally {
      pool.shutdownNow();
    }
    if (timed) {
      awaitJit(jit);
    }
  }

  /** Requests from..to-1 of each route, split over the threads. */
  private static void batch(ExecutorService pool, HttpClient client, String base, String nonce, int from, int to)
      throws Exception {
    HttpRequest open = HttpRequest.newBuilder(URI.create(base + "/open")).build();
    HttpRequest spent = HttpRequest.newBuilder(URI.create(base + "/half")).header("X-Client", nonce).build();
    List<Future<?>> done = new ArrayList<>();
    for (int t = 0; t < THREADS; t++) {
      int thread = t;
      done.add(
          pool.submit(
              () -> {
                for (int i = from + thread; i < to; i += THREADS) {
                  send(client, open);
                  send(
                      client,
                      i % 2 == 0
                          ? HttpRequest.newBuilder(URI.create(base + "/half"))
                              .header("X-Client", nonce + "-" + i)
                              .build()
                          : spent);
                }
                return null;
              }));
    }
    for (Future<?> f : done) {
      f.get();
    }
  }

  private static void send(HttpClient client, HttpRequest request) throws IOException, InterruptedException {
    HttpResponse<Void> response = client.send(request, HttpResponse.BodyHandlers.discarding());
    if (response.statusCode() != 200 && response.statusCode() != 429) {
      throw new IOException(request.uri() + " answered " + response.statusCode() + " during the warm-up");
    }
  }

  /**
   * Until the JIT's total compilation time has not moved for a second (at most 5 s: on a
   * loaded machine the compiler threads may wait long for a core).
   */
  private static void awaitJit(CompilationMXBean jit) throws InterruptedException {
    long deadline = System.nanoTime() + JIT_WAIT_MAX_MS * 1_000_000L;
    long last = jit.getTotalCompilationTime();
    while (System.nanoTime() < deadline) {
      Thread.sleep(JIT_QUIET_MS);
      long now = jit.getTotalCompilationTime();
      if (now == last) {
        return;
      }
      last = now;
    }
  }
}
