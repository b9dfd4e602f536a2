/**
 * Configuration (docs/http.md, One configuration and Start-up
 * validation): the document read from an object, a JSON file or a YAML
 * file, and checked whole at start-up: every field by the walker
 * (walker.ts, with the schema), then here the rules that span fields,
 * which the schema's description lists. Every mistake is a ConfigError
 * whose message is `librl: configuration: <path>: <problem>`, the path
 * naming the field (`policies[0].burst`, `routes[1].policies[0]`).
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { isIP } from "node:net";
import path from "node:path";
import { MAX_WINDOW_MS, durationMs } from "./durations.js";
import { substitute } from "./substitute.js";
import { WalkError, walkDocument, walkField, type RateValue, type Walked } from "./walker.js";

/** A configuration that cannot work; `field` is the path of the field at fault, `problem` what is wrong with it. */
export class ConfigError extends Error {
  override readonly name = "ConfigError";
  constructor(
    readonly field: string,
    readonly problem: string,
  ) {
    super(`librl: configuration: ${field}: ${problem}`);
  }
}

export type AlgorithmName = "fixed" | "sliding" | "approx" | "token" | "concurrency";

/** Where an identity's value is read (docs/http.md, Named identities); header names and schemes in lower case. */
export type Source =
  | { readonly kind: "header"; readonly name: string }
  | { readonly kind: "cookie"; readonly name: string }
  | { readonly kind: "query"; readonly name: string }
  | { readonly kind: "authorization"; readonly scheme: string }
  /** A request attribute (docs/http.md, Request attributes), its name case-sensitive. */
  | { readonly kind: "attribute"; readonly name: string }
  | { readonly kind: "user" }
  | { readonly kind: "ip" };

/**
 * Whose counter a policy uses: `ip`, the built-in `api-key` and `user`,
 * `global`, a named identity (`identities`, the built-ins redefined
 * included), or one source inline (`cookie:anon_id`). `hashed`: the value
 * is always its SHA-256 prefix (api-key, and an identity with an
 * authorization: source).
 */
export type KeyKind =
  | { readonly kind: "ip" }
  | { readonly kind: "api-key" }
  | { readonly kind: "user" }
  | { readonly kind: "global" }
  | { readonly kind: "identity"; readonly name: string; readonly sources: readonly Source[]; readonly hashed: boolean }
  | { readonly kind: "source"; readonly source: Source; readonly tagKind: string; readonly hashed: boolean };

/** What one request costs against a policy; `header` is the name in lower case, `name` as configured; `code`: a cost resolver's name. */
export type CostSpec =
  | { kind: "units"; units: number }
  | { kind: "body-bytes" }
  | { kind: "header"; header: string; name: string }
  | { kind: "code"; name: string };

export type CountMode = "all" | "failed" | "succeeded";

/** One named limit, checked. */
export interface Policy {
  readonly name: string;
  readonly algorithm: AlgorithmName;
  /** The limit (token: the rate per window); 0 for a `limit: code:<name>` policy until its resolver gives one. */
  readonly limit: number;
  /** `limit: code:<name>`: the limit resolver giving each request's limit and window (docs/http.md, Resolvers). */
  readonly limitResolver: string | undefined;
  /** The window; for a concurrency policy, its lease (the longest a request holds its slots). */
  readonly windowMs: number;
  readonly aligned: boolean;
  readonly burst: number | undefined;
  readonly key: KeyKind;
  readonly cost: CostSpec;
  readonly count: CountMode;
  readonly overridable: boolean;
  /** A shadow policy is checked and counted but never refuses (docs/http.md, Shadow mode); the top-level shadow makes every policy one. */
  readonly shadow: boolean;
  /** `block`: once this policy denies a subject, it is locked out this long (docs/http.md, Lockouts and queues). */
  readonly blockMs: number | undefined;
  /** `queue` (token): a request over the rate waits for its turn up to this long. */
  readonly queueMs: number | undefined;
}

export interface Route {
  readonly path: string;
  /** Upper-case methods; undefined: every method. */
  readonly methods: readonly string[] | undefined;
  readonly policies: readonly Policy[];
  /** This route's refusal: `deny` with the fields the route's `deny` gives replaced; undefined: `deny`'s. */
  readonly deny: Deny | undefined;
}

