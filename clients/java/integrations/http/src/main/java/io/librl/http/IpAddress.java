package io.librl.http;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * An IP address as docs/http.md, Identity reads one: parsed strictly (no host names, no DNS, no
 * leading zeros in IPv4), IPv4-mapped IPv6 made IPv4, written in canonical text (RFC 5952 for
 * IPv6: lower case, the longest run of two or more zero groups as {@code ::}).
 */
public final class IpAddress {
  private final byte[] bytes;
  /** The canonical text when it was known as the address was read (an IPv4 one), else null. */
  private final String text;

  private IpAddress(byte[] bytes) {
    this(bytes, null);
  }

  private IpAddress(byte[] bytes, String text) {
    this.bytes = bytes;
    this.text = text;
  }

  /** 4 bytes (IPv4) or 16 (IPv6). */
  byte[] bytes() {
    return bytes.clone();
  }

  boolean isV4() {
    return bytes.length == 4;
  }

  /** 127.0.0.0/8 or ::1. */
  public boolean isLoopback() {
    if (isV4()) {
      return bytes[0] == 127;
    }
    for (int i = 0; i < 15; i++) {
      if (bytes[i] != 0) {
        return false;
      }
    }
    return bytes[15] == 1;
  }

  /**
   * An address as a proxy or a socket writes it: {@code 203.0.113.7}, {@code 2001:db8::1}, {@code
   * 203.0.113.7:4711}, {@code [2001:db8::1]:4711}, with an IPv6 zone index ({@code fe80::1%eth0})
   * dropped: it names the writer's interface, not another client. IPv4-mapped IPv6 is IPv4. Null
   * for anything else.
   */
  public static IpAddress parse(String raw) {
    String text = trimOws(raw);
    // A plain IPv4 address (what a socket reports) read without its text being written again: a
    // dotted quad v4 accepts is canonical already.
    if (text.indexOf(':') < 0) {
      byte[] v4 = v4(text);
      return v4 == null ? null : new IpAddress(v4, text);
    }
    byte[] ip;
    if (text.startsWith("[")) {
      int close = text.indexOf(']');
      if (close < 0) {
        return null;
      }
      String after = text.substring(close + 1);
      if (!(after.isEmpty() || (after.startsWith(":") && port(after.substring(1))))) {
        return null;
      }
      ip = v6WithZone(text.substring(1, close));
    } else if (text.indexOf(':') == text.lastIndexOf(':')) {
      int colon = text.indexOf(':');
      if (!port(text.substring(colon + 1))) {
        return null;
      }
      ip = v4(text.substring(0, colon));
    } else {
      ip = v6WithZone(text);
    }
    return ip == null ? null : canonical(ip);
  }

  /** The bytes of the header value, read as text (an address is ASCII; anything else is none). */
  public static IpAddress parse(byte[] raw) {
    for (byte b : raw) {
      if (b < 0) {
        return null;
      }
    }
    return parse(new String(raw, StandardCharsets.US_ASCII));
  }

  /** An address without a zone or port, as a configuration writes one; null otherwise. */
  static byte[] literal(String text) {
    return text.contains(":") ? v6(text) : v4(text);
  }

  static IpAddress of(byte[] bytes) {
    return canonical(bytes.clone());
  }

  private static IpAddress canonical(byte[] ip) {
    if (ip.length == 16) {
      boolean mapped = true;
      for (int i = 0; i < 10; i++) {
        mapped &= ip[i] == 0;
      }
      if (mapped && ip[10] == (byte) 0xff && ip[11] == (byte) 0xff) {
        return new IpAddress(Arrays.copyOfRange(ip, 12, 16));
      }
    }
    return new IpAddress(ip);
  }

  private static boolean port(String text) {
    return !text.isEmpty() && text.length() <= 5 && text.chars().allMatch(c -> c >= '0' && c <= '9');
  }

