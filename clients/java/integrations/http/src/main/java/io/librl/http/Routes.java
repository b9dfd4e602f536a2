package io.librl.http;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Which policies apply to a request (docs/http.md, Routes): the route whose canonical path is the
 * longest whole-segment prefix of the request's canonical path, among those whose methods include
 * the request's; without routes, every policy.
 */
public final class Routes {
  private final List<Policy> all;
  /** Empty: every policy applies to every request. */
  private final List<Compiled> routes;

  private record Compiled(
      int index, String path, byte[] canonical, List<String> methods, List<Policy> policies, Config.Deny deny) {}

  /**
   * The policies a request gets, in check order, and the route that chose them.
   *
   * @param route the route's index in the configuration, or -1 without routes
   * @param path the route's path as configured, or null
   * @param policies the policies to check, in order
   * @param deny the route's own refusal, or null: the top-level {@code deny}
   */
  public record Selection(int route, String path, List<Policy> policies, Config.Deny deny) {
    public Selection(int route, String path, List<Policy> policies) {
      this(route, path, policies, null);
    }
  }

  /** {@code routes} name policies by name; the configuration was validated before this. */
  public Routes(List<Policy> policies, List<Config.Route> routes) {
    this.all = List.copyOf(policies);
    List<Compiled> compiled = new ArrayList<>();
    for (int i = 0; i < routes.size(); i++) {
      Config.Route r = routes.get(i);
      List<Policy> selected = new ArrayList<>();
      for (String name : r.policies()) {
        for (Policy p : policies) {
          if (p.name().equals(name)) {
            selected.add(p);
            break;
          }
        }
      }
      compiled.add(
          new Compiled(
              i,
              r.path(),
              lowerAscii(canonicalPath(r.path().getBytes(StandardCharsets.UTF_8))),
              r.methods(),
              List.copyOf(selected),
              r.deny()));
    }
    this.routes = List.copyOf(compiled);
  }

  /**
   * Null when routes exist and none matches: the request is not checked. {@code path} is the path
   * as the framework hands it, raw or decoded, as bytes.
   */
  public Selection select(String method, byte[] path) {
    if (routes.isEmpty()) {
      return new Selection(-1, null, all);
    }
    byte[] canonical = isCanonicalLower(path) ? path : lowerAscii(canonicalPath(path));
    Compiled best = null;
    for (Compiled route : routes) {
      boolean methodOk = route.methods() == null || route.methods().contains(method);
      // Strictly longer only: among equally long matches the first wins.
      if (methodOk
          && under(route.canonical(), canonical)
          && (best == null || route.canonical().length > best.canonical().length)) {
        best = route;
      }
    }
    return best == null
        ? null
        : new Selection(best.index(), best.path(), best.policies(), best.deny());
  }

  /**
   * An absolute-form target ({@code http://example.com/limited}, RFC 9112 section 3.2.2) without
   * its scheme, {@code ://} and authority (up to the first {@code /}, {@code ?} or {@code #});
   * any other target as it is.
   */
  private static byte[] withoutAuthority(byte[] target) {
    if (target.length == 0 || !isAsciiLetter(target[0])) {
      return target;
    }
    int i = 1;
    while (i < target.length
        && (isAsciiLetter(target[i])
            || (target[i] >= '0' && target[i] <= '9')
            || target[i] == '+'
            || target[i] == '-'
            || target[i] == '.')) {
      i++;
    }
    if (i + 3 > target.length || target[i] != ':' || target[i + 1] != '/' || target[i + 2] != '/') {
      return target;
    }
    int end = i + 3;
    while (end < target.length && target[end] != '/' && target[end] != '?' && target[end] != '#') {
      end++;
    }
    return Arrays.copyOfRange(target, end, target.length);
  }

