/**
 * Typed arguments -> the commands' argument vectors, with client-side checks
 * of types and of mutually exclusive options. Ranges (1..2^50, 1 ms..3650
 * days) are the server's to check: its errors name the argument.
 */

/**
 * A window or duration: an integer number of seconds, or a string as the
 * commands take it (`"1500ms"`, `"90s"`, `"1m"`, `"24h"`, `"7d"`).
 */
export type Duration = number | string;

/** Options every limiter takes, alone or as an RL.ALL clause. */
export interface CommonOptions {
  /** Units this call consumes (`COST n`); the server's default is 1. */
  cost?: number;
  /** Give back up to `n` units this limiter recorded (`REFUND n`); not with `cost`. */
  refund?: number;
  /** A denial starts a block of this duration on the key (`BLOCK duration`). */
  block?: Duration;
  /** Read limit, window (and burst) from the override stored at this key (`OVERRIDE okey`). */
  override?: string;
}

export interface FixedClauseOptions extends CommonOptions {
  /** Windows aligned on multiples of the window in Unix time (`ALIGNED`). */
  aligned?: boolean;
}

export interface SlidingClauseOptions extends CommonOptions {
  /** The two-window weighted counter instead of the exact log (`APPROX`). */
  approx?: boolean;
}

export interface TokenClauseOptions extends CommonOptions {
  /** Bucket capacity (`BURST capacity`); the server's default is `rate`. */
  burst?: number;
  /** Admit now against future tokens if they exist within this wait (`RESERVE max_wait`); not with `wait`. */
  reserve?: Duration;
  /** As `reserve`, and the server replies only when the reserved time has come (`WAIT max_wait`); not with `reserve`. */
  wait?: Duration;
}

/** Options of an RL.CONCURRENT acquire, alone or as an RL.ALL clause. */
export interface ConcurrentClauseOptions {
  /** Slots this lease takes (`COST n`); the server's default is 1; 0 reads the slots held. */
  cost?: number;
  /** Read limit and lease (its window) from the override stored at this key (`OVERRIDE okey`). */
  override?: string;
}

export interface ConcurrentOptions extends ConcurrentClauseOptions {
  /**
   * A refused acquire waits up to this long for a slot, the server holding
   * the reply (`WAIT max_wait`, 0 allowed); sent on a connection of the
   * Limiter's own. Not an RL.ALL clause option.
   */
  wait?: Duration;
}

export interface PeekOption {
  /** Answer as if the call were made, and change nothing (`PEEK`). */
  peek?: boolean;
}

export interface AcquireOptions extends ConcurrentOptions, PeekOption {}
export interface FixedOptions extends FixedClauseOptions, PeekOption {}
export interface SlidingOptions extends SlidingClauseOptions, PeekOption {}
export interface TokenOptions extends TokenClauseOptions, PeekOption {}

export interface AllOptions extends PeekOption {}

export interface OverrideSetOptions {
  /** The override's bucket capacity for RL.TOKEN (`BURST capacity`). */
  burst?: number;
  /** The override expires after this duration (`TTL duration`); without it, it lives until deleted. */
  ttl?: Duration;
}

export interface OverrideListOptions {
  /** Only okeys matching this glob-style pattern (`MATCH pattern`). */
  match?: string;
  /** A hint of how much work one call does (`COUNT count`). */
  count?: number;
}

export type Algorithm = "FIXED" | "SLIDING" | "TOKEN" | "CONCURRENT";

/**
 * One limiter call, checked and split so that key prefixes can be applied
 * to its keys: `[key, ...head, ...(OVERRIDE okey), ...(PEEK)]`.
 */
export interface Clause {
  readonly algorithm: Algorithm;
  readonly key: string;
  /** limit/rate, window (CONCURRENT: lease), then the options other than OVERRIDE and PEEK. */
  readonly args: readonly string[];
  readonly override: string | undefined;
  /** Whether this clause gives units back (REFUND): such calls are never cached. */
  readonly refund: boolean;
}

/** A checked single-limiter call: a clause plus its own PEEK flag. */
export interface LimiterCall extends Clause {
  readonly peek: boolean;
}

