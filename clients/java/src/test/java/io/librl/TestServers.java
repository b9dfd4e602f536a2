package io.librl;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.Protocol;

/**
 * Real servers with librl loaded, for the tests: standalone, a primary with a replica, or a
 * 3-primary Redis Cluster, on free loopback ports. Each is started once per test run, the first
 * time a test asks for it, and shared by every test class after; all are killed when the JVM
 * exits (a shutdown hook, and the kernel's parent-death signal through setpriv if the JVM dies
 * without running it).
 *
 * <p>Environment, as the Makefile exports it: LIBRL_MODULE (the module), REDIS8_SERVER,
 * VALKEY8_SERVER and VALKEY_SERVER, each defaulting to where scripts/servers.env (the one list of
 * the server binaries) says the install script puts it; Debian's redis-server 7.0 is on PATH.
 */
final class TestServers {
  private TestServers() {}

  /** The four servers every test runs on. */
  enum Flavor {
    REDIS7("redis7", null),
    REDIS8("redis8", "REDIS8_SERVER"),
    VALKEY8("valkey8", "VALKEY8_SERVER"),
    VALKEY9("valkey9", "VALKEY_SERVER");

    final String label;
    private final String variable;

    Flavor(String label, String variable) {
      this.label = label;
      this.variable = variable;
    }

    String binary() {
      String path = "redis-server";
      if (variable != null) {
        path = System.getenv(variable);
        if (path == null || path.isEmpty()) {
          path = ROOT.resolve(serversEnv(variable)).toString();
        }
        if (!Files.isExecutable(Path.of(path))) {
          throw new IllegalStateException(
              label + " server " + path + " is missing: scripts/install-deps.sh test installs it,"
                  + " or set " + variable);
        }
      }
      return path;
    }

    @Override
    public String toString() {
      return label;
    }
  }

  static final Path ROOT = Path.of(System.getProperty("librl.root", "../..")).toAbsolutePath().normalize();

  private static final Map<String, Object> STARTED = new ConcurrentHashMap<>();
  private static final List<Process> LIVE = new ArrayList<>();
  private static final Set<Integer> HANDED = new HashSet<>();
  /**
   * Every server is spawned from this one long-lived thread: the parent-death signal fires when
   * the spawning thread ends, which must be the JVM's end, not a test thread's.
   */
  private static final ExecutorService SPAWNER =
      Executors.newSingleThreadExecutor(
          r -> {
            Thread t = new Thread(r, "librl-test-servers");
            t.setDaemon(true);
            return t;
          });
  private static final boolean SETPRIV = Files.isExecutable(Path.of("/usr/bin/setpriv"));

