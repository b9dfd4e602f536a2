package io.librl.http;

import io.librl.http.Schema.Field;
import io.librl.http.Schema.Kind;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Pattern;

/**
 * The configuration's walker (docs/http.md, Start-up validation): reads a document with the
 * schema's tree ({@link Schema}, generated from conformance/schema/config.schema.json by
 * scripts/gen-schema.py) and checks every field's name, kind, enum, bounds, pattern and duration,
 * filling in the defaults. Its messages are conformance/README.md's templates, the same in every
 * language. The rules that span fields are {@link ConfigReader}'s.
 */
final class Walker {
  private Walker() {}

  /** A duration field once walked, in milliseconds. */
  record Ms(long ms) {}

  private static final Map<String, Pattern> PATTERNS = new ConcurrentHashMap<>();

  /** The whole document; its path is {@code (document)}. */
  static WalkedObject document(Object document) {
    return object("(document)", "", document, Schema.ROOT);
  }

  /** One object of the schema ({@code policy}, ...) found at {@code path}. */
  static WalkedObject objectAt(String path, Object value, String object) {
    return object(path, path + ".", value, object);
  }

  /** One field of one of the schema's objects, at {@code path}. */
  static Object field(String path, Object value, String object, String name) {
    for (Field f : fields(object)) {
      if (f.name().equals(name)) {
        return walk(path, value, f);
      }
    }
    throw new ConfigException(path, "the generated schema has no such field");
  }

  static List<Field> fields(String object) {
    List<Field> fields = Schema.OBJECTS.get(object);
    if (fields == null) {
      throw new ConfigException(object, "the generated schema has no such object");
    }
    return fields;
  }

  private static WalkedObject object(String where, String prefix, Object value, String object) {
    if (!(value instanceof Map<?, ?> map)) {
      throw new ConfigException(where, "must be an object");
    }
    List<Field> fields = fields(object);
    for (Object key : map.keySet()) {
      if (!(key instanceof String) || fields.stream().noneMatch(f -> f.name().equals(key))) {
        throw new ConfigException(prefix + key, "unknown field");
      }
    }
    Map<String, Object> out = new LinkedHashMap<>();
    for (Field field : fields) {
      String path = prefix + field.name();
      if (map.containsKey(field.name())) {
        out.put(field.name(), walk(path, map.get(field.name()), field));
      } else if (field.required()) {
        throw new ConfigException(path, "missing");
      } else if (field.defaultValue() != null) {
        out.put(field.name(), walk(path, field.defaultValue(), field));
      }
    }
    return new WalkedObject(prefix, out);
  }

