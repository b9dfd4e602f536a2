package io.librl;

import java.util.List;
import java.util.Objects;

/**
 * One step of {@code RL.OVERRIDE LIST}, with SCAN's cursor contract: start with cursor {@code
 * "0"}, and stop when {@link #cursor()} is {@code "0"} again.
 *
 * @param cursor the cursor of the next step, {@code "0"} when the iteration is over
 * @param entries the overrides of this step
 */
public record OverridePage(String cursor, List<OverrideEntry> entries) {
  public OverridePage {
    Objects.requireNonNull(cursor, "cursor");
    entries = List.copyOf(entries);
  }

  /** Whether this was the last step. */
  public boolean isLast() {
    return "0".equals(cursor);
  }
}
