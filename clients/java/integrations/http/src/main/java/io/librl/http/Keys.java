package io.librl.http;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;

/**
 * The keys a check writes (docs/http.md, Keys): {@code <prefix>{<subject>}:<policy>} and its
 * override key, with the subject as the cluster hash tag; and how a value becomes part of a key:
 * verbatim when it is short and safe, else hashed (docs/http.md, Identity).
 *
 * @param key the limiter key
 * @param overrideKey the override key when the policy is overridable, else null
 */
public record Keys(String key, String overrideKey) {

  /** One subject's keys share the hash tag, so they share a slot. */
  public static Keys of(String prefix, Identity.Subject subject, String policy, boolean overridable) {
    String text = subject.toString();
    return new Keys(
        prefix + "{" + text + "}:" + policy,
        overridable ? prefix + "{" + text + "}:override:" + policy : null);
  }

  /**
   * The first 16 bytes of the value's SHA-256 in hex: API keys stay out of Redis (and out of
   * {@code KEYS} and {@code MONITOR}), and an operator can still find one client's counters:
   * {@code printf %s "$KEY" | sha256sum | cut -c1-32}.
   */
  public static String hashed(byte[] value) {
    byte[] digest;
    try {
      digest = MessageDigest.getInstance("SHA-256").digest(value);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every Java platform has SHA-256", e);
    }
    StringBuilder out = new StringBuilder(32);
    for (int i = 0; i < 16; i++) {
      out.append(Character.forDigit((digest[i] >> 4) & 0xf, 16));
      out.append(Character.forDigit(digest[i] & 0xf, 16));
    }
    return out.toString();
  }

  /**
   * A user or header value as it appears in a key: verbatim when it is 1 to 64 bytes of {@code
   * A-Z a-z 0-9 . _ ~ @ + = : / -}, else {@code sha256-} and its hash (a {@code }} must not end
   * the hash tag early). The test is on the bytes.
   */
  public static String keySafe(byte[] value) {
    boolean safe = value.length >= 1 && value.length <= 64;
    for (int i = 0; safe && i < value.length; i++) {
      safe = SAFE[value[i] & 0xff];
    }
    return safe ? new String(value, StandardCharsets.US_ASCII) : "sha256-" + hashed(value);
  }

  /** The bytes {@link #keySafe} keeps verbatim, by value: a lookup per byte on every request's subject. */
  private static final boolean[] SAFE = new boolean[256];

  static {
    for (int b = 0; b < 128; b++) {
      SAFE[b] =
          (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9') || "._~@+=:/-".indexOf(b) >= 0;
    }
  }
}