const COMMON_KEYS = ["cost", "refund", "block", "override"] as const;
const FIXED_KEYS = new Set<string>([...COMMON_KEYS, "aligned"]);
const SLIDING_KEYS = new Set<string>([...COMMON_KEYS, "approx"]);
const TOKEN_KEYS = new Set<string>([...COMMON_KEYS, "burst", "reserve", "wait"]);
const FIXED_CALL_KEYS = new Set<string>([...FIXED_KEYS, "peek"]);
const SLIDING_CALL_KEYS = new Set<string>([...SLIDING_KEYS, "peek"]);
const TOKEN_CALL_KEYS = new Set<string>([...TOKEN_KEYS, "peek"]);
const CONCURRENT_KEYS = new Set<string>(["cost", "override"]);
const ACQUIRE_KEYS = new Set<string>([...CONCURRENT_KEYS, "wait", "peek"]);
const ALL_KEYS = new Set<string>(["peek"]);
const OVERRIDE_SET_KEYS = new Set<string>(["burst", "ttl"]);
const OVERRIDE_LIST_KEYS = new Set<string>(["match", "count"]);

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "string") return `the string ${JSON.stringify(value)}`;
  if (typeof value === "number" || typeof value === "bigint" || typeof value === "boolean") {
    return `${typeof value} ${String(value)}`;
  }
  return typeof value;
}

export function checkKey(where: string, name: string, value: unknown): string {
  if (typeof value !== "string") {
    throw new TypeError(`${where}: ${name} must be a string, got ${describe(value)}`);
  }
  return value;
}

/** An integer argument (limit, rate, burst, cost, refund, count), as a string. */
export function checkInteger(where: string, name: string, value: unknown): string {
  if (typeof value !== "number" || !Number.isSafeInteger(value)) {
    throw new TypeError(`${where}: ${name} must be an integer number, got ${describe(value)}`);
  }
  return String(value);
}

/** A window or duration: integer seconds or the command's own string form. */
export function checkDuration(where: string, name: string, value: unknown): string {
  if (typeof value === "number") {
    if (!Number.isSafeInteger(value)) {
      throw new TypeError(
        `${where}: ${name} must be an integer number of seconds or a string such as "1500ms", got ${describe(value)}`,
      );
    }
    return String(value);
  }
  if (typeof value === "string" && value.length > 0) return value;
  throw new TypeError(
    `${where}: ${name} must be an integer number of seconds or a string such as "1500ms" or "1m", got ${describe(value)}`,
  );
}

function checkBoolean(where: string, name: string, value: unknown): boolean {
  if (value === undefined) return false;
  if (typeof value !== "boolean") {
    throw new TypeError(`${where}: option ${name} must be a boolean, got ${describe(value)}`);
  }
  return value;
}

function checkOptionsObject(
  where: string,
  options: unknown,
  allowed: ReadonlySet<string>,
): Record<string, unknown> {
  if (options === undefined) return {};
  if (options === null || typeof options !== "object" || Array.isArray(options)) {
    throw new TypeError(`${where}: options must be an object, got ${describe(options)}`);
  }
  const record = options as Record<string, unknown>;
  for (const name of Object.keys(record)) {
    if (!allowed.has(name)) {
      throw new TypeError(
        `${where}: unknown option ${JSON.stringify(name)} (expected one of ${[...allowed].join(", ")})`,
      );
    }
  }
  return record;
}

/**
 * Builds a clause, or with `peek` set a single-limiter call (the options then
 * include `peek`); `where` names the caller in error messages. The result is
 * one object literal: spreading an object with an undefined field is slow.
 */
function buildClause(
  where: string,
  algorithm: Algorithm,
  key: unknown,
  limit: unknown,
  window: unknown,
  options: unknown,
  allowed: ReadonlySet<string>,
  limitName: string,
  call: boolean,
  windowName = "window",
): LimiterCall | Clause {
  const record = checkOptionsObject(where, options, allowed);
  const checkedKey = checkKey(where, "key", key);
  const args: string[] = [checkInteger(where, limitName, limit), checkDuration(where, windowName, window)];
  if (algorithm === "FIXED" && checkBoolean(where, "aligned", record["aligned"])) args.push("ALIGNED");
  if (algorithm === "SLIDING" && checkBoolean(where, "approx", record["approx"])) args.push("APPROX");
  if (algorithm === "TOKEN" && record["burst"] !== undefined) {
    args.push("BURST", checkInteger(where, "burst", record["burst"]));
  }
  const cost = record["cost"];
  const refund = record["refund"];
  if (cost !== undefined && refund !== undefined) {
    throw new TypeError(`${where}: cost and refund are mutually exclusive (a call either consumes or gives back)`);
  }
  if (cost !== undefined) args.push("COST", checkInteger(where, "cost", cost));
  if (refund !== undefined) args.push("REFUND", checkInteger(where, "refund", refund));
  if (algorithm === "CONCURRENT" && record["wait"] !== undefined) {
    args.push("WAIT", checkDuration(where, "wait", record["wait"]));
  }
  if (algorithm === "TOKEN") {
    const reserve = record["reserve"];
    const wait = record["wait"];
    if (reserve !== undefined && wait !== undefined) {
      throw new TypeError(`${where}: reserve and wait are mutually exclusive (wait is reserve plus a server-side wait)`);
    }
    if (reserve !== undefined) args.push("RESERVE", checkDuration(where, "reserve", reserve));
    if (wait !== undefined) args.push("WAIT", checkDuration(where, "wait", wait));
  }
  if (record["block"] !== undefined) args.push("BLOCK", checkDuration(where, "block", record["block"]));
  const override =
    record["override"] === undefined ? undefined : checkKey(where, "option override", record["override"]);
  if (!call) return { algorithm, key: checkedKey, args, override, refund: refund !== undefined };
  const peek = checkBoolean(where, "peek", record["peek"]);
  return { algorithm, key: checkedKey, args, override, refund: refund !== undefined, peek };
}

