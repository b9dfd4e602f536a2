/**
 * The framework-free HTTP rate limiter (docs/http.md): a request's
 * route, its plan (policies, subjects, keys), its costs, the decision
 * (one RL.ALL per subject, or the fail mode), then the response: the
 * handler's with the rate-limit headers, or a refusal; and the refunds of
 * `count: failed|succeeded` after the response. The Express and Fastify
 * adapters only read requests and write responses.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { Limiter, type LimiterOptions, type RedisLikeClient } from "../limiter.js";
import { ReplyWaiter, RespConnection } from "../resp.js";
import { parseAllOne, type Decision } from "../reply.js";
import { checkResolvers, resolvePolicies, toConfig, type Config, type ConfigSource, type LoadOptions, type Policy } from "./configuration.js";
import {
  bySubject,
  clause,
  decide,
  answeredOf,
  encodeOne,
  failedOf,
  sendOne,
  decideShadow,
  leasesOf,
  refund,
  release,
  turnMs,
  type Answered,
  type DirectAll,
  type EncodedAll,
  type Failed,
  type Held,
} from "./decide.js";
import { Breaker, BreakerOpen } from "./breaker.js";
import { FailMode } from "./fail-modes.js";
import { LocalLimiter } from "./local.js";
import { mostRestrictive, rateLimitHeaders, type Checked } from "./headers.js";
import { callHook, outcomeOf, type DecisionEvent, type DecisionHook, type Logger, type Outcome } from "./hook.js";
import { Exemptions, Identity, TrustedProxies, subjectOf, subjectOfValue, type RequestFacts, type Subject, type SubjectValues } from "./identity.js";
import { keyBase, limiterKey, overrideKey } from "./keys.js";
import { MAX_UNITS, MAX_WINDOW_MS } from "./durations.js";
import { costs, costsOf, plan, type Check, type MeasureBody, type Planned } from "./plan.js";
import { denied, unavailable, type Refusal } from "./refusals.js";
import { Recent } from "./recent.js";
import { Routes, type Selection } from "./routes.js";

export type { CheckReport, DecisionEvent, Logger, Outcome } from "./hook.js";
export type { MeasureBody } from "./plan.js";
export type { Selection } from "./routes.js";

export interface HttpLimiterOptions<Req = unknown> {
  /** An ioredis Redis or Cluster, or a node-redis client or cluster (connected, or connecting); or give `url`. */
  client?: RedisLikeClient;
  /**
   * A standalone server's `redis://` or `rediss://` URL, instead of
   * `client`: the integration makes its own connection (docs/http/node.md,
   * Redis clients) and closes it on close().
   */
  url?: string;
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
  /** The resolvers the configuration's `code:<name>` values name (docs/http.md, Resolvers). */
  resolvers?: Resolvers<Req>;
}

/** A limit resolver's answer: the subject's limit and window (ms), and a token policy's burst. */
export interface LimitGiven {
  readonly limit: number;
  readonly windowMs: number;
  readonly burst?: number | undefined;
}

/** A request's mode from a mode resolver: `off` checks nothing and sends no headers. */
export type RequestMode = "enforce" | "shadow" | "off";

/**
 * Resolvers by name, each given the framework's request (Express's `req`,
 * Fastify's `request`) and free to return a promise: a cost (an integer
 * from 1 to 2^50, else the request is answered 400), a limit (nothing:
 * the policy does not apply to the request), a mode.
 */
export interface Resolvers<Req = unknown> {
  cost?: Readonly<Record<string, (request: Req) => unknown>>;
  limit?: Readonly<Record<string, (request: Req) => LimitGiven | null | undefined | Promise<LimitGiven | null | undefined>>>;
  mode?: Readonly<Record<string, (request: Req) => RequestMode | Promise<RequestMode>>>;
}

/** A request as the adapters describe it. */
export interface RequestInfo extends RequestFacts {
  readonly method: string;
  /** The framework's request, as resolvers receive it. */
  readonly request?: unknown;
  /** The path as received (raw, or decoded by the framework), without the query string. */
  readonly path: string;
  /**
   * Reads a body without Content-Length to measure it, when check() is
   * given no `measureBody` (the adapters' way: a method of the request's
   * facts, so that no function is made per request for it).
   */
  measureBody?(max: number): Promise<number | undefined>;
}

/** Where no way to read the body was given: it cannot be measured (as a body too large). */
const UNMEASURED: MeasureBody = () => Promise.resolve(undefined);

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