  static {
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  synchronized (LIVE) {
                    LIVE.forEach(Process::destroyForcibly);
                  }
                }));
    // Every server the suites use starts at once, in the background, when the first suite asks
    // for one: the clusters' gossip settles while the standalone suites run.
    for (Flavor f : Flavor.values()) {
      prefetch(() -> standalone(f));
    }
    prefetch(
        () -> cluster(Flavor.REDIS7),
        () -> cluster(Flavor.VALKEY9),
        () -> primaryWithReplica(Flavor.VALKEY9));
  }

  /** scripts/servers.env's path for {@code variable}, relative to the root. */
  private static String serversEnv(String variable) {
    try {
      for (String line : Files.readAllLines(ROOT.resolve("scripts/servers.env"))) {
        int eq = line.indexOf('=');
        if (eq > 0 && !line.startsWith("#") && line.substring(0, eq).trim().equals(variable)) {
          return line.substring(eq + 1).trim();
        }
      }
    } catch (IOException e) {
      throw new IllegalStateException("reading scripts/servers.env", e);
    }
    throw new IllegalStateException("scripts/servers.env does not name " + variable);
  }

  static String module() {
    String m = System.getenv("LIBRL_MODULE");
    Path p = m == null || m.isEmpty() ? ROOT.resolve("target/release/librl.so") : Path.of(m);
    if (!Files.exists(p)) {
      throw new IllegalStateException("the module " + p + " is missing: make build");
    }
    return p.toString();
  }

  /** A free loopback port (for a cluster node, its bus port 10000 above too). */
  static synchronized int freePort(boolean cluster) {
    for (int i = 0; i < 1000; i++) {
      int port;
      try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
        port = s.getLocalPort();
      } catch (IOException e) {
        throw new IllegalStateException(e);
      }
      if (!HANDED.contains(port) && (!cluster || (port <= 55535 && bindable(port + 10000)))) {
        HANDED.add(port);
        return port;
      }
    }
    throw new IllegalStateException("no free port");
  }

  private static boolean bindable(int port) {
    try (ServerSocket s = new ServerSocket(port, 1, InetAddress.getLoopbackAddress())) {
      return s.isBound();
    } catch (IOException e) {
      return false;
    }
  }

  /** One server process with librl loaded. */
  static final class Server {
    final Flavor flavor;
    final int port;
    final Path dir;
    private final Process process;

    private Server(Flavor flavor, int port, Path dir, Process process) {
      this.flavor = flavor;
      this.port = port;
      this.dir = dir;
      this.process = process;
    }

    /**
     * A new control connection (the test closes it). Its reads wait 15 s, not Jedis's 2 s: a
     * MIGRATE it sends may itself take up to its own 5 s timeout on a busy machine.
     */
    Jedis jedis() {
      return new Jedis("127.0.0.1", port, 15_000);
    }

    String addr() {
      return "127.0.0.1:" + port;
    }

    /** One command on a short-lived control connection. */
    Object call(String... words) {
      try (Jedis j = jedis()) {
        return j.sendCommand(
            () -> words[0].getBytes(java.nio.charset.StandardCharsets.UTF_8),
            java.util.Arrays.copyOfRange(words, 1, words.length));
      }
    }

    String info(String section) {
      try (Jedis j = jedis()) {
        return j.info(section);
      }
    }

    String logTail() {
      try {
        String log = Files.readString(dir.resolve("server.log"));
        return log.length() > 2000 ? log.substring(log.length() - 2000) : log;
      } catch (IOException e) {
        return "(no log: " + e + ")";
      }
    }

    void waitReady() {
      long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
      while (true) {
        try (Jedis j = jedis()) {
          if ("PONG".equals(j.ping())) {
            return;
          }
        } catch (RuntimeException e) {
          if (!process.isAlive() || System.nanoTime() > deadline) {
            throw new IllegalStateException(
                flavor + " on " + port + " never answered: " + e + "\n" + logTail(), e);
          }
        }
        sleep(20);
      }
    }
  }

  static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  private static Server spawn(Flavor flavor, boolean cluster, String... extra) {
    int port = freePort(cluster);
    Path dir;
    try {
      dir = Files.createTempDirectory("librl-java-" + flavor + "-");
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
    List<String> argv = new ArrayList<>();
    if (SETPRIV) {
      argv.addAll(List.of("/usr/bin/setpriv", "--pdeathsig", "KILL", "--"));
    }
    argv.addAll(
        List.of(
            flavor.binary(), "--port", Integer.toString(port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", dir.toString(), "--logfile", "server.log",
            "--loadmodule", module()));
    if (cluster) {
      argv.addAll(
          List.of(
              "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
              "--cluster-node-timeout", "5000"));
    }
    argv.addAll(List.of(extra));
    Process p;
    try {
      p =
          SPAWNER
              .submit(
                  () ->
                      new ProcessBuilder(argv)
                          .redirectOutput(ProcessBuilder.Redirect.DISCARD)
                          .redirectError(ProcessBuilder.Redirect.DISCARD)
                          .start())
              .get();
    } catch (Exception e) {
      throw new IllegalStateException("starting " + argv, e);
    }
    synchronized (LIVE) {
      LIVE.add(p);
    }
    return new Server(flavor, port, dir, p);
  }

  @SuppressWarnings("unchecked") // each name is started by one kind of call
  private static <T> T once(String name, Callable<T> start) {
    return (T)
        STARTED.computeIfAbsent(
            name,
            n -> {
              try {
                return start.call();
              } catch (Exception e) {
                throw new IllegalStateException("starting " + n, e);
              }
            });
  }

  /** The run's standalone server of {@code flavor}. */
  static Server standalone(Flavor flavor) {
    return once(
        "standalone " + flavor,
        () -> {
          Server s = spawn(flavor, false);
          s.waitReady();
          return s;
        });
  }

  /** The run's primary with one replica in sync: {@code [primary, replica]}. */
  static List<Server> primaryWithReplica(Flavor flavor) {
    return once(
        "replicated " + flavor,
        () -> {
          Server primary = spawn(flavor, false, "--repl-diskless-sync-delay", "0");
          primary.waitReady();
          Server replica =
              spawn(flavor, false, "--replicaof", "127.0.0.1", Integer.toString(primary.port));
          replica.waitReady();
          long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
          while (!replica.info("replication").contains("master_link_status:up")) {
            if (System.nanoTime() > deadline) {
              throw new IllegalStateException("the replica never synced");
            }
            sleep(20);
          }
          return List.of(primary, replica);
        });
  }

  /** The run's 3-primary cluster of {@code flavor}. */
  static Cluster cluster(Flavor flavor) {
    return once("cluster " + flavor, () -> Cluster.start(flavor));
  }

  /** Starts servers in the background: later calls find them running, or wait for them. */
  private static void prefetch(Runnable... starts) {
    for (Runnable r : starts) {
      Thread t = new Thread(r, "librl-test-prefetch");
      t.setDaemon(true);
      t.start();
    }
  }

  /** Three primaries owning slots 0-5460, 5461-10922 and 10923-16383. */
  static final class Cluster {
    final List<Server> nodes;
    private static final int[][] RANGES = {{0, 5460}, {5461, 10922}, {10923, 16383}};

    private Cluster(List<Server> nodes) {
      this.nodes = nodes;
    }

    static Cluster start(Flavor flavor) throws Exception {
      List<Future<Server>> started = new ArrayList<>();
      ExecutorService pool = Executors.newFixedThreadPool(3);
      try {
        for (int i = 0; i < 3; i++) {
          started.add(
              pool.submit(
                  () -> {
                    Server s = spawn(flavor, true);
                    s.waitReady();
                    return s;
                  }));
        }
        List<Server> nodes = new ArrayList<>();
        for (Future<Server> f : started) {
          nodes.add(f.get());
        }
        Cluster c = new Cluster(List.copyOf(nodes));
        for (int i = 0; i < 3; i++) {
          Server n = nodes.get(i);
          // Distinct epochs from the start, as redis-cli --cluster create sets them: otherwise a
          // late epoch bump while a test moves a slot can hand it back to its old owner.
          n.call("CLUSTER", "SET-CONFIG-EPOCH", Integer.toString(i + 1));
          n.call("CLUSTER", "ADDSLOTSRANGE", Integer.toString(RANGES[i][0]), Integer.toString(RANGES[i][1]));
        }
        for (Server n : nodes.subList(1, 3)) {
          nodes.get(0).call("CLUSTER", "MEET", "127.0.0.1", Integer.toString(n.port));
        }
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (!c.settled()) {
          if (System.nanoTime() > deadline) {
            throw new IllegalStateException("the cluster never reached cluster_state:ok");
          }
          sleep(50);
        }
        return c;
      } finally {
        pool.shutdown();
      }
    }

    private boolean settled() {
      for (Server n : nodes) {
        String info = String.valueOf(decode(n.call("CLUSTER", "INFO")));
        if (!info.contains("cluster_state:ok") || !info.contains("cluster_known_nodes:3")) {
          return false;
        }
        if (!(n.call("CLUSTER", "SLOTS") instanceof List<?> slots) || slots.size() != 3) {
          return false;
        }
      }
      return true;
    }

    /** CONFIG RESETSTAT on every node. */
    void resetStats() {
      nodes.forEach(n -> n.call("CONFIG", "RESETSTAT"));
    }

    /**
     * Summed over every node: "getkeys" (COMMAND GETKEYS and GETKEYSANDFLAGS calls), "moved"
     * and "ask" (those errors replied), and each command's calls by its commandstats name
     * ("rl.fixed", "rl.override|set").
     */
    Map<String, Long> stats() {
      Map<String, Long> out = new HashMap<>(Map.of("getkeys", 0L, "moved", 0L, "ask", 0L));
      for (Server n : nodes) {
        for (String section : List.of("commandstats", "errorstats")) {
          for (String line : n.info(section).split("\r?\n")) {
            int colon = line.indexOf(':');
            if (colon < 0) {
              continue;
            }
            String name = line.substring(0, colon);
            String fields = line.substring(colon + 1);
            if (name.startsWith("cmdstat_")) {
              String cmd = name.substring(8).toLowerCase(java.util.Locale.ROOT);
              long calls = field(fields, "calls");
              if (cmd.equals("command|getkeys") || cmd.equals("command|getkeysandflags")) {
                out.merge("getkeys", calls, Long::sum);
              } else {
                out.merge(cmd, calls, Long::sum);
              }
            } else if (name.equals("errorstat_MOVED")) {
              out.merge("moved", field(fields, "count"), Long::sum);
            } else if (name.equals("errorstat_ASK")) {
              out.merge("ask", field(fields, "count"), Long::sum);
            }
          }
        }
      }
      return out;
    }

    private static long field(String fields, String name) {
      for (String kv : fields.split(",")) {
        int eq = kv.indexOf('=');
        if (eq > 0 && kv.substring(0, eq).equals(name)) {
          return Long.parseLong(kv.substring(eq + 1).trim());
        }
      }
      return 0;
    }

    /** The node owning {@code slot}, as node 0 sees it. */
    Server owner(int slot) {
      String addr = ownerSeenBy(nodes.get(0), slot);
      for (Server n : nodes) {
        if (n.addr().equals(addr)) {
          return n;
        }
      }
      throw new IllegalStateException("no owner of slot " + slot);
    }

    private static String ownerSeenBy(Server n, int slot) {
      if (n.call("CLUSTER", "SLOTS") instanceof List<?> ranges) {
        for (Object r : ranges) {
          if (r instanceof List<?> range
              && (Long) range.get(0) <= slot
              && slot <= (Long) range.get(1)
              && range.get(2) instanceof List<?> node) {
            return decode(node.get(0)) + ":" + node.get(1);
          }
        }
      }
      return "";
    }

    /**
     * Reshards {@code slot} to {@code target} as redis-cli --cluster does: IMPORTING/MIGRATING,
     * MIGRATE every key, SETSLOT NODE on every node; returns once every node names the target.
     */
    void moveSlot(int slot, Server target) {
      moveSlot(slot, target, 100, 0);
    }

    /**
     * {@link #moveSlot(int, Server)} key by key in MIGRATE batches of {@code batch} keys, {@code
     * pauseMs} apart (docs/contributing.md, Calls while a slot moves); returns how long the slot
     * was half-moved, in nanoseconds.
     */
    long moveSlot(int slot, Server target, int batch, long pauseMs) {
      Server source = owner(slot);
      if (source == target) {
        throw new IllegalStateException("slot " + slot + " is already on " + target.addr());
      }
      String s = Integer.toString(slot);
      beginMove(slot, source, target);
      long halfMoved = System.nanoTime();
      while (source.call("CLUSTER", "GETKEYSINSLOT", s, Integer.toString(batch)) instanceof List<?> keys
          && !keys.isEmpty()) {
        List<String> argv =
            new ArrayList<>(
                List.of("MIGRATE", "127.0.0.1", Integer.toString(target.port), "", "0", "5000", "KEYS"));
        keys.forEach(k -> argv.add(decode(k)));
        source.call(argv.toArray(String[]::new));
        if (pauseMs > 0) {
          sleep(pauseMs);
        }
      }
      List<Server> order = new ArrayList<>(List.of(target, source));
      nodes.stream().filter(n -> n != target && n != source).forEach(order::add);
      String targetId = id(target);
      for (Server n : order) {
        n.call("CLUSTER", "SETSLOT", s, "NODE", targetId);
      }
      halfMoved = System.nanoTime() - halfMoved;
      long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
      for (Server n : nodes) {
        while (!ownerSeenBy(n, slot).equals(target.addr())) {
          if (System.nanoTime() > deadline) {
            throw new IllegalStateException("slot " + slot + ": " + n.addr() + " still names " + ownerSeenBy(n, slot));
          }
          sleep(10);
        }
      }
      return halfMoved;
    }

    /**
     * Marks {@code slot} as moving from {@code source} to {@code target} (IMPORTING, then
     * MIGRATING) and moves no key: a resharding stopped half way, until {@link #moveSlot} ends it.
     */
    void beginMove(int slot, Server source, Server target) {
      String s = Integer.toString(slot);
      target.call("CLUSTER", "SETSLOT", s, "IMPORTING", id(source));
      source.call("CLUSTER", "SETSLOT", s, "MIGRATING", id(target));
    }

    private static String id(Server n) {
      return decode(n.call("CLUSTER", "MYID"));
    }
  }

  static String decode(Object v) {
    return v instanceof byte[] b ? new String(b, java.nio.charset.StandardCharsets.UTF_8) : String.valueOf(v);
  }

  /** Protocol's own FLUSHALL, for tests that clear a shared server. */
  static void flushAll(Server s) {
    try (Jedis j = s.jedis()) {
      j.sendCommand(Protocol.Command.FLUSHALL);
    }
  }
}