/** A refusal's shape (docs/http.md, Refusals): `deny`, a route's `deny` merged over it, or `fail_deny`. */
export interface Deny {
  readonly status: number;
  readonly body: "problem" | "text" | "json";
  /** The `text` body. */
  readonly message: string;
  /** The `text` body's Content-Type. */
  readonly contentType: string;
  /** The `json` body, serialized once at start-up. */
  readonly json: string | undefined;
  /** The extra headers sent on this refusal; undefined: none. */
  readonly headers: Readonly<Record<string, string>> | undefined;
}

export type HeadersMode = "both" | "ietf" | "legacy" | "draft6" | "none";

/** The whole configuration, checked, with every default filled in. */
export interface Config {
  readonly prefix: string;
  /** `enforce` or `shadow`; with a mode resolver, `enforce` (each policy's own mode) until it says otherwise. */
  readonly mode: "enforce" | "shadow";
  /** `mode: code:<name>`: the mode resolver giving each request's mode. */
  readonly modeResolver: string | undefined;
  readonly fail: "open" | "closed" | "local";
  /** The most limiter keys the `local` fail mode holds. */
  readonly localMaxKeys: number;
  readonly timeoutMs: number;
  readonly headers: HeadersMode;
  /** What X-RateLimit-Reset holds: seconds from now, or the Unix time of the reset. */
  readonly legacyReset: "seconds" | "unix";
  readonly trustedProxies: readonly TrustedNetwork[];
  /** The clients no policy limits: `exempt`, with 127.0.0.0/8 and ::1/128 when `exempt_loopback` (docs/http.md, Exemptions). */
  readonly exempt: readonly TrustedNetwork[];
  readonly exemptLoopback: boolean;
  /** An IPv6 client's `ip` subject is its network of this many bits (docs/http.md, IPv6 networks). */
  readonly ipv6Prefix: number;
  /** Lower-case header name. */
  readonly apiKeyHeader: string;
  readonly deny: Deny;
  /** The refusal of `fail: closed`. */
  readonly failDeny: Deny;
  /** The most bytes read to measure a body without Content-Length (`body-bytes` costs); more is 413. */
  readonly maxBodyBytes: number;
  readonly policies: ReadonlyMap<string, Policy>;
  /** In the file's order; undefined: every policy applies to every request. */
  readonly routes: readonly Route[] | undefined;
}

/** A trusted proxy: an address with its prefix length (32 or 128 for one address). */
export interface TrustedNetwork {
  readonly address: string;
  readonly prefix: number;
  readonly family: "ipv4" | "ipv6";
  /** As written in the configuration. */
  readonly text: string;
}

type Obj = Record<string, unknown>;

