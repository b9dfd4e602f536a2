package io.librl.http;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * One real redis-server (Debian's, on PATH) with the module (LIBRL_MODULE, else
 * target/release/librl.so) on a free loopback port, started once per test JVM and killed when it
 * exits. The HTTP adapters' tests need a real Redis; the four servers and clusters are the client
 * package's and the conformance suite's to cover.
 */
public final class TestRedis {
  private TestRedis() {}

  private static String url;

  /** {@code redis://127.0.0.1:<port>}, starting the server the first time. */
  public static synchronized String url() {
    if (url == null) {
      url = start();
    }
    return url;
  }

  /** Sends one command (RESP) and returns the raw reply's first line, e.g. {@code :2}. */
  public static String command(String... words) throws IOException {
    int port = Integer.parseInt(url().substring(url().lastIndexOf(':') + 1));
    try (Socket s = new Socket(InetAddress.getLoopbackAddress(), port)) {
      StringBuilder out = new StringBuilder("*" + words.length + "\r\n");
      for (String w : words) {
        out.append('$').append(w.getBytes(StandardCharsets.UTF_8).length).append("\r\n").append(w).append("\r\n");
      }
      OutputStream o = s.getOutputStream();
      o.write(out.toString().getBytes(StandardCharsets.UTF_8));
      o.flush();
      InputStream in = s.getInputStream();
      StringBuilder line = new StringBuilder();
      int c;
      while ((c = in.read()) >= 0 && c != '\r') {
        line.append((char) c);
      }
      return line.toString();
    }
  }

  private static String start() {
    String module = System.getenv("LIBRL_MODULE");
    Path so = module != null && !module.isEmpty() ? Path.of(module) : TestSupport.root().resolve("target/release/librl.so");
    if (!Files.isRegularFile(so)) {
      throw new IllegalStateException(so + " is missing: make build first");
    }
    int port;
    try (ServerSocket free = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      port = free.getLocalPort();
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
    try {
      Process p =
          new ProcessBuilder(
                  List.of("redis-server", "--bind", "127.0.0.1", "--port", Integer.toString(port),
                      "--save", "", "--appendonly", "no", "--loadmodule", so.toString()))
              .redirectErrorStream(true)
              .redirectOutput(ProcessBuilder.Redirect.DISCARD)
              .start();
      Runtime.getRuntime().addShutdownHook(new Thread(p::destroyForcibly));
      long deadline = System.nanoTime() + 20_000_000_000L;
      while (true) {
        try {
          new Socket(InetAddress.getLoopbackAddress(), port).close();
          break;
        } catch (IOException notYet) {
          if (!p.isAlive() || System.nanoTime() > deadline) {
            throw new IllegalStateException("redis-server did not start on port " + port);
          }
          Thread.sleep(20);
        }
      }
    } catch (IOException e) {
      throw new IllegalStateException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
    return "redis://127.0.0.1:" + port;
  }
}
