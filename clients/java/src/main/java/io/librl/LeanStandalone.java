package io.librl;

import io.lettuce.core.RedisCommandExecutionException;
import io.lettuce.core.RedisCommandTimeoutException;
import io.lettuce.core.RedisConnectionException;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * A standalone server's ordinary calls (those it answers at once) on one plain socket of its own,
 * pipelined: each caller writes its whole command under a lock and queues its future, and one
 * reader thread reads the replies in order and completes the futures first in, first out. On a
 * busy servlet path Lettuce's command objects, codec, channel pipeline and futures cost more CPU
 * per call than the call itself (docs/clients/java.md, Connections). Everything else goes through
 * the Lettuce transport it wraps: calls the server may hold, durable calls, and every call while
 * the socket is down (a background thread connects it again), so a lost socket behaves as
 * Lettuce's connection does.
 *
 * <p>Timeouts as Lettuce's: a call not answered within the connection's timeout fails with a
 * {@code RedisCommandTimeoutException}; its reply, if it comes later, is read and dropped.
 */
final class LeanStandalone implements Transport {
  /** How often the watchdog looks for calls past their timeout, and retries a lost socket. */
  private static final long TICK_MS = 100;

  private final LettuceStandalone lettuce;
  private final InetSocketAddress address;
  private final int connectTimeoutMs;
  /** AUTH and SELECT, encoded, sent first on each socket; empty when the URI names neither. */
  private final List<List<String>> handshake;
  private final long timeoutNanos;
  private final ScheduledExecutorService watchdog;
  /** The socket in use; null while there is none. */
  private volatile Link link;
  private volatile boolean closed;
  /** When the watchdog may next try to connect (System.nanoTime); only the watchdog reads it. */
  private long nextAttempt;

  /** One call awaiting its reply. */
  private record Pending(String name, long sentAt, CompletableFuture<Object> reply) {}

  /** One socket, and the calls written on it awaiting replies, in order. */
  private static final class Link {
    final Socket socket;
    final OutputStream out;
    final InputStream in;
    /** Guarded by the link itself, as is the output stream and {@code dead}. */
    final ArrayDeque<Pending> pending = new ArrayDeque<>();

    boolean dead;

    Link(Socket socket) throws IOException {
      this.socket = socket;
      this.out = new BufferedOutputStream(socket.getOutputStream(), 8192);
      this.in = new BufferedInputStream(socket.getInputStream(), 65536);
    }
  }

  /** A server's error reply, as read (only the reader makes them). */
  private record ServerError(String message) {}

