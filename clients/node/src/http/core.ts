/**
 * The framework-free HTTP rate limiter (docs/http.md, Behaviour): which
 * policies apply to a request, its subjects and keys, one RL.ALL per
 * subject (admitted subjects refunded when another denies), the fail
 * modes, shadow mode, the decision hook, and the refunds of `count:
 * failed|succeeded` after the response. The Express and Fastify adapters
 * only read requests and write responses.
 */
import { Fixed, Sliding, Token, type Clause } from "../args.js";
import { Limiter, type LimiterOptions, type RedisLikeClient } from "../limiter.js";
import type { AllDecision, Decision } from "../reply.js";
import { ConfigError, MAX_UNITS, resolvePolicies, toConfig, type Config, type ConfigSource, type LoadOptions, type Policy } from "./config.js";
import { Identity, type RequestFacts, type Subject } from "./identity.js";
import {
  badCost,
  denied,
  mostRestrictive,
  rateLimitHeaders,
  tooLarge,
  unavailable,
  type Checked,
  type Refusal,
} from "./response.js";

/** One checked policy, as the decision hook sees it. */
export interface CheckReport {
  readonly policy: string;
  /** The key's middle part: `ip:203.0.113.9`, `user:alice`, `api-key:<32 hex>`, `global`. */
  readonly subject: string;
  readonly key: string;
  readonly cost: number;
  /** The module's reply to this policy's clause; undefined when Redis could not answer. */
  readonly decision: Decision | undefined;
}

/**
 * What happened to a request (docs/http.md, Decision hook):
 * - `allowed`: every policy admitted it;
 * - `denied`: a policy refused it;
 * - `would_deny`: a policy would have refused it; shadow mode let it pass;
 * - `fail_open` / `fail_closed`: Redis did not answer in time; passed / 503.
 */
export type Outcome = "allowed" | "denied" | "would_deny" | "fail_open" | "fail_closed";

/** The decision hook's argument, once per checked request. */
export interface DecisionEvent {
  readonly outcome: Outcome;
  /** Whether the decision was made in the process (the Rust-only `local` fail mode): always false here. */
  readonly local: false;
  readonly method: string;
  readonly path: string;
  /** The matched route's `path` from the configuration, or undefined. */
  readonly route: string | undefined;
  /** One per checked policy, in check order. */
  readonly checks: readonly CheckReport[];
  /** Why Redis could not answer (fail_open, fail_closed). */
  readonly error: Error | undefined;
}

export interface Logger {
  warn(message: string): void;
}

export interface HttpLimiterOptions {
  /** An ioredis Redis or Cluster, or a node-redis client or cluster (connected, or connecting). */
  client: RedisLikeClient;
  /** The configuration: a file path (YAML or JSON), a document object, or a loaded Config. */
  config: ConfigSource;
  /** Parses a YAML configuration file (default: the `yaml` package, when installed). */
  parseYaml?: LoadOptions["parseYaml"];
  /** Called once per checked request, for logs and metrics; its errors are logged, never thrown. */
  onDecision?: (event: DecisionEvent) => void;
  /** Where warnings go (fail-open, shadow would-deny, failed refunds); default `console`. */
  logger?: Logger;
  /** Options of the underlying Limiter (a keyPrefix of the client is not applied: `prefix` is). */
  limiterOptions?: Omit<LimiterOptions, "keyPrefix">;
}

/** A request as the adapters describe it. */
export interface RequestInfo extends RequestFacts {
  readonly method: string;
  /** The path, without the query string. */
  readonly path: string;
}

/** Reads the body of a request without Content-Length, up to `max` bytes: its length, or undefined past max. */
export type MeasureBody = (max: number) => Promise<number | undefined>;

/** The policies that apply to a request, and the configuration route that chose them (if one did). */
export interface Selection {
  readonly policies: readonly Policy[];
  readonly route: string | undefined;
}

