package io.librl;

/**
 * A librl call that failed after it was sent: {@link LibrlCommandException} (the server's error
 * reply, or the client's failure on the way) or {@link DurabilityException} (the call stands on
 * the primary, but too few replicas have it). Calls refused before sending throw {@link
 * LibrlArgumentException} instead.
 */
public abstract class LibrlException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final String command;

  LibrlException(String command, String message, Throwable cause) {
    super("librl: " + command + ": " + message, cause);
    this.command = command;
  }

  /** The command: {@code RL.FIXED}, {@code RL.ALL}, {@code RL.OVERRIDE SET}... */
  public String command() {
    return command;
  }
}