  private static boolean isAsciiLetter(byte b) {
    return (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z');
  }

  /**
   * docs/http.md, The canonical path: an absolute-form target's scheme and authority dropped,
   * the query and fragment dropped, percent-escapes decoded until none is
   * left, {@code ;} parameters, empty and {@code .} segments dropped, {@code ..} applied (never
   * above the root), no trailing slash. Bytes in, bytes out.
   */
  public static byte[] canonicalPath(byte[] target) {
    byte[] path = withoutAuthority(target);
    int query = path.length;
    for (int i = 0; i < path.length; i++) {
      if (path[i] == '?' || path[i] == '#') {
        query = i;
        break;
      }
    }
    byte[] decoded = percentDecodeFully(Arrays.copyOf(path, query));
    List<byte[]> segments = new ArrayList<>();
    int start = 0;
    for (int i = 0; i <= decoded.length; i++) {
      if (i < decoded.length && decoded[i] != '/') {
        continue;
      }
      int end = start;
      while (end < i && decoded[end] != ';') {
        end++;
      }
      byte[] segment = Arrays.copyOfRange(decoded, start, end);
      start = i + 1;
      if (segment.length == 0 || (segment.length == 1 && segment[0] == '.')) {
        continue;
      }
      if (segment.length == 2 && segment[0] == '.' && segment[1] == '.') {
        if (!segments.isEmpty()) {
          segments.remove(segments.size() - 1);
        }
        continue;
      }
      segments.add(segment);
    }
    ByteArrayOutputStream out = new ByteArrayOutputStream(decoded.length + 1);
    for (byte[] segment : segments) {
      out.write('/');
      out.writeBytes(segment);
    }
    if (out.size() == 0) {
      out.write('/');
    }
    return out.toByteArray();
  }

  /**
   * Percent-decoded until no {@code %XX} is left, in one pass: each byte is pushed, and while the
   * output ends in an escape it is decoded in place (a decoded byte may end another: {@code %%32F}
   * is {@code /}), in linear time whatever the nesting.
   */
  private static byte[] percentDecodeFully(byte[] path) {
    byte[] out = new byte[path.length];
    int n = 0;
    for (byte b : path) {
      out[n++] = b;
      while (n >= 3 && out[n - 3] == '%') {
        int high = Character.digit(out[n - 2] & 0xff, 16);
        int low = Character.digit(out[n - 1] & 0xff, 16);
        if (high < 0 || low < 0 || (out[n - 2] & 0xff) > 0x7f || (out[n - 1] & 0xff) > 0x7f) {
          break;
        }
        n -= 3;
        out[n++] = (byte) ((high << 4) | low);
      }
    }
    return Arrays.copyOf(out, n);
  }

  /**
   * Whether the path is its own canonical form in lower case already (most requests' paths: {@code
   * /api/items}), which then needs no copy: a {@code /}, then segments of bytes other than {@code %
   * ; ? #} and upper-case letters, none empty, {@code .} or {@code ..}, no trailing slash.
   */
  static boolean isCanonicalLower(byte[] path) {
    if (path.length == 0 || path[0] != '/') {
      return false;
    }
    if (path.length == 1) {
      return true;
    }
    int start = 1;
    for (int i = 1; i <= path.length; i++) {
      byte b = i < path.length ? path[i] : (byte) '/';
      if (b == '%' || b == ';' || b == '?' || b == '#' || (b >= 'A' && b <= 'Z')) {
        return false;
      }
      if (b != '/') {
        continue;
      }
      int len = i - start;
      if (len == 0
          || (path[start] == '.' && (len == 1 || (len == 2 && path[start + 1] == '.')))) {
        return false;
      }
      start = i + 1;
    }
    return true;
  }

  /** {@code /upload} covers {@code /upload} and {@code /upload/x}, never {@code /uploads}. */
  private static boolean under(byte[] route, byte[] path) {
    if (route.length == 1 && route[0] == '/') {
      return true;
    }
    if (path.length < route.length) {
      return false;
    }
    for (int i = 0; i < route.length; i++) {
      if (path[i] != route[i]) {
        return false;
      }
    }
    return path.length == route.length || path[route.length] == '/';
  }

  private static byte[] lowerAscii(byte[] bytes) {
    byte[] out = bytes.clone();
    for (int i = 0; i < out.length; i++) {
      if (out[i] >= 'A' && out[i] <= 'Z') {
        out[i] = (byte) (out[i] + 32);
      }
    }
    return out;
  }

  static int indexOf(byte[] bytes, byte b, int from) {
    for (int i = from; i < bytes.length; i++) {
      if (bytes[i] == b) {
        return i;
      }
    }
    return -1;
  }
}
