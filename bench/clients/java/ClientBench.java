// Client-side cost of the Java package: microseconds per call of a librl
// RL.FIXED through Jedis (JedisPooled, JedisCluster) and Lettuce's blocking
// view (RedisClient, RedisClusterClient) against the same client's INCR, on a
// standalone redis-server and on a 3-primary Redis Cluster, each started here
// on free loopback ports and killed at the end. Prints one JSON object per
// client, a line each:
//
//   {"client": "Jedis", "version": "7.0.0",
//    "standalone": {"rl_us": .., "incr_us": ..},
//    "cluster": {"rl_us": .., "incr_us": .., "getkeys_calls": 0, "moved": 0}}
//
// Each figure is the median over CALLS calls (one thread, a round trip each),
// INCR and RL.FIXED alternating and timed one by one, after WARMUP rounds for
// the JIT. In the cluster the keys spread over the three primaries;
// getkeys_calls and moved are what every node's INFO commandstats and
// errorstats counted during the measured calls.
//
// Run by bench/phases.py with the package's classpath (make bench):
//   java -cp CLASSPATH bench/clients/java/ClientBench.java --module librl.so --redis-server redis-server

import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.librl.JedisLimiter;
import io.librl.LettuceLimiter;
import io.librl.Limiter;
import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.function.Consumer;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisCluster;
import redis.clients.jedis.JedisPooled;

public class ClientBench {
  static final int CALLS = 3000;
  static final int WARMUP = 3000;
  static final int KEYS = 1000;
  static final Duration MINUTE = Duration.ofMinutes(1);
  static final List<Process> LIVE = new ArrayList<>();

  static String module;
  static String redisServer;

  public static void main(String[] args) throws Exception {
    for (int i = 0; i + 1 < args.length; i += 2) {
      switch (args[i]) {
        case "--module" -> module = args[i + 1];
        case "--redis-server" -> redisServer = args[i + 1];
        default -> throw new IllegalArgumentException("unknown argument " + args[i]);
      }
    }
    if (module == null || redisServer == null) {
      throw new IllegalArgumentException("usage: ClientBench --module librl.so --redis-server redis-server");
    }
    Runtime.getRuntime().addShutdownHook(new Thread(() -> LIVE.forEach(Process::destroyForcibly)));
    int server = start(false);
    List<Integer> cluster = startCluster();
    try {
      System.out.println(jedis(server, cluster));
      System.out.println(lettuce(server, cluster));
    } finally {
      LIVE.forEach(Process::destroyForcibly);
    }
    System.exit(0); // Lettuce's threads would keep the JVM up
  }

  static String jedis(int server, List<Integer> cluster) {
    String standalone;
    try (JedisPooled c = new JedisPooled("127.0.0.1", server)) {
      Limiter l = JedisLimiter.of(c);
      standalone = measure(k -> c.incr(k), k -> l.fixed(k, 1_000_000_000L, MINUTE), "bench");
    }
    Set<HostAndPort> nodes = new HashSet<>();
    cluster.forEach(p -> nodes.add(new HostAndPort("127.0.0.1", p)));
    String clustered;
    try (JedisCluster c = new JedisCluster(nodes)) {
      Limiter l = JedisLimiter.of(c);
      clustered = measureCluster(cluster, k -> c.incr(k), k -> l.fixed(k, 1_000_000_000L, MINUTE));
    }
    return row("Jedis", "redis.clients/jedis", standalone, clustered);
  }

  static String lettuce(int server, List<Integer> cluster) {
    RedisClient client = RedisClient.create(RedisURI.create("127.0.0.1", server));
    String standalone;
    try (StatefulRedisConnection<String, String> c = client.connect();
        LettuceLimiter l = LettuceLimiter.create(client)) {
      Limiter sync = l.sync();
      standalone = measure(k -> c.sync().incr(k), k -> sync.fixed(k, 1_000_000_000L, MINUTE), "bench");
    } finally {
      client.shutdown();
    }
    List<RedisURI> uris = new ArrayList<>();
    cluster.forEach(p -> uris.add(RedisURI.create("127.0.0.1", p)));
    RedisClusterClient cc = RedisClusterClient.create(uris);
    String clustered;
    try (StatefulRedisClusterConnection<String, String> c = cc.connect();
        LettuceLimiter l = LettuceLimiter.create(cc)) {
      Limiter sync = l.sync();
      clustered = measureCluster(cluster, k -> c.sync().incr(k), k -> sync.fixed(k, 1_000_000_000L, MINUTE));
    } finally {
      cc.shutdown();
    }
    return row("Lettuce", "io.lettuce/lettuce-core", standalone, clustered);
  }

  static String row(String client, String artifact, String standalone, String cluster) {
    return String.format(
        Locale.ROOT,
        "{\"client\": \"%s\", \"version\": \"%s\", \"standalone\": %s, \"cluster\": %s}",
        client, version(artifact), standalone, cluster);
  }

  /** The version of a jar on the classpath, from the pom.properties Maven put in it. */
  static String version(String artifact) {
    try (var in = ClientBench.class.getClassLoader().getResourceAsStream("META-INF/maven/" + artifact + "/pom.properties")) {
      java.util.Properties p = new java.util.Properties();
      if (in != null) {
        p.load(in);
      }
      return p.getProperty("version", "unknown");
    } catch (IOException e) {
      return "unknown";
    }
  }

