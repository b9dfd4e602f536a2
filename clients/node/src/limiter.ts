import {
  allArgv,
  checkAllOptions,
  checkClause,
  clauseKeys,
  fixedCall,
  limiterArgv,
  overrideDeleteArgv,
  overrideGetArgv,
  overrideListArgv,
  overrideSetArgv,
  slidingCall,
  tokenCall,
  type AllOptions,
  type Clause,
  type Duration,
  type FixedOptions,
  type LimiterCall,
  type OverrideListOptions,
  type OverrideSetOptions,
  type SlidingOptions,
  type TokenOptions,
} from "./args.js";
import { DenialCache, type DenialCacheOptions } from "./cache.js";
import {
  parseAllDecision,
  parseCount,
  parseDecision,
  parseOverrideInfo,
  parseOverrideList,
  type AllDecision,
  type Decision,
  type OverrideInfo,
  type OverrideListPage,
} from "./reply.js";
import { keySlot } from "./slot.js";
import { transportFor, type ClientKind, type IoredisCommandClass, type Transport } from "./transport.js";

/**
 * Thrown before sending when, on a cluster, the keys of one call hash to
 * different slots (the server would answer CROSSSLOT).
 */
export class CrossSlotError extends Error {
  override readonly name = "CrossSlotError";
  constructor(
    message: string,
    /** The keys of the call, with their slots. */
    readonly slots: ReadonlyArray<readonly [key: string, slot: number]>,
  ) {
    super(message);
  }
}

/**
 * A durable Limiter's call took effect on the primary, but fewer replicas
 * than asked acknowledged it within the timeout (`WAIT` replied
 * `replicas`). `reply` is the call's result as it stands on the primary
 * (a Decision, an AllDecision, a count, or undefined for overrideSet): the
 * caller decides whether to act on it.
 */
export class DurabilityError extends Error {
  override readonly name = "DurabilityError";
  /** The Rust client's error code for the same case. */
  readonly code = "NOTDURABLE";
  constructor(
    readonly reply: unknown,
    readonly replicas: number,
    readonly numreplicas: number,
    readonly timeoutMs: number,
  ) {
    super(
      `librl: ${replicas} of ${numreplicas} replicas acknowledged the call within ${timeoutMs} ms ` +
        `(WAIT ${numreplicas} ${timeoutMs}); the primary has it`,
    );
  }
}

/** `WAIT numreplicas timeoutMs` after every call that may write. */
export interface DurableOptions {
  /** Replicas that must acknowledge the call (at least 1). */
  numreplicas: number;
  /** The longest WAIT waits, in ms: at least 1 (`WAIT n 0` would wait forever). */
  timeoutMs: number;
}

export interface LimiterOptions {
  /**
   * Answer a repeated denied call locally until its retryAfterMs has passed
   * (see the README: exact only while nobody else refunds, deletes or
   * overrides that key meanwhile). `true`, or options. Default off.
   */
  denialCache?: boolean | DenialCacheOptions;
  /**
   * Prefix for every key and okey this Limiter sends. Defaults to the
   * client's own `keyPrefix` (ioredis; node-redis 6), which neither client
   * applies to module commands by itself. Not applied to MATCH patterns,
   * nor removed from the okeys overrideList returns.
   */
  keyPrefix?: string;
  /**
   * ioredis only: the `Command` class of the ioredis that built the client.
   * Found automatically; needed only where it cannot be (bundled code).
   */
  ioredisCommand?: unknown;
  /**
   * Sends `WAIT numreplicas timeoutMs` right behind every call that may
   * write (not PEEK, not a GET or LIST), on the same connection, in the
   * same round trip; a call fewer replicas acknowledged rejects with a
   * DurabilityError carrying its reply. Needs a client with one connection
   * per node (not a pool). Default off.
   */
  durable?: DurableOptions;
}

/**
 * The client types a Limiter accepts: an ioredis `Redis` or `Cluster`, or a
 * node-redis (v4+) client, pool or cluster — anything with `sendCommand`.
 */
export interface RedisLikeClient {
  sendCommand(...args: never[]): unknown;
}

function checkDurable(durable: unknown): readonly [number, number] | undefined {
  if (durable === undefined) return undefined;
  const d = durable as Partial<DurableOptions> | null;
  const example = "e.g. { numreplicas: 1, timeoutMs: 100 } sends WAIT 1 100 after every call that writes";
  if (d === null || typeof d !== "object" || Object.keys(d).some((k) => k !== "numreplicas" && k !== "timeoutMs")) {
    throw new TypeError(`new Limiter(): durable must be { numreplicas, timeoutMs } (${example})`);
  }
  if (typeof d.numreplicas !== "number" || !Number.isSafeInteger(d.numreplicas) || d.numreplicas < 1) {
    throw new TypeError(`new Limiter(): durable.numreplicas must be an integer of at least 1 (${example})`);
  }
  if (typeof d.timeoutMs !== "number" || !Number.isSafeInteger(d.timeoutMs) || d.timeoutMs < 1) {
    throw new TypeError(
      `new Limiter(): durable.timeoutMs must be an integer of at least 1 (WAIT with 0 would block the connection forever) (${example})`,
    );
  }
  return [d.numreplicas, d.timeoutMs];
}

