package io.librl.http;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * A request's headers as bytes (docs/http.md, Identity: header values are bytes). Each adapter
 * gives the lines of a header, in order, as the bytes the client sent: servlet containers and
 * Netty hand values over as text decoded from Latin-1, which {@link #latin1} encodes back.
 */
@FunctionalInterface
public interface RequestHeaders {

  /** Every line of the header {@code name} (ASCII case-insensitive), in order; empty if absent. */
  List<byte[]> lines(String name);

  /** Text decoded from Latin-1 (as servlet containers and Netty decode it) back to its bytes. */
  static byte[] latin1(String value) {
    return value.getBytes(StandardCharsets.ISO_8859_1);
  }

  /** Headers from name/value pairs, one pair per line (tests, and code that has them). */
  static RequestHeaders of(List<Map.Entry<String, byte[]>> pairs) {
    return name -> {
      List<byte[]> out = new ArrayList<>();
      for (Map.Entry<String, byte[]> e : pairs) {
        if (e.getKey().equalsIgnoreCase(name)) {
          out.add(e.getValue());
        }
      }
      return out;
    };
  }

  /**
   * The header as docs/http.md, Identity reads it: every line joined by {@code ", "} (as HTTP
   * combines a field's lines), trimmed of spaces and tabs; null when the header is absent.
   */
  default byte[] joined(String name) {
    List<byte[]> lines = lines(name);
    if (lines.isEmpty()) {
      return null;
    }
    if (lines.size() == 1) {
      return trimOws(lines.get(0));
    }
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (int i = 0; i < lines.size(); i++) {
      if (i > 0) {
        out.write(',');
        out.write(' ');
      }
      out.writeBytes(lines.get(i));
    }
    return trimOws(out.toByteArray());
  }

  /** {@link #joined}, where an empty value is no value. */
  default byte[] value(String name) {
    byte[] v = joined(name);
    return v == null || v.length == 0 ? null : v;
  }

  /** Without spaces and tabs at either end: the same array when it has none there. */
  static byte[] trimOws(byte[] bytes) {
    int start = 0;
    int end = bytes.length;
    while (start < end && (bytes[start] == ' ' || bytes[start] == '\t')) {
      start++;
    }
    while (end > start && (bytes[end - 1] == ' ' || bytes[end - 1] == '\t')) {
      end--;
    }
    return start == 0 && end == bytes.length ? bytes : java.util.Arrays.copyOfRange(bytes, start, end);
  }
}
