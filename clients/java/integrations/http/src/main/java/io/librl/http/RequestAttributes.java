package io.librl.http;

import java.math.BigInteger;
import java.nio.charset.StandardCharsets;

/**
 * What the application's own code left on a request before the check (docs/http.md, Request
 * attributes), by name: a servlet request's {@code getAttribute}, a WebFlux exchange's {@code
 * getAttribute}. An {@code attribute:<name>} source reads it.
 */
@FunctionalInterface
public interface RequestAttributes {
  /** A request that carries no attributes. */
  RequestAttributes NONE = name -> null;

  /** The attribute's value, or null when the request has none of that name. */
  Object get(String name);

  /**
   * The attribute as a source's value: a string's UTF-8 bytes, trimmed of spaces and tabs; an
   * integer ({@code Integer}, {@code Long}, {@code Short}, {@code Byte}, {@code BigInteger}) its
   * decimal text; null for anything else, or for a string empty once trimmed.
   */
  static byte[] value(Object v) {
    String text;
    if (v instanceof String s) {
      text = s;
    } else if (v instanceof Integer || v instanceof Long || v instanceof Short || v instanceof Byte
        || v instanceof BigInteger) {
      text = v.toString();
    } else {
      return null;
    }
    byte[] bytes = RequestHeaders.trimOws(text.getBytes(StandardCharsets.UTF_8));
    return bytes.length == 0 ? null : bytes;
  }
}
