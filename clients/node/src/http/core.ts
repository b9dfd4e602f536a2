/**
 * The framework-free HTTP rate limiter (docs/http.md): a request's
 * route, its plan (policies, subjects, keys), its costs, the decision
 * (one RL.ALL per subject, or the fail mode), then the response: the
 * handler's with the rate-limit headers, or a refusal; and the refunds of
 * `count: failed|succeeded` after the response. The Express and Fastify
 * adapters only read requests and write responses.
 */
import { Limiter, type LimiterOptions, type RedisLikeClient } from "../limiter.js";
import type { Decision } from "../reply.js";
import { resolvePolicies, toConfig, type Config, type ConfigSource, type LoadOptions, type Policy } from "./configuration.js";
import { bySubject, decide, decideOne, decideShadow, leasesOf, refund, release, type Answered, type DirectAll, type Failed, type Held } from "./decide.js";
import { FailMode } from "./fail-modes.js";
import { mostRestrictive, rateLimitHeaders, type Checked } from "./headers.js";
import { callHook, type DecisionEvent, type DecisionHook, type Logger, type Outcome } from "./hook.js";
import { Exemptions, Identity, TrustedProxies, subjectOf, type RequestFacts, type SubjectValues } from "./identity.js";
import { keyBase, limiterKey, overrideKey } from "./keys.js";
import { costs, costsOf, plan, type Check, type MeasureBody, type Planned } from "./plan.js";
import { denied, unavailable, type Refusal } from "./refusals.js";
import { Routes, type Selection } from "./routes.js";

export type { CheckReport, DecisionEvent, Logger, Outcome } from "./hook.js";
export type { MeasureBody } from "./plan.js";
export type { Selection } from "./routes.js";

export interface HttpLimiterOptions {
  /** An ioredis Redis or Cluster, or a node-redis client or cluster (connected, or connecting). */
  client: RedisLikeClient;
  /** The configuration: a file path (YAML or JSON), a document object, or a loaded Config. */
  config: ConfigSource;
  /** Parses a YAML configuration file (default: the `yaml` package, when installed). */
  parseYaml?: LoadOptions["parseYaml"];
  /** Called once per checked request, for logs and metrics; its errors are logged, never thrown. */
  onDecision?: DecisionHook;
  /** Where warnings go (fail modes, shadow would-deny, failed refunds); default `console`. */
  logger?: Logger;
  /** Options of the underlying Limiter (a keyPrefix of the client is not applied: `prefix` is). */
  limiterOptions?: Omit<LimiterOptions, "keyPrefix">;
}

/** A request as the adapters describe it. */
export interface RequestInfo extends RequestFacts {
  readonly method: string;
  /** The path as received (raw, or decoded by the framework), without the query string. */
  readonly path: string;
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
      /**
       * Call when the handler is done with the response (before its last
       * bytes are sent, so the client's next request finds the slots
       * free), or when the client went away: releases the leases of the
       * request's concurrency policies, once however often it is called
       * (the same promise; it never rejects). Undefined when it holds none.
       */
      readonly release: (() => Promise<void>) | undefined;
    }
  | { readonly pass: false; readonly refusal: Refusal };

const PASS_UNCHECKED: Verdict = Object.freeze({ pass: true, headers: Object.freeze({}), after: undefined, release: undefined });

/** A policy the short way can check: a rate limit whose cost needs no body read. */
function isShort(p: Policy): boolean {
  return p.algorithm !== "concurrency" && p.cost.kind !== "body-bytes";
}

/** Whether every check has the first one's subject (then one RL.ALL decides them all). */
function oneSubject(checks: readonly Check[]): boolean {
  const tag = (checks[0] as Check).subject.tag;
  for (let i = 1; i < checks.length; i++) if ((checks[i] as Check).subject.tag !== tag) return false;
  return true;
}

/** One configuration made ready for requests; reload() swaps it whole, and a request keeps the one it started with. */
class State {
  readonly routes: Routes;
  readonly trusted: TrustedProxies;
  readonly fail: FailMode;
  readonly exempt: Exemptions;
  /** Some policies are shadow and others enforced (docs/http.md, Shadow mode): the long way. */
  readonly mixed: boolean;
  /** The adapters' own selections (a route's, a `.policies()` middleware's), resolved once per configuration. */
  readonly own = new WeakMap<object, Selection>();

