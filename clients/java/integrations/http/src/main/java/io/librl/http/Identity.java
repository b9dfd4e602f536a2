package io.librl.http;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * Who sent a request (docs/http.md, Identity): its address (proxy headers believed only from
 * trusted proxies), its API key, its user, a header's value; and the subject a policy counts,
 * whose text is the middle of the policy's keys.
 */
public final class Identity {
  private Identity() {}

  /**
   * What a request says of who sent it, read once per request; a policy's subject is taken from it
   * by {@link #subject}.
   */
  public static final class Client {
    /** Not yet read: a string no hash can be the same object as. */
    private static final String UNREAD = new String("unread");

    private final Config config;
    private final IpAddress ip;
    private final RequestHeaders headers;
    private final String user;
    private final byte[] query;
    private final RequestAttributes attributes;
    /**
     * The API key's hash, read when a policy first asks for it (most never do): {@link #UNREAD}
     * until then, null when there is none. One field, so a client read from two threads at worst
     * reads the header twice.
     */
    private String apiKey = UNREAD;

    private Client(
        Config config,
        IpAddress ip,
        RequestHeaders headers,
        String user,
        byte[] query,
        RequestAttributes attributes) {
      this.config = config;
      this.ip = ip;
      this.headers = headers;
      this.user = user;
      this.query = query;
      this.attributes = attributes;
    }

    /** The hashed {@code api_key_header} value, or null. */
    private String apiKey() {
      String k = apiKey;
      if (k == UNREAD) {
        byte[] key = headers.value(config.apiKeyHeader());
        k = key == null ? null : Keys.hashed(key);
        apiKey = k;
      }
      return k;
    }

    /**
     * {@code peer} is the TCP peer as the server reports it (a zone index allowed), {@code user}
     * what the framework authenticated (a string: its UTF-8 bytes make the key).
     */
    public static Client of(String peer, RequestHeaders headers, Config config, String user) {
      return of(peer, headers, null, config, user);
    }

    /** The same, with the raw query string's bytes (after the {@code ?}), or null. */
    public static Client of(
        String peer, RequestHeaders headers, byte[] query, Config config, String user) {
      return of(peer, headers, query, config, user, RequestAttributes.NONE);
    }

    /** The same, with the request's attributes (docs/http.md, Request attributes). */
    public static Client of(
        String peer,
        RequestHeaders headers,
        byte[] query,
        Config config,
        String user,
        RequestAttributes attributes) {
      IpAddress p = peer == null ? null : peerAddress(peer);
      return new Client(
          config,
          p == null ? null : clientIp(p, headers, config.trustedProxies()),
          headers,
          user == null || user.isEmpty() ? null : user,
          query,
          attributes == null ? RequestAttributes.NONE : attributes);
    }

    /** The last peer read and its address (a servlet container reports the same one request after request). */
    private record Peer(String text, IpAddress ip) {}

    /** One entry, replaced whole: a stale read only parses again. */
    private static volatile Peer lastPeer = new Peer("", null);

    /** {@link IpAddress#parse(String)} of the TCP peer, without parsing the same text twice in a row. */
    private static IpAddress peerAddress(String peer) {
      Peer last = lastPeer;
      if (last.text().equals(peer)) {
        return last.ip();
      }
      IpAddress ip = IpAddress.parse(peer);
      lastPeer = new Peer(peer, ip);
      return ip;
    }

    /** The client's full address (trusted proxies applied), or null without a peer. */
    public IpAddress ip() {
      return ip;
    }

    /**
     * Whether no policy limits this client (docs/http.md, Exemptions): its full address is in
     * {@code exempt}; a request without an address never is.
     */
    public boolean exempt() {
      if (ip == null) {
        return false;
      }
      for (IpAddress.Network net : config.exempt()) {
        if (net.contains(ip)) {
          return true;
        }
      }
      return false;
    }