  private static byte[] v6WithZone(String text) {
    int percent = text.indexOf('%');
    if (percent < 0) {
      return v6(text);
    }
    if (percent == text.length() - 1) {
      return null;
    }
    return v6(text.substring(0, percent));
  }

  /** Dotted decimal, four octets of 1 to 3 digits, no leading zero, each at most 255. */
  static byte[] v4(String text) {
    byte[] out = new byte[4];
    int octet = 0;
    int start = 0;
    int n = text.length();
    for (int i = 0; i <= n; i++) {
      if (i < n && text.charAt(i) != '.') {
        continue;
      }
      int len = i - start;
      if (octet == 4 || len == 0 || len > 3 || (len > 1 && text.charAt(start) == '0')) {
        return null;
      }
      int v = 0;
      for (int j = start; j < i; j++) {
        char c = text.charAt(j);
        if (c < '0' || c > '9') {
          return null;
        }
        v = v * 10 + (c - '0');
      }
      if (v > 255) {
        return null;
      }
      out[octet++] = (byte) v;
      start = i + 1;
    }
    return octet == 4 ? out : null;
  }

  /** RFC 4291's text forms: 8 groups of 1 to 4 hex digits, one {@code ::}, an IPv4 tail. */
  static byte[] v6(String text) {
    if (text.isEmpty()) {
      return null;
    }
    int gap = text.indexOf("::");
    if (gap >= 0 && text.indexOf("::", gap + 1) >= 0) {
      return null;
    }
    int[] head;
    int[] tail;
    if (gap >= 0) {
      head = groups(text.substring(0, gap), false);
      tail = groups(text.substring(gap + 2), true);
      if (head == null || tail == null || head.length + tail.length > 7) {
        return null;
      }
    } else {
      head = groups(text, true);
      tail = new int[0];
      if (head == null || head.length != 8) {
        return null;
      }
    }
    byte[] out = new byte[16];
    for (int i = 0; i < head.length; i++) {
      out[2 * i] = (byte) (head[i] >> 8);
      out[2 * i + 1] = (byte) head[i];
    }
    int start = 8 - tail.length;
    for (int i = 0; i < tail.length; i++) {
      out[2 * (start + i)] = (byte) (tail[i] >> 8);
      out[2 * (start + i) + 1] = (byte) tail[i];
    }
    return out;
  }

  /** Colon-separated groups (empty text: none); the last may be IPv4 (two groups) if allowed. */
  private static int[] groups(String text, boolean v4Tail) {
    if (text.isEmpty()) {
      return new int[0];
    }
    String[] parts = text.split(":", -1);
    int[] out = new int[parts.length + 1];
    int n = 0;
    for (int i = 0; i < parts.length; i++) {
      String p = parts[i];
      if (i == parts.length - 1 && v4Tail && p.contains(".")) {
        byte[] v4 = v4(p);
        if (v4 == null) {
          return null;
        }
        out[n++] = ((v4[0] & 0xff) << 8) | (v4[1] & 0xff);
        out[n++] = ((v4[2] & 0xff) << 8) | (v4[3] & 0xff);
        continue;
      }
      if (p.isEmpty() || p.length() > 4) {
        return null;
      }
      int v = 0;
      for (int j = 0; j < p.length(); j++) {
        int d = Character.digit(p.charAt(j), 16);
        if (d < 0 || p.charAt(j) > 0x7f) {
          return null;
        }
        v = v * 16 + d;
      }
      out[n++] = v;
    }
    return Arrays.copyOf(out, n);
  }

  private static String trimOws(String text) {
    int start = 0;
    int end = text.length();
    while (start < end && (text.charAt(start) == ' ' || text.charAt(start) == '\t')) {
      start++;
    }
    while (end > start && (text.charAt(end - 1) == ' ' || text.charAt(end - 1) == '\t')) {
      end--;
    }
    return text.substring(start, end);
  }

