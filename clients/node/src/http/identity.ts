/**
 * Who sent a request (docs/http.md, Who): the client's IP address (proxy
 * headers believed only from trusted proxies), its API key (hashed, never
 * stored verbatim), its user, a header's value, or everyone.
 */
import { createHash } from "node:crypto";
import { ipBytes, type Cidr, type Config, type KeyKind } from "./config.js";

/** What the adapters read from a request, framework-free. */
export interface RequestFacts {
  /** The TCP peer's address as the socket reports it. */
  readonly peer: string | undefined;
  /** A header's value by lower-case name (several lines joined with ", "), or undefined. */
  header(name: string): string | undefined;
  /** The authenticated user, as the user resolver found it. */
  readonly user: string | undefined;
}

/** One subject: the part inside the key's braces (`ip:203.0.113.9`). */
export interface Subject {
  /** `ip`, `api-key`, `user`, `header:<name>` or `global`. */
  readonly kind: string;
  readonly value: string;
  /** The hash tag: `<kind>:<value>`, or `global`. */
  readonly tag: string;
  /** A loopback IP subject (exempt from ip policies with exempt_loopback). */
  readonly loopback: boolean;
}

/** The first 32 hex digits of the value's SHA-256: `printf %s "$KEY" | sha256sum | cut -c1-32`. */
export function apiKeyId(value: string): string {
  return createHash("sha256").update(value, "utf8").digest("hex").slice(0, 32);
}

function contains(net: Cidr, addr: Uint8Array): boolean {
  let bits = net.bits;
  for (let i = 0; i < 16 && bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if (((net.bytes[i] as number) & mask) !== ((addr[i] as number) & mask)) return false;
  }
  return true;
}

/** `203.0.113.7`, `2001:db8::1`, `203.0.113.7:4711`, `[2001:db8::1]:4711` -> bytes and canonical text. */
function parseHop(hop: string): { bytes: Uint8Array; text: string } | undefined {
  let s = hop.trim();
  const bracket = /^\[([^\]]+)\](?::[0-9]+)?$/.exec(s);
  if (bracket) s = bracket[1] as string;
  else if (/^[0-9.]+:[0-9]+$/.test(s)) s = s.slice(0, s.lastIndexOf(":"));
  const bytes = ipBytes(s);
  return bytes === undefined ? undefined : { bytes, text: canonicalIp(bytes) };
}

/** IPv4 (and IPv4-mapped IPv6) as dotted quads; IPv6 in RFC 5952 form. */
export function canonicalIp(bytes: Uint8Array): string {
  const mapped = bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff;
  if (mapped) return Array.from(bytes.slice(12)).join(".");
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i] as number) << 8) | (bytes[i + 1] as number));
  // The longest run of two or more zero groups becomes "::".
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) {
      best = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best < 0) return hex.join(":");
  return `${hex.slice(0, best).join(":")}::${hex.slice(best + bestLen).join(":")}`;
}

function isLoopback(bytes: Uint8Array): boolean {
  const mapped = bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff;
  if (mapped) return bytes[12] === 127;
  return bytes.slice(0, 15).every((b) => b === 0) && bytes[15] === 1;
}

/**
 * The client's address: the TCP peer, unless the peer is a trusted proxy;
 * then `X-Forwarded-For` is read from its nearest hop back and the first
 * address that is not a trusted proxy is the client (the hops left of it
 * were written by the client and prove nothing). Without X-Forwarded-For,
 * a trusted proxy's `X-Real-IP` is the client.
 */
export function clientIp(facts: RequestFacts, trusted: readonly Cidr[]): { text: string; loopback: boolean } | undefined {
  const peer = facts.peer === undefined ? undefined : parseHop(facts.peer);
  if (peer === undefined) return undefined;
  const result = (ip: { bytes: Uint8Array; text: string }) => ({ text: ip.text, loopback: isLoopback(ip.bytes) });
  const isTrusted = (ip: Uint8Array) => trusted.some((net) => contains(net, ip));
  if (!isTrusted(peer.bytes)) return result(peer);
  const xff = facts.header("x-forwarded-for");
  const hops = xff === undefined ? [] : xff.split(",").map((h) => h.trim()).filter((h) => h !== "");
  if (hops.length === 0) {
    const real = facts.header("x-real-ip");
    const parsed = real === undefined ? undefined : parseHop(real);
    return result(parsed ?? peer);
  }
  let client = peer;
  for (let i = hops.length - 1; i >= 0; i--) {
    // Past an unreadable hop nothing can be believed: the nearest address read so far stands.
    const ip = parseHop(hops[i] as string);
    if (ip === undefined) break;
    client = ip;
    if (!isTrusted(ip.bytes)) break;
  }
  return result(client);
}

/**
 * A user or header value as it appears in a key: verbatim when it is 1 to
 * 64 bytes of `A-Z a-z 0-9 . _ ~ @ + = : / -`, else `sha256-` and 32 hex
 * digits of its SHA-256 (a `}` must not break the hash tag).
 */
export function keyValue(value: string): string {
  return /^[A-Za-z0-9._~@+=:/-]{1,64}$/.test(value) ? value : `sha256-${apiKeyId(value)}`;
}

/** The subjects a request presents to each kind of key, computed once per request. */
export class Identity {
  #ip: Subject | undefined;
  #ipDone = false;

  constructor(
    private readonly facts: RequestFacts,
    private readonly config: Config,
  ) {}

  ip(): Subject {
    if (!this.#ipDone) {
      const ip = clientIp(this.facts, this.config.trustedProxies);
      this.#ip =
        ip === undefined
          ? { kind: "ip", value: "unknown", tag: "ip:unknown", loopback: false }
          : { kind: "ip", value: ip.text, tag: `ip:${ip.text}`, loopback: ip.loopback };
      this.#ipDone = true;
    }
    return this.#ip as Subject;
  }

  apiKey(): Subject | undefined {
    const value = this.facts.header(this.config.apiKeyHeader);
    if (value === undefined || value === "") return undefined;
    const id = apiKeyId(value);
    return { kind: "api-key", value: id, tag: `api-key:${id}`, loopback: false };
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
          const value = keyValue(user);
          return { kind: "user", value, tag: `user:${value}`, loopback: false };
        }
        return this.apiKey() ?? this.ip();
      }
      case "header": {
        const value = this.facts.header(key.header);
        if (value === undefined || value === "") return this.ip();
        const kind = `header:${key.header}`;
        return { kind, value: keyValue(value), tag: `${kind}:${keyValue(value)}`, loopback: false };
      }
      case "global":
        return { kind: "global", value: "", tag: "global", loopback: false };
    }
  }
}