/** The verdict on a request before its handler runs. */
export type Verdict =
  | {
      readonly pass: true;
      /** Headers for the response (rate-limit headers of the checks made). */
      readonly headers: Readonly<Record<string, string>>;
      /**
       * Call with the response's status before the response is sent; it
       * resolves once the `count: failed|succeeded` refunds are made
       * (a failed refund is logged), so the client's next request sees them.
       */
      readonly after: ((status: number) => Promise<void>) | undefined;
    }
  | { readonly pass: false; readonly refusal: Refusal };

const PASS_UNCHECKED: Verdict = { pass: true, headers: {}, after: undefined };

/** One policy applied to one request. */
interface Check {
  readonly policy: Policy;
  readonly subject: Subject;
  readonly key: string;
  readonly okey: string | undefined;
  readonly cost: number;
}

class Unanswered extends Error {
  override readonly name = "RedisTimeout";
}

/** How often the fail-open warning is logged at most. */
const WARN_INTERVAL_MS = 10_000;

export class HttpLimiter {
  readonly config: Config;
  readonly limiter: Limiter;
  readonly #onDecision: ((event: DecisionEvent) => void) | undefined;
  readonly #logger: Logger;
  readonly #everyPolicy: readonly Policy[];
  #lastWarning = -Infinity;

  constructor(options: HttpLimiterOptions) {
    if (options === null || typeof options !== "object") throw new TypeError("librl: give { client, config }");
    if (options.client === undefined) throw new TypeError("librl: the `client` option is missing (an ioredis or node-redis client)");
    if (options.config === undefined) throw new TypeError("librl: the `config` option is missing (a file path or a configuration object)");
    const load: LoadOptions = options.parseYaml === undefined ? {} : { parseYaml: options.parseYaml };
    try {
      this.config = toConfig(options.config, load);
    } catch (err) {
      if (err instanceof ConfigError) err.message = `librl: configuration: ${err.message}`;
      throw err;
    }
    this.#everyPolicy = [...this.config.policies.values()];
    this.limiter = new Limiter(options.client, { ...options.limiterOptions, keyPrefix: "" });
    if (options.onDecision !== undefined && typeof options.onDecision !== "function") {
      throw new TypeError("librl: onDecision must be a function");
    }
    this.#onDecision = options.onDecision;
    this.#logger = options.logger ?? console;
  }

  /** Named policies, checked now (a missing name throws, naming it). */
  policies(names: readonly string[], where = "policies"): Policy[] {
    return resolvePolicies(where, names, this.config.policies);
  }