function isObject(value: unknown): value is Obj {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * A duration in ms: a JSON integer of seconds, or the module's grammar
 * (`250ms`, `1s`, `15m`, `24h`, `7d`, `60`), from 1 ms to `maxMs`.
 */
export function parseDuration(field: string, value: unknown, maxMs = MAX_WINDOW_MS): number {
  const ms = durationMs(value);
  if (ms !== undefined && ms >= 1 && ms <= maxMs) return ms;
  throw new ConfigError(field, `must be a duration from 1 ms to ${maxMs} ms (an integer and ms, s, m, h or d; seconds without a unit)`);
}

/** `100/minute`, `5 per 2 minutes`, `10/90s` (docs/http.md, Rates), as [limit, window ms]. */
export function parseRate(field: string, value: unknown): [number, number] {
  const rate = walkOne(field, value, "policy", "rate") as RateValue;
  return [rate.count, rate.windowMs];
}

/** One field's value as the walker reads it, a ConfigError naming `path` when it is wrong. */
function walkOne(path: string, value: unknown, object: string, name: string): unknown {
  try {
    return walkField(path, value, object, name);
  } catch (err) {
    throw err instanceof WalkError ? new ConfigError(err.path, err.problem) : err;
  }
}

/** `10.0.0.0/8`, `127.0.0.1`, `::1/128`, `2001:db8::/32`, read by node:net; no zone index. */
export function parseNetwork(field: string, value: unknown): TrustedNetwork {
  const m = typeof value === "string" ? /^([^/%]*)(?:\/([0-9]{1,3}))?$/.exec(value) : null;
  const address = m?.[1] ?? "";
  const version = isIP(address);
  const max = version === 4 ? 32 : 128;
  const prefix = m?.[2] === undefined ? max : Number(m[2]);
  if (m === null || version === 0 || prefix > max) throw new ConfigError(field, "must be an IP address or a CIDR network");
  return { address, prefix, family: version === 4 ? "ipv4" : "ipv6", text: value as string };
}

/** `header:<Name>` -> the name (the walker has checked the pattern). */
function headerName(value: string): string {
  return value.slice("header:".length);
}

/** One source as the walker has checked it: `user`, `ip`, or `<kind>:<Name>`. */
function sourceOf(text: string): Source {
  if (text === "user" || text === "ip") return { kind: text };
  const colon = text.indexOf(":");
  const name = text.slice(colon + 1);
  switch (text.slice(0, colon)) {
    case "header":
      return { kind: "header", name: name.toLowerCase() };
    case "cookie":
      return { kind: "cookie", name };
    case "query":
      return { kind: "query", name };
    case "attribute":
      return { kind: "attribute", name };
    default:
      return { kind: "authorization", scheme: name.toLowerCase() };
  }
}

/**
 * The named identities (identity-names-not-reserved, ip-source-last):
 * each name to its key; `api-key` is always hashed, and so is any
 * identity with an authorization: source.
 */
function identitiesOf(given: unknown): Map<string, KeyKind> {
  const out = new Map<string, KeyKind>();
  for (const [name, list] of Object.entries((given ?? {}) as Record<string, string[]>)) {
    if (name === "ip" || name === "global") throw new ConfigError(`identities.${name}`, "ip and global are reserved");
    const ip = list.indexOf("ip");
    if (ip >= 0 && ip < list.length - 1) throw new ConfigError(`identities.${name}[${ip + 1}]`, "a source after ip is never read");
    const sources = list.map(sourceOf);
    out.set(name, { kind: "identity", name, sources, hashed: name === "api-key" || sources.some((s) => s.kind === "authorization") });
  }
  return out;
}

/**
 * A policy's key (keys-name-identities): `ip`, `global`, an identity's
 * name (the built-in `api-key` and `user` unless redefined), or one
 * source inline, which keeps its kind and name in the subject.
 */
function keyKind(field: string, key: string, identities: ReadonlyMap<string, KeyKind>): KeyKind {
  if (key === "ip" || key === "global") return { kind: key };
  if (key.includes(":")) {
    const source = sourceOf(key);
    const name = source.kind === "authorization" ? source.scheme : (source as { name: string }).name;
    return { kind: "source", source, tagKind: `${source.kind}:${name}`, hashed: source.kind === "authorization" };
  }
  const named = identities.get(key);
  if (named !== undefined) return named;
  if (key === "api-key" || key === "user") return { kind: key };
  throw new ConfigError(field, `no identity is named "${key}"`);
}

function costSpec(cost: number | string): CostSpec {
  if (typeof cost === "number") return { kind: "units", units: cost };
  if (cost === "body-bytes") return { kind: "body-bytes" };
  if (cost.startsWith("code:")) return { kind: "code", name: cost.slice("code:".length) };
  return { kind: "header", header: headerName(cost).toLowerCase(), name: headerName(cost) };
}

/** The names of the resolvers the application registered, per field (docs/http.md, Resolvers). */
export interface ResolverNames {
  readonly cost?: Readonly<Record<string, unknown>> | undefined;
  readonly limit?: Readonly<Record<string, unknown>> | undefined;
  readonly mode?: Readonly<Record<string, unknown>> | undefined;
}

/** `code:<name>` -> the name, checked registered (resolvers-registered); undefined for any other value. */
function resolverName(field: string, value: unknown, kind: keyof ResolverNames, registered: ResolverNames): string | undefined {
  if (typeof value !== "string" || !value.startsWith("code:")) return undefined;
  const name = value.slice("code:".length);
  const table = registered[kind];
  if (table === undefined || !Object.prototype.hasOwnProperty.call(table, name) || typeof table[name] !== "function") {
    throw new ConfigError(field, `no ${kind} resolver is registered as "${name}"`);
  }
  return name;
}

/** Every `code:<name>` of a configuration read without these resolvers (a Config built elsewhere), checked against them. */
export function checkResolvers(config: Config, registered: ResolverNames): void {
  if (config.modeResolver !== undefined) resolverName("mode", `code:${config.modeResolver}`, "mode", registered);
  [...config.policies.values()].forEach((p, i) => {
    if (p.limitResolver !== undefined) resolverName(`policies[${i}].limit`, `code:${p.limitResolver}`, "limit", registered);
    if (p.cost.kind === "code") resolverName(`policies[${i}].cost`, `code:${p.cost.name}`, "cost", registered);
  });
}

/**
 * A walked policy, with the rules that span its fields, in the order
 * conformance/README.md lists them (rate-or-limit-and-window,
 * code-limit-alone, aligned-only-on-fixed, burst-only-on-token,
 * queue-only-on-token, concurrency-has-lease, resolvers-registered).
 */
function policyOf(where: string, p: Walked, topMode: Config["mode"], identities: ReadonlyMap<string, KeyKind>, registered: ResolverNames): Policy {
  const algorithm = p["algorithm"] as AlgorithmName;
  const concurrency = algorithm === "concurrency";
  const rate = p["rate"] as RateValue | undefined;
  const codeLimit = typeof p["limit"] === "string" ? (p["limit"] as string) : undefined;
  if (codeLimit !== undefined) {
    // code-limit-alone: the resolver gives the limit, window and burst.
    for (const field of ["window", "rate", "burst"]) {
      if (p[field] !== undefined) throw new ConfigError(`${where}.${field}`, `a policy whose limit is ${codeLimit} has no ${field}`);
    }
    if (p["overridable"] === true) throw new ConfigError(`${where}.overridable`, `a policy whose limit is ${codeLimit} has no overridable`);
  }
  const limit = codeLimit === undefined ? (p["limit"] as number | undefined) : 0;
  const windowMs = codeLimit === undefined ? (p["window"] as number | undefined) : 0;
  const leaseMs = p["lease"] as number | undefined;
  if (!concurrency) {
    if (rate !== undefined && (limit !== undefined || windowMs !== undefined)) {
      throw new ConfigError(`${where}.rate`, "give rate, or limit and window, not both");
    }
    if (rate === undefined && limit === undefined) throw new ConfigError(`${where}.limit`, "missing (give limit and window, or rate)");
    if (rate === undefined && windowMs === undefined) throw new ConfigError(`${where}.window`, "missing (give limit and window, or rate)");
  }
  if (p["aligned"] === true && algorithm !== "fixed") throw new ConfigError(`${where}.aligned`, `aligned is for fixed policies, not ${algorithm}`);
  if (p["burst"] !== undefined && algorithm !== "token") throw new ConfigError(`${where}.burst`, `burst is for token policies, not ${algorithm}`);
  if (p["queue"] !== undefined && algorithm !== "token") throw new ConfigError(`${where}.queue`, `queue is for token policies, not ${algorithm}`);
  if (concurrency) {
    for (const field of ["window", "rate", "block"]) {
      if (p[field] !== undefined) throw new ConfigError(`${where}.${field}`, `a concurrency policy has no ${field}; give limit and lease`);
    }
    if (limit === undefined) throw new ConfigError(`${where}.limit`, "missing (a concurrency policy gives limit and lease)");
    if (leaseMs === undefined) throw new ConfigError(`${where}.lease`, "missing (a concurrency policy gives limit and lease)");
    if (p["count"] !== "all") {
      throw new ConfigError(`${where}.count`, "must be all on a concurrency policy (its slots are freed when the response is finished)");
    }
  } else if (leaseMs !== undefined) {
    throw new ConfigError(`${where}.lease`, `lease is for concurrency policies, not ${algorithm}`);
  }
  const limitResolver = resolverName(`${where}.limit`, codeLimit, "limit", registered);
  resolverName(`${where}.cost`, p["cost"], "cost", registered);
  return {
    name: p["name"] as string,
    algorithm,
    limit: rate?.count ?? (limit as number),
    limitResolver,
    windowMs: concurrency ? (leaseMs as number) : (rate?.windowMs ?? (windowMs as number)),
    aligned: p["aligned"] as boolean,
    burst: p["burst"] as number | undefined,
    key: keyKind(`${where}.key`, p["key"] as string, identities),
    cost: costSpec(p["cost"] as number | string),
    count: p["count"] as CountMode,
    overridable: p["overridable"] as boolean,
    shadow: topMode === "shadow" || p["mode"] === "shadow",
    blockMs: p["block"] as number | undefined,
    queueMs: p["queue"] as number | undefined,
  };
}

/** The headers the integration sets itself, which a refusal's `headers` may not name (lower case). */
const OWN_HEADERS = new Set([
  "ratelimit",
  "ratelimit-policy",
  "ratelimit-limit",
  "ratelimit-remaining",
  "ratelimit-reset",
  "x-ratelimit-limit",
  "x-ratelimit-remaining",
  "x-ratelimit-reset",
  "retry-after",
  "content-type",
  "content-length",
]);

/** A refusal's extra headers (deny-headers-are-extra): none the integration sets, no name twice. */
function extraHeaders(where: string, given: unknown): Readonly<Record<string, string>> | undefined {
  if (given === undefined) return undefined;
  const seen = new Set<string>();
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(given as Record<string, string>)) {
    const lower = name.toLowerCase();
    if (OWN_HEADERS.has(lower)) throw new ConfigError(`${where}.headers.${name}`, "the integration sets this header itself");
    if (seen.has(lower)) throw new ConfigError(`${where}.headers.${name}`, `"${name}" is given twice`);
    seen.add(lower);
    headers[name] = value;
  }
  return seen.size === 0 ? undefined : Object.freeze(headers);
}

