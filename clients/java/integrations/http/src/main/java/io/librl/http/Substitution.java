package io.librl.http;

import java.util.function.Function;

/**
 * {@code ${VAR}} and {@code ${VAR:-default}} in a configuration file's text (docs/http.md,
 * Environment variables), replaced before the text is parsed: one file serves every environment.
 * Only files are substituted; a configuration built as data is used as given.
 */
final class Substitution {
  private Substitution() {}

  /**
   * The text with every reference replaced ({@code $${} is a literal {@code ${}, a {@code $}
   * elsewhere is itself); values are not substituted again. {@code env} gives a variable's value,
   * or null when it is not set.
   *
   * @throws ConfigException for an unset variable without a default ({@code ${APP_LIMIT}: not
   *     set}) or a {@code ${} that starts no reference
   */
  static String apply(String text, Function<String, String> env) {
    if (text.indexOf('$') < 0) {
      return text;
    }
    StringBuilder out = new StringBuilder(text.length());
    int i = 0;
    while (i < text.length()) {
      char c = text.charAt(i);
      if (c != '$') {
        out.append(c);
        i++;
      } else if (text.startsWith("$${", i)) {
        out.append("${");
        i += 3;
      } else if (text.startsWith("${", i)) {
        i = reference(text, i, env, out);
      } else {
        out.append(c);
        i++;
      }
    }
    return out.toString();
  }

  /** Appends the reference's value that starts at {@code start}; returns the index after it. */
  private static int reference(String text, int start, Function<String, String> env, StringBuilder out) {
    int close = text.indexOf('}', start);
    if (close < 0) {
      throw malformed(text.substring(start, Math.min(text.length(), start + 40)));
    }
    String inside = text.substring(start + 2, close);
    int dash = inside.indexOf(":-");
    String name = dash < 0 ? inside : inside.substring(0, dash);
    if (!isName(name)) {
      throw malformed(text.substring(start, close + 1));
    }
    String value = env.apply(name);
    if (dash >= 0) {
      out.append(value == null || value.isEmpty() ? inside.substring(dash + 2) : value);
    } else if (value == null) {
      throw new ConfigException("${" + name + "}", "not set");
    } else {
      out.append(value);
    }
    return close + 1;
  }

  /** {@code [A-Za-z_][A-Za-z0-9_]*}. */
  private static boolean isName(String name) {
    if (name.isEmpty()) {
      return false;
    }
    for (int i = 0; i < name.length(); i++) {
      char c = name.charAt(i);
      boolean letter = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
      if (!(letter || (i > 0 && c >= '0' && c <= '9'))) {
        return false;
      }
    }
    return true;
  }

  private static ConfigException malformed(String reference) {
    return new ConfigException(
        reference, "not a reference: write ${NAME} or ${NAME:-default} (NAME: [A-Za-z_][A-Za-z0-9_]*), or $${ for a literal ${");
  }
}