  /**
   * The address as an {@code ip} subject writes it (docs/http.md, IPv6 networks): an IPv4
   * address as itself, an IPv6 one as its network of {@code v6Prefix} bits ({@code
   * 2001:db8:1::/56}), itself at 128.
   */
  public String subjectText(int v6Prefix) {
    if (isV4() || v6Prefix >= 128) {
      return toString();
    }
    byte[] net = new byte[16];
    int full = v6Prefix / 8;
    System.arraycopy(bytes, 0, net, 0, full);
    int rest = v6Prefix % 8;
    if (rest != 0) {
      net[full] = (byte) (bytes[full] & (0xff << (8 - rest)));
    }
    return new IpAddress(net) + "/" + v6Prefix;
  }

  @Override
  public String toString() {
    if (text != null) {
      return text;
    }
    if (isV4()) {
      return (bytes[0] & 0xff) + "." + (bytes[1] & 0xff) + "." + (bytes[2] & 0xff) + "."
          + (bytes[3] & 0xff);
    }
    int[] g = new int[8];
    for (int i = 0; i < 8; i++) {
      g[i] = ((bytes[2 * i] & 0xff) << 8) | (bytes[2 * i + 1] & 0xff);
    }
    // The longest run of two or more zero groups, the first of equals.
    int bestStart = -1;
    int bestLen = 1;
    for (int i = 0; i < 8; ) {
      if (g[i] != 0) {
        i++;
        continue;
      }
      int j = i;
      while (j < 8 && g[j] == 0) {
        j++;
      }
      if (j - i > bestLen) {
        bestStart = i;
        bestLen = j - i;
      }
      i = j;
    }
    StringBuilder out = new StringBuilder();
    for (int i = 0; i < 8; i++) {
      if (i == bestStart) {
        out.append("::");
        i += bestLen - 1;
        continue;
      }
      if (out.length() > 0 && out.charAt(out.length() - 1) != ':') {
        out.append(':');
      }
      out.append(Integer.toHexString(g[i]));
    }
    return out.toString();
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof IpAddress other && Arrays.equals(bytes, other.bytes);
  }

  @Override
  public int hashCode() {
    return Arrays.hashCode(bytes);
  }

  /** A CIDR network ({@code 10.0.0.0/8}), or one address ({@code ::1}); host bits allowed. */
  public static final class Network {
    private final byte[] network;
    private final int prefix;

    private Network(byte[] network, int prefix) {
      this.network = network;
      this.prefix = prefix;
    }

    /** {@code 10.0.0.0/8}, {@code 127.0.0.1} (one host), {@code ::1}; no zone index. Null if not. */
    public static Network parse(String text) {
      int slash = text.indexOf('/');
      String address = slash < 0 ? text : text.substring(0, slash);
      byte[] bytes = literal(address);
      if (bytes == null) {
        return null;
      }
      int prefix = bytes.length * 8;
      if (slash >= 0) {
        String p = text.substring(slash + 1);
        if (p.isEmpty() || p.length() > 3 || !p.chars().allMatch(c -> c >= '0' && c <= '9')) {
          return null;
        }
        prefix = Integer.parseInt(p);
        if (prefix > bytes.length * 8) {
          return null;
        }
      }
      return new Network(bytes, prefix);
    }

    /** Whether {@code ip} is in this network (an IPv4 address is never in an IPv6 network). */
    public boolean contains(IpAddress ip) {
      byte[] b = ip.bytes;
      if (b.length != network.length) {
        return false;
      }
      int full = prefix / 8;
      for (int i = 0; i < full; i++) {
        if (b[i] != network[i]) {
          return false;
        }
      }
      int rest = prefix % 8;
      if (rest == 0) {
        return true;
      }
      int mask = (0xff << (8 - rest)) & 0xff;
      return (b[full] & mask) == (network[full] & mask);
    }

    @Override
    public String toString() {
      return IpAddress.of(network) + "/" + prefix;
    }
  }
}
