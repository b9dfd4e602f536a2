package io.librl.http;

/**
 * A configuration refused at start-up (docs/http.md, Start-up validation). The message is {@code
 * librl: configuration: <path>: <what is wrong>}, the path naming the field ({@code
 * policies[0].burst}, {@code routes[1].policies[0]}, {@code timeout}, {@code (document)}).
 */
public final class ConfigException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final String path;
  private final String problem;

  public ConfigException(String path, String problem) {
    super("librl: configuration: " + path + ": " + problem);
    this.path = path;
    this.problem = problem;
  }

  /** The field's path. */
  public String path() {
    return path;
  }

  /** What is wrong with it, without the path. */
  public String problem() {
    return problem;
  }
}