/**
 * A walked refusal (`deny`, `fail_deny`, `routes[i].deny`); `base` is
 * `deny` for a route's, whose fields it replaces (its `headers` whole).
 * A json body needs its json (a route's may take `deny`'s), and json is
 * given only with a json body (deny-json-with-json-body).
 */
function denyOf(where: string, d: Walked, base?: Deny): Deny {
  const body = (d["body"] ?? base?.body) as Deny["body"];
  const json = d["json"] === undefined ? base?.json : JSON.stringify(d["json"]);
  if (body === "json" && json === undefined) throw new ConfigError(`${where}.json`, "missing (body: json sends it)");
  if (body !== "json" && d["json"] !== undefined) throw new ConfigError(`${where}.json`, "json is sent only with body: json");
  const headers = d["headers"] === undefined ? base?.headers : extraHeaders(where, d["headers"]);
  return Object.freeze({
    status: (d["status"] ?? base?.status) as number,
    body,
    message: (d["message"] ?? base?.message) as string,
    contentType: (d["content_type"] ?? base?.contentType) as string,
    json,
    headers,
  });
}

/** Policy names -> policies, checking each name exists (`where` is the list's path). */
export function resolvePolicies(where: string, names: unknown, policies: ReadonlyMap<string, Policy>): Policy[] {
  if (!Array.isArray(names)) throw new ConfigError(where, "must be a list");
  return names.map((name, i) => {
    const policy = typeof name === "string" ? policies.get(name) : undefined;
    if (policy === undefined) throw new ConfigError(`${where}[${i}]`, `no policy is named ${typeof name === "string" ? `"${name}"` : String(name)}`);
    return policy;
  });
}