export function fixedCall(key: unknown, limit: unknown, window: unknown, options: unknown): LimiterCall {
  return buildClause("fixed()", "FIXED", key, limit, window, options, FIXED_CALL_KEYS, "limit", true) as LimiterCall;
}

export function slidingCall(key: unknown, limit: unknown, window: unknown, options: unknown): LimiterCall {
  return buildClause("sliding()", "SLIDING", key, limit, window, options, SLIDING_CALL_KEYS, "limit", true) as LimiterCall;
}

export function tokenCall(key: unknown, rate: unknown, window: unknown, options: unknown): LimiterCall {
  return buildClause("token()", "TOKEN", key, rate, window, options, TOKEN_CALL_KEYS, "rate", true) as LimiterCall;
}

export function acquireCall(key: unknown, limit: unknown, lease: unknown, options: unknown): LimiterCall {
  return buildClause("acquire()", "CONCURRENT", key, limit, lease, options, ACQUIRE_KEYS, "limit", true, "lease") as LimiterCall;
}

/** An RL.ALL clause for a fixed window (the options of `limiter.fixed` but `peek`). */
export function Fixed(key: string, limit: number, window: Duration, options?: FixedClauseOptions): Clause {
  return Object.freeze(buildClause("Fixed()", "FIXED", key, limit, window, options, FIXED_KEYS, "limit", false));
}

/** An RL.ALL clause for a sliding window (the options of `limiter.sliding` but `peek`). */
export function Sliding(key: string, limit: number, window: Duration, options?: SlidingClauseOptions): Clause {
  return Object.freeze(buildClause("Sliding()", "SLIDING", key, limit, window, options, SLIDING_KEYS, "limit", false));
}

/** An RL.ALL clause for a token bucket (the options of `limiter.token` but `peek`). */
export function Token(key: string, rate: number, window: Duration, options?: TokenClauseOptions): Clause {
  return Object.freeze(buildClause("Token()", "TOKEN", key, rate, window, options, TOKEN_KEYS, "rate", false));
}

/**
 * An RL.ALL clause for a concurrency limit (`cost`, `override`): it takes
 * its lease only when every clause admits the call; the clause's decision
 * carries the lease id (`limiter.heldLease(clause, id)` gives it back).
 */
export function Concurrent(key: string, limit: number, lease: Duration, options?: ConcurrentClauseOptions): Clause {
  return Object.freeze(
    buildClause("Concurrent()", "CONCURRENT", key, limit, lease, options, CONCURRENT_KEYS, "limit", false, "lease"),
  );
}

/**
 * `RL.CONCURRENT key limit lease RELEASE|RENEW id [OVERRIDE okey]`: a held
 * lease's limit (a CONCURRENT clause or acquire call) with the action.
 * RELEASE goes without the OVERRIDE: it frees the same slots either way,
 * and a call naming one key never meets TRYAGAIN while its slot moves. A
 * renewal keeps it: the override's window is the lease's length.
 */
export function leaseActionCall(limit: Clause, action: "RELEASE" | "RENEW", id: number): LimiterCall {
  return {
    algorithm: "CONCURRENT",
    key: limit.key,
    args: [limit.args[0] as string, limit.args[1] as string, action, String(id)],
    override: action === "RELEASE" ? undefined : limit.override,
    refund: false,
    peek: false,
  };
}

const ALGORITHMS = new Set<string>(["FIXED", "SLIDING", "TOKEN", "CONCURRENT"]);

export function checkClause(value: unknown, index: number): Clause {
  const c = value as Partial<Clause> | null;
  if (
    c === null ||
    typeof c !== "object" ||
    typeof c.algorithm !== "string" ||
    !ALGORITHMS.has(c.algorithm) ||
    typeof c.key !== "string" ||
    !Array.isArray(c.args)
  ) {
    throw new TypeError(
      `all(): clause ${index} is not a clause; build clauses with Fixed(), Sliding(), Token() or Concurrent()`,
    );
  }
  return c as Clause;
}

/** The words of the clause grammar that take no value. */
const FLAGS = new Set<string>(["ALIGNED", "APPROX"]);

