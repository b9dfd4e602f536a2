import {
  acquireCall,
  allArgv,
  checkAllOptions,
  checkClause,
  checkInteger,
  checkKey,
  clauseKeys,
  fixedCall,
  limiterArgv,
  overrideDeleteArgv,
  overrideGetArgv,
  overrideListArgv,
  overrideSetArgv,
  slidingCall,
  tokenCall,
  type AcquireOptions,
  type AllOptions,
  type Clause,
  type ConcurrentOptions,
  type Duration,
  type FixedOptions,
  type LimiterCall,
  type OverrideListOptions,
  type OverrideSetOptions,
  type SlidingOptions,
  type TokenOptions,
} from "./args.js";
import { DenialCache, type DenialCacheOptions } from "./cache.js";
import { HeldCalls, heldForMs } from "./held.js";
import { Lease, LeaseRefusedError, type KeepAliveOptions } from "./lease.js";
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
import { isTryAgain, splitAll, splitCall, type SplitIo } from "./split.js";
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
   * Answer a repeated denied call locally until its retryAfterMs has
   * passed, or the max age (1 s) has (see the README: exact only while
   * nobody else refunds, deletes or overrides that key meanwhile). `true`,
   * or options. Default off.
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

/** What `withLease` takes besides the acquire's options. */
export interface WithLeaseOptions extends ConcurrentOptions, KeepAliveOptions {
  /** Renew the lease in the background while `fn` runs (`lease.keepAlive()`); `lease.signal` aborts if it is lost. */
  keepAlive?: boolean;
}

const WITH_LEASE_OWN = new Set(["keepAlive", "onLost"]);

