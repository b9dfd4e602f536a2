/**
 * Identity (docs/http.md, Identity): who sent a request. The client's
 * address (proxy headers believed only from trusted proxies), its API key
 * (hashed, never stored verbatim), its user, a header's value, or
 * everyone. Addresses are read with `node:net`; a zone index is dropped.
 */
import { BlockList, SocketAddress, isIP } from "node:net";
import type { Config, KeyKind, Source, TrustedNetwork } from "./configuration.js";
import { apiKeyId, headerKeyValue, userKeyValue } from "./keys.js";
import { Recent } from "./recent.js";
import { authorizationValue, cookieValue, queryValue } from "./sources.js";

/** What the adapters read from a request, framework-free. */
export interface RequestFacts {
  /** The TCP peer's address as the socket reports it. */
  readonly peer: string | undefined;
  /**
   * A header's value by lower-case name, every line joined with ", ", as
   * the Latin-1 string of its bytes (what Node gives), or undefined.
   */
  header(name: string): string | undefined;
  /** The authenticated user, as the user resolver found it. */
  readonly user: string | undefined;
  /** The raw query string (after the `?`, up to any `#`), for `query:` sources; absent: none. */
  readonly query?: string | undefined;
  /** The Cookie header, its lines joined with "; ", for `cookie:` sources; absent: `header("cookie")`. */
  readonly cookie?: string | undefined;
  /** A request attribute the application's code set (Express `req[name]`, Fastify `request[name]`), for `attribute:` sources. */
  attribute?(name: string): unknown;
}

/** One subject: the part inside the key's braces (`ip:203.0.113.9`). */
export interface Subject {
  /** `ip`, `api-key`, `user`, `global`, an identity's name, or an inline source's kind and name (`cookie:anon_id`). */
  readonly kind: string;
  readonly value: string;
  /** The hash tag: `<kind>:<value>`, or `global`. */
  readonly tag: string;
}

/** Trims spaces and tabs (HTTP's OWS), and nothing else, at both ends. */
export function trimOws(text: string): string {
  const ows = (c: number) => c === 0x20 || c === 0x09;
  let start = 0;
  let end = text.length;
  while (start < end && ows(text.charCodeAt(start))) start++;
  while (end > start && ows(text.charCodeAt(end - 1))) end--;
  return start === 0 && end === text.length ? text : text.slice(start, end);
}

/** A header's value trimmed of OWS; undefined when it is absent or empty (docs/http.md, Identity: header values are bytes). */
export function headerValue(facts: RequestFacts, name: string): string | undefined {
  const raw = facts.header(name);
  if (raw === undefined) return undefined;
  const value = trimOws(raw);
  return value === "" ? undefined : value;
}

/** An address in canonical text and its family. */
export interface Address {
  readonly text: string;
  readonly family: "ipv4" | "ipv6";
}

const MAPPED = /^::ffff:([0-9]+\.[0-9]+\.[0-9]+\.[0-9]+)$/i;
/** libuv writes `::a.b.c.d` (IPv4-compatible, deprecated) where RFC 5952 has hex groups. */
const COMPATIBLE = /^::([0-9]+)\.([0-9]+)\.([0-9]+)\.([0-9]+)$/;

/**
 * An address's canonical text: IPv4 (and IPv4-mapped IPv6) as a dotted
 * quad, IPv6 in RFC 5952 form without its zone index; undefined when the
 * text is not an address.
 */
export function canonicalAddress(text: string): Address | undefined {
  const family = isIP(text);
  // node:net's own IPv4 grammar has no leading zeros: the text is canonical.
  if (family === 4) return { text, family: "ipv4" };
  if (family !== 6) return undefined;
  const zone = text.indexOf("%");
  const address = zone < 0 ? text : text.slice(0, zone);
  // An IPv4 client of a dual-stack socket (a server listening on `::`,
  // Node's default) is reported as `::ffff:a.b.c.d`: read it as it is,
  // without a SocketAddress (microseconds on every request). isIP has
  // checked the dotted part, which has no leading zeros.
  const reported = MAPPED.exec(address);
  if (reported !== null) return { text: reported[1] as string, family: "ipv4" };
  const written = new SocketAddress({ address, family: "ipv6" }).address;
  const mapped = MAPPED.exec(written);
  if (mapped !== null) return { text: mapped[1] as string, family: "ipv4" };
  const compatible = COMPATIBLE.exec(written);
  if (compatible === null) return { text: written, family: "ipv6" };
  const [a, b, c, d] = compatible.slice(1).map(Number) as [number, number, number, number];
  return { text: `::${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`, family: "ipv6" };
}

/**
 * One hop of X-Forwarded-For (or X-Real-IP, or the peer): an address,
 * without a port (`203.0.113.7:4711`) or brackets (`[2001:db8::1]:4711`).
 */