/**
 * Checks a configuration document (the JSON form, or the same as an
 * object): the walker first (every field, with the schema), then the
 * rules that span fields.
 */
export function parseConfig(raw: unknown, registered: ResolverNames = {}): Config {
  let doc: Walked;
  try {
    doc = walkDocument(raw);
  } catch (err) {
    throw err instanceof WalkError ? new ConfigError(err.path, err.problem) : err;
  }
  const modeResolver = resolverName("mode", doc["mode"], "mode", registered);
  // With a mode resolver, each policy has its own mode (enforce by default) until a request is shadow or off.
  const mode = (modeResolver === undefined ? doc["mode"] : "enforce") as Config["mode"];
  const identities = identitiesOf(doc["identities"]);
  const trustedProxies = (doc["trusted_proxies"] as unknown[]).map((p, i) => parseNetwork(`trusted_proxies[${i}]`, p));
  const exempt = (doc["exempt"] as unknown[]).map((p, i) => parseNetwork(`exempt[${i}]`, p));
  if (doc["exempt_loopback"] === true) exempt.push(parseNetwork("exempt_loopback", "127.0.0.0/8"), parseNetwork("exempt_loopback", "::1/128"));
  const policies = new Map<string, Policy>();
  (doc["policies"] as Walked[]).forEach((p, i) => {
    const policy = policyOf(`policies[${i}]`, p, mode, identities, registered);
    if (policies.has(policy.name)) throw new ConfigError(`policies[${i}].name`, `"${policy.name}" is used by an earlier policy`);
    policies.set(policy.name, policy);
  });
  const deny = denyOf("deny", doc["deny"] as Walked);
  const failDeny = denyOf("fail_deny", doc["fail_deny"] as Walked);
  const routes = (doc["routes"] as Walked[]).map((r, i) => ({
    path: r["path"] as string,
    methods: r["methods"] as string[] | undefined,
    policies: resolvePolicies(`routes[${i}].policies`, r["policies"], policies),
    deny: r["deny"] === undefined ? undefined : denyOf(`routes[${i}].deny`, r["deny"] as Walked, deny),
  }));
  return {
    prefix: doc["prefix"] as string,
    mode,
    modeResolver,
    fail: doc["fail"] as Config["fail"],
    localMaxKeys: doc["local_max_keys"] as number,
    timeoutMs: doc["timeout"] as number,
    headers: doc["headers"] as HeadersMode,
    legacyReset: doc["legacy_reset"] as Config["legacyReset"],
    trustedProxies,
    exempt,
    exemptLoopback: doc["exempt_loopback"] as boolean,
    ipv6Prefix: doc["ipv6_prefix"] as number,
    apiKeyHeader: (doc["api_key_header"] as string).toLowerCase(),
    deny,
    failDeny,
    maxBodyBytes: doc["max_body_bytes"] as number,
    policies,
    routes: routes.length === 0 ? undefined : routes,
  };
}

