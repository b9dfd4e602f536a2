package io.librl;

import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;

/** What the package does with its stages' failures, whichever client it runs on. */
final class Stages {
  private Stages() {}

  /** The failure a {@code CompletionException} or {@code ExecutionException} wraps. */
  static Throwable unwrap(Throwable e) {
    while ((e instanceof CompletionException || e instanceof ExecutionException)
        && e.getCause() != null) {
      e = e.getCause();
    }
    return e;
  }
}