/** What a request finds while the breaker is open: a failure, with nothing Redis admitted. */
const BREAKER_OPEN: Failed = Object.freeze({ answered: false, error: new BreakerOpen(), admitted: [] });

const PASS_UNCHECKED: Verdict = Object.freeze({ pass: true, headers: Object.freeze({}), after: undefined, release: undefined });

/** A policy the short way can check: a rate limit whose cost needs no body read. */
function isShort(p: Policy): boolean {
  return (
    p.algorithm !== "concurrency" &&
    p.cost.kind !== "body-bytes" &&
    p.cost.kind !== "code" &&
    p.limitResolver === undefined &&
    p.blockMs === undefined &&
    p.queueMs === undefined
  );
}

/** Whether every check has the first one's subject (then one RL.ALL decides them all). */
function oneSubject(checks: readonly Check[]): boolean {
  const tag = (checks[0] as Check).subject.tag;
  for (let i = 1; i < checks.length; i++) if ((checks[i] as Check).subject.tag !== tag) return false;
  return true;
}

/**
 * How many subjects' checks a one-policy way keeps, in a Recent table (a
 * subject takes its slot when it comes back; one seen once keeps nothing).
 * Few: a stream of fresh subjects must leave its entries to die young.
 * With 1,024, Fastify's `/half` (a fresh subject every other request) kept
 * ~400 KB alive across each scavenge: 1.8 ms pauses instead of 0.6, and
 * the survivors promoted and swept again by mark-compact
 * (docs/performance.md, HTTP).
 */
const SUBJECTS_KEPT = 64;

/** A one-policy check with its RL.ALL's RESP bytes. */
interface OneCheck extends Check {
  readonly encoded: string;
}

/**
 * A selection's one policy that needs nothing of a request but its
 * subject (State.oneWay), with the checks of the subjects seen lately:
 * a returning client's keys and RL.ALL are not made again.
 */
class OneWay {
  readonly #checks = new Recent<OneCheck>(SUBJECTS_KEPT);

  constructor(
    readonly policy: Policy,
    readonly prefix: string,
  ) {}

  check(subject: Subject): OneCheck {
    let found = this.#checks.get(subject.tag);
    if (found === undefined) {
      const policy = this.policy;
      const base = keyBase(this.prefix, subject.tag);
      const key = limiterKey(base, policy.name);
      const okey = policy.overridable ? overrideKey(base, policy.name) : undefined;
      const cost = (policy.cost as { readonly units: number }).units;
      found = { policy, subject, key, okey, cost, encoded: encodeOne({ policy, subject, key, okey, cost }) };
      this.#checks.offer(subject.tag, found);
    }
    return found;
  }
}

/**
 * Where checkInto() gives its answer: verdict() with the verdict, or
 * error() with what check() would have rejected with; one of them, once.
 * An adapter's own per-request object, so that the commonest request makes
 * no promise or closure to hear it.
 */
export interface VerdictTarget {
  verdict(verdict: Verdict): void;
  error(err: unknown): void;
}

/** Gives `target` a verdict that may still be coming. */
function deliver(target: VerdictTarget, verdict: Verdict | Promise<Verdict>): void {
  if (verdict instanceof Promise) {
    verdict.then(
      (v) => target.verdict(v),
      (err: unknown) => target.error(err),
    );
  } else {
    target.verdict(verdict);
  }
}

/** How a OneCall's reply or failure becomes a verdict: HttpLimiter's, made once per limiter. */
interface OneAnswers {
  reply(call: OneCall, reply: unknown): Verdict | Promise<Verdict>;
  failed(call: OneCall, err: Error): Verdict | Promise<Verdict>;
}

/** A checkInto() request on the one-policy way, waiting on its RL.ALL's reply: the one object it makes to hear it. */
class OneCall extends ReplyWaiter {
  constructor(
    readonly answers: OneAnswers,
    readonly st: State,
    readonly req: RequestInfo,
    readonly selection: Selection,
    readonly check: OneCheck,
    readonly target: VerdictTarget,
  ) {
    super();
  }

  resolve(reply: unknown): void {
    let verdict: Verdict | Promise<Verdict>;
    try {
      verdict = this.answers.reply(this, reply);
    } catch (err) {
      // An unexpected reply: check()'s promise would reject with it.
      this.target.error(err);
      return;
    }
    deliver(this.target, verdict);
  }