/** A YAML parser: `parse(text)` as the `yaml` package's `parse` or js-yaml's `load`. */
export type YamlParser = (text: string) => unknown;

export interface LoadOptions {
  /** The resolvers the application registers (docs/http.md, Resolvers): a `code:<name>` naming none fails. */
  resolvers?: ResolverNames;
  /** Parses YAML; default: the optional peer dependency `yaml`, when installed. */
  parseYaml?: YamlParser;
}

/**
 * The optional peer dependency `yaml`, or undefined when it is not
 * installed: beside this package, else in the application's directory (a
 * linked install resolves from the checkout, not from the application).
 */
function installedYaml(): YamlParser | undefined {
  const requirers = [require, createRequire(path.join(process.cwd(), "package.json"))];
  for (const req of requirers) {
    try {
      const mod = req("yaml") as { parse?: YamlParser };
      if (typeof mod.parse === "function") return (text) => mod.parse!(text);
    } catch {
      // not there: try the next place
    }
  }
  return undefined;
}

/**
 * Reads and checks a configuration file: `.json` as JSON; anything else as
 * YAML (JSON is YAML too) with `options.parseYaml`, else the `yaml` package.
 */
export function loadConfig(file: string, options: LoadOptions = {}): Config {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new ConfigError("(file)", `cannot read ${file}: ${(err as Error).message}`);
  }
  // ${VAR} and ${VAR:-default}, from the environment, before the text is parsed.
  text = substitute(text);
  let doc: unknown;
  if (/\.json$/i.test(file)) {
    try {
      doc = JSON.parse(text);
    } catch (err) {
      throw new ConfigError("(file)", `${file} is not JSON: ${(err as Error).message}`);
    }
  } else {
    const parse = options.parseYaml ?? installedYaml();
    if (parse === undefined) {
      throw new ConfigError(
        "(file)",
        `${file} is YAML: install the \`yaml\` package (npm install yaml) or pass { parseYaml } (or use a .json file)`,
      );
    }
    try {
      doc = parse(text);
    } catch (err) {
      throw new ConfigError("(file)", `${file} is not YAML: ${(err as Error).message}`);
    }
  }
  return parseConfig(doc, options.resolvers);
}

/** A configuration given as a checked Config, a document object, or a file path. */
export type ConfigSource = Config | Record<string, unknown> | string;

/** Distinguishes an already checked Config (it has a policies Map). */
export function toConfig(source: ConfigSource, options: LoadOptions = {}): Config {
  if (typeof source === "string") return loadConfig(source, options);
  if (isObject(source) && source["policies"] instanceof Map) return source as unknown as Config;
  return parseConfig(source, options.resolvers);
}
