package io.librl.http;

import java.nio.file.Path;

/** Where the repository is (the build passes it as the system property librl.root). */
public final class TestSupport {
  private TestSupport() {}

  public static Path root() {
    String root = System.getProperty("librl.root");
    if (root == null) {
      throw new IllegalStateException("set the system property librl.root to the repository");
    }
    return Path.of(root).toAbsolutePath().normalize();
  }
}