  private static Object walk(String path, Object value, Field field) {
    switch (field.kind()) {
      case STRING:
        return string(path, value, field);
      case INTEGER:
        {
          Long n = integer(value, field);
          if (n == null) {
            throw new ConfigException(path, integerExpected(field));
          }
          return n;
        }
      case BOOLEAN:
        if (!(value instanceof Boolean)) {
          throw new ConfigException(path, "must be true or false");
        }
        return value;
      case DURATION:
        {
          long ms = durationValueMs(value);
          if (ms < 0 || !inDuration(ms, field)) {
            throw new ConfigException(
                path,
                "must be a duration from "
                    + field.durationMinMs()
                    + " ms to "
                    + field.durationMaxMs()
                    + " ms (an integer and ms, s, m, h or d; seconds without a unit)");
          }
          return new Ms(ms);
        }
      case RATE:
        {
          TimeText.Rate rate =
              value instanceof String text && matches(text, field) ? TimeText.rate(text) : null;
          if (rate == null || !inBounds(rate.count(), field) || !inDuration(rate.periodMs(), field)) {
            throw new ConfigException(
                path,
                "must be a rate: a count from "
                    + field.minimum()
                    + " to "
                    + field.maximum()
                    + " per a period from "
                    + field.durationMinMs()
                    + " ms to "
                    + field.durationMaxMs()
                    + " ms (100/minute, 5 per 10s, 3/1500ms)");
          }
          return rate;
        }
      case INT_OR_STRING:
        {
          Object walked;
          if (value instanceof String text) {
            walked = matches(text, field) ? text : null;
          } else {
            walked = integer(value, field);
          }
          if (walked == null) {
            throw new ConfigException(
                path,
                "must be "
                    + (field.expected() == null ? "an integer or a string" : field.expected()));
          }
          return walked;
        }
      case LIST:
        {
          if (!(value instanceof List<?> items)) {
            throw new ConfigException(path, "must be a list");
          }
          if (field.minItems() != null && items.size() < field.minItems()) {
            throw new ConfigException(path, "must not be empty");
          }
          if (field.items() == null) {
            throw new ConfigException(path, "the generated schema gives this list no items");
          }
          List<Object> out = new ArrayList<>(items.size());
          for (int i = 0; i < items.size(); i++) {
            out.add(walk(path + "[" + i + "]", items.get(i), field.items()));
          }
          return out;
        }
      case MAP:
        {
          if (!(value instanceof Map<?, ?> map)) {
            throw new ConfigException(path, "must be an object");
          }
          if (field.items() == null) {
            throw new ConfigException(path, "the generated schema gives this map no values");
          }
          Map<String, Object> out = new LinkedHashMap<>();
          for (Map.Entry<?, ?> e : map.entrySet()) {
            String name = String.valueOf(e.getKey());
            String at = path + "." + name;
            if (field.keyPattern() != null
                && !PATTERNS.computeIfAbsent(field.keyPattern(), Pattern::compile).matcher(name).find()) {
              throw new ConfigException(
                  at, "must be " + (field.keyExpected() == null ? "a name" : field.keyExpected()));
            }
            out.put(name, walk(at, e.getValue(), field.items()));
          }
          return out;
        }
      case JSON:
        if (value == null) {
          throw new ConfigException(
              path, "must be " + (field.expected() == null ? "a JSON value" : field.expected()));
        }
        return value;
      case OBJECT:
        if (field.object() == null) {
          throw new ConfigException(path, "the generated schema names no object here");
        }
        return object(path, path + ".", value, field.object());
      default:
        throw new ConfigException(path, "a kind this walker does not know: " + field.kind());
    }
  }

  private static String string(String path, Object value, Field field) {
    if (!field.choices().isEmpty()) {
      if (value instanceof String text && field.choices().contains(text)) {
        return text;
      }
      throw new ConfigException(path, "must be one of " + String.join(", ", field.choices()));
    }
    if (value instanceof String text && matches(text, field)) {
      return text;
    }
    throw new ConfigException(
        path, "must be " + (field.expected() == null ? "a string" : field.expected()));
  }

  private static Long integer(Object value, Field field) {
    long n = wholeNumber(value);
    return n >= 0 && inBounds(n, field) ? n : null;
  }

  private static String integerExpected(Field field) {
    return "must be an integer from " + field.minimum() + " to " + field.maximum();
  }

  /**
   * A number whose value is whole and not negative (JSON Schema's integer: {@code 5} and {@code
   * 5.0} alike; {@code true} is no number), else -1. Past {@code Long.MAX_VALUE}: -1 too (every
   * bound is below it).
   */
  static long wholeNumber(Object value) {
    if (value instanceof Long || value instanceof Integer || value instanceof Short
        || value instanceof Byte) {
      long n = ((Number) value).longValue();
      return n >= 0 ? n : -1;
    }
    if (value instanceof BigInteger b) {
      return b.signum() >= 0 && b.bitLength() < 64 ? b.longValue() : -1;
    }
    if (value instanceof BigDecimal d) {
      try {
        long n = d.longValueExact();
        return n >= 0 ? n : -1;
      } catch (ArithmeticException e) {
        return -1;
      }
    }
    if (value instanceof Double || value instanceof Float) {
      double f = ((Number) value).doubleValue();
      // Whole values up to 2^53 are exact in a double; every bound is below that.
      return f == Math.rint(f) && f >= 0 && f < 9_007_199_254_740_992.0 ? (long) f : -1;
    }
    return -1;
  }

