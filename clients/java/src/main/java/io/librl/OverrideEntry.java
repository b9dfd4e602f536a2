package io.librl;

import java.util.Objects;

/**
 * One override listed by {@code RL.OVERRIDE LIST}.
 *
 * @param key the override key
 * @param values its values
 */
public record OverrideEntry(String key, OverrideValues values) {
  public OverrideEntry {
    Objects.requireNonNull(key, "key");
    Objects.requireNonNull(values, "values");
  }
}
