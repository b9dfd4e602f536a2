package io.librl;

/**
 * A command that failed on the server or on the way. Its message carries the server's own error
 * line, which names the argument ({@code librl: RL.FIXED: ERR limit must be an integer from 1 to
 * 1125899906842624 (2^50)}); its cause is the client's exception, unchanged (Lettuce's {@code
 * RedisCommandExecutionException} or {@code RedisCommandTimeoutException}, Jedis's {@code
 * JedisDataException} or {@code JedisConnectionException}...).
 */
public final class LibrlCommandException extends LibrlException {
  private static final long serialVersionUID = 1L;

  private final String errorCode;

  LibrlCommandException(String command, Throwable cause, boolean serverError) {
    super(command, String.valueOf(cause.getMessage()), cause);
    this.errorCode = serverError ? codeOf(cause.getMessage()) : null;
  }

  /** An unexpected reply: one this package cannot read. */
  LibrlCommandException(String command, String message) {
    super(command, message, null);
    this.errorCode = null;
  }

  private static String codeOf(String message) {
    if (message == null || message.isEmpty()) {
      return "ERR";
    }
    int space = message.indexOf(' ');
    return space < 0 ? message : message.substring(0, space);
  }

  /**
   * Whether the server answered the call with an error reply (a bad argument, {@code WRONGTYPE},
   * {@code OOM}...), rather than the call failing on the way (connection, timeout).
   */
  public boolean isServerError() {
    return errorCode != null;
  }

  /**
   * The server's error code, the first word of its error reply: {@code ERR}, {@code WRONGTYPE},
   * {@code OOM}, {@code CROSSSLOT}...; null when the call failed on the way.
   */
  public String errorCode() {
    return errorCode;
  }
}