  reject(err: Error): void {
    let verdict: Verdict | Promise<Verdict>;
    try {
      verdict = this.answers.failed(this, err);
    } catch (thrown) {
      this.target.error(thrown);
      return;
    }
    deliver(this.target, verdict);
  }
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
  /** The whole configuration is on trial (`mode: shadow`). */
  readonly shadow: boolean;
  /** Some policy's limit, or cost, is a resolver's (then requests take the long way). */
  readonly limitResolvers: boolean;
  readonly costResolvers: boolean;
  /** Some policy has `queue`: an admitted request may wait for its turn. */
  readonly queues: boolean;
  /** `fail: local`: the in-process limiters, per configuration (a reload starts afresh). */
  readonly local: LocalLimiter | undefined;
  /** The mode resolver, when `mode: code:<name>`. */
  readonly modeResolver: ((request: unknown) => RequestMode | Promise<RequestMode>) | undefined;
  /** Each selection's one-policy way, when its requests can take it (null: they cannot), found on its first request. */
  readonly #one = new WeakMap<Selection, OneWay | null>();

  constructor(
    readonly config: Config,
    limiter: Limiter,
    logger: Logger,
    readonly resolvers: Resolvers,
  ) {
    // A Config built elsewhere (loadConfig without these resolvers) is checked against them here.
    checkResolvers(config, resolvers);
    const policies = [...config.policies.values()];
    this.modeResolver = config.modeResolver === undefined ? undefined : resolvers.mode?.[config.modeResolver];
    this.shadow = config.mode === "shadow";
    this.limitResolvers = policies.some((p) => p.limitResolver !== undefined);
    this.costResolvers = policies.some((p) => p.cost.kind === "code");
    this.queues = policies.some((p) => p.queueMs !== undefined);
    this.local = config.fail === "local" ? new LocalLimiter(config.localMaxKeys) : undefined;
    this.routes = new Routes(config.routes, policies);
    this.trusted = new TrustedProxies(config.trustedProxies);
    this.fail = new FailMode(config.fail, limiter, config.timeoutMs, logger);
    this.exempt = new Exemptions(config.exempt);
    this.mixed = config.mode !== "shadow" && policies.some((p) => p.shadow);
  }

  /**
   * The selection's policy when it is one that needs nothing of a request
   * but its subject: a rate limit, enforced, its cost a constant, counted
   * whatever the response, in a configuration without shadow or mode
   * resolvers. Such a request (the commonest) is checked without a plan
   * or cost step, and answered from the reply's one decision.
   */
  oneWay(selection: Selection): OneWay | null {
    let found = this.#one.get(selection);
    if (found === undefined) {
      const p = selection.policies.length === 1 ? (selection.policies[0] as Policy) : undefined;
      const quick = p !== undefined && isShort(p) && p.cost.kind === "units" && p.count === "all" && !p.shadow;
      found = quick && !this.shadow && !this.mixed && this.modeResolver === undefined ? new OneWay(p, this.config.prefix) : null;
      this.#one.set(selection, found);
    }
    return found;
  }
}

/** A subject named from code: the raw value for the policy's key (a string is its UTF-8 bytes; null for `global`), or values by kind. */
export type SubjectOf = SubjectValues | string | Uint8Array | null;

/**
 * The key and override key the middleware uses for `policy` and a subject
 * named from code (docs/http.md, Keys from code), with every rule a
 * request's key follows (prefix, IPv6 network, hashing). A policy the
 * configuration lacks throws a ConfigError; a subject that does not fit
 * the policy's key, a TypeError.
 */
export function policyKeys(config: Config, policy: string, subject: SubjectOf): { key: string; overrideKey: string } {
  const [p] = resolvePolicies("policy", [policy], config.policies) as [Policy];
  const s =
    subject === null || typeof subject === "string" || subject instanceof Uint8Array
      ? subjectOfValue(p.key, subject, config.ipv6Prefix)
      : subjectOf(p.key, subject, config.ipv6Prefix);
  const base = keyBase(config.prefix, s.tag);
  return { key: limiterKey(base, policy), overrideKey: overrideKey(base, policy) };
}

/** The resolvers option, checked: an object of objects of functions. */
function resolversOf(given: unknown): Resolvers {
  if (given === undefined) return {};
  if (given === null || typeof given !== "object") throw new TypeError("librl: resolvers must be { cost?, limit?, mode? }, each an object of functions");
  for (const [kind, table] of Object.entries(given)) {
    if (kind !== "cost" && kind !== "limit" && kind !== "mode") throw new TypeError(`librl: resolvers.${kind}: resolvers are cost, limit or mode`);
    if (table === undefined) continue;
    if (table === null || typeof table !== "object") throw new TypeError(`librl: resolvers.${kind} must be an object of functions`);
    for (const [name, fn] of Object.entries(table as object)) {
      if (typeof fn !== "function") throw new TypeError(`librl: resolvers.${kind}.${name} must be a function`);
    }
  }
  return given as Resolvers;
}

