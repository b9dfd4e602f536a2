package io.librl.http;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Who sent a request (docs/http.md, Identity): its address (proxy headers believed only from
 * trusted proxies), its API key, its user, a header's value; and the subject a policy counts,
 * whose text is the middle of the policy's keys.
 */
public final class Identity {
  private Identity() {}

  /**
   * The identities a request carries.
   *
   * @param ip the client's address after the trusted-proxy rules; null when there is no peer
   * @param apiKey the API key's id ({@link Keys#hashed}), never the key itself; null without one
   * @param user the authenticated user, made key-safe; null without one
   */
  public record Client(IpAddress ip, String apiKey, String user) {

    /**
     * {@code peer} is the TCP peer as the server reports it (a zone index allowed), {@code user}
     * what the framework authenticated (a string: its UTF-8 bytes make the key).
     */
    public static Client of(
        String peer, RequestHeaders headers, Config config, String user) {
      IpAddress p = peer == null ? null : IpAddress.parse(peer);
      byte[] key = headers.value(config.apiKeyHeader());
      return new Client(
          p == null ? null : clientIp(p, headers, config.trustedProxies()),
          key == null ? null : Keys.hashed(key),
          user == null || user.isEmpty() ? null : Keys.keySafe(user.getBytes(StandardCharsets.UTF_8)));
    }

    /** The subject of a policy, falling back as the contract says: user, API key, address. */
    public Subject subject(Policy.Key key, RequestHeaders headers) {
      switch (key.kind()) {
        case IP:
          return ipSubject();
        case API_KEY:
          return apiKey != null ? new Subject(Subject.Kind.API_KEY, apiKey) : ipSubject();
        case USER:
          if (user != null) {
            return new Subject(Subject.Kind.USER, user);
          }
          return apiKey != null ? new Subject(Subject.Kind.API_KEY, apiKey) : ipSubject();
        case HEADER:
          {
            byte[] v = headers.value(key.header());
            if (v == null) {
              return ipSubject();
            }
            return new Subject(
                Subject.Kind.HEADER, key.header().toLowerCase(Locale.ROOT) + ":" + Keys.keySafe(v));
          }
        case GLOBAL:
        default:
          return new Subject(Subject.Kind.GLOBAL, null);
      }
    }

    private Subject ipSubject() {
      return ip == null ? new Subject(Subject.Kind.UNKNOWN, null) : new Subject(Subject.Kind.IP, ip.toString());
    }
  }

  /**
   * Whose counter a policy uses; its {@code toString} is the key's middle part ({@code
   * ip:203.0.113.7}, {@code api-key:2bb8...}, {@code user:alice}, {@code header:x-tenant:acme},
   * {@code global}, {@code key:alice}, {@code ip:unknown}).
   */
  public record Subject(Kind kind, String value) {
    public enum Kind {
      IP,
      API_KEY,
      USER,
      HEADER,
      GLOBAL,
      /** A key a framework resolved itself: Spring Cloud Gateway's {@code KeyResolver}. */
      KEY,
      /** No peer address: every such request shares one counter. */
      UNKNOWN
    }

    /** Whether this is an {@code ip} subject with a loopback address. */
    public boolean isLoopback() {
      if (kind != Kind.IP) {
        return false;
      }
      IpAddress ip = IpAddress.parse(value);
      return ip != null && ip.isLoopback();
    }

    @Override
    public String toString() {
      switch (kind) {
        case IP:
          return "ip:" + value;
        case API_KEY:
          return "api-key:" + value;
        case USER:
          return "user:" + value;
        case HEADER:
          return "header:" + value;
        case GLOBAL:
          return "global";
        case KEY:
          return "key:" + value;
        case UNKNOWN:
        default:
          return "ip:unknown";
      }
    }
  }

  /**
   * The client's address: the TCP peer, unless the peer is a trusted proxy: then {@code
   * X-Forwarded-For} is read from its nearest hop back, and the first address that is not a
   * trusted proxy is the client (the hops left of it were written by the client and prove
   * nothing). Without {@code X-Forwarded-For}, a trusted proxy's {@code X-Real-IP} is the client.
   */
  public static IpAddress clientIp(
      IpAddress peer, RequestHeaders headers, List<IpAddress.Network> trusted) {
    if (!trusted(peer, trusted)) {
      return peer;
    }
    byte[] forwarded = headers.joined("X-Forwarded-For");
    List<byte[]> hops = new ArrayList<>();
    if (forwarded != null) {
      int start = 0;
      for (int i = 0; i <= forwarded.length; i++) {
        if (i == forwarded.length || forwarded[i] == ',') {
          byte[] hop = RequestHeaders.trimOws(java.util.Arrays.copyOfRange(forwarded, start, i));
          // Empty elements are skipped, as RFC 9110 reads a list.
          if (hop.length > 0) {
            hops.add(hop);
          }
          start = i + 1;
        }
      }
    }
    if (hops.isEmpty()) {
      byte[] real = headers.value("X-Real-IP");
      IpAddress ip = real == null ? null : IpAddress.parse(real);
      return ip == null ? peer : ip;
    }
    IpAddress client = peer;
    for (int i = hops.size() - 1; i >= 0; i--) {
      // Past an unreadable hop nothing can be believed: the nearest address read so far stands.
      IpAddress ip = IpAddress.parse(hops.get(i));
      if (ip == null) {
        break;
      }
      client = ip;
      if (!trusted(ip, trusted)) {
        break;
      }
    }
    return client;
  }

  private static boolean trusted(IpAddress ip, List<IpAddress.Network> trusted) {
    for (IpAddress.Network net : trusted) {
      if (net.contains(ip)) {
        return true;
      }
    }
    return false;
  }
}