/** A clause of `COST 0`: a read, which writes and replicates nothing. */
function isRead(clause: Clause): boolean {
  const at = clause.args.indexOf("COST");
  return at >= 0 && clause.args[at + 1] === "0";
}

/** Runs `f`, turning a synchronous throw (a client-side check) into a rejection. */
function attempt<T>(f: () => Promise<T>): Promise<T> {
  try {
    return f();
  } catch (err) {
    return Promise.reject(err);
  }
}

/** The unique identity of a call for the denial cache. */
function callId(argv: readonly string[]): string {
  return JSON.stringify(argv);
}

export class Limiter {
  readonly #transport: Transport;
  readonly #prefix: string;
  readonly #cache: DenialCache | undefined;
  readonly #durable: readonly [number, number] | undefined;

  constructor(client: RedisLikeClient, options: LimiterOptions = {}) {
    if (options === null || typeof options !== "object") {
      throw new TypeError("new Limiter(client, options): options must be an object");
    }
    for (const name of Object.keys(options)) {
      if (!["denialCache", "keyPrefix", "ioredisCommand", "durable"].includes(name)) {
        throw new TypeError(
          `new Limiter(): unknown option ${JSON.stringify(name)} (expected denialCache, keyPrefix, ioredisCommand, durable)`,
        );
      }
    }
    if (options.ioredisCommand !== undefined && typeof options.ioredisCommand !== "function") {
      throw new TypeError("new Limiter(): ioredisCommand must be ioredis's Command class");
    }
    this.#transport = transportFor(client, options.ioredisCommand as IoredisCommandClass | undefined);
    if (options.keyPrefix !== undefined && typeof options.keyPrefix !== "string") {
      throw new TypeError("new Limiter(): keyPrefix must be a string");
    }
    this.#prefix = options.keyPrefix ?? this.#transport.keyPrefix;
    const dc = options.denialCache;
    if (dc === undefined || dc === false) this.#cache = undefined;
    else if (dc === true) this.#cache = new DenialCache();
    else if (typeof dc === "object" && dc !== null) this.#cache = new DenialCache(dc);
    else throw new TypeError("new Limiter(): denialCache must be a boolean or { maxEntries }");
    this.#durable = checkDurable(options.durable);
  }

  /** Which kind of client this Limiter found: "ioredis", "ioredis-cluster", "node-redis" or "node-redis-cluster". */
  get clientKind(): ClientKind {
    return this.#transport.kind;
  }

  /** The prefix applied to keys and okeys ("" for none). */
  get keyPrefix(): string {
    return this.#prefix;
  }

