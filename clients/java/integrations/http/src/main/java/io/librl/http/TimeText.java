package io.librl.http;

/**
 * The text forms a configuration writes time in (docs/http.md, Durations and Rates): a duration is
 * the module's own grammar ({@code 250ms}, {@code 1s}, {@code 15m}; bare digits are seconds), a
 * rate the {@code limits} library's notation ({@code 100/minute}, {@code 5 per 2 minutes}, {@code
 * 3/1500ms}). Bounds are the schema's and the walker's to apply; these only read.
 */
public final class TimeText {
  private TimeText() {}

  /** A count and a period: what a rate reads as. */
  public record Rate(long count, long periodMs) {}

  /**
   * {@code 250ms}, {@code 1s}, {@code 15m}, {@code 24H}, {@code 7d}, or bare digits of seconds, in
   * milliseconds, exactly as the module's commands read them: no spaces, no sign, no fraction, no
   * leading zero. -1 for anything else.
   */
  public static long durationMs(String text) {
    int digits = 0;
    long value = 0;
    while (digits < text.length() && isDigit(text.charAt(digits))) {
      value = checkedDecimal(value, text.charAt(digits));
      if (value < 0) {
        return -1;
      }
      digits++;
    }
    if (digits == 0 || (text.charAt(0) == '0' && digits > 1) || value == 0 && digits > 1) {
      return -1;
    }
    long scale;
    switch (text.substring(digits).toLowerCase(java.util.Locale.ROOT)) {
      case "":
      case "s":
        scale = 1000;
        break;
      case "ms":
        scale = 1;
        break;
      case "m":
        scale = 60_000;
        break;
      case "h":
        scale = 3_600_000;
        break;
      case "d":
        scale = 86_400_000;
        break;
      default:
        return -1;
    }
    // Only ASCII case folds: "\u0130" (dotted I) lowercases to two chars, never a unit.
    if (!isAscii(text)) {
      return -1;
    }
    return Math.multiplyHigh(value, scale) != 0 || value * scale < 0 ? -1 : value * scale;
  }

  /**
   * {@code OWS count OWS ("/" | "per") OWS period OWS} (docs/http.md, Rates): the count and the
   * period in ms, unbounded; null for anything else. Letters in any ASCII case.
   */
  public static Rate rate(String text) {
    if (!isAscii(text)) {
      return null;
    }
    String t = trimOws(text);
    int i = 0;
    long count = 0;
    while (i < t.length() && isDigit(t.charAt(i))) {
      count = checkedDecimal(count, t.charAt(i));
      if (count < 0) {
        return null;
      }
      i++;
    }
    if (i == 0) {
      return null;
    }
    int afterCount = skipOws(t, i);
    String period;
    if (afterCount < t.length() && t.charAt(afterCount) == '/') {
      period = t.substring(skipOws(t, afterCount + 1));
    } else if (t.regionMatches(true, afterCount, "per", 0, 3)) {
      int after = afterCount + 3;
      int start = skipOws(t, after);
      // "per" needs whitespace only where letters would touch.
      if (start == after && start < t.length() && Character.isLetter(t.charAt(start))) {
        return null;
      }
      period = t.substring(start);
    } else {
      return null;
    }
    long ms = periodMs(period);
    return ms < 0 ? null : new Rate(count, ms);
  }

  /** {@code [n OWS] unit} (n may have leading zeros), else a duration of the module's grammar. */
  private static long periodMs(String period) {
    if (period.isEmpty()) {
      return -1;
    }
    int i = 0;
    long n = 0;
    while (i < period.length() && isDigit(period.charAt(i))) {
      n = checkedDecimal(n, period.charAt(i));
      if (n < 0) {
        return -1;
      }
      i++;
    }
    String unit = i == 0 ? period : period.substring(skipOws(period, i));
    long unitMs = unitMs(unit);
    if (unitMs < 0) {
      return durationMs(period);
    }
    if (i == 0) {
      n = 1;
    }
    if (n < 1 || Math.multiplyHigh(n, unitMs) != 0 || n * unitMs < 0) {
      return -1;
    }
    return n * unitMs;
  }

  /** A unit word or letter; {@code ms} is a duration's unit, not a rate's. */
  private static long unitMs(String unit) {
    String lower = unit.toLowerCase(java.util.Locale.ROOT);
    String word = lower.length() > 2 && lower.endsWith("s") ? lower.substring(0, lower.length() - 1) : lower;
    switch (word) {
      case "s":
      case "second":
        return 1000;
      case "m":
      case "minute":
        return 60_000;
      case "h":
      case "hour":
        return 3_600_000;
      case "d":
      case "day":
        return 86_400_000;
      default:
        return -1;
    }
  }

  private static boolean isDigit(char c) {
    return c >= '0' && c <= '9';
  }

  private static boolean isAscii(String text) {
    for (int i = 0; i < text.length(); i++) {
      if (text.charAt(i) > 0x7F) {
        return false;
      }
    }
    return true;
  }

  /** {@code value * 10 + digit}, or -1 past {@code Long.MAX_VALUE}. */
  private static long checkedDecimal(long value, char digit) {
    if (value > (Long.MAX_VALUE - (digit - '0')) / 10) {
      return -1;
    }
    return value * 10 + (digit - '0');
  }

  private static boolean isOws(char c) {
    return c == ' ' || c == '\t';
  }

  private static int skipOws(String text, int from) {
    int i = from;
    while (i < text.length() && isOws(text.charAt(i))) {
      i++;
    }
    return i;
  }

  private static String trimOws(String text) {
    int start = skipOws(text, 0);
    int end = text.length();
    while (end > start && isOws(text.charAt(end - 1))) {
      end--;
    }
    return text.substring(start, end);
  }
}