  constructor(
    readonly config: Config,
    limiter: Limiter,
    logger: Logger,
  ) {
    const policies = [...config.policies.values()];
    this.routes = new Routes(config.routes, policies);
    this.trusted = new TrustedProxies(config.trustedProxies);
    this.fail = new FailMode(config.fail, limiter, config.timeoutMs, logger);
    this.exempt = new Exemptions(config.exempt);
    this.mixed = config.mode !== "shadow" && policies.some((p) => p.shadow);
  }
}

export class HttpLimiter {
  readonly limiter: Limiter;
  readonly #onDecision: DecisionHook | undefined;
  readonly #logger: Logger;
  readonly #parseYaml: LoadOptions;
  #state: State;
  /** The policy names the adapters resolved (routes' own, `.policies()`), checked again by reload(). */
  readonly #named = new Map<object, { readonly names: readonly string[]; readonly where: string }>();
  /** The Limiter's short way for RL.ALL, when its options allow it. */
  readonly #direct: DirectAll | undefined;

  constructor(options: HttpLimiterOptions) {
    if (options === null || typeof options !== "object") throw new TypeError("librl: give { client, config }");
    if (options.client === undefined) throw new TypeError("librl: the `client` option is missing (an ioredis or node-redis client)");
    if (options.config === undefined) throw new TypeError("librl: the `config` option is missing (a file path or a configuration object)");
    if (options.onDecision !== undefined && typeof options.onDecision !== "function") {
      throw new TypeError("librl: onDecision must be a function");
    }
    this.#parseYaml = options.parseYaml === undefined ? {} : { parseYaml: options.parseYaml };
    const config = toConfig(options.config, this.#parseYaml);
    this.limiter = new Limiter(options.client, { ...options.limiterOptions, keyPrefix: "" });
    this.#onDecision = options.onDecision;
    this.#logger = options.logger ?? console;
    this.#direct = this.limiter.directAll;
    this.#state = new State(config, this.limiter, this.#logger);
  }

  /** The configuration in use (the latest reload()'s). */
  get config(): Config {
    return this.#state.config;
  }

  /**
   * Swaps the configuration (docs/http.md, Reload): a file path, a
   * document or a Config, checked as at start-up. A configuration that does
   * not validate, or lacks a policy a route's own list or a `.policies()`
   * middleware names, throws the start-up error and the old one stays.
   * Requests in flight finish on the configuration they started with.
   */
  reload(source: ConfigSource): Config {
    const config = toConfig(source, this.#parseYaml);
    for (const { names, where } of this.#named.values()) resolvePolicies(where, names, config.policies);
    this.#state = new State(config, this.limiter, this.#logger);
    return config;
  }

  /**
   * The limiter key the middleware uses for `policy` and a subject named
   * from code (`{ user: "alice" }`, `{ apiKey }`, `{ ip }`, `{ header }`):
   * `<prefix>{<subject>}:<policy>` (docs/http.md, Keys).
   */
  key(policy: string, subject: SubjectValues = {}): string {
    return limiterKey(this.#base(policy, subject), policy);
  }

  /**
   * The override key for `policy` and a subject named from code: managing
   * a customer's plan is one call, `limiter.overrideSet(core.overrideKey("search",
   * { user: "alice" }), 500, "1m")`.
   */
  overrideKey(policy: string, subject: SubjectValues = {}): string {
    return overrideKey(this.#base(policy, subject), policy);
  }

  #base(policy: string, subject: SubjectValues): string {
    const config = this.config;
    const [p] = resolvePolicies("policy", [policy], config.policies) as [Policy];
    return keyBase(config.prefix, subjectOf(p.key, subject, config.ipv6Prefix).tag);
  }

  /** Named policies, checked now (a missing name throws, naming it). */
  policies(names: readonly string[], where = "policies"): Policy[] {
    return resolvePolicies(where, names, this.config.policies);
  }

  /**
   * An adapter's own selection for `owner` (a route's config, a
   * `.policies()` middleware): `names` resolved once per configuration
   * (a missing name throws, naming `where`), and checked again by reload().
   */
  selection(owner: object, names: readonly string[], where: string): Selection {
    const state = this.#state;
    let found = state.own.get(owner);
    if (found === undefined) {
      found = { policies: resolvePolicies(where, names, state.config.policies), route: undefined };
      state.own.set(owner, found);
      this.#named.set(owner, { names: [...names], where });
    }
    return found;
  }

  /**
   * The configuration's choice for a request (docs/http.md, Routes): the
   * route with the longest matching canonical path prefix (whole segments,
   * ASCII case folded) among those whose methods include the request's,
   * else none; without routes, every policy. `path` is the request's path
   * as received, raw or decoded, a query string included or not.
   */
  select(method: string, path: string): Selection {
    return this.#state.routes.select(method, path);
  }

  /**
   * Checks a request: pass (with headers and the after-response step) or a
   * refusal. Runs on every request, so the usual case (rate policies, one
   * subject, no body to measure) takes the short way: no async layers, the
   * RL.ALL argv built straight from plans made at start-up.
   */
  check(req: RequestInfo, selection: Selection, measureBody: MeasureBody): Promise<Verdict> {
    const policies = selection.policies;
    if (policies.length === 0) return Promise.resolve(PASS_UNCHECKED);
    const st = this.#state;
    const config = st.config;
    const identity = new Identity(req, config, st.trusted);
    // An exempt client's request is not checked at all (docs/http.md, Exemptions).
    if (st.exempt.has(identity)) return Promise.resolve(PASS_UNCHECKED);
    const planned = plan(policies, identity, config.prefix);
    const direct = this.#direct;
    if (direct === undefined || !policies.every(isShort) || st.mixed) return this.#checkAll(st, req, selection, planned, measureBody);
    const checks = costsOf(planned, req, 0);
    if (!Array.isArray(checks)) return Promise.resolve({ pass: false, refusal: checks });
    if (!oneSubject(checks)) return this.#decided(st, req, selection, checks, decide(this.limiter, checks, config.timeoutMs, this.#logger));
    return this.#decided(st, req, selection, checks, decideOne(direct, checks, config.timeoutMs));
  }

  /** The long way: bodies measured, several subjects, concurrency leases, shadow policies, a cluster. */
  async #checkAll(st: State, req: RequestInfo, selection: Selection, planned: readonly Planned[], measureBody: MeasureBody): Promise<Verdict> {
    const config = st.config;
    const checks = await costs(planned, (name) => req.header(name), config.maxBodyBytes, measureBody);
    if (!Array.isArray(checks)) return { pass: false, refusal: checks };
    if (!st.mixed || !checks.some((c) => c.policy.shadow)) {
      return this.#decided(st, req, selection, checks, decide(this.limiter, checks, config.timeoutMs, this.#logger));
    }
    // Shadow policies beside enforced ones: the enforced groups first, then the shadow ones whatever those answered.
    const enforced = checks.filter((c) => !c.policy.shadow);
    const shadow = checks.filter((c) => c.policy.shadow);
    const result: Answered | Failed =
      enforced.length === 0
        ? { answered: true, admitted: true, decisions: [] }
        : await decide(this.limiter, enforced, config.timeoutMs, this.#logger);
    if (!result.answered) return this.#failed(st, req, selection, checks, result);
    let shadowDecisions: Decision[];
    try {
      shadowDecisions = await decideShadow(this.limiter, shadow, config.timeoutMs);
    } catch (err) {
      // Redis failed after the enforced groups: as a failure in the middle of the exchange.
      const admitted = result.admitted ? bySubject(enforced).map((group) => ({ checks: group, decisions: group.map((c) => result.decisions[enforced.indexOf(c)] as Decision) })) : [];
      return this.#failed(st, req, selection, checks, { answered: false, error: err instanceof Error ? err : new Error(String(err)), admitted });
    }
    let e = 0;
    let s = 0;
    const decisions = checks.map((c) => (c.policy.shadow ? shadowDecisions[s++] : result.decisions[e++]) as Decision);
    return this.#respond(st, req, selection, checks, result.admitted, decisions);
  }

  #decided(st: State, req: RequestInfo, selection: Selection, checks: readonly Check[], exchange: Promise<Answered | Failed>): Promise<Verdict> {
    return exchange.then((result) =>
      result.answered ? this.#respond(st, req, selection, checks, result.admitted, result.decisions) : this.#failed(st, req, selection, checks, result),
    );
  }

  /** Redis did not answer: the fail mode's verdict. */
  async #failed(st: State, req: RequestInfo, selection: Selection, checks: readonly Check[], result: Failed): Promise<Verdict> {
    const outcome = await st.fail.apply(result);
    this.#emit(req, selection, outcome, checks, undefined, result.error);
    if (outcome === "fail_closed") return { pass: false, refusal: unavailable() };
    // fail: open after some groups were admitted: their leases are held while the request runs.
    const held = result.admitted.flatMap((t) => leasesOf(t.checks, t.decisions));
    return held.length === 0 ? PASS_UNCHECKED : { pass: true, headers: {}, after: undefined, release: this.#releaser(st.config, held) };
  }

  /** The verdict on an answered exchange: admitted, denied, or (shadow) would deny. */
  #respond(st: State, req: RequestInfo, selection: Selection, checks: readonly Check[], admitted: boolean, decisions: readonly Decision[]): Verdict {
    const config = st.config;
    const checked: Checked[] = checks.map((c, i) => ({ policy: c.policy, decision: decisions[i] as Decision }));
    if (admitted) {
      // Admitted with a denial: a shadow policy's, which refuses nothing.
      const wouldDeny = checked.findIndex((c) => !c.decision.allowed);
      if (wouldDeny < 0) this.#emit(req, selection, "allowed", checks, decisions, undefined);
      else {
        this.#logger.warn(`librl: shadow policy: ${req.method} ${req.path} would be refused by policy "${(checks[wouldDeny] as Check).policy.name}"`);
        this.#emit(req, selection, "would_deny", checks, decisions, undefined);
      }
      const held = leasesOf(checks, decisions);
      return {
        pass: true,
        headers: rateLimitHeaders(config.headers, checked, false, config.legacyReset),
        after: this.#after(config, checks),
        release: held.length === 0 ? undefined : this.#releaser(config, held),
      };
    }
    if (config.mode === "shadow") {
      const worst = mostRestrictive(checked) as number;
      this.#logger.warn(`librl: shadow mode: ${req.method} ${req.path} would be refused by policy "${(checks[worst] as Check).policy.name}"`);
      this.#emit(req, selection, "would_deny", checks, decisions, undefined);
      // The exchange gave back what the admitted groups took: nothing is held.
      return { pass: true, headers: rateLimitHeaders(config.headers, checked, false, config.legacyReset), after: undefined, release: undefined };
    }
    const worst = mostRestrictive(checked, true) as number;
    this.#emit(req, selection, "denied", checks, decisions, undefined);
    // A shadow concurrency policy's lease is not refunded, but the request it was taken for is not served.
    const shadowHeld = leasesOf(
      checks.filter((c) => c.policy.shadow),
      decisions.filter((_, i) => (checks[i] as Check).policy.shadow),
    );
    if (shadowHeld.length > 0) void this.#releaser(config, shadowHeld)();
    const headers = rateLimitHeaders(config.headers, checked, true, config.legacyReset);
    return { pass: false, refusal: denied(config.deny, checked[worst] as Checked, (checks[worst] as Check).cost, headers) };
  }

  /** `count: failed` refunds below 400, `count: succeeded` from 400 (docs/http.md, Counting after the response). */
  #after(config: Config, checks: readonly Check[]): ((status: number) => Promise<void>) | undefined {
    if (checks.every((c) => c.policy.count === "all")) return undefined;
    return (status: number) => {
      const back = checks.filter((c) => (c.policy.count === "failed" ? status < 400 : c.policy.count === "succeeded" && status >= 400));
      if (back.length === 0) return Promise.resolve();
      return refund(this.limiter, back, config.timeoutMs, this.#logger, `count: ${status < 400 ? "failed" : "succeeded"}`);
    };
  }

  /** Releases `held` on the first call only; a failure is logged (the leases end by themselves). */
  #releaser(config: Config, held: readonly Held[]): () => Promise<void> {
    let sent: Promise<void> | undefined;
    return () => (sent ??= release(this.limiter, held, config.timeoutMs, this.#logger, "the response is finished"));
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
      checks: checks.map((c, i) => ({ policy: c.policy.name, subject: c.subject.tag, key: c.key, cost: c.cost, decision: decisions?.[i] })),
      error,
    };
    callHook(hook, event, this.#logger);
  }
}