  /** RL.FIXED: a fixed window of `limit` units per `window`. */
  fixed(key: string, limit: number, window: Duration, options?: FixedOptions): Promise<Decision> {
    return attempt(() => this.#limit(fixedCall(key, limit, window, options)));
  }

  /** RL.SLIDING: an exact sliding log (or, with `approx`, the two-window counter). */
  sliding(key: string, limit: number, window: Duration, options?: SlidingOptions): Promise<Decision> {
    return attempt(() => this.#limit(slidingCall(key, limit, window, options)));
  }

  /** RL.TOKEN: a bucket refilling `rate` tokens per `window`, of capacity `burst` (default `rate`). */
  token(key: string, rate: number, window: Duration, options?: TokenOptions): Promise<Decision> {
    return attempt(() => this.#limit(tokenCall(key, rate, window, options)));
  }

  /** RL.ALL: every clause admits the call and records it, or none does. */
  async all(clauses: readonly Clause[], options?: AllOptions): Promise<AllDecision> {
    if (!Array.isArray(clauses) || clauses.length === 0) {
      throw new TypeError("all(): give an array of at least one clause (Fixed(), Sliding(), Token())");
    }
    const checked = clauses.map((clause, i) => checkClause(clause, i));
    const peek = checkAllOptions(options);
    const argv = allArgv(checked, peek, this.#prefix);
    const keys = checked.flatMap((clause) => clauseKeys(clause, this.#prefix));
    this.#checkSlots("RL.ALL", keys);
    const refund = checked.some((clause) => clause.refund);
    const n = checked.length;
    const writes = !peek && !checked.every(isRead);
    return this.#cached(argv, keys, refund, writes, (reply) => parseAllDecision(reply, n));
  }

  /** RL.OVERRIDE SET: stores an override at `okey` (replacing any). */
  async overrideSet(okey: string, limit: number, window: Duration, options?: OverrideSetOptions): Promise<void> {
    const argv = overrideSetArgv(okey, limit, window, options, this.#prefix);
    this.#cache?.clear();
    try {
      await this.#write(argv, [argv[2] as string], () => undefined);
    } finally {
      this.#cache?.clear();
    }
  }

  /** RL.OVERRIDE GET: the override at `okey`, or null. */
  async overrideGet(okey: string): Promise<OverrideInfo | null> {
    const argv = overrideGetArgv(okey, this.#prefix);
    return parseOverrideInfo(await this.#transport.send(argv, [argv[2] as string], true));
  }

  /** RL.OVERRIDE DEL: deletes overrides; resolves to how many existed. */
  async overrideDelete(...okeys: string[]): Promise<number> {
    const argv = overrideDeleteArgv(okeys, this.#prefix);
    const keys = argv.slice(2);
    this.#checkSlots("RL.OVERRIDE DEL", keys);
    this.#cache?.clear();
    try {
      return await this.#write(argv, keys, (reply) => parseCount(reply, "RL.OVERRIDE DEL"));
    } finally {
      this.#cache?.clear();
    }
  }

  /**
   * RL.OVERRIDE LIST: one page of this server's overrides (SCAN's cursor
   * contract: start at 0, stop when the returned cursor is "0"). On a
   * cluster, each primary lists its own: use a Limiter over each primary's
   * client.
   */
  async overrideList(cursor: number | string | bigint = 0, options?: OverrideListOptions): Promise<OverrideListPage> {
    const argv = overrideListArgv(cursor, options);
    if (this.#transport.isCluster) {
      throw new Error(
        "librl: overrideList() lists one server's overrides, so a cluster cannot route it; " +
          "create a Limiter over each primary's own client (ioredis: cluster.nodes('master'); " +
          "node-redis: cluster.masters with cluster.nodeClient(master)) and list each",
      );
    }
    return parseOverrideList(await this.#transport.send(argv, [], true));
  }

  /** Throws client-side errors synchronously (the public methods turn them into rejections). */
  #limit(call: LimiterCall): Promise<Decision> {
    const argv = limiterArgv(call, this.#prefix);
    const keys = clauseKeys(call, this.#prefix);
    if (keys.length > 1) this.#checkSlots(argv[0] as string, keys);
    const writes = !call.peek && !isRead(call);
    return this.#cached(argv, keys, call.refund, writes, (reply) => parseDecision(reply, argv[0] as string));
  }

  /** Sends a call that may write: with `WAIT` behind it when this Limiter is durable. */
  #write<T>(argv: readonly string[], keys: readonly string[], parse: (reply: unknown) => T): Promise<T> {
    const durable = this.#durable;
    if (durable === undefined) return this.#transport.send(argv, keys, false).then(parse);
    return this.#transport.sendWithWait(argv, keys, durable).then(([reply, acked]) => {
      const result = parse(reply);
      const replicas = Number(acked);
      if (!(replicas >= durable[0])) throw new DurabilityError(result, replicas, durable[0], durable[1]);
      return result;
    });
  }

  #cached<T extends Decision | AllDecision>(
    argv: readonly string[],
    keys: readonly string[],
    refund: boolean,
    writes: boolean,
    parse: (reply: unknown) => T,
  ): Promise<T> {
    const cache = this.#cache;
    const durable = writes && this.#durable !== undefined;
    // The hot path: no cache, not durable: one promise from the client, one .then.
    if (cache === undefined) {
      return durable ? this.#write(argv, keys, parse) : this.#transport.send(argv, keys, false).then(parse);
    }
    return this.#throughCache(cache, argv, keys, refund, (a, k) =>
      durable ? this.#write(a, k, parse) : this.#transport.send(a, k, false).then(parse),
    );
  }

  async #throughCache<T extends Decision | AllDecision>(
    cache: DenialCache,
    argv: readonly string[],
    keys: readonly string[],
    refund: boolean,
    call: (argv: readonly string[], keys: readonly string[]) => Promise<T>,
  ): Promise<T> {
    if (refund) {
      // A refund can make a cached denial wrong: forget the key's entries
      // (again after the reply, in case a denial arrived meanwhile).
      for (const key of keys) cache.clearKey(key);
      try {
        return await call(argv, keys);
      } finally {
        for (const key of keys) cache.clearKey(key);
      }
    }
    const id = callId(argv);
    const hit = cache.get(id) as T | undefined;
    if (hit !== undefined) return hit;
    const generation = cache.generation;
    const decision = await call(argv, keys);
    cache.offer(id, keys, decision, generation);
    return decision;
  }

  #checkSlots(command: string, keys: readonly string[]): void {
    if (!this.#transport.isCluster || keys.length < 2) return;
    const slots = keys.map((key) => [key, keySlot(key)] as const);
    const first = slots[0] as readonly [string, number];
    const other = slots.find(([, slot]) => slot !== first[1]);
    if (other === undefined) return;
    throw new CrossSlotError(
      `librl: ${command} on a cluster needs all its keys in one hash slot, but ${JSON.stringify(first[0])} ` +
        `is in slot ${first[1]} and ${JSON.stringify(other[0])} in slot ${other[1]}. ` +
        `Give them a common hash tag, e.g. "{user42}:min" and "{user42}:day" (only the part in braces is hashed).`,
      slots,
    );
  }
}
