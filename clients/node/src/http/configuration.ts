/**
 * Configuration (docs/http.md, One configuration and Start-up
 * validation): the document read from an object, a JSON file or a YAML
 * file, and checked whole at start-up. Every mistake is a ConfigError
 * whose message is `librl: configuration: <path>: <problem>`, the path
 * naming the field (`policies[0].burst`, `routes[1].policies[0]`).
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { isIP } from "node:net";
import path from "node:path";
import { MAX_UNITS, MAX_WINDOW_MS, durationMs, rateOf } from "./durations.js";

export { MAX_UNITS } from "./durations.js";

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

export type AlgorithmName = "fixed" | "sliding" | "approx" | "token";

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
  readonly windowMs: number;
  readonly aligned: boolean;
  readonly burst: number | undefined;
  readonly key: KeyKind;
  readonly cost: CostSpec;
  readonly count: CountMode;
  readonly overridable: boolean;
}

export interface Route {
  readonly path: string;
  /** Upper-case methods; undefined: every method. */
  readonly methods: readonly string[] | undefined;
  readonly policies: readonly Policy[];
}

export type HeadersMode = "both" | "ietf" | "legacy" | "none";

/** The whole configuration, checked, with every default filled in. */
export interface Config {
  readonly prefix: string;
  readonly mode: "enforce" | "shadow";
  readonly fail: "open" | "closed";
  readonly timeoutMs: number;
  readonly headers: HeadersMode;
  readonly trustedProxies: readonly TrustedNetwork[];
  readonly exemptLoopback: boolean;
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

const TOP_FIELDS = new Set([
  "prefix",
  "mode",
  "fail",
  "timeout",
  "headers",
  "trusted_proxies",
  "exempt_loopback",
  "api_key_header",
  "deny",
  "max_body_bytes",
  "local_max_keys",
  "policies",
  "routes",
]);
const POLICY_FIELDS = new Set([
  "name",
  "algorithm",
  "limit",
  "window",
  "rate",
  "aligned",
  "burst",
  "key",
  "cost",
  "count",
  "overridable",
]);
const ROUTE_FIELDS = new Set(["path", "methods", "policies"]);
const DENY_FIELDS = new Set(["status", "body", "message"]);
const HTTP_TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const POLICY_NAME = /^[A-Za-z0-9._-]{1,64}$/;
const METHOD = /^[!#$%&'*+.^_`|~0-9A-Z-]+$/;

type Obj = Record<string, unknown>;

function isObject(value: unknown): value is Obj {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function shown(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

function checkFields(where: string, value: Obj, known: ReadonlySet<string>): void {
  for (const name of Object.keys(value)) {
    if (!known.has(name)) {
      throw new ConfigError(where === "" ? name : `${where}.${name}`, `unknown field (expected one of ${[...known].join(", ")})`);
    }
  }
}

function oneOf<T extends string>(field: string, value: unknown, allowed: readonly T[], fallback: T): T {
  if (value === undefined) return fallback;
  if (typeof value === "string" && (allowed as readonly string[]).includes(value)) return value as T;
  throw new ConfigError(field, `${shown(value)} is not one of ${allowed.join(", ")}`);
}

function bool(field: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== "boolean") throw new ConfigError(field, `${shown(value)} is not true or false`);
  return value;
}

function units(field: string, value: unknown, max = MAX_UNITS, maxText = "2^50"): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 1 || value > max) {
    throw new ConfigError(field, `${shown(value)} is not an integer from 1 to ${maxText}`);
  }
  return value;
}

/**
 * A duration in ms: a JSON integer of seconds, or the module's grammar
 * (`250ms`, `1s`, `15m`, `24h`, `7d`, `60`), from 1 ms to `maxMs`.
 */
export function parseDuration(field: string, value: unknown, maxMs = MAX_WINDOW_MS, maxText = "3650 days"): number {
  const ms = durationMs(value);
  if (ms === undefined) {
    throw new ConfigError(field, `${shown(value)} is not a duration (an integer with a unit ms, s, m, h or d: "250ms", "1s", "15m")`);
  }
  if (!(ms >= 1 && ms <= maxMs)) throw new ConfigError(field, `${shown(value)} is not from 1 ms to ${maxText}`);
  return ms;
}

/** `100/minute`, `5 per 2 minutes`, `10/90s`: the `limits` library's shorthand, as [limit, window ms]. */
export function parseRate(field: string, value: unknown): [number, number] {
  const rate = rateOf(value);
  if (rate === undefined) {
    throw new ConfigError(field, `${shown(value)} is not a rate such as "100/minute", "5 per 2 minutes" or "10/90s"`);
  }
  const [limit, windowMs] = rate;
  if (!(limit >= 1 && limit <= MAX_UNITS)) throw new ConfigError(field, `${shown(value)}: the count must be from 1 to 2^50`);
  if (!(windowMs >= 1 && windowMs <= MAX_WINDOW_MS)) throw new ConfigError(field, `${shown(value)}: the period must be from 1 ms to 3650 days`);
  return rate;
}

/** `10.0.0.0/8`, `127.0.0.1`, `::1/128`, `2001:db8::/32` (read by node:net). */
export function parseNetwork(field: string, value: unknown): TrustedNetwork {
  const m = typeof value === "string" ? /^([^/]*)(?:\/([0-9]{1,3}))?$/.exec(value) : null;
  const address = m?.[1] ?? "";
  const family = isIP(address) === 4 ? "ipv4" : isIP(address) === 6 && !address.includes("%") ? "ipv6" : undefined;
  const max = family === "ipv4" ? 32 : 128;
  const prefix = m?.[2] === undefined ? max : Number(m[2]);
  if (m === null || family === undefined || prefix > max) throw new ConfigError(field, "must be an IP address or a CIDR network");
  return { address, prefix, family, text: value as string };
}

function parseKey(field: string, value: unknown): KeyKind {
  if (value === undefined) return { kind: "ip" };
  if (value === "ip" || value === "api-key" || value === "user" || value === "global") return { kind: value };
  if (typeof value === "string" && value.startsWith("header:")) {
    const header = value.slice("header:".length);
    if (HTTP_TOKEN.test(header)) return { kind: "header", header: header.toLowerCase(), tagKind: `header:${header.toLowerCase()}` };
  }
  throw new ConfigError(field, `${shown(value)} is not one of ip, api-key, user, header:<Name>, global`);
}

function parseCost(field: string, value: unknown): CostSpec {
  if (value === undefined) return { kind: "units", units: 1 };
  if (value === "body-bytes") return { kind: "body-bytes" };
  if (typeof value === "string" && value.startsWith("header:")) {
    const header = value.slice("header:".length);
    if (HTTP_TOKEN.test(header)) return { kind: "header", header: header.toLowerCase(), name: header };
  }
  if (typeof value === "number") return { kind: "units", units: units(field, value) };
  throw new ConfigError(field, `${shown(value)} is not an integer from 1 to 2^50, body-bytes or header:<Name>`);
}

function parsePolicy(where: string, raw: unknown): Policy {
  if (!isObject(raw)) throw new ConfigError(where, "a policy must be an object");
  checkFields(where, raw, POLICY_FIELDS);
  const name = raw["name"];
  if (typeof name !== "string" || !POLICY_NAME.test(name)) {
    throw new ConfigError(`${where}.name`, `${shown(name)} is not a name of letters, digits, '.', '_' and '-'`);
  }
  const algorithm = oneOf<AlgorithmName>(`${where}.algorithm`, raw["algorithm"], ["fixed", "sliding", "approx", "token"], "fixed");
  if (raw["algorithm"] === undefined) throw new ConfigError(`${where}.algorithm`, "missing (fixed, sliding, approx or token)");
  let limit: number;
  let windowMs: number;
  if (raw["rate"] !== undefined) {
    if (raw["limit"] !== undefined || raw["window"] !== undefined) {
      throw new ConfigError(`${where}.rate`, "give rate, or limit and window, not both");
    }
    [limit, windowMs] = parseRate(`${where}.rate`, raw["rate"]);
  } else {
    if (raw["limit"] === undefined) throw new ConfigError(`${where}.limit`, "missing (give limit and window, or rate)");
    if (raw["window"] === undefined) throw new ConfigError(`${where}.window`, "missing (give limit and window, or rate)");
    limit = units(`${where}.limit`, raw["limit"]);
    windowMs = parseDuration(`${where}.window`, raw["window"]);
  }
  if (raw["aligned"] === true && algorithm !== "fixed") {
    throw new ConfigError(`${where}.aligned`, `aligned is for fixed policies, not ${algorithm}`);
  }
  if (raw["burst"] !== undefined && algorithm !== "token") {
    throw new ConfigError(`${where}.burst`, `burst is for token policies, not ${algorithm}`);
  }
  return {
    name,
    algorithm,
    limit,
    windowMs,
    aligned: bool(`${where}.aligned`, raw["aligned"], false),
    burst: raw["burst"] === undefined ? undefined : units(`${where}.burst`, raw["burst"]),
    key: parseKey(`${where}.key`, raw["key"]),
    cost: parseCost(`${where}.cost`, raw["cost"]),
    count: oneOf<CountMode>(`${where}.count`, raw["count"], ["all", "failed", "succeeded"], "all"),
    overridable: bool(`${where}.overridable`, raw["overridable"], false),
  };
}

/** Policy names -> policies, checking each name exists (`where` is the list's path). */
export function resolvePolicies(where: string, names: unknown, policies: ReadonlyMap<string, Policy>): Policy[] {
  if (!Array.isArray(names)) throw new ConfigError(where, "must be a list of policy names");
  return names.map((name, i) => {
    const policy = typeof name === "string" ? policies.get(name) : undefined;
    if (policy === undefined) {
      throw new ConfigError(`${where}[${i}]`, `no policy is named ${typeof name === "string" ? `"${name}"` : shown(name)}`);
    }
    return policy;
  });
}

function parseRoute(where: string, raw: unknown, policies: ReadonlyMap<string, Policy>): Route {
  if (!isObject(raw)) throw new ConfigError(where, "a route must be an object");
  checkFields(where, raw, ROUTE_FIELDS);
  const path = raw["path"];
  if (typeof path !== "string" || !path.startsWith("/")) {
    throw new ConfigError(`${where}.path`, `${shown(path)} is not a path starting with /`);
  }
  let methods: string[] | undefined;
  if (raw["methods"] !== undefined) {
    const list = raw["methods"];
    if (!Array.isArray(list) || list.length === 0) throw new ConfigError(`${where}.methods`, "must be a non-empty list of methods");
    methods = list.map((m, i) => {
      if (typeof m !== "string" || !METHOD.test(m)) {
        throw new ConfigError(`${where}.methods[${i}]`, `${shown(m)} is not an upper-case method name (GET, POST, ...)`);
      }
      return m;
    });
  }
  if (raw["policies"] === undefined) throw new ConfigError(`${where}.policies`, "missing (a list of policy names; [] exempts the route)");
  return { path, methods, policies: resolvePolicies(`${where}.policies`, raw["policies"], policies) };
}

/** Checks a configuration document (the JSON form, or the same as an object). */
export function parseConfig(raw: unknown): Config {
  if (!isObject(raw)) throw new ConfigError("(document)", "must be an object");
  checkFields("", raw, TOP_FIELDS);
  const prefix = raw["prefix"] ?? "rl:";
  // Braces would break the cluster hash tag the subject is.
  if (typeof prefix !== "string" || !/^[\x21-\x7a\x7c\x7e]{0,64}$/.test(prefix)) {
    throw new ConfigError("prefix", `${shown(prefix)} is not 0 to 64 bytes of printable ASCII without {, } or space`);
  }
  const fail = raw["fail"];
  if (fail === "local") {
    throw new ConfigError("fail", "local is the Rust integration's mode; use open or closed");
  }
  const apiKeyHeader = raw["api_key_header"] ?? "X-Api-Key";
  if (typeof apiKeyHeader !== "string" || !HTTP_TOKEN.test(apiKeyHeader)) {
    throw new ConfigError("api_key_header", `${shown(apiKeyHeader)} is not a header name`);
  }
  const proxies = raw["trusted_proxies"] ?? [];
  if (!Array.isArray(proxies)) throw new ConfigError("trusted_proxies", "must be a list of IPs or CIDRs");
  const denyRaw = raw["deny"] ?? {};
  if (!isObject(denyRaw)) throw new ConfigError("deny", "must be an object {status, body, message}");
  checkFields("deny", denyRaw, DENY_FIELDS);
  const status = denyRaw["status"] ?? 429;
  if (typeof status !== "number" || !Number.isInteger(status) || status < 400 || status > 599) {
    throw new ConfigError("deny.status", `${shown(status)} is not a status from 400 to 599`);
  }
  const body = oneOf<"problem" | "text">("deny.body", denyRaw["body"], ["problem", "text"], "problem");
  const message = denyRaw["message"] ?? "Too Many Requests";
  if (typeof message !== "string" || message === "" || Buffer.byteLength(message) > 1024) {
    throw new ConfigError("deny.message", `${shown(message)} is not a string of 1 to 1024 bytes`);
  }
  const maxBody = raw["max_body_bytes"] === undefined ? 8 * 1024 * 1024 : units("max_body_bytes", raw["max_body_bytes"]);
  // The `local` fail mode's bound: checked so that one file serves every integration.
  if (raw["local_max_keys"] !== undefined) units("local_max_keys", raw["local_max_keys"], 2 ** 32, "2^32");

  const rawPolicies = raw["policies"];
  if (!Array.isArray(rawPolicies)) throw new ConfigError("policies", "missing or not a list of policies");
  const policies = new Map<string, Policy>();
  rawPolicies.forEach((p, i) => {
    const policy = parsePolicy(`policies[${i}]`, p);
    if (policies.has(policy.name)) throw new ConfigError(`policies[${i}].name`, `"${policy.name}" is used by an earlier policy`);
    policies.set(policy.name, policy);
  });
  const rawRoutes = raw["routes"] ?? [];
  if (!Array.isArray(rawRoutes)) throw new ConfigError("routes", "must be a list of routes");
  const routes = rawRoutes.map((r, i) => parseRoute(`routes[${i}]`, r, policies));

  return {
    prefix,
    mode: oneOf("mode", raw["mode"], ["enforce", "shadow"], "enforce"),
    fail: oneOf("fail", fail, ["open", "closed"], "open"),
    timeoutMs: raw["timeout"] === undefined ? 250 : parseDuration("timeout", raw["timeout"], 60_000, "60 s"),
    headers: oneOf<HeadersMode>("headers", raw["headers"], ["both", "ietf", "legacy", "none"], "both"),
    trustedProxies: proxies.map((p, i) => parseNetwork(`trusted_proxies[${i}]`, p)),
    exemptLoopback: bool("exempt_loopback", raw["exempt_loopback"], true),
    apiKeyHeader: apiKeyHeader.toLowerCase(),
    deny: { status, body, message },
    maxBodyBytes: maxBody,
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
