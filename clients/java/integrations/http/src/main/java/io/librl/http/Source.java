package io.librl.http;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * One identity source (docs/http.md, Named identities): where a request's value for a subject is
 * read. A value is bytes; null is no value (absent, or empty after trimming), and the next source
 * is tried.
 *
 * @param kind which part of the request holds the value
 * @param name the header's, cookie's, query parameter's or request attribute's name, or the
 *     Authorization scheme, as written; null for {@code user} and {@code ip}
 */
public record Source(Kind kind, String name) {

  /** Where a source reads. */
  public enum Kind {
    HEADER,
    COOKIE,
    QUERY,
    AUTHORIZATION,
    /** What the application's code left on the request (docs/http.md, Request attributes). */
    ATTRIBUTE,
    USER,
    IP
  }

  /** A source's text as the schema's pattern admits it: {@code user}, {@code ip}, {@code kind:Name}. */
  static Source parse(String text) {
    if (text.equals("user")) {
      return new Source(Kind.USER, null);
    }
    if (text.equals("ip")) {
      return new Source(Kind.IP, null);
    }
    int colon = text.indexOf(':');
    Kind kind = Kind.valueOf(text.substring(0, colon).toUpperCase(Locale.ROOT));
    return new Source(kind, text.substring(colon + 1));
  }

  /**
   * The subject text an inline source gives a value: {@code header:<name lower>:}, {@code
   * cookie:<Name>:}, {@code query:<Name>:}, {@code authorization:<scheme lower>:}, {@code
   * attribute:<name>:}.
   */
  String inlinePrefix() {
    return PREFIXES.computeIfAbsent(this, Source::prefix);
  }

  /**
   * Each configured source's {@link #inlinePrefix}, made once: sources come from configurations
   * only, so there are few.
   */
  private static final Map<Source, String> PREFIXES = new ConcurrentHashMap<>();

  private String prefix() {
    switch (kind) {
      case HEADER:
      case AUTHORIZATION:
        return kind.name().toLowerCase(Locale.ROOT) + ":" + name.toLowerCase(Locale.ROOT) + ":";
      default:
        return kind.name().toLowerCase(Locale.ROOT) + ":" + name + ":";
    }
  }

  /**
   * The request's value from this source, or null. {@code query} is the raw query string's bytes
   * (after the {@code ?}, up to any {@code #}), or null; {@code user} the framework's user, or
   * null. {@code ip} has no value here: the caller falls back to the client's address. A request
   * read this way carries no attributes.
   */
  public byte[] read(RequestHeaders headers, byte[] query, String user) {
    return read(headers, query, user, RequestAttributes.NONE);
  }

  /** The same, with the request's attributes for an {@code attribute:<name>} source. */
  public byte[] read(RequestHeaders headers, byte[] query, String user, RequestAttributes attributes) {
    byte[] v;
    switch (kind) {
      case HEADER:
        return headers.value(name);
      case COOKIE:
        v = cookie(headers.lines("Cookie"), name);
        break;
      case QUERY:
        v = query == null ? null : query(query, name);
        break;
      case AUTHORIZATION:
        v = authorization(headers.value("Authorization"), name);
        break;
      case ATTRIBUTE:
        return RequestAttributes.value(attributes.get(name));
      case USER:
        v = user == null ? null : user.getBytes(StandardCharsets.UTF_8);
        break;
      case IP:
      default:
        return null;
    }
    return v == null || v.length == 0 ? null : v;
  }

  /**
   * The cookie {@code name} (RFC 6265): the lines joined by {@code "; "}, pairs split on {@code
   * ;} and trimmed, the first pair whose name is exactly {@code name}, its value trimmed and
   * without one surrounding pair of double quotes; no decoding.
   */
  static byte[] cookie(List<byte[]> lines, String name) {
    byte[] want = name.getBytes(StandardCharsets.UTF_8);
    for (byte[] line : lines) {
      int start = 0;
      for (int i = 0; i <= line.length; i++) {
        if (i < line.length && line[i] != ';') {
          continue;
        }
        byte[] pair = RequestHeaders.trimOws(Arrays.copyOfRange(line, start, i));
        start = i + 1;
        int eq = Routes.indexOf(pair, (byte) '=', 0);
        if (eq < 0) {
          continue;
        }
        if (Arrays.equals(RequestHeaders.trimOws(Arrays.copyOfRange(pair, 0, eq)), want)) {
          byte[] value = RequestHeaders.trimOws(Arrays.copyOfRange(pair, eq + 1, pair.length));
          if (value.length >= 2 && value[0] == '"' && value[value.length - 1] == '"') {
            value = Arrays.copyOfRange(value, 1, value.length - 1);
          }
          return value;
        }
      }
    }
    return null;
  }

  /**
   * The query parameter {@code name}: pairs split on {@code &}, name and value at the first
   * {@code =} (a pair without one is skipped), each decoded as {@code application/x-www-form-urlencoded} ({@code +}
   * a space, then percent-escapes once; a {@code %} without two hex digits stays); the first pair
   * whose decoded name is exactly {@code name}.
   */
  static byte[] query(byte[] query, String name) {
    byte[] want = name.getBytes(StandardCharsets.UTF_8);
    int start = 0;
    for (int i = 0; i <= query.length; i++) {
      if (i < query.length && query[i] != '&') {
        continue;
      }
      byte[] pair = Arrays.copyOfRange(query, start, i);
      start = i + 1;
      if (pair.length == 0) {
        continue;
      }
      int eq = Routes.indexOf(pair, (byte) '=', 0);
      // A pair without "=" names nothing (as the cookie pairs): "q&q=2" gives 2.
      if (eq >= 0 && Arrays.equals(formDecode(Arrays.copyOfRange(pair, 0, eq)), want)) {
        return formDecode(Arrays.copyOfRange(pair, eq + 1, pair.length));
      }
    }
    return null;
  }

  /**
   * The credentials of {@code Authorization: <Scheme> <credentials>} when the first token equals
   * {@code scheme} without regard to ASCII case: the rest after the spaces, trimmed.
   */
  static byte[] authorization(byte[] value, String scheme) {
    if (value == null) {
      return null;
    }
    int space = Routes.indexOf(value, (byte) ' ', 0);
    byte[] first = space < 0 ? value : Arrays.copyOfRange(value, 0, space);
    String token = new String(first, StandardCharsets.ISO_8859_1);
    if (!token.equalsIgnoreCase(scheme) || !isAscii(first)) {
      return null;
    }
    return space < 0 ? null : RequestHeaders.trimOws(Arrays.copyOfRange(value, space + 1, value.length));
  }

  private static boolean isAscii(byte[] b) {
    for (byte x : b) {
      if (x < 0) {
        return false;
      }
    }
    return true;
  }

  private static byte[] formDecode(byte[] in) {
    ByteArrayOutputStream out = new ByteArrayOutputStream(in.length);
    for (int i = 0; i < in.length; i++) {
      byte b = in[i];
      if (b == '+') {
        out.write(' ');
      } else if (b == '%' && i + 2 < in.length && hex(in[i + 1]) >= 0 && hex(in[i + 2]) >= 0) {
        out.write((hex(in[i + 1]) << 4) | hex(in[i + 2]));
        i += 2;
      } else {
        out.write(b);
      }
    }
    return out.toByteArray();
  }

  /** A hex digit's value, or -1 (ASCII only). */
  private static int hex(byte b) {
    return b < 0 ? -1 : Character.digit(b, 16);
  }
}