/** A `limit: code:<name>` policy with the limit, window (a concurrency policy keeps its lease) and burst its resolver gave. */
function resolvedPolicy(policy: Policy, name: string, given: LimitGiven): Policy {
  const whole = (v: unknown, max: number) => typeof v === "number" && Number.isInteger(v) && v >= 1 && v <= max;
  const g = given as Partial<LimitGiven>;
  const burstOk = g.burst === undefined || (policy.algorithm === "token" && whole(g.burst, MAX_UNITS));
  if (typeof given !== "object" || !whole(g.limit, MAX_UNITS) || !whole(g.windowMs, MAX_WINDOW_MS) || !burstOk) {
    throw new TypeError(
      `librl: the limit resolver "${name}" gave ${JSON.stringify(given)}, not { limit, windowMs${policy.algorithm === "token" ? ", burst?" : ""} } as integers from 1`,
    );
  }
  return {
    ...policy,
    limit: given.limit,
    windowMs: policy.algorithm === "concurrency" ? policy.windowMs : given.windowMs,
    burst: given.burst,
  };
}

/** Frees leases the local limiter gave, on the first call only. */
function localReleaser(local: LocalLimiter, held: readonly Held[]): () => Promise<void> {
  let done = false;
  return () => {
    if (!done) {
      done = true;
      for (const { check, id } of held) local.release(clause(check, "COST"), id);
    }
    return Promise.resolve();
  };
}

/** Whether every check counts whatever the response (no refunds after it); a loop, as it runs on every admitted request. */
function countsAll(checks: readonly Check[]): boolean {
  for (const c of checks) if (c.policy.count !== "all") return false;
  return true;
}

/** check()'s `measureBody`, else the request's own. */
function measurerOf(req: RequestInfo, measureBody: MeasureBody | undefined): MeasureBody {
  if (measureBody !== undefined) return measureBody;
  return req.measureBody === undefined ? UNMEASURED : (max) => (req.measureBody as MeasureBody).call(req, max);
}