/**
 * A clause's options after its two positionals, in order, as `[NAME,
 * value]` (value undefined for ALIGNED and APPROX): the clauses this
 * package builds, and those the HTTP layer builds, follow the command
 * grammar, so the words can be read back.
 */
export function clauseOptions(args: readonly string[]): Array<[name: string, value: string | undefined]> {
  const options: Array<[string, string | undefined]> = [];
  for (let i = 2; i < args.length; ) {
    const name = (args[i] as string).toUpperCase();
    if (FLAGS.has(name)) {
      options.push([name, undefined]);
      i += 1;
    } else {
      options.push([name, args[i + 1]]);
      i += 2;
    }
  }
  return options;
}

/** The value of one of a clause's options (`COST`, `WAIT`, ...), or undefined. */
export function clauseOption(clause: Clause, name: string): string | undefined {
  return clauseOptions(clause.args).find(([n]) => n === name)?.[1];
}

/** The argument vector of one clause (without its algorithm name), keys prefixed. */
export function clauseArgs(clause: Clause, prefix: string): string[] {
  const argv = [prefix + clause.key, ...clause.args];
  if (clause.override !== undefined) argv.push("OVERRIDE", prefix + clause.override);
  return argv;
}

/** The keys a clause declares, prefixed: its key, then its okey. */
export function clauseKeys(clause: Clause, prefix: string): string[] {
  return clause.override === undefined ? [prefix + clause.key] : [prefix + clause.key, prefix + clause.override];
}

export function limiterArgv(call: LimiterCall, prefix: string): string[] {
  const argv = ["RL." + call.algorithm, ...clauseArgs(call, prefix)];
  if (call.peek) argv.push("PEEK");
  return argv;
}

export function allArgv(clauses: readonly Clause[], peek: boolean, prefix: string): string[] {
  const argv = ["RL.ALL"];
  for (const clause of clauses) argv.push(clause.algorithm, ...clauseArgs(clause, prefix));
  if (peek) argv.push("PEEK");
  return argv;
}

export function checkAllOptions(options: unknown): boolean {
  const record = checkOptionsObject("all()", options, ALL_KEYS);
  return checkBoolean("all()", "peek", record["peek"]);
}

export function overrideSetArgv(okey: unknown, limit: unknown, window: unknown, options: unknown, prefix: string): string[] {
  const where = "overrideSet()";
  const record = checkOptionsObject(where, options, OVERRIDE_SET_KEYS);
  const argv = [
    "RL.OVERRIDE",
    "SET",
    prefix + checkKey(where, "okey", okey),
    checkInteger(where, "limit", limit),
    checkDuration(where, "window", window),
  ];
  if (record["burst"] !== undefined) argv.push("BURST", checkInteger(where, "burst", record["burst"]));
  if (record["ttl"] !== undefined) argv.push("TTL", checkDuration(where, "ttl", record["ttl"]));
  return argv;
}

export function overrideGetArgv(okey: unknown, prefix: string): string[] {
  return ["RL.OVERRIDE", "GET", prefix + checkKey("overrideGet()", "okey", okey)];
}

export function overrideDeleteArgv(okeys: readonly unknown[], prefix: string): string[] {
  if (okeys.length === 0) throw new TypeError("overrideDelete(): give at least one okey");
  return ["RL.OVERRIDE", "DEL", ...okeys.map((okey, i) => prefix + checkKey("overrideDelete()", `okey ${i}`, okey))];
}

export function overrideListArgv(cursor: unknown, options: unknown): string[] {
  const where = "overrideList()";
  let cur: string;
  if (typeof cursor === "string" && /^[0-9]+$/.test(cursor)) cur = cursor;
  else if (typeof cursor === "number" && Number.isSafeInteger(cursor) && cursor >= 0) cur = String(cursor);
  else if (typeof cursor === "bigint" && cursor >= 0n) cur = cursor.toString();
  else {
    throw new TypeError(`${where}: cursor must be 0 or the cursor a previous call returned, got ${describe(cursor)}`);
  }
  const record = checkOptionsObject(where, options, OVERRIDE_LIST_KEYS);
  const argv = ["RL.OVERRIDE", "LIST", cur];
  if (record["match"] !== undefined) argv.push("MATCH", checkKey(where, "option match", record["match"]));
  if (record["count"] !== undefined) argv.push("COUNT", checkInteger(where, "count", record["count"]));
  return argv;
}

const DURATION_UNITS_MS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * A duration argument as the command reads it (a bare integer is seconds),
 * in ms; undefined when it is not one (the server's error will say so).
 */
export function durationMs(value: string): number | undefined {
  const m = /^([0-9]+)(ms|s|m|h|d)?$/i.exec(value);
  if (m === null) return undefined;
  return Number(m[1]) * (DURATION_UNITS_MS[(m[2] ?? "s").toLowerCase()] as number);
}