export class Limiter {
  readonly #transport: Transport;
  readonly #prefix: string;
  readonly #cache: DenialCache | undefined;
  readonly #durable: readonly [number, number] | undefined;
  /** Connections of its own for the calls the server holds (WAIT). */
  readonly #held: HeldCalls;
  /** How a call split on TRYAGAIN sends its one-key calls. */
  readonly #io: SplitIo = {
    overrideGet: (okey) => this.overrideGet(okey),
    call: (call) => this.#send(call),
  };

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
    const ioredisCommand = options.ioredisCommand as IoredisCommandClass | undefined;
    this.#transport = transportFor(client, ioredisCommand);
    this.#held = new HeldCalls(client as unknown as Record<string, unknown>, this.#transport, ioredisCommand);
    if (options.keyPrefix !== undefined && typeof options.keyPrefix !== "string") {
      throw new TypeError("new Limiter(): keyPrefix must be a string");
    }
    this.#prefix = options.keyPrefix ?? this.#transport.keyPrefix;
    const dc = options.denialCache;
    if (dc === undefined || dc === false) this.#cache = undefined;
    else if (dc === true) this.#cache = new DenialCache();
    else if (typeof dc === "object" && dc !== null) this.#cache = new DenialCache(dc);
    else throw new TypeError("new Limiter(): denialCache must be a boolean or { maxEntries, maxAgeMs }");
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

  /**
   * The short way for a caller that builds RL.ALL's argv itself from plans
   * made once (the HTTP integrations, on every request): `argv` is sent as
   * given, unchecked and unprefixed, and the raw reply returned. Undefined
   * when calls must take all()'s way: on a cluster (a TRYAGAIN is split),
   * with the denial cache, or durable. Internal: not part of the API.
   * @internal
   */
  get directAll(): ((argv: readonly string[], keys: readonly string[]) => Promise<unknown>) | undefined {
    if (this.#transport.isCluster || this.#cache !== undefined || this.#durable !== undefined || this.#prefix !== "") return undefined;
    const transport = this.#transport;
    return (argv, keys) => transport.send(argv, keys, false);
  }
  /**
   * The short way's RESP-encoded variant, where the connection takes a
   * command already encoded (the integrations' own, made from a URL): the
   * caller encodes RL.ALL from parts made once per policy; the connection
   * bounds the wait (`timeoutMs`) without a timer per call. Undefined
   * where directAll is, and for the client libraries. Internal.
   * @internal
   */
  get directEncoded(): ((command: string, timeoutMs: number) => Promise<unknown>) | undefined {
    return this.directAll === undefined ? undefined : this.#transport.sendEncoded;
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

  /**
   * RL.CONCURRENT: takes `cost` slots (default 1) of `limit` as one lease
   * ending `lease` from now unless renewed. Resolves to the Lease, admitted
   * or refused (a refusal is not an error): `release()` it when done.
   */
  async acquire(key: string, limit: number, lease: Duration, options?: AcquireOptions): Promise<Lease> {
    const call = acquireCall(key, limit, lease, options);
    return new Lease(await this.#send(call), call, this.#sendLease);
  }

  /**
   * Runs `fn` holding a lease of `limit` on `key`, and releases it however
   * `fn` ends. Rejects with a LeaseRefusedError (its `decision` the refusal)
   * when no slot is free, without calling `fn`. With `keepAlive: true` the
   * lease is renewed in the background while `fn` runs, and `lease.signal`
   * aborts if it is lost.
   */
  withLease<T>(key: string, limit: number, lease: Duration, fn: (lease: Lease) => Promise<T> | T): Promise<T>;
  withLease<T>(
    key: string,
    limit: number,
    lease: Duration,
    options: WithLeaseOptions,
    fn: (lease: Lease) => Promise<T> | T,
  ): Promise<T>;
  async withLease<T>(
    key: string,
    limit: number,
    lease: Duration,
    optionsOrFn: WithLeaseOptions | ((lease: Lease) => Promise<T> | T),
    maybeFn?: (lease: Lease) => Promise<T> | T,
  ): Promise<T> {
    const [options, fn] =
      typeof optionsOrFn === "function" ? [{} as WithLeaseOptions, optionsOrFn] : [optionsOrFn, maybeFn];
    if (typeof fn !== "function") throw new TypeError("withLease(): give the function to run holding the lease, last");
    if (options === null || typeof options !== "object") throw new TypeError("withLease(): options must be an object");
    const acquireOptions: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(options)) {
      if (!WITH_LEASE_OWN.has(name)) acquireOptions[name] = value;
    }
    if (options.keepAlive !== undefined && typeof options.keepAlive !== "boolean") {
      throw new TypeError("withLease(): option keepAlive must be a boolean");
    }
    if ("peek" in acquireOptions) throw new TypeError("withLease(): peek takes no lease; use acquire() with peek");
    const held = await this.acquire(key, limit, lease, acquireOptions as ConcurrentOptions);
    if (!held.allowed) throw new LeaseRefusedError(held.decision);
    if (options.keepAlive === true) {
      held.keepAlive(options.onLost === undefined ? {} : { onLost: options.onLost });
    } else if (options.onLost !== undefined) {
      throw new TypeError("withLease(): onLost needs keepAlive: true");
    }
    let result: T;
    try {
      result = await fn(held);
    } catch (err) {
      // The work's error is the one to report; a release failing too leaves
      // the lease to end by itself.
      await held.release().catch(() => undefined);
      throw err;
    }
    await held.release();
    return result;
  }

  /**
   * The Lease of an id taken elsewhere: by a Concurrent() clause of all()
   * (give its decision, `all.decisions[i]`), or handed over by another
   * process (give the id). `clause` names the limit RELEASE and RENEW
   * repeat: `Concurrent(key, limit, lease, { override })`. Sends nothing.
   */
  heldLease(clause: Clause, lease: number | Decision): Lease {
    const c = checkClause(clause, 0);
    if (c.algorithm !== "CONCURRENT") throw new TypeError("heldLease(): clause must be a Concurrent() clause");
    let decision: Decision;
    if (typeof lease === "number") {
      checkInteger("heldLease()", "lease id", lease);
      decision = { allowed: lease > 0, count: 0, retryAfterMs: 0, limit: Number(c.args[0]), remaining: 0, resetAfterMs: 0, leaseId: lease };
    } else if (lease !== null && typeof lease === "object" && typeof lease.leaseId === "number") {
      decision = lease;
    } else {
      throw new TypeError("heldLease(): give the lease id, or the clause's decision from all()");
    }
    return new Lease(decision, c, this.#sendLease);
  }

  /** RL.ALL: every clause admits the call and records it, or none does. */
  async all(clauses: readonly Clause[], options?: AllOptions): Promise<AllDecision> {
    if (!Array.isArray(clauses) || clauses.length === 0) {
      throw new TypeError("all(): give an array of at least one clause (Fixed(), Sliding(), Token(), Concurrent())");
    }
    const checked = clauses.map((clause, i) => checkClause(clause, i));
    const peek = checkAllOptions(options);
    const argv = allArgv(checked, peek, this.#prefix);
    const keys = checked.flatMap((clause) => clauseKeys(clause, this.#prefix));
    this.#checkSlots("RL.ALL", keys);
    const refund = checked.some((clause) => clause.refund);
    const n = checked.length;
    const writes = !peek && !checked.every(isRead);
    const holdMs = heldForMs(checked, peek);
    // A release frees a slot before a denial's retryAfterMs: never cached.
    const cacheable = !checked.some((clause) => clause.algorithm === "CONCURRENT");
    return this.#cached(argv, keys, refund, cacheable, () => {
      const sent = this.#exchange(argv, keys, writes, holdMs, (reply) => parseAllDecision(reply, n));
      return this.#transport.isCluster ? sent.catch((err: unknown) => this.#splitOn(err, () => splitAll(checked, peek, this.#io))) : sent;
    });
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

  /**
   * Forgets the cached denials that name any of these keys (limiter keys or
   * okeys, as given to the calls): an operator's change (an override set,
   * a key deleted) applies at once instead of within the cache's max age.
   */
  forgetDenials(...keys: string[]): void {
    keys.forEach((key, i) => this.#cache?.clearKey(this.#prefix + checkKey("forgetDenials()", `key ${i}`, key)));
  }

  /** Forgets every cached denial (after an `rl.mode` change, say). */
  clearDenialCache(): void {
    this.#cache?.clear();
  }

  /**
   * Closes the connections this Limiter opened for calls the server holds
   * (`wait`); the client stays the application's to close. A call with
   * `wait` after this rejects.
   */
  close(): void {
    this.#held.close();
  }

  /** A limiter call, through the denial cache (RL.CONCURRENT never is: a release ends a denial early). */
  #limit(call: LimiterCall): Promise<Decision> {
    if (this.#cache === undefined || call.algorithm === "CONCURRENT") return this.#send(call);
    const argv = limiterArgv(call, this.#prefix);
    const keys = clauseKeys(call, this.#prefix);
    return this.#cached(argv, keys, call.refund, true, () => this.#send(call));
  }

  /**
   * Sends one limiter call; on a cluster, a call naming two keys that meets
   * TRYAGAIN is split (split.ts). Throws client-side errors synchronously
   * (the public methods turn them into rejections).
   */
  #send(call: LimiterCall): Promise<Decision> {
    const argv = limiterArgv(call, this.#prefix);
    const keys = clauseKeys(call, this.#prefix);
    if (keys.length > 1) this.#checkSlots(argv[0] as string, keys);
    const writes = !call.peek && !isRead(call);
    const sent = this.#exchange(argv, keys, writes, heldForMs([call], call.peek), (reply) =>
      parseDecision(reply, argv[0] as string),
    );
    if (keys.length < 2 || !this.#transport.isCluster) return sent;
    return sent.catch((err: unknown) => this.#splitOn(err, () => splitCall(call, this.#io)));
  }

  /** The lease's RELEASE and RENEW: as any call, never from the denial cache. */
  readonly #sendLease = (call: LimiterCall): Promise<Decision> => attempt(() => this.#send(call));

  /** Runs the split for a TRYAGAIN; any other error goes on. */
  #splitOn<T>(err: unknown, split: () => Promise<T>): Promise<T> {
    return isTryAgain(err) ? split() : Promise.reject(err);
  }

  /**
   * One round trip: a call that may write is followed by `WAIT` on the same
   * connection when this Limiter is durable; a call the server may hold
   * (`holdMs`, its WAIT) goes on a connection of its own.
   */
  #exchange<T>(
    argv: readonly string[],
    keys: readonly string[],
    writes: boolean,
    holdMs: number | undefined,
    parse: (reply: unknown) => T,
  ): Promise<T> {
    const durable = writes ? this.#durable : undefined;
    // The hot path: not durable, not held: one promise from the client, one .then.
    if (holdMs === undefined && durable === undefined) return this.#transport.send(argv, keys, false).then(parse);
    const exchange = (transport: Transport): Promise<T> => {
      if (durable === undefined) return transport.send(argv, keys, false).then(parse);
      return transport.sendWithWait(argv, keys, durable).then(([reply, acked]) => {
        const result = parse(reply);
        const replicas = Number(acked);
        if (!(replicas >= durable[0])) throw new DurabilityError(result, replicas, durable[0], durable[1]);
        return result;
      });
    };
    return holdMs === undefined ? exchange(this.#transport) : this.#held.run(holdMs, exchange);
  }

  /** Sends an override change (`WAIT` behind it when durable), around which the denial cache is cleared. */
  #write<T>(argv: readonly string[], keys: readonly string[], parse: (reply: unknown) => T): Promise<T> {
    return this.#exchange(argv, keys, true, undefined, parse);
  }

  #cached<T extends Decision | AllDecision>(
    argv: readonly string[],
    keys: readonly string[],
    refund: boolean,
    cacheable: boolean,
    send: () => Promise<T>,
  ): Promise<T> {
    const cache = this.#cache;
    if (cache === undefined || !cacheable) return send();
    return this.#throughCache(cache, argv, keys, refund, send);
  }

  async #throughCache<T extends Decision | AllDecision>(
    cache: DenialCache,
    argv: readonly string[],
    keys: readonly string[],
    refund: boolean,
    send: () => Promise<T>,
  ): Promise<T> {
    if (refund) {
      // A refund can make a cached denial wrong: forget the key's entries
      // (again after the reply, in case a denial arrived meanwhile).
      for (const key of keys) cache.clearKey(key);
      try {
        return await send();
      } finally {
        for (const key of keys) cache.clearKey(key);
      }
    }
    const id = callId(argv);
    const hit = cache.get(id) as T | undefined;
    if (hit !== undefined) return hit;
    const ticket = cache.ticket();
    const decision = await send();
    cache.offer(id, keys, decision, ticket);
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