export function parseHop(hop: string): Address | undefined {
  const s = trimOws(hop);
  if (s.startsWith("[")) {
    const bracket = /^\[([^\]]*)\](?::[0-9]+)?$/.exec(s);
    return bracket === null ? undefined : canonicalAddress(bracket[1] as string);
  }
  const v4port = /^([0-9.]+):[0-9]+$/.exec(s);
  return canonicalAddress(v4port === null ? s : (v4port[1] as string));
}

/** An IPv6 address's eight 16-bit groups, from its text (hex groups, `::`, a dotted IPv4 tail). */
function ipv6Groups(text: string): number[] {
  const dotted = /^(.*:)([0-9]+)\.([0-9]+)\.([0-9]+)\.([0-9]+)$/.exec(text);
  let hex = text;
  if (dotted !== null) {
    const [a, b, c, d] = dotted.slice(2).map(Number) as [number, number, number, number];
    hex = `${dotted[1] as string}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const parse = (part: string) => (part === "" ? [] : part.split(":").map((g) => parseInt(g, 16)));
  const gap = hex.indexOf("::");
  if (gap < 0) return parse(hex);
  const head = parse(hex.slice(0, gap));
  const tail = parse(hex.slice(gap + 2));
  return [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
}

/**
 * An IPv6 client's subject (docs/http.md, IPv6 networks): its network of
 * `prefix` bits in canonical text and its length (`2001:db8:1::/56`); at
 * 128, the address itself.
 */
export function ipv6Network(text: string, prefix: number): string {
  if (prefix >= 128) return text;
  const groups = ipv6Groups(text).map((g, i) => {
    const bits = Math.min(16, Math.max(0, prefix - i * 16));
    return bits === 16 ? g : g & ((0xffff << (16 - bits)) & 0xffff);
  });
  return `${rfc5952(groups)}/${prefix}`;
}

/** Eight groups in RFC 5952 text: lower-case hex, the longest run of two or more zero groups (the first) as `::`. */
function rfc5952(groups: readonly number[]): string {
  let best = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLength) {
      best = i;
      bestLength = j - i;
    }
    i = j;
  }
  const hex = (from: number, to: number) => groups.slice(from, to).map((g) => g.toString(16)).join(":");
  return best < 0 ? hex(0, 8) : `${hex(0, best)}::${hex(best + bestLength, 8)}`;
}

/** The exempt networks (docs/http.md, Exemptions), ready for requests: matched on the client's full address. */
export class Exemptions {
  readonly #list = new BlockList();
  readonly empty: boolean;

  constructor(networks: readonly TrustedNetwork[]) {
    for (const n of networks) this.#list.addSubnet(n.address, n.prefix, n.family);
    this.empty = networks.length === 0;
  }

  /** Whether the request's client is exempt; a request without a client address never is. */
  has(identity: Identity): boolean {
    if (this.empty) return false;
    const a = identity.address();
    return a !== null && this.#list.check(a.text, a.family);
  }
}

/**
 * How many TCP peers' addresses (and ip subjects) are kept read, in Recent
 * tables: a server sees few peers, over and over (keep-alive, proxies).
 * Few, for the reason SUBJECTS_KEPT is: many clients' entries must die
 * young, not be promoted.
 */
const PEERS_KEPT = 64;

/** The trusted proxies, ready for requests. */
export class TrustedProxies {
  readonly #list = new BlockList();
  readonly #empty: boolean;
  /** TCP peers as the socket reports them, read (null: not an address): parsing one costs microseconds. */
  readonly #peers = new Recent<Address | null>(PEERS_KEPT);

  /** A TCP peer's address, read once per distinct text. */
  peer(text: string): Address | undefined {
    let found = this.#peers.get(text);
    if (found === undefined) {
      found = parseHop(text) ?? null;
      this.#peers.offer(text, found);
    }
    return found ?? undefined;
  }

  constructor(networks: readonly TrustedNetwork[]) {
    for (const n of networks) this.#list.addSubnet(n.address, n.prefix, n.family);
    this.#empty = networks.length === 0;
  }

  has(a: Address): boolean {
    return !this.#empty && this.#list.check(a.text, a.family);
  }

  /** Clients' ip subjects by address, made once per distinct address (the configuration's IPv6 prefix is fixed with it). */
  readonly #ipSubjects = new Recent<Subject>(PEERS_KEPT);

  /** The ip subject of a client's address: an IPv6 one counted by its network of `ipv6Prefix` bits. */
  ipSubject(a: Address, ipv6Prefix: number): Subject {
    let found = this.#ipSubjects.get(a.text);
    if (found === undefined) {
      const value = a.family === "ipv6" ? ipv6Network(a.text, ipv6Prefix) : a.text;
      found = { kind: "ip", value, tag: `ip:${value}` };
      this.#ipSubjects.offer(a.text, found);
    }
    return found;
  }
}

/**
 * The client's address: the TCP peer, unless the peer is a trusted proxy;
 * then `X-Forwarded-For` (every line, one list) is read from its nearest
 * hop back and the first address that is not a trusted proxy is the
 * client (the hops left of it were written by the client and prove
 * nothing). Without X-Forwarded-For, a trusted proxy's `X-Real-IP` is the
 * client. Undefined when the peer is unknown.
 */
export function clientAddress(facts: RequestFacts, trusted: TrustedProxies): Address | undefined {
  const peer = facts.peer === undefined ? undefined : trusted.peer(facts.peer);
  if (peer === undefined) return undefined;
  let client = peer;
  if (trusted.has(peer)) {
    const xff = facts.header("x-forwarded-for");
    // Empty list elements are skipped, as RFC 9110 reads a list.
    const hops = xff === undefined ? [] : xff.split(",").filter((h) => trimOws(h) !== "");
    if (hops.length === 0) {
      const real = headerValue(facts, "x-real-ip");
      client = (real === undefined ? undefined : parseHop(real)) ?? peer;
    }
    for (let i = hops.length - 1; i >= 0; i--) {
      // Past an unreadable hop nothing can be believed: the nearest address read so far stands.
      const hop = parseHop(hops[i] as string);
      if (hop === undefined) break;
      client = hop;
      if (!trusted.has(hop)) break;
    }
  }
  return client;
}

const GLOBAL: Subject = { kind: "global", value: "", tag: "global" };
const UNKNOWN_IP: Subject = { kind: "ip", value: "unknown", tag: "ip:unknown" };

/** The subjects a request presents to each kind of key, each computed at most once per request. */
export class Identity {
  #address: Address | null | undefined;
  #ip: Subject | undefined;
  #apiKey: Subject | null | undefined;

  constructor(
    private readonly facts: RequestFacts,
    private readonly config: Config,
    private readonly trusted: TrustedProxies,
  ) {}

  /** The client's full address (the peer, or the client the trusted proxies name), or null when unknown. */
  address(): Address | null {
    if (this.#address === undefined) this.#address = clientAddress(this.facts, this.trusted) ?? null;
    return this.#address;
  }

  ip(): Subject {
    if (this.#ip === undefined) {
      const a = this.address();
      this.#ip = a === null ? UNKNOWN_IP : this.trusted.ipSubject(a, this.config.ipv6Prefix);
    }
    return this.#ip;
  }

  /** The API key's subject, or null without a key (absent or empty header). */
  apiKey(): Subject | null {
    if (this.#apiKey === undefined) {
      const value = headerValue(this.facts, this.config.apiKeyHeader);
      if (value === undefined) this.#apiKey = null;
      else {
        const id = apiKeyId(value);
        this.#apiKey = { kind: "api-key", value: id, tag: `api-key:${id}` };
      }
    }
    return this.#apiKey;
  }

  subject(key: KeyKind): Subject {
    switch (key.kind) {
      case "ip":
        return this.ip();
      case "api-key":
        return this.apiKey() ?? this.ip();
      case "user": {
        const user = this.facts.user;
        if (user !== undefined && user !== "") {
          const value = userKeyValue(user);
          return { kind: "user", value, tag: `user:${value}` };
        }
        return this.apiKey() ?? this.ip();
      }
      case "source": {
        const raw = this.read(key.source);
        return raw === undefined ? this.ip() : named(key.tagKind, raw, key.hashed);
      }
      case "identity": {
        // The first source with a value; `ip` (last, if given) and none: the ip subject.
        for (const source of key.sources) {
          const raw = this.read(source);
          if (raw !== undefined) return named(key.name, raw, key.hashed);
        }
        return this.ip();
      }
      case "global":
        return GLOBAL;
    }
  }

  /** A source's value as bytes (Latin-1 text), undefined when absent or empty; `ip` has none here (it is the fallback). */
  read(source: Source): string | undefined {
    const facts = this.facts;
    switch (source.kind) {
      case "header":
        return headerValue(facts, source.name);
      case "cookie":
        return cookieValue("cookie" in facts ? facts.cookie : facts.header("cookie"), source.name);
      case "query":
        return queryValue(facts.query, source.name);
      case "authorization":
        return authorizationValue(facts.header("authorization"), source.scheme);
      case "attribute":
        return attributeValue(facts.attribute?.(source.name));
      case "user":
        return facts.user === undefined || facts.user === "" ? undefined : Buffer.from(facts.user, "utf8").toString("latin1");
      case "ip":
        return undefined;
    }
  }
}

/**
 * A request attribute's value as bytes in Latin-1 text (docs/http.md,
 * Request attributes): a string is its UTF-8 bytes, trimmed of spaces and
 * tabs; an integer (a number or a bigint) its decimal text; empty, absent,
 * null or any other type is no value.
 */
export function attributeValue(value: unknown): string | undefined {
  if (typeof value === "string") {
    const trimmed = trimOws(value);
    return trimmed === "" ? undefined : Buffer.from(trimmed, "utf8").toString("latin1");
  }
  if (typeof value === "bigint") return value.toString();
  // BigInt: the decimal digits of a large one too (String(1e21) is "1e+21").
  if (typeof value === "number" && Number.isInteger(value)) return BigInt(value).toString();
  return undefined;
}

/** `<kind>:<value>`, the value (bytes as Latin-1 text) verbatim when key-safe, else hashed; always hashed when `hashed`. */
function named(kind: string, raw: string, hashed: boolean): Subject {
  const value = hashed ? apiKeyId(raw) : headerKeyValue(raw);
  return { kind, value, tag: `${kind}:${value}` };
}

/** A subject named from code (keys and override keys for a customer's plan): each value raw, as a request would present it. */
export interface SubjectValues {
  /** The client's address (an IPv6 one is counted by its network). */
  readonly ip?: string;
  /** The API key itself (hashed as the middleware hashes it). */
  readonly apiKey?: string;
  readonly user?: string;
  /**
   * The value of a `header:<Name>` policy's header, or of any identity or
   * inline source (`cookie:`, `query:`, `authorization:`'s credentials):
   * a string is its UTF-8 bytes.
   */
  readonly header?: string | Uint8Array;
}

/**
 * The subject the middleware would use for `key` given these values: the
 * same readers and hashing as a request's (docs/http.md, Keys and
 * Identity), the kinds a key falls back to included. Throws when the
 * values do not name a subject of that key.
 */
export function subjectOf(key: KeyKind, values: SubjectValues, ipv6Prefix: number): Subject {
  const ip = (): Subject => {
    const a = values.ip === undefined ? undefined : canonicalAddress(values.ip);
    if (a === undefined) throw new TypeError(`librl: give the subject's ip (an address)${values.ip === undefined ? "" : `, not ${JSON.stringify(values.ip)}`}`);
    const value = a.family === "ipv6" ? ipv6Network(a.text, ipv6Prefix) : a.text;
    return { kind: "ip", value, tag: `ip:${value}` };
  };
  const apiKey = (): Subject | undefined => {
    if (values.apiKey === undefined || values.apiKey === "") return undefined;
    const id = apiKeyId(values.apiKey);
    return { kind: "api-key", value: id, tag: `api-key:${id}` };
  };
  switch (key.kind) {
    case "global":
      return { kind: "global", value: "", tag: "global" };
    case "ip":
      return ip();
    case "api-key":
      return apiKey() ?? ip();
    case "user": {
      if (values.user !== undefined && values.user !== "") {
        const value = userKeyValue(values.user);
        return { kind: "user", value, tag: `user:${value}` };
      }
      return apiKey() ?? ip();
    }
    case "source":
    case "identity": {
      const raw = values.header === undefined ? "" : bytesText(values.header);
      if (raw === "") return ip();
      return named(key.kind === "source" ? key.tagKind : key.name, raw, key.hashed);
    }
  }
}