    /**
     * The subject of a policy, falling back as the contract says: the built-in {@code user} is
     * the user, then the API key, then the address; a named identity its first source with a
     * value, then the address.
     */
    public Subject subject(Policy.Key key, RequestHeaders headers) {
      switch (key.kind()) {
        case IP:
          return ipSubject();
        case API_KEY:
          return apiKey() != null ? new Subject(Subject.Kind.API_KEY, apiKey()) : ipSubject();
        case USER:
          if (user != null) {
            return new Subject(Subject.Kind.USER, Keys.keySafe(user.getBytes(StandardCharsets.UTF_8)));
          }
          return apiKey() != null ? new Subject(Subject.Kind.API_KEY, apiKey()) : ipSubject();
        case IDENTITY:
          {
            Config.NamedIdentity named = config.identities().get(key.identity());
            for (Source source : named.sources()) {
              byte[] v = source.read(headers, query, user, attributes);
              if (v != null) {
                return named(named, v);
              }
            }
            return ipSubject();
          }
        case SOURCE:
          {
            byte[] v = key.source().read(headers, query, user, attributes);
            return v == null ? ipSubject() : inline(key.source(), v);
          }
        case GLOBAL:
        default:
          return new Subject(Subject.Kind.GLOBAL, null);
      }
    }

    private Subject ipSubject() {
      return ip == null
          ? new Subject(Subject.Kind.UNKNOWN, null)
          : new Subject(Subject.Kind.IP, ip.subjectText(config.ipv6Prefix()));
    }
  }

  /** A named identity's subject for a value: {@code <identity>:<value>}, hashed as it says. */
  static Subject named(Config.NamedIdentity identity, byte[] value) {
    return new Subject(
        Subject.Kind.NAMED,
        identity.name() + ":" + (identity.hashed() ? Keys.hashed(value) : Keys.keySafe(value)));
  }

  /** An inline source's subject: its kind and name, then the value ({@code authorization:} hashed). */
  static Subject inline(Source source, byte[] value) {
    String text =
        source.kind() == Source.Kind.AUTHORIZATION ? Keys.hashed(value) : Keys.keySafe(value);
    return new Subject(Subject.Kind.NAMED, source.inlinePrefix() + text);
  }

  /**
   * The subject a policy's key gives a raw value named from code (docs/http.md, Keys from code):
   * an address (its IPv6 network), an API key, a user name, a header's, cookie's or query
   * parameter's value, a named identity's value; ignored for {@code global}. Null when the value
   * cannot be that subject (an {@code ip} value that is no address, a missing value).
   */
  static Subject ofValue(Config config, Policy.Key key, byte[] value) {
    if (key.kind() == Policy.KeyKind.GLOBAL) {
      return new Subject(Subject.Kind.GLOBAL, null);
    }
    if (value == null) {
      return null;
    }
    switch (key.kind()) {
      case IP:
        {
          IpAddress ip = IpAddress.parse(value);
          return ip == null ? null : new Subject(Subject.Kind.IP, ip.subjectText(config.ipv6Prefix()));
        }
      case API_KEY:
        return new Subject(Subject.Kind.API_KEY, Keys.hashed(value));
      case USER:
        return new Subject(Subject.Kind.USER, Keys.keySafe(value));
      case IDENTITY:
        return named(config.identities().get(key.identity()), value);
      case SOURCE:
      default:
        return inline(key.source(), value);
    }
  }

  /**
   * Whose counter a policy uses; its {@code toString} is the key's middle part ({@code
   * ip:203.0.113.7}, {@code api-key:2bb8...}, {@code user:alice}, {@code header:x-tenant:acme},
   * {@code client:acme}, {@code global}, {@code key:alice}, {@code ip:unknown}).
   */
  public record Subject(Kind kind, String value) {
    public enum Kind {
      IP,
      API_KEY,
      USER,
      /** A named identity or an inline source: the value is the whole text ({@code client:acme}). */
      NAMED,
      GLOBAL,
      /** A key a framework resolved itself: Spring Cloud Gateway's {@code KeyResolver}. */
      KEY,
      /** No peer address: every such request shares one counter. */
      UNKNOWN
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
        case NAMED:
          return value;
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