  /**
   * The configuration's choice for a request: the route with the longest
   * matching path prefix (whole segments) among those whose methods
   * include the request's, else none; without routes, every policy.
   */
  select(method: string, path: string): Selection {
    const routes = this.config.routes;
    if (routes === undefined) return { policies: this.#everyPolicy, route: undefined };
    const upper = method.toUpperCase();
    for (const route of routes) {
      if (!pathHasPrefix(path, route.path)) continue;
      if (route.methods !== undefined && !route.methods.includes(upper)) continue;
      return { policies: route.policies, route: route.path };
    }
    return { policies: [], route: undefined };
  }

  /** Checks a request: pass (with headers and the after-response step) or a refusal. */
  async check(req: RequestInfo, selection: Selection, measureBody: MeasureBody): Promise<Verdict> {
    if (selection.policies.length === 0) return PASS_UNCHECKED;
    const identity = new Identity(req, this.config);
    const applying: Array<{ policy: Policy; subject: Subject }> = [];
    for (const policy of selection.policies) {
      const subject = identity.subject(policy.key);
      if (this.config.exemptLoopback && subject.loopback) continue;
      applying.push({ policy, subject });
    }
    if (applying.length === 0) return PASS_UNCHECKED;

    let bodyLength: number | undefined;
    const checks: Check[] = [];
    for (const { policy, subject } of applying) {
      let cost: number;
      switch (policy.cost.kind) {
        case "units":
          cost = policy.cost.units;
          break;
        case "header": {
          const value = req.header(policy.cost.header);
          if (value === undefined) cost = 1;
          else {
            const n = /^\s*[0-9]+\s*$/.test(value) ? Number(value) : NaN;
            if (!(n >= 1 && n <= MAX_UNITS)) return { pass: false, refusal: badCost(headerName(policy.cost.header), policy.name) };
            cost = n;
          }
          break;
        }
        case "body-bytes": {
          if (bodyLength === undefined) {
            const max = this.config.maxBodyBytes;
            const declared = req.header("content-length");
            if (declared !== undefined && /^\s*[0-9]+\s*$/.test(declared)) bodyLength = Number(declared);
            else bodyLength = await measureBody(max);
            if (bodyLength === undefined || bodyLength > max) return { pass: false, refusal: tooLarge(max) };
          }
          cost = Math.min(Math.max(bodyLength, 1), MAX_UNITS);
          break;
        }
      }
      // The subject is the hash tag: one subject's keys share a cluster slot.
      const base = `${this.config.prefix}{${subject.tag}}`;
      checks.push({
        policy,
        subject,
        key: `${base}:${policy.name}`,
        okey: policy.overridable ? `${base}:override:${policy.name}` : undefined,
        cost,
      });
    }

    const exchange = { abandoned: false };
    let result: { admitted: boolean; decisions: Decision[] };
    try {
      result = await this.#withTimeout(this.#decide(checks, exchange));
    } catch (err) {
      exchange.abandoned = true;
      const error = err instanceof Error ? err : new Error(String(err));
      const closed = this.config.fail === "closed";
      this.#warn(
        `librl: Redis did not answer (${error.message}); ${closed ? "refusing requests (fail: closed)" : "passing requests unlimited (fail: open)"}`,
      );
      this.#emit(req, selection, closed ? "fail_closed" : "fail_open", checks, undefined, error);
      return closed ? { pass: false, refusal: unavailable() } : PASS_UNCHECKED;
    }

    const checked: Checked[] = checks.map((c, i) => ({ policy: c.policy, decision: result.decisions[i] as Decision }));
    if (!result.admitted) {
      const worst = mostRestrictive(checked) ?? 0;
      if (this.config.mode !== "shadow") {
        this.#emit(req, selection, "denied", checks, result.decisions, undefined);
        const headers = rateLimitHeaders(this.config, checked, true);
        return { pass: false, refusal: denied(this.config, checked[worst] as Checked, (checks[worst] as Check).cost, headers) };
      }
      const name = (checks[worst] as Check).policy.name;
      this.#logger.warn(`librl: shadow mode: ${req.method} ${req.path} would be refused by policy "${name}"`);
      this.#emit(req, selection, "would_deny", checks, result.decisions, undefined);
      return { pass: true, headers: rateLimitHeaders(this.config, checked, false), after: undefined };
    }
    this.#emit(req, selection, "allowed", checks, result.decisions, undefined);
    const later = checks.filter((c) => c.policy.count !== "all");
    const after =
      later.length === 0
        ? undefined
        : (status: number) => this.#refund(later.filter((c) => (c.policy.count === "failed" ? status < 400 : status >= 400)));
    return { pass: true, headers: rateLimitHeaders(this.config, checked, false), after };
  }

