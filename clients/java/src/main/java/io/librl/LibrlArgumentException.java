package io.librl;

/**
 * A call refused before anything was sent: an option its command does not take, {@code cost} with
 * {@code refund}, {@code reserve} with {@code waitUpTo}, a duration that is not a positive whole
 * number of milliseconds, {@code RL.ALL} without clauses, keys of one call in two cluster slots
 * (the message says how to fix it with a hash tag)...
 */
public final class LibrlArgumentException extends IllegalArgumentException {
  private static final long serialVersionUID = 1L;

  private final String where;
  private final String detail;

  LibrlArgumentException(String where, String message) {
    super("librl: " + where + ": " + message);
    this.where = where;
    this.detail = message;
  }

  /** The same refusal, naming {@code where} instead (a clause's place in its call, say). */
  LibrlArgumentException at(String where) {
    return new LibrlArgumentException(where, detail);
  }

  /** The call or clause refused: {@code fixed}, {@code all clause 2 (FIXED user42:min)}... */
  public String where() {
    return where;
  }
}
