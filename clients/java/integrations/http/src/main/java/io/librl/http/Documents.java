package io.librl.http;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.regex.Pattern;
import org.yaml.snakeyaml.LoaderOptions;
import org.yaml.snakeyaml.Yaml;
import org.yaml.snakeyaml.constructor.AbstractConstruct;
import org.yaml.snakeyaml.constructor.SafeConstructor;
import org.yaml.snakeyaml.error.YAMLException;
import org.yaml.snakeyaml.nodes.Node;
import org.yaml.snakeyaml.nodes.ScalarNode;
import org.yaml.snakeyaml.nodes.Tag;
import org.yaml.snakeyaml.representer.Representer;
import org.yaml.snakeyaml.resolver.Resolver;

/**
 * A configuration file's text as the language's own data (maps, lists, strings, numbers,
 * booleans, null), for the walker. YAML and JSON alike (JSON is YAML), read with YAML 1.2's core
 * schema rather than SnakeYAML's YAML 1.1 default, as the other integrations read it: {@code yes},
 * {@code on} and {@code off} are strings, {@code 010} is ten, {@code 1e+30} is a number. A key
 * given twice is refused: a file whose second {@code limit} silently wins is a mistake.
 */
public final class Documents {
  private Documents() {}

  /** The document in {@code text}; a {@link ConfigException} at {@code (document)} if unreadable. */
  public static Object read(String text) {
    LoaderOptions options = new LoaderOptions();
    options.setAllowDuplicateKeys(false);
    Yaml yaml =
        new Yaml(
            new CoreConstructor(options),
            new Representer(new org.yaml.snakeyaml.DumperOptions()),
            new org.yaml.snakeyaml.DumperOptions(),
            options,
            new CoreResolver());
    try {
      return yaml.load(text);
    } catch (YAMLException | IllegalArgumentException e) {
      throw new ConfigException("(document)", "not YAML or JSON: " + oneLine(e.getMessage()));
    }
  }

  private static String oneLine(String message) {
    return message == null ? "unreadable" : message.replaceAll("\\s*\\n\\s*", " ").strip();
  }

  /** YAML 1.2's core schema: its booleans, nulls, integers and floats, and nothing else. */
  private static final class CoreResolver extends Resolver {
    private static final Pattern BOOL = Pattern.compile("^(?:true|True|TRUE|false|False|FALSE)$");
    private static final Pattern INT = Pattern.compile("^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$");
    private static final Pattern FLOAT =
        Pattern.compile(
            "^(?:[-+]?(?:\\.[0-9]+|[0-9]+(?:\\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                + "|[-+]?\\.(?:inf|Inf|INF)|\\.(?:nan|NaN|NAN))$");
    private static final Pattern NULL = Pattern.compile("^(?:~|null|Null|NULL|)$");

    @Override
    protected void addImplicitResolvers() {
      addImplicitResolver(Tag.BOOL, BOOL, "tTfF");
      addImplicitResolver(Tag.INT, INT, "-+0123456789");
      addImplicitResolver(Tag.FLOAT, FLOAT, "-+0123456789.");
      addImplicitResolver(Tag.NULL, NULL, "~nN\0");
      addImplicitResolver(Tag.NULL, NULL, null);
    }
  }

  /** Integers exactly (a Long, or a BigInteger past it), floats as BigDecimal (whole or not). */
  private static final class CoreConstructor extends SafeConstructor {
    CoreConstructor(LoaderOptions options) {
      super(options);
      this.yamlConstructors.put(Tag.INT, new ConstructInt());
      this.yamlConstructors.put(Tag.FLOAT, new ConstructFloat());
    }

    private final class ConstructInt extends AbstractConstruct {
      @Override
      public Object construct(Node node) {
        String text = constructScalar((ScalarNode) node);
        BigInteger value;
        if (text.startsWith("0o")) {
          value = new BigInteger(text.substring(2), 8);
        } else if (text.startsWith("0x")) {
          value = new BigInteger(text.substring(2), 16);
        } else {
          value = new BigInteger(text.startsWith("+") ? text.substring(1) : text);
        }
        return value.bitLength() < 64 ? (Object) value.longValue() : value;
      }
    }

    private final class ConstructFloat extends AbstractConstruct {
      @Override
      public Object construct(Node node) {
        String text = constructScalar((ScalarNode) node);
        String lower = text.toLowerCase(java.util.Locale.ROOT);
        if (lower.endsWith(".inf")) {
          return lower.startsWith("-") ? Double.NEGATIVE_INFINITY : Double.POSITIVE_INFINITY;
        }
        if (lower.equals(".nan")) {
          return Double.NaN;
        }
        return new BigDecimal(text.startsWith("+") ? text.substring(1) : text);
      }
    }
  }
}