  /**
   * One RL.ALL per subject, in the order subjects first appear. After a
   * denial, the groups already admitted are refunded and the rest are
   * peeked, so every check has a reply and a refused request is counted by
   * no policy. An exchange abandoned (timeout) refunds what it admitted.
   */
  async #decide(checks: readonly Check[], exchange: { abandoned: boolean }): Promise<{ admitted: boolean; decisions: Decision[] }> {
    const groups = new Map<string, number[]>();
    checks.forEach((c, i) => {
      const members = groups.get(c.subject.tag);
      if (members === undefined) groups.set(c.subject.tag, [i]);
      else members.push(i);
    });
    const decisions = new Array<Decision>(checks.length);
    const admittedGroups: number[][] = [];
    let admitted = true;
    try {
      for (const members of groups.values()) {
        if (exchange.abandoned) break;
        const clauses = members.map((i) => clause(checks[i] as Check, "cost"));
        const reply: AllDecision = await this.limiter.all(clauses, admitted ? undefined : { peek: true });
        members.forEach((i, j) => (decisions[i] = reply.decisions[j] as Decision));
        if (admitted && reply.allowed) admittedGroups.push(members);
        else admitted = false;
      }
    } finally {
      if (!admitted || exchange.abandoned) {
        for (const members of admittedGroups) await this.#refund(members.map((i) => checks[i] as Check));
      }
    }
    return { admitted, decisions };
  }

  /** Gives the checks' costs back (one RL.ALL of REFUND clauses per subject); failures are logged. */
  async #refund(checks: readonly Check[]): Promise<void> {
    const groups = new Map<string, Check[]>();
    for (const c of checks) {
      const members = groups.get(c.subject.tag);
      if (members === undefined) groups.set(c.subject.tag, [c]);
      else members.push(c);
    }
    for (const members of groups.values()) {
      try {
        await this.#withTimeout(this.limiter.all(members.map((c) => clause(c, "refund"))));
      } catch (err) {
        this.#logger.warn(`librl: could not refund ${members.map((c) => c.key).join(", ")}: ${(err as Error).message}`);
      }
    }
  }

  #withTimeout<T>(work: Promise<T>): Promise<T> {
    const ms = this.config.timeoutMs;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      // Timers run before I/O in an event loop turn: after a stall of the
      // process, a reply already in the socket is read first (setImmediate
      // runs after the I/O phase), so only a Redis that did not answer times out.
      timer = setTimeout(() => setImmediate(() => reject(new Unanswered(`no answer within ${ms} ms`))), ms);
    });
    // A late reply or error of the abandoned work is dropped.
    work.catch(() => {});
    return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
  }

  #warn(message: string): void {
    const now = Date.now();
    if (now - this.#lastWarning < WARN_INTERVAL_MS) return;
    this.#lastWarning = now;
    this.#logger.warn(message);
  }

  #emit(
    req: RequestInfo,
    selection: Selection,
    outcome: Outcome,
    checks: readonly Check[],
    decisions: readonly Decision[] | undefined,
    error: Error | undefined,
  ): void {
    const hook = this.#onDecision;
    if (hook === undefined) return;
    const event: DecisionEvent = {
      outcome,
      local: false,
      method: req.method,
      path: req.path,
      route: selection.route,
      checks: checks.map((c, i) => ({
        policy: c.policy.name,
        subject: c.subject.tag,
        key: c.key,
        cost: c.cost,
        decision: decisions?.[i],
      })),
      error,
    };
    try {
      hook(event);
    } catch (err) {
      this.#logger.warn(`librl: the decision hook threw: ${(err as Error).message}`);
    }
  }
}

/** `/api` matches `/api`, `/api/x`, not `/apix`; `/` matches everything. */
function pathHasPrefix(path: string, prefix: string): boolean {
  if (prefix === "/" || path === prefix) return true;
  if (!path.startsWith(prefix)) return false;
  return prefix.endsWith("/") || path.charAt(prefix.length) === "/";
}

/** `x-batch-size` -> `X-Batch-Size`, for messages. */
function headerName(lower: string): string {
  return lower.replace(/(^|-)([a-z])/g, (_, dash: string, c: string) => dash + c.toUpperCase());
}

/** A check as an RL.ALL clause, consuming (`cost`) or giving back (`refund`) its cost. */
function clause(c: Check, as: "cost" | "refund"): Clause {
  const p = c.policy;
  const window = `${p.windowMs}ms`;
  const amount = as === "cost" ? { cost: c.cost } : { refund: c.cost };
  const override = c.okey === undefined ? {} : { override: c.okey };
  switch (p.algorithm) {
    case "fixed":
      return Fixed(c.key, p.limit, window, { ...amount, ...override, ...(p.aligned ? { aligned: true } : {}) });
    case "sliding":
      return Sliding(c.key, p.limit, window, { ...amount, ...override });
    case "approx":
      return Sliding(c.key, p.limit, window, { ...amount, ...override, approx: true });
    case "token":
      return Token(c.key, p.limit, window, { ...amount, ...override, ...(p.burst === undefined ? {} : { burst: p.burst }) });
  }
}
