package io.librl.example;

import io.librl.http.Config;
import io.librl.http.ConfigException;
import io.librl.http.RateLimiter;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.Proxy;
import java.nio.file.Path;

/**
 * On {@code SIGHUP} the example re-reads the file {@code LIBRL_POLICIES} names and swaps it in
 * (docs/http.md, Reload), printing {@code librl: configuration reloaded} or the start-up error on
 * stderr; the old configuration stays when the new one is refused. The JDK's signal API ({@code
 * sun.misc.Signal}, module jdk.unsupported) is reached by reflection: javac warns on every direct
 * use of it, and the build treats warnings as errors.
 */
final class Reloads {
  private Reloads() {}

  /** Installs the handler; without the signal API (another JVM) nothing is installed. */
  static void onHangup(RateLimiter limiter, String policies) {
    try {
      Class<?> signal = Class.forName("sun.misc.Signal");
      Class<?> handler = Class.forName("sun.misc.SignalHandler");
      InvocationHandler reload =
          (proxy, method, args) -> {
            switch (method.getName()) {
              case "handle":
                reload(limiter, policies);
                return null;
              case "equals":
                return proxy == args[0];
              case "hashCode":
                return System.identityHashCode(proxy);
              default:
                return "librl: reload on SIGHUP";
            }
          };
      Object hup = signal.getConstructor(String.class).newInstance("HUP");
      Object proxy = Proxy.newProxyInstance(handler.getClassLoader(), new Class<?>[] {handler}, reload);
      signal.getMethod("handle", signal, handler).invoke(null, hup, proxy);
    } catch (ReflectiveOperationException | RuntimeException e) {
      System.err.println("librl: no SIGHUP reload: " + e);
    }
  }

  private static void reload(RateLimiter limiter, String policies) {
    try {
      limiter.reload(Config.load(Path.of(policies)));
      System.err.println("librl: configuration reloaded");
    } catch (ConfigException e) {
      System.err.println(e.getMessage());
    }
  }
}