  /** A duration in a document: a string of the grammar, or a number of whole seconds; -1 if not. */
  static long durationValueMs(Object value) {
    if (value instanceof String text) {
      return TimeText.durationMs(text);
    }
    if (value instanceof Number) {
      long seconds = wholeNumber(value);
      return seconds < 0 || seconds > Long.MAX_VALUE / 1000 ? -1 : seconds * 1000;
    }
    return -1;
  }

  private static boolean inBounds(long n, Field field) {
    return (field.minimum() == null || n >= field.minimum())
        && (field.maximum() == null || n <= field.maximum());
  }

  private static boolean inDuration(long ms, Field field) {
    return (field.durationMinMs() == null || ms >= field.durationMinMs())
        && (field.durationMaxMs() == null || ms <= field.durationMaxMs());
  }

  /** The field's pattern (searched for: the schema's are anchored) and its lengths in UTF-8 bytes. */
  private static boolean matches(String text, Field field) {
    long len = text.getBytes(StandardCharsets.UTF_8).length;
    return (field.pattern() == null
            || PATTERNS.computeIfAbsent(field.pattern(), Pattern::compile).matcher(text).find())
        && (field.minLength() == null || len >= field.minLength())
        && (field.maxLength() == null || len <= field.maxLength());
  }

  /** An object once walked: its fields (given or defaulted), each with its path. */
  static final class WalkedObject {
    private final String prefix;
    private final Map<String, Object> fields;

    WalkedObject(String prefix, Map<String, Object> fields) {
      this.prefix = prefix;
      this.fields = fields;
    }

    /** A field's path, for the cross-field rules' messages. */
    String path(String name) {
      return prefix + name;
    }

    boolean has(String name) {
      return fields.containsKey(name);
    }

    Object value(String name) {
      return fields.get(name);
    }

    /** The reader asked a field for a kind the schema does not give it: out of step. */
    ConfigException outOfStep(String name) {
      return new ConfigException(
          path(name),
          "the schema and librl-http's reader disagree on this field (regenerate Schema.java and"
              + " update the reader)");
    }

    private <T> T read(String name, Class<T> kind, boolean required) {
      Object v = fields.get(name);
      if (v == null) {
        if (required) {
          throw outOfStep(name);
        }
        return null;
      }
      if (!kind.isInstance(v)) {
        throw outOfStep(name);
      }
      return kind.cast(v);
    }

    String text(String name) {
      return read(name, String.class, false);
    }

    String requiredText(String name) {
      return read(name, String.class, true);
    }

    Long integer(String name) {
      return read(name, Long.class, false);
    }

    long requiredInteger(String name) {
      return read(name, Long.class, true);
    }

    Boolean bool(String name) {
      return read(name, Boolean.class, false);
    }

    boolean requiredBool(String name) {
      return read(name, Boolean.class, true);
    }

    Long ms(String name) {
      Ms ms = read(name, Ms.class, false);
      return ms == null ? null : ms.ms();
    }

    TimeText.Rate rate(String name) {
      return read(name, TimeText.Rate.class, false);
    }

    List<?> list(String name) {
      List<?> list = read(name, List.class, false);
      return list == null ? List.of() : list;
    }

    WalkedObject object(String name) {
      return read(name, WalkedObject.class, true);
    }

    /** An object field that may be absent (a route's {@code deny}). */
    WalkedObject optionalObject(String name) {
      return read(name, WalkedObject.class, false);
    }

    /** A map field ({@code identities}, {@code deny.headers}): names in order to walked values. */
    @SuppressWarnings("unchecked")
    Map<String, Object> map(String name) {
      Map<String, Object> map = read(name, Map.class, false);
      return map == null ? Map.of() : map;
    }
  }
}