/** A value given from code as bytes in Latin-1 text: a string is its UTF-8 bytes. */
function bytesText(value: string | Uint8Array): string {
  return Buffer.from(typeof value === "string" ? Buffer.from(value, "utf8") : value).toString("latin1");
}

/**
 * The subject of a policy's key for one raw value, the way
 * `override_key("search", "alice")` names it (docs/http.md, Keys from
 * code): an address for `ip`, the API key for `api-key`, the user's name
 * for `user`, the value of an identity or inline source; null for
 * `global`. A string is its UTF-8 bytes.
 */
export function subjectOfValue(key: KeyKind, value: string | Uint8Array | null, ipv6Prefix: number): Subject {
  switch (key.kind) {
    case "global":
      return subjectOf(key, {}, ipv6Prefix);
    case "ip":
      return subjectOf(key, value === null ? {} : { ip: typeof value === "string" ? value : Buffer.from(value).toString("latin1") }, ipv6Prefix);
    case "api-key":
    case "user":
    case "source":
    case "identity": {
      if (value === null || value.length === 0) throw new TypeError(`librl: give the subject's value (a ${key.kind} policy's key)`);
      const raw = bytesText(value);
      if (key.kind === "api-key") return named("api-key", raw, true);
      if (key.kind === "user") return named("user", raw, false);
      return named(key.kind === "source" ? key.tagKind : key.name, raw, key.hashed);
    }
  }
}
