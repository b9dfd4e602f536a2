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

/** Whose counter a policy uses. */
export type KeyKind =
  | { kind: "ip" }
  | { kind: "api-key" }
  | { kind: "user" }
  | { kind: "header"; header: string; tagKind: string }
  | { kind: "global" };

/** What one request costs against a policy; `header` is the name in lower case, `name` as configured. */
export type CostSpec =
  | { kind: "units"; units: number }
  | { kind: "body-bytes" }
  | { kind: "header"; header: string; name: string };

export type CountMode = "all" | "failed" | "succeeded";

/** One named limit, checked. */
export interface Policy {
  readonly name: string;
  readonly algorithm: AlgorithmName;
  /** The limit (token: the rate per window). */
  readonly limit: number;
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
}

export interface Route {
  readonly path: string;
  /** Upper-case methods; undefined: every method. */
  readonly methods: readonly string[] | undefined;
  readonly policies: readonly Policy[];
}

export type HeadersMode = "both" | "ietf" | "legacy" | "draft6" | "none";

/** The whole configuration, checked, with every default filled in. */
export interface Config {
  readonly prefix: string;
  readonly mode: "enforce" | "shadow";
  readonly fail: "open" | "closed";
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
  readonly deny: { readonly status: number; readonly body: "problem" | "text"; readonly message: string };
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

/**
 * A policy's key. Named identities and inline cookie:, query: and
 * authorization: sources are refused at start-up until Node.js reads them,
 * rather than silently keyed by the client address.
 */
function keyKind(field: string, key: string): KeyKind {
  if (key === "ip" || key === "api-key" || key === "user" || key === "global") return { kind: key };
  if (!key.includes(":")) throw new ConfigError(field, `no identity is named "${key}"`);
  if (!key.startsWith("header:")) {
    throw new ConfigError(field, `${key.slice(0, key.indexOf(":"))}: sources are not read by the Node.js integrations yet`);
  }
  const header = headerName(key).toLowerCase();
  return { kind: "header", header, tagKind: `header:${header}` };
}

function costSpec(cost: number | string): CostSpec {
  if (typeof cost === "number") return { kind: "units", units: cost };
  if (cost === "body-bytes") return { kind: "body-bytes" };
  return { kind: "header", header: headerName(cost).toLowerCase(), name: headerName(cost) };
}

/**
 * A walked policy, with the rules that span its fields, in the order
 * conformance/README.md lists them (rate-or-limit-and-window,
 * aligned-only-on-fixed, burst-only-on-token, concurrency-has-lease).
 */
/**
 * Refuses a `code:<name>` value (docs/http.md, Resolvers in code) at
 * start-up, naming the field, until Node.js registers resolvers: taken as a
 * number, a header or a mode it would fail every request or count the wrong
 * thing.
 */
function noResolver(field: string, value: unknown): void {
  if (typeof value === "string" && value.startsWith("code:")) {
    throw new ConfigError(field, `resolvers (${value}) are not read by the Node.js integrations yet`);
  }
}

function policyOf(where: string, p: Walked, topMode: Config["mode"]): Policy {
  for (const field of ["limit", "cost", "mode"]) noResolver(`${where}.${field}`, p[field]);
  const algorithm = p["algorithm"] as AlgorithmName;
  const concurrency = algorithm === "concurrency";
  const rate = p["rate"] as RateValue | undefined;
  const limit = p["limit"] as number | undefined;
  const windowMs = p["window"] as number | undefined;
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
  if (concurrency) {
    for (const field of ["window", "rate"]) {
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
  return {
    name: p["name"] as string,
    algorithm,
    limit: rate?.count ?? (limit as number),
    windowMs: concurrency ? (leaseMs as number) : (rate?.windowMs ?? (windowMs as number)),
    aligned: p["aligned"] as boolean,
    burst: p["burst"] as number | undefined,
    key: keyKind(`${where}.key`, p["key"] as string),
    cost: costSpec(p["cost"] as number | string),
    count: p["count"] as CountMode,
    overridable: p["overridable"] as boolean,
    shadow: topMode === "shadow" || p["mode"] === "shadow",
  };
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
export function parseConfig(raw: unknown): Config {
  let doc: Walked;
  try {
    doc = walkDocument(raw);
  } catch (err) {
    throw err instanceof WalkError ? new ConfigError(err.path, err.problem) : err;
  }
  noResolver("mode", doc["mode"]);
  if (doc["fail"] === "local") throw new ConfigError("fail", "local is the Rust integration's mode; use open or closed");
  const identities = doc["identities"];
  if (identities !== undefined && identities !== null && Object.keys(identities as object).length > 0) {
    // Refused rather than keyed by the client address behind the user's back.
    throw new ConfigError("identities", "named identities are not read by the Node.js integrations yet");
  }
  const trustedProxies = (doc["trusted_proxies"] as unknown[]).map((p, i) => parseNetwork(`trusted_proxies[${i}]`, p));
  const exempt = (doc["exempt"] as unknown[]).map((p, i) => parseNetwork(`exempt[${i}]`, p));
  if (doc["exempt_loopback"] === true) exempt.push(parseNetwork("exempt_loopback", "127.0.0.0/8"), parseNetwork("exempt_loopback", "::1/128"));
  const policies = new Map<string, Policy>();
  (doc["policies"] as Walked[]).forEach((p, i) => {
    const policy = policyOf(`policies[${i}]`, p, doc["mode"] as Config["mode"]);
    if (policies.has(policy.name)) throw new ConfigError(`policies[${i}].name`, `"${policy.name}" is used by an earlier policy`);
    policies.set(policy.name, policy);
  });
  const routes = (doc["routes"] as Walked[]).map((r, i) => ({
    path: r["path"] as string,
    methods: r["methods"] as string[] | undefined,
    policies: resolvePolicies(`routes[${i}].policies`, r["policies"], policies),
  }));
  const deny = doc["deny"] as Walked;
  return {
    prefix: doc["prefix"] as string,
    mode: doc["mode"] as Config["mode"],
    fail: doc["fail"] as Config["fail"],
    timeoutMs: doc["timeout"] as number,
    headers: doc["headers"] as HeadersMode,
    legacyReset: doc["legacy_reset"] as Config["legacyReset"],
    trustedProxies,
    exempt,
    exemptLoopback: doc["exempt_loopback"] as boolean,
    ipv6Prefix: doc["ipv6_prefix"] as number,
    apiKeyHeader: (doc["api_key_header"] as string).toLowerCase(),
    deny: { status: deny["status"] as number, body: deny["body"] as Config["deny"]["body"], message: deny["message"] as string },
    maxBodyBytes: doc["max_body_bytes"] as number,
    policies,
    routes: routes.length === 0 ? undefined : routes,
  };
}

/** A YAML parser: `parse(text)` as the `yaml` package's `parse` or js-yaml's `load`. */
export type YamlParser = (text: string) => unknown;

export interface LoadOptions {
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
  return parseConfig(doc);
}

/** A configuration given as a checked Config, a document object, or a file path. */
export type ConfigSource = Config | Record<string, unknown> | string;

/** Distinguishes an already checked Config (it has a policies Map). */
export function toConfig(source: ConfigSource, options: LoadOptions = {}): Config {
  if (typeof source === "string") return loadConfig(source, options);
  if (isObject(source) && source["policies"] instanceof Map) return source as unknown as Config;
  return parseConfig(source);
}
