package io.librl.http;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * What an {@code attribute:<name>} source makes of each Java type (docs/http.md, Request
 * attributes); the vectors give strings only.
 */
class RequestAttributesTest {
  private static final Source PROJECT = Source.parse("attribute:project");

  private static byte[] read(Object value) {
    Map<String, Object> attributes = value == null ? Map.of() : Map.of("project", value);
    return PROJECT.read(name -> List.of(), null, null, attributes::get);
  }

  private static byte[] text(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  @Test
  void anIntegerIsItsDecimalText() {
    assertArrayEquals(text("42"), read(42));
    assertArrayEquals(text("-7"), read(-7L));
    assertArrayEquals(text("3"), read((short) 3));
    assertArrayEquals(text("9"), read((byte) 9));
    assertArrayEquals(text("123456789012345678901234567890"), read(new BigInteger("123456789012345678901234567890")));
  }

  @Test
  void anyOtherTypeIsNoValue() {
    assertNull(read(true));
    assertNull(read(1.5));
    assertNull(read(2.0f));
    assertNull(read('x'));
    assertNull(read(new StringBuilder("1:42")));
    assertNull(read(List.of("1:42")));
  }

  @Test
  void absentOrBlankIsNoValue() {
    assertNull(read(null));
    assertNull(read(""));
    assertNull(read(" \t "));
    assertNull(PROJECT.read(name -> List.of(), null, null));
  }
}