  LeanStandalone(
      LettuceStandalone lettuce,
      String host,
      int port,
      String username,
      char[] password,
      int database,
      Duration connectTimeout) {
    this.lettuce = lettuce;
    this.address = new InetSocketAddress(host, port);
    this.connectTimeoutMs = (int) Math.min(Integer.MAX_VALUE, Math.max(1, connectTimeout.toMillis()));
    Duration t = lettuce.replyTimeout();
    this.timeoutNanos = t == null ? Long.MAX_VALUE : t.toNanos();
    List<List<String>> h = new ArrayList<>();
    if (password != null && password.length > 0) {
      h.add(
          username == null || username.isEmpty()
              ? List.of("AUTH", new String(password))
              : List.of("AUTH", username, new String(password)));
    }
    if (database != 0) {
      h.add(List.of("SELECT", Integer.toString(database)));
    }
    this.handshake = List.copyOf(h);
    this.nextAttempt = System.nanoTime();
    this.watchdog =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread th = new Thread(r, "librl-lean-watchdog");
              th.setDaemon(true);
              return th;
            });
    try {
      link = open();
    } catch (IOException e) {
      // Lettuce connected (it did so first): this socket is tried again by the watchdog.
      link = null;
    }
    watchdog.scheduleWithFixedDelay(this::tick, TICK_MS, TICK_MS, TimeUnit.MILLISECONDS);
  }

  @Override
  public boolean cluster() {
    return false;
  }

  @Override
  public Duration replyTimeout() {
    return lettuce.replyTimeout();
  }

  @Override
  public CompletableFuture<Object> send(Call call) {
    Link l = link;
    if (call.holds() || l == null) {
      return lettuce.send(call);
    }
    byte[] command = encode(call.words());
    Pending p = new Pending(call.name(), System.nanoTime(), new CompletableFuture<>());
    IOException failed = null;
    synchronized (l) {
      if (l.dead) {
        return lettuce.send(call);
      }
      l.pending.add(p);
      try {
        l.out.write(command);
        l.out.flush();
      } catch (IOException e) {
        failed = e;
      }
    }
    if (failed != null) {
      kill(l, failed);
    }
    return p.reply;
  }

  @Override
  public CompletableFuture<Durable> sendDurable(Call call, int replicas, Duration timeout) {
    return lettuce.sendDurable(call, replicas, timeout);
  }

  @Override
  public CompletableFuture<List<Object>> primaries() {
    return lettuce.primaries();
  }

  @Override
  public CompletableFuture<Object> sendTo(Object node, Call call) {
    return send(call);
  }

  /** Closes the socket, the watchdog and the Lettuce transport. */
  void close() {
    closed = true;
    watchdog.shutdownNow();
    Link l = link;
    if (l != null) {
      kill(l, new IOException("the limiter is closed"));
    }
    lettuce.close();
  }

  /** Connects, sends the handshake and reads its replies, then starts the socket's reader. */
  private Link open() throws IOException {
    Socket s = new Socket();
    try {
      s.setTcpNoDelay(true);
      s.setKeepAlive(true);
      s.connect(address, connectTimeoutMs);
      Link l = new Link(s);
      if (!handshake.isEmpty()) {
        s.setSoTimeout(connectTimeoutMs);
        for (List<String> words : handshake) {
          l.out.write(encode(words));
        }
        l.out.flush();
        for (List<String> words : handshake) {
          if (read(l.in) instanceof ServerError e) {
            throw new IOException(words.get(0) + ": " + e.message());
          }
        }
        s.setSoTimeout(0);
      }
      Thread reader = new Thread(() -> readLoop(l), "librl-lean-reader");
      reader.setDaemon(true);
      reader.start();
      return l;
    } catch (IOException | RuntimeException e) {
      s.close();
      throw e;
    }
  }

  /** Reads replies until the socket fails, completing the oldest pending call with each. */
  private void readLoop(Link l) {
    try {
      while (true) {
        Object reply = read(l.in);
        Pending p;
        synchronized (l) {
          p = l.pending.poll();
        }
        if (p == null) {
          throw new IOException("a reply no call awaits");
        }
        if (reply instanceof ServerError e) {
          p.reply.completeExceptionally(
              new LibrlCommandException(p.name, new RedisCommandExecutionException(e.message()), true));
        } else {
          p.reply.complete(reply);
        }
      }
    } catch (IOException | RuntimeException e) {
      kill(l, e);
    }
  }

  /** Marks the socket dead, closes it and fails every call awaiting a reply on it. */
  private void kill(Link l, Throwable cause) {
    List<Pending> lost;
    synchronized (l) {
      if (l.dead) {
        return;
      }
      l.dead = true;
      lost = new ArrayList<>(l.pending);
      l.pending.clear();
    }
    synchronized (this) {
      if (link == l) {
        link = null;
      }
    }
    try {
      l.socket.close();
    } catch (IOException ignored) {
      // Closing is all that is left to do with it.
    }
    for (Pending p : lost) {
      p.reply.completeExceptionally(
          new LibrlCommandException(
              p.name, new RedisConnectionException("connection lost: " + cause.getMessage(), cause), false));
    }
  }

  /** Fails calls past their timeout, and connects the socket again when there is none. */
  private void tick() {
    Link l = link;
    if (l != null) {
      long now = System.nanoTime();
      List<Pending> late = new ArrayList<>();
      synchronized (l) {
        for (Pending p : l.pending) {
          if (now - p.sentAt < timeoutNanos) {
            break;
          }
          if (!p.reply.isDone()) {
            late.add(p);
          }
        }
      }
      for (Pending p : late) {
        p.reply.completeExceptionally(
            new LibrlCommandException(
                p.name,
                new RedisCommandTimeoutException(
                    "Command timed out after " + TimeUnit.NANOSECONDS.toMillis(timeoutNanos) + " millisecond(s)"),
                false));
      }
      return;
    }
    long now = System.nanoTime();
    if (closed || now - nextAttempt < 0) {
      return;
    }
    // At most one attempt a second while the server is away; calls use Lettuce meanwhile.
    nextAttempt = now + TimeUnit.SECONDS.toNanos(1);
    try {
      Link opened = open();
      synchronized (this) {
        if (closed) {
          kill(opened, new IOException("the limiter is closed"));
        } else {
          link = opened;
        }
      }
    } catch (IOException | RuntimeException e) {
      // Still unreachable: the next tick after a second tries again.
    }
  }

  /** The command as RESP: an array of bulk strings. */
  static byte[] encode(List<String> words) {
    byte[][] parts = new byte[words.size()][];
    int size = 16;
    for (int i = 0; i < parts.length; i++) {
      parts[i] = words.get(i).getBytes(StandardCharsets.UTF_8);
      size += parts[i].length + 16;
    }
    byte[] out = new byte[size];
    int at = 0;
    out[at++] = '*';
    at = decimal(out, at, parts.length);
    for (byte[] part : parts) {
      out[at++] = '$';
      at = decimal(out, at, part.length);
      System.arraycopy(part, 0, out, at, part.length);
      at += part.length;
      out[at++] = '\r';
      out[at++] = '\n';
    }
    return java.util.Arrays.copyOf(out, at);
  }

  /** Writes n and CRLF at {@code at}; returns the index after them. */
  private static int decimal(byte[] out, int at, int n) {
    if (n == 0) {
      out[at++] = '0';
    } else {
      int start = at;
      for (int v = n; v > 0; v /= 10) {
        out[at++] = (byte) ('0' + v % 10);
      }
      for (int i = start, j = at - 1; i < j; i++, j--) {
        byte b = out[i];
        out[i] = out[j];
        out[j] = b;
      }
    }
    out[at++] = '\r';
    out[at++] = '\n';
    return at;
  }

  /**
   * One RESP2 reply, as {@link LettuceReply} gives it: arrays as lists, integers as {@code Long},
   * strings as {@code String}, nil as null; an error reply as a {@link ServerError}.
   */
  static Object read(InputStream in) throws IOException {
    int type = in.read();
    switch (type) {
      case '+':
        return line(in);
      case '-':
        return new ServerError(line(in));
      case ':':
        return number(in);
      case '$': {
        long n = number(in);
        if (n < 0) {
          return null;
        }
        if (n > Integer.MAX_VALUE - 2) {
          throw new IOException("a bulk string too long: " + n);
        }
        byte[] b = in.readNBytes((int) n + 2);
        if (b.length != n + 2) {
          throw new EOFException();
        }
        return new String(b, 0, (int) n, StandardCharsets.UTF_8);
      }
      case '*': {
        long n = number(in);
        if (n < 0) {
          return null;
        }
        List<Object> items = new ArrayList<>((int) Math.min(n, 64));
        for (long i = 0; i < n; i++) {
          Object item = read(in);
          items.add(item instanceof ServerError e ? e.message() : item);
        }
        return items;
      }
      case -1:
        throw new EOFException("the server closed the connection");
      default:
        throw new IOException("not a RESP2 reply: type byte " + type);
    }
  }

  private static String line(InputStream in) throws IOException {
    java.io.ByteArrayOutputStream b = new java.io.ByteArrayOutputStream(64);
    while (true) {
      int c = in.read();
      if (c < 0) {
        throw new EOFException();
      }
      if (c == '\r') {
        if (in.read() != '\n') {
          throw new IOException("a reply line without LF");
        }
        return b.toString(StandardCharsets.UTF_8);
      }
      b.write(c);
    }
  }

  private static long number(InputStream in) throws IOException {
    int c = in.read();
    boolean negative = c == '-';
    if (negative) {
      c = in.read();
    }
    long v = 0;
    int digits = 0;
    while (c >= '0' && c <= '9') {
      v = v * 10 + (c - '0');
      digits++;
      c = in.read();
    }
    if (digits == 0 || c != '\r' || in.read() != '\n') {
      throw new IOException("a malformed number in a reply");
    }
    return negative ? -v : v;
  }
}