export class HttpLimiter {
  readonly limiter: Limiter;
  readonly #onDecision: DecisionHook | undefined;
  readonly #logger: Logger;
  /** How configurations are read: the YAML parser, and the resolvers' names. */
  readonly #load: LoadOptions;
  readonly #resolvers: Resolvers;
  #state: State;
  /** The policy names the adapters resolved (routes' own, `.policies()`), checked again by reload(). */
  readonly #named = new Map<object, { readonly names: readonly string[]; readonly where: string }>();
  /** The Limiter's short way for RL.ALL, when its options allow it. */
  readonly #direct: DirectAll | undefined;
  /** Its RESP-encoded variant, on the integration's own connection. */
  readonly #encoded: EncodedAll | undefined;
  /** Spares requests the timeout while Redis is failing (docs/http.md, Fail modes); kept across reloads. */
  readonly #breaker = new Breaker();
  /** The connection made from `url`, which close() ends. */
  readonly #own: RespConnection | undefined;
  /** checkInto()'s way from a one-policy request's reply to its verdict (#answerOne, #settle). */
  readonly #oneAnswers: OneAnswers = {
    reply: (call, reply) => this.#answerOne(call.st, call.req, call.selection, call.check, parseAllOne(reply)),
    failed: (call, err) => this.#settle(call.st, call.req, call.selection, [call.check], false, failedOf(err)),
  };

  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- each adapter types the request its resolvers get
  constructor(options: HttpLimiterOptions<any>) {
    if (options === null || typeof options !== "object") throw new TypeError("librl: give { client, config }");
    if (options.client === undefined && options.url === undefined) {
      throw new TypeError("librl: give the `client` option (an ioredis or node-redis client) or `url` (redis://host:port)");
    }
    if (options.client !== undefined && options.url !== undefined) throw new TypeError("librl: give `client` or `url`, not both");
    if (options.url !== undefined && typeof options.url !== "string") throw new TypeError("librl: the `url` option must be a string (redis://host:port/db)");
    if (options.config === undefined) throw new TypeError("librl: the `config` option is missing (a file path or a configuration object)");
    if (options.onDecision !== undefined && typeof options.onDecision !== "function") {
      throw new TypeError("librl: onDecision must be a function");
    }
    this.#resolvers = resolversOf(options.resolvers);
    this.#load = { resolvers: this.#resolvers, ...(options.parseYaml === undefined ? {} : { parseYaml: options.parseYaml }) };
    const config = toConfig(options.config, this.#load);
    // Made once the configuration is known good (its timeout bounds the connect).
    this.#own = options.url === undefined ? undefined : new RespConnection(options.url, { connectTimeoutMs: Math.max(config.timeoutMs, 1000) });
    try {
      this.limiter = new Limiter((this.#own ?? options.client) as RedisLikeClient, { ...options.limiterOptions, keyPrefix: "" });
    } catch (err) {
      this.#own?.close();
      throw err;
    }
    this.#onDecision = options.onDecision;
    this.#logger = options.logger ?? console;
    this.#direct = this.limiter.directAll;
    this.#encoded = this.limiter.directEncoded;
    this.#state = new State(config, this.limiter, this.#logger, this.#resolvers);
  }

  /** Closes the connection made from `url` (a `client` of the application's is its to close). */
  close(): void {
    this.#own?.close();
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
    const config = toConfig(source, this.#load);
    for (const { names, where } of this.#named.values()) resolvePolicies(where, names, config.policies);
    this.#state = new State(config, this.limiter, this.#logger, this.#resolvers);
    return config;
  }

  /**
   * The limiter key the middleware uses for `policy` and a subject named
   * from code: the raw value for the policy's key (`"alice"` for a `user`
   * policy, an address for `ip`, the API key, a cookie's value; null for
   * `global`), or the values by kind (`{ user: "alice" }`, `{ apiKey }`,
   * `{ ip }`, `{ header }`): `<prefix>{<subject>}:<policy>` (docs/http.md, Keys).
   */
  key(policy: string, subject: SubjectOf = {}): string {
    return policyKeys(this.config, policy, subject).key;
  }

  /**
   * The override key for `policy` and a subject named from code: managing
   * a customer's plan is one call, `limiter.overrideSet(core.overrideKey("search",
   * "alice"), 500, "1m")`.
   */
  overrideKey(policy: string, subject: SubjectOf = {}): string {
    return policyKeys(this.config, policy, subject).overrideKey;
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
  check(req: RequestInfo, selection: Selection, measureBody?: MeasureBody): Promise<Verdict> {
    const policies = selection.policies;
    if (policies.length === 0) return Promise.resolve(PASS_UNCHECKED);
    const st = this.#state;
    const config = st.config;
    const identity = new Identity(req, config, st.trusted);
    // An exempt client's request is not checked at all (docs/http.md, Exemptions).
    if (st.exempt.has(identity)) return Promise.resolve(PASS_UNCHECKED);
    const one = this.#direct === undefined ? null : st.oneWay(selection);
    if (one !== null) return this.#checkOne(st, req, selection, one, identity);
    const planned = plan(policies, identity, config.prefix);
    if (st.modeResolver !== undefined) return this.#checkMode(st, req, selection, planned, measurerOf(req, measureBody), st.modeResolver);
    const direct = this.#direct;
    const shadow = st.shadow;
    if (direct === undefined || !policies.every(isShort) || st.mixed) return this.#checkAll(st, req, selection, planned, measurerOf(req, measureBody), shadow);
    const checks = costsOf(planned, req, 0);
    if (!Array.isArray(checks)) return Promise.resolve({ pass: false, refusal: checks });
    if (!this.#breaker.asks()) return this.#failed(st, req, selection, checks, BREAKER_OPEN, shadow);
    if (!oneSubject(checks)) return this.#decided(st, req, selection, checks, shadow, decide(this.limiter, checks, config.timeoutMs, this.#logger));
    // One continuation reads the reply and answers.
    return sendOne(direct, checks, config.timeoutMs, this.#encoded).then(
      (reply) => this.#settle(st, req, selection, checks, shadow, answeredOf(reply, checks.length)),
      (err: unknown) => this.#settle(st, req, selection, checks, shadow, failedOf(err)),
    );
  }

  /**
   * check() for an adapter that hears the verdict on an object of its own
   * (`target`): the same verdict, or the same error. The commonest request
   * (State.oneWay's, on the connection made from `url`) makes no promise
   * or closure of its own: its RL.ALL's reply goes to one object, which
   * gives `target` the verdict. Every other request takes check()'s way.
   */
  checkInto(req: RequestInfo, selection: Selection, target: VerdictTarget): void {
    const own = this.#own;
    const st = this.#state;
    const one = own === undefined || this.#encoded === undefined || selection.policies.length === 0 ? null : st.oneWay(selection);
    if (one !== null) {
      const identity = new Identity(req, st.config, st.trusted);
      // An exempt client, or an open breaker, takes check()'s way (which finds the same).
      if (!st.exempt.has(identity) && this.#breaker.asks()) {
        const check = one.check(identity.subject(one.policy.key));
        (own as RespConnection).sendEncodedTo(check.encoded, st.config.timeoutMs, new OneCall(this.#oneAnswers, st, req, selection, check, target));
        return;
      }
    }
    this.check(req, selection).then(
      (verdict) => target.verdict(verdict),
      (err: unknown) => target.error(err),
    );
  }

  /**
   * A request on a selection of one policy that needs only the subject
   * (State.oneWay): its one check, sent RESP-encoded on the own
   * connection (else the Limiter's short way), and the reply read straight
   * into its decision. A failure takes the fail mode's way, as any other.
   */
  #checkOne(st: State, req: RequestInfo, selection: Selection, one: OneWay, identity: Identity): Promise<Verdict> {
    const config = st.config;
    const check = one.check(identity.subject(one.policy.key));
    if (!this.#breaker.asks()) return this.#failed(st, req, selection, [check], BREAKER_OPEN, false);
    const encoded = this.#encoded;
    const sent = encoded === undefined ? sendOne(this.#direct as DirectAll, [check], config.timeoutMs) : encoded(check.encoded, config.timeoutMs);
    return sent.then(
      (reply) => this.#answerOne(st, req, selection, check, parseAllOne(reply)),
      (err: unknown) => this.#settle(st, req, selection, [check], false, failedOf(err)),
    );
  }

  /** #respond's verdict for one check of #checkOne's kind: the headers, or the refusal; the hook takes #respond's way. */
  #answerOne(st: State, req: RequestInfo, selection: Selection, check: Check, decision: Decision): Verdict | Promise<Verdict> {
    this.#breaker.ended(undefined);
    if (this.#onDecision !== undefined) return this.#respond(st, req, selection, [check], false, decision.allowed, [decision]);
    const config = st.config;
    const checked: Checked = { policy: check.policy, decision };
    const headers = rateLimitHeaders(config.headers, [checked], !decision.allowed, config.legacyReset);
    if (decision.allowed) return { pass: true, headers, after: undefined, release: undefined };
    return { pass: false, refusal: denied(selection.deny ?? config.deny, checked, check.cost, headers) };
  }

  /** `mode: code:<name>`: the request's mode first (off: unchecked, no headers, no hook call). */
  async #checkMode(
    st: State,
    req: RequestInfo,
    selection: Selection,
    planned: readonly Planned[],
    measureBody: MeasureBody,
    resolver: (request: unknown) => RequestMode | Promise<RequestMode>,
  ): Promise<Verdict> {
    const mode = await resolver(req.request);
    if (mode === "off") return PASS_UNCHECKED;
    if (mode !== "enforce" && mode !== "shadow") {
      throw new TypeError(`librl: the mode resolver "${st.config.modeResolver}" gave ${JSON.stringify(mode)}, not enforce, shadow or off`);
    }
    return this.#checkAll(st, req, selection, planned, measureBody, mode === "shadow");
  }

  /**
   * Each `limit: code:<name>` policy with the limit its resolver gives for
   * this request; a policy it gives nothing for does not apply. A resolver
   * that fails, or gives what is not a limit, fails the request (the
   * framework's error): counting by a limit nobody gave would be a guess.
   */
  async #resolveLimits(st: State, req: RequestInfo, planned: readonly Planned[]): Promise<Planned[]> {
    const out: Planned[] = [];
    for (const p of planned) {
      const name = p.policy.limitResolver;
      if (name === undefined) {
        out.push(p);
        continue;
      }
      const given = await (st.resolvers.limit?.[name] as NonNullable<Resolvers["limit"]>[string])(req.request);
      if (given === undefined || given === null) continue;
      out.push({ ...p, policy: resolvedPolicy(p.policy, name, given) });
    }
    return out;
  }

  /** The long way: bodies measured, several subjects, concurrency leases, shadow policies, resolvers, a cluster. */
  async #checkAll(st: State, req: RequestInfo, selection: Selection, given: readonly Planned[], measureBody: MeasureBody, shadowRequest: boolean): Promise<Verdict> {
    const config = st.config;
    const planned = st.limitResolvers ? await this.#resolveLimits(st, req, given) : given;
    if (planned.length === 0) return PASS_UNCHECKED;
    const resolveCost = st.costResolvers ? (name: string) => (st.resolvers.cost?.[name] as (request: unknown) => unknown)(req.request) : undefined;
    const checks = await costs(planned, (name) => req.header(name), config.maxBodyBytes, measureBody, resolveCost);
    if (!Array.isArray(checks)) return { pass: false, refusal: checks };
    if (!this.#breaker.asks()) return this.#failed(st, req, selection, checks, BREAKER_OPEN, shadowRequest);
    if (shadowRequest || !st.mixed || !checks.some((c) => c.policy.shadow)) {
      return this.#decided(st, req, selection, checks, shadowRequest, decide(this.limiter, checks, config.timeoutMs, this.#logger));
    }


    // Shadow policies beside enforced ones: the enforced groups first, then the shadow ones whatever those answered.
    const enforced = checks.filter((c) => !c.policy.shadow);
    const shadow = checks.filter((c) => c.policy.shadow);
    const result: Answered | Failed =
      enforced.length === 0
        ? { answered: true, admitted: true, decisions: [] }
        : await decide(this.limiter, enforced, config.timeoutMs, this.#logger);
    if (!result.answered) {
      this.#breaker.ended(result.error);
      return this.#failed(st, req, selection, checks, result, false);
    }
    let shadowDecisions: Decision[];
    try {
      shadowDecisions = await decideShadow(this.limiter, shadow, config.timeoutMs);
    } catch (err) {
      // Redis failed after the enforced groups: as a failure in the middle of the exchange.
      const error = err instanceof Error ? err : new Error(String(err));
      this.#breaker.ended(error);
      const admitted = result.admitted ? bySubject(enforced).map((group) => ({ checks: group, decisions: group.map((c) => result.decisions[enforced.indexOf(c)] as Decision) })) : [];
      return this.#failed(st, req, selection, checks, { answered: false, error, admitted }, false);
    }
    this.#breaker.ended(undefined);
    let e = 0;
    let s = 0;
    const decisions = checks.map((c) => (c.policy.shadow ? shadowDecisions[s++] : result.decisions[e++]) as Decision);
    return this.#respond(st, req, selection, checks, false, result.admitted, decisions);
  }

  #decided(st: State, req: RequestInfo, selection: Selection, checks: readonly Check[], shadow: boolean, exchange: Promise<Answered | Failed>): Promise<Verdict> {
    return exchange.then((result) => this.#settle(st, req, selection, checks, shadow, result));
  }

  /** The breaker told how the exchange went, then the verdict on it. */
  #settle(st: State, req: RequestInfo, selection: Selection, checks: readonly Check[], shadow: boolean, result: Answered | Failed): Verdict | Promise<Verdict> {
    this.#breaker.ended(result.answered ? undefined : result.error);
    return result.answered ? this.#respond(st, req, selection, checks, shadow, result.admitted, result.decisions) : this.#failed(st, req, selection, checks, result, shadow);
  }

  /** Redis did not answer: the fail mode's verdict. */
  async #failed(st: State, req: RequestInfo, selection: Selection, checks: readonly Check[], result: Failed, shadow: boolean): Promise<Verdict> {
    if (st.local !== undefined) return this.#decideLocally(st, st.local, req, selection, checks, result, shadow);
    const outcome = await st.fail.apply(result);
    this.#emit(req, selection, outcome, checks, undefined, result.error);
    if (outcome === "fail_closed") return { pass: false, refusal: unavailable(st.config.failDeny) };
    // fail: open after some groups were admitted: their leases are held while the request runs.
    const held = result.admitted.flatMap((t) => leasesOf(t.checks, t.decisions));
    return held.length === 0 ? PASS_UNCHECKED : { pass: true, headers: {}, after: undefined, release: this.#releaser(st.config, held) };
  }

  /**
   * `fail: local` (docs/http.md, Fail modes): the checks decided in the
   * process by librl-core's algorithms (local.ts), shadow policies apart
   * from enforced ones as in Redis; then answered as Redis's replies are
   * (headers, refusal, hook with `local: true`). Refused, what Redis had
   * admitted before it failed is given back. No `count` refunds (the
   * local limiter takes none) and no queue turns (RESERVE is not booked
   * in the process).
   */
  async #decideLocally(
    st: State,
    local: LocalLimiter,
    req: RequestInfo,
    selection: Selection,
    checks: readonly Check[],
    failed: Failed,
    shadow: boolean,
  ): Promise<Verdict> {
    const apart = !shadow && st.mixed;
    const enforced = apart ? checks.filter((c) => !c.policy.shadow) : checks;
    const all = local.check(enforced.map((c) => clause(c, "COST")));
    let decisions = all.decisions;
    if (apart && enforced.length < checks.length) {
      const shadowAll = local.check(checks.filter((c) => c.policy.shadow).map((c) => clause(c, "COST")));
      let e = 0;
      let s = 0;
      decisions = checks.map((c) => (c.policy.shadow ? shadowAll.decisions[s++] : all.decisions[e++]) as Decision);
    }
    const checked: Checked[] = checks.map((c, i) => ({ policy: c.policy, decision: decisions[i] as Decision }));
    await st.fail.local(failed, outcomeOf(shadow, checked) === "denied");
    return this.#respond(st, req, selection, checks, shadow, all.allowed, decisions, { limiter: local, error: failed.error });
  }

  /** The verdict on an answered exchange: admitted, denied, or (shadow) would deny. */
  #respond(
    st: State,
    req: RequestInfo,
    selection: Selection,
    checks: readonly Check[],
    shadow: boolean,
    admitted: boolean,
    decisions: readonly Decision[],
    local?: { readonly limiter: LocalLimiter; readonly error: Error },
  ): Verdict | Promise<Verdict> {
    const config = st.config;
    const checked: Checked[] = checks.map((c, i) => ({ policy: c.policy, decision: decisions[i] as Decision }));
    const outcome = outcomeOf(shadow, checked);
    if (outcome !== "denied") {
      if (outcome === "would_deny") {
        const worst = mostRestrictive(checked) as number;
        const what = admitted ? "shadow policy" : "shadow mode";
        this.#logger.warn(`librl: ${what}: ${req.method} ${req.path} would be refused by policy "${(checks[worst] as Check).policy.name}"`);
      }
      this.#emit(req, selection, outcome, checks, decisions, local?.error, local !== undefined);
      const headers = rateLimitHeaders(config.headers, checked, false, config.legacyReset);
      // Not admitted (a shadow request Redis denied): the exchange gave back what the admitted groups took.
      if (!admitted) return { pass: true, headers, after: undefined, release: undefined };
      const held = leasesOf(checks, decisions);
      if (local !== undefined) {
        const release = held.length === 0 ? undefined : localReleaser(local.limiter, held);
        return { pass: true, headers, after: undefined, release };
      }
      const verdict: Verdict = { pass: true, headers, after: this.#after(config, checks), release: held.length === 0 ? undefined : this.#releaser(config, held) };
      // A queued request is served when the turn its queue policies booked comes; a shadow request waits for nothing.
      const wait = st.queues && !shadow ? turnMs(checks, decisions) : 0;
      return wait > 0 ? sleep(wait).then(() => verdict) : verdict;
    }
    const worst = mostRestrictive(checked, true) as number;
    this.#emit(req, selection, "denied", checks, decisions, local?.error, local !== undefined);
    // A shadow concurrency policy's lease is not refunded, but the request it was taken for is not served.
    const shadowHeld = leasesOf(
      checks.filter((c) => c.policy.shadow),
      decisions.filter((_, i) => (checks[i] as Check).policy.shadow),
    );
    if (shadowHeld.length > 0) void (local === undefined ? this.#releaser(config, shadowHeld) : localReleaser(local.limiter, shadowHeld))();
    const headers = rateLimitHeaders(config.headers, checked, true, config.legacyReset);
    return { pass: false, refusal: denied(selection.deny ?? config.deny, checked[worst] as Checked, (checks[worst] as Check).cost, headers) };
  }

  /** `count: failed` refunds below 400, `count: succeeded` from 400 (docs/http.md, Counting after the response). */
  #after(config: Config, checks: readonly Check[]): ((status: number) => Promise<void>) | undefined {
    if (countsAll(checks)) return undefined;
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
    local = false,
  ): void {
    const hook = this.#onDecision;
    if (hook === undefined) return;
    const event: DecisionEvent = {
      outcome,
      local,
      method: req.method,
      path: req.path,
      route: selection.route,
      checks: checks.map((c, i) => ({ policy: c.policy.name, subject: c.subject.tag, key: c.key, cost: c.cost, decision: decisions?.[i] })),
      error,
    };
    callHook(hook, event, this.#logger);
  }
}
