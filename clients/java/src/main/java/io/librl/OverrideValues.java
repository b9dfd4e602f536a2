package io.librl;

import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * An override's stored values ({@code RL.OVERRIDE GET}; docs/overrides.md).
 *
 * @param limit the limit (a token bucket's rate)
 * @param window the window
 * @param burst a token bucket's capacity, when the override sets one
 * @param ttl how long the override still lives, when it expires
 */
public record OverrideValues(long limit, Duration window, OptionalLong burst, Optional<Duration> ttl) {
  public OverrideValues {
    Objects.requireNonNull(window, "window");
    Objects.requireNonNull(burst, "burst");
    Objects.requireNonNull(ttl, "ttl");
  }
}