  /** INCR and RL.FIXED alternately, each call timed on its own; medians in µs. */
  static String measure(Consumer<String> incr, Consumer<String> rl, String prefix) {
    long[] incrNs = new long[CALLS];
    long[] rlNs = new long[CALLS];
    for (int i = -WARMUP; i < CALLS; i++) {
      int k = Math.floorMod(i, KEYS);
      long t0 = System.nanoTime();
      incr.accept(prefix + ":incr:" + k);
      long t1 = System.nanoTime();
      rl.accept(prefix + ":rl:" + k);
      long t2 = System.nanoTime();
      if (i >= 0) {
        incrNs[i] = t1 - t0;
        rlNs[i] = t2 - t1;
      }
    }
    return String.format(Locale.ROOT, "{\"rl_us\": %.1f, \"incr_us\": %.1f}", median(rlNs), median(incrNs));
  }

  static String measureCluster(List<Integer> ports, Consumer<String> incr, Consumer<String> rl) {
    measure(incr, rl, "warm"); // the client's slot map, and the JIT
    ports.forEach(p -> call(p, "CONFIG", "RESETSTAT"));
    String m = measure(incr, rl, "bench");
    long getkeys = 0;
    long moved = 0;
    for (int p : ports) {
      for (String line : (info(p, "commandstats") + info(p, "errorstats")).split("\r?\n")) {
        if (line.startsWith("cmdstat_command|getkeys")) {
          getkeys += field(line, "calls");
        } else if (line.startsWith("errorstat_MOVED")) {
          moved += field(line, "count");
        }
      }
    }
    return m.substring(0, m.length() - 1)
        + String.format(Locale.ROOT, ", \"getkeys_calls\": %d, \"moved\": %d}", getkeys, moved);
  }

  static long field(String line, String name) {
    for (String kv : line.substring(line.indexOf(':') + 1).split(",")) {
      if (kv.startsWith(name + "=")) {
        return Long.parseLong(kv.substring(name.length() + 1).trim());
      }
    }
    return 0;
  }

  static double median(long[] ns) {
    long[] s = ns.clone();
    Arrays.sort(s);
    return s[s.length / 2] / 1000.0;
  }

  static int freePort() throws IOException {
    while (true) {
      int port;
      try (ServerSocket s = new ServerSocket(0)) {
        port = s.getLocalPort();
      }
      if (port <= 55535) {
        try (ServerSocket bus = new ServerSocket(port + 10000)) {
          return port;
        } catch (IOException taken) {
          // the cluster bus port is taken: try another
        }
      }
    }
  }

  static int start(boolean cluster) throws Exception {
    int port = freePort();
    Path dir = Files.createTempDirectory("librl-java-bench-");
    List<String> argv =
        new ArrayList<>(
            List.of(redisServer, "--port", Integer.toString(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", dir.toString(), "--logfile", "server.log",
                "--loadmodule", module));
    if (cluster) {
      argv.addAll(List.of("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"));
    }
    LIVE.add(new ProcessBuilder(argv).redirectOutput(ProcessBuilder.Redirect.DISCARD)
        .redirectError(ProcessBuilder.Redirect.DISCARD).start());
    long deadline = System.nanoTime() + 15_000_000_000L;
    while (true) {
      try (Jedis j = new Jedis("127.0.0.1", port)) {
        j.ping();
        return port;
      } catch (RuntimeException e) {
        if (System.nanoTime() > deadline) {
          throw e;
        }
        Thread.sleep(20);
      }
    }
  }

  static List<Integer> startCluster() throws Exception {
    List<Integer> ports = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      ports.add(start(true));
    }
    int[][] ranges = {{0, 5460}, {5461, 10922}, {10923, 16383}};
    for (int i = 0; i < 3; i++) {
      call(ports.get(i), "CLUSTER", "SET-CONFIG-EPOCH", Integer.toString(i + 1));
      call(ports.get(i), "CLUSTER", "ADDSLOTSRANGE", Integer.toString(ranges[i][0]), Integer.toString(ranges[i][1]));
    }
    for (int p : ports.subList(1, 3)) {
      call(ports.get(0), "CLUSTER", "MEET", "127.0.0.1", Integer.toString(p));
    }
    long deadline = System.nanoTime() + 30_000_000_000L;
    while (!ports.stream().allMatch(p -> {
      String info = new String((byte[]) call(p, "CLUSTER", "INFO"), java.nio.charset.StandardCharsets.UTF_8);
      return info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:3");
    })) {
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("the cluster never reached cluster_state:ok");
      }
      Thread.sleep(50);
    }
    return ports;
  }

  static Object call(int port, String... words) {
    try (Jedis j = new Jedis("127.0.0.1", port)) {
      return j.sendCommand(
          () -> words[0].getBytes(java.nio.charset.StandardCharsets.UTF_8),
          Arrays.copyOfRange(words, 1, words.length));
    }
  }

  static String info(int port, String section) {
    try (Jedis j = new Jedis("127.0.0.1", port)) {
      return j.info(section);
    }
  }
}
