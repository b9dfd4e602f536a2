/**
 * The `local` fail mode's limiter (docs/http.md, Fail modes): while Redis
 * cannot answer, the process decides the checks itself with librl-core's
 * algorithms, integer for integer (held to them by
 * conformance/vectors/algorithms.json), all-or-nothing as RL.ALL is.
 * Limits then hold per process; overrides are not read (they live in
 * Redis); counts made here stay here when Redis is back.
 *
 * It takes the clauses the middleware already builds for RL.ALL
 * (`clause(check, "COST")` of decide.ts) and answers what Redis would, an
 * `AllDecision`, so a request decided here goes through the same headers,
 * refusals and hook:
 *
 *     const local = new LocalLimiter(config.localMaxKeys);   // local_max_keys
 *     const all = local.check(checks.map((c) => clause(c, "COST")));
 *     all.allowed; all.decisions;                 // one Decision per clause
 *     local.check(clauses, { peek: true });       // decide, record nothing
 *     local.release(clauseOfTheLease, decision.leaseId);   // a CONCURRENT's slots
 *     local.check(clauses, { nowMs: 1000 });      // tests: an explicit now
 *
 * A refused request is recorded by no clause, and its CONCURRENT clauses
 * report lease 0 (nothing taken). OVERRIDE is ignored (no overrides), as
 * are BLOCK, RESERVE and WAIT (a TOKEN clause is decided as a plain call:
 * a turn is never booked locally), as the Rust integration's local limiter
 * does. A REFUND clause, a bad limit, window or cost, or a bad `nowMs`
 * throw a RangeError before anything is decided.
 *
 * Memory is bounded: a key goes when its limiter would be empty again (as
 * Redis expires it), and at `maxKeys` keys the tenth closest to expiry is
 * evicted at once (an evicted limiter starts afresh, admitting more).
 * Numbers: times and counts are exact in a number below 2^53; products
 * that may pass it (APPROX's weighting, the token bucket's units) are
 * BigInt.
 */
import { durationMs, type Clause } from "../args.js";
import type { AllDecision, Decision } from "../reply.js";

/** The largest limit, rate, burst or cost (librl-core's MAX_AMOUNT). */
export const MAX_AMOUNT = 2 ** 50;
/** The longest window or lease: 3650 days in ms (librl-core's MAX_WINDOW_MS). */
export const MAX_WINDOW_MS = 3650 * 24 * 60 * 60 * 1000;
/** Lease ids stay below 2^53 (librl-core's MAX_LEASE_ID). */
const MAX_LEASE_ID = 2 ** 53 - 1;
/** Lease ids a key gives per millisecond before they run ahead of the clock. */
const IDS_PER_MS = 1000;

type Six = readonly [number, number, number, number, number, number];

interface FixedState {
  readonly kind: "fixed";
  readonly startMs: number;
  readonly endMs: number;
  readonly count: number;
}
interface ApproxState {
  readonly kind: "approx";
  readonly startMs: number;
  readonly current: number;
  readonly previous: number;
}
/** The exact log: `[t, cost]` oldest first, times strictly increasing. */
interface SlidingState {
  readonly kind: "sliding";
  readonly entries: readonly (readonly [number, number])[];
}
/** `missing` units (1/`windowMs` of a token each) short of full, as of `atMs`. */
interface TokenState {
  readonly kind: "token";
  readonly atMs: number;
  readonly windowMs: number;
  readonly missing: bigint;
}
interface Lease {
  readonly id: number;
  readonly endMs: number;
  readonly slots: number;
}
interface LeasesState {
  readonly kind: "concurrency";
  readonly nextId: number;
  readonly leases: readonly Lease[];
}
type State = FixedState | ApproxState | SlidingState | TokenState | LeasesState;

/** A clause as the algorithms read it. */
interface Limit {
  readonly algorithm: State["kind"];
  readonly key: string;
  /** TOKEN: the rate. */
  readonly limit: number;
  /** CONCURRENT: the lease. */
  readonly windowMs: number;
  readonly aligned: boolean;
  /** TOKEN: the burst, else the rate. */
  readonly capacity: number;
  readonly cost: number;
}

/** One clause decided: its reply, and for an admitted one the state to store and until when it matters (Unix ms). */
interface Outcome {
  readonly six: Six;
  readonly commit: { readonly state: State; readonly expiresAtMs: number } | undefined;
  readonly leaseId: number;
}

interface Entry {
  readonly state: State;
  readonly expiresAtMs: number;
}

export interface LocalCheckOptions {
  /** Decide and record nothing (RL.ALL's PEEK). */
  readonly peek?: boolean;
  /** The time in Unix ms (tests); the wall clock otherwise. */
  readonly nowMs?: number;
}

/** Per-process limiters, at most `maxKeys` of them (at least 1). */
export class LocalLimiter {
  private readonly keys = new Map<string, Entry>();
  private readonly capacity: number;

  constructor(maxKeys = 100_000) {
    if (!Number.isSafeInteger(maxKeys)) throw new RangeError(`maxKeys must be an integer, not ${maxKeys}`);
    this.capacity = Math.max(1, maxKeys);
  }

  /** Keys held, expired ones included until they are next looked at. */
  get size(): number {
    return this.keys.size;
  }

  /**
   * As RL.ALL: admitted only if every clause admits, then recorded by each
   * (unless `peek`); a refused request is recorded by none. Each decision
   * is the one the clause alone gives.
   */
  check(clauses: readonly Clause[], options: LocalCheckOptions = {}): AllDecision {
    const limits = clauses.map(limitOf);
    const now = nowOf(options.nowMs);
    const outcomes = limits.map((l) => decideOne(l, this.live(l.key, now), now));
    const allowed = outcomes.every((o) => o.six[0] === 1);
    const taken = allowed && options.peek !== true;
    if (taken) {
      limits.forEach((l, i) => {
        const commit = outcomes[i]?.commit;
        if (commit !== undefined) this.insert(l.key, { state: commit.state, expiresAtMs: commit.expiresAtMs }, now);
      });
    }
    const decisions = outcomes.map((o) => decision(o, taken));
    return { allowed, retryAfterMs: allowed ? 0 : longestWait(decisions), decisions };
  }

  /** Frees lease `leaseId` of a CONCURRENT clause's key; false when it is not held (released, ended, or its key evicted). */
  release(clause: Clause, leaseId: number, nowMs?: number): boolean {
    const l = limitOf(clause);
    if (l.algorithm !== "concurrency") throw new RangeError(`release takes a CONCURRENT clause, not ${clause.algorithm}`);
    const now = nowOf(nowMs);
    const entry = this.keys.get(l.key);
    if (entry === undefined || entry.state.kind !== "concurrency") return false;
    const held = entry.state.leases.filter((x) => x.endMs > now);
    if (!held.some((x) => x.id === leaseId)) return false;
    const kept = held.filter((x) => x.id !== leaseId);
    const nextId = entry.state.nextId;
    const expiresAtMs = kept.reduce((latest, x) => Math.max(latest, x.endMs), idsCaughtUpMs(nextId));
    if (expiresAtMs <= now) this.keys.delete(l.key);
    else this.keys.set(l.key, { state: { kind: "concurrency", nextId, leases: kept }, expiresAtMs });
    return true;
  }

  /** The key's state unless it has expired (an expired one is dropped). */
  private live(key: string, now: number): State | undefined {
    const entry = this.keys.get(key);
    if (entry === undefined) return undefined;
    if (entry.expiresAtMs <= now) {
      this.keys.delete(key);
      return undefined;
    }
    return entry.state;
  }

  private insert(key: string, entry: Entry, now: number): void {
    const keys = this.keys;
    if (!keys.has(key) && keys.size >= this.capacity) {
      for (const [k, e] of keys) if (e.expiresAtMs <= now) keys.delete(k);
    }
    if (!keys.has(key) && keys.size >= this.capacity) {
      // Evict the tenth closest to expiry at once, so that a full store
      // sorts once per many inserts, not on each.
      const expiries = [...keys.values()].map((e) => e.expiresAtMs).sort((a, b) => a - b);
      const cut = Math.min(Math.max(1, Math.floor(this.capacity / 10)), expiries.length - 1);
      const threshold = expiries[cut] ?? 0;
      for (const [k, e] of keys) if (e.expiresAtMs <= threshold) keys.delete(k);
      // Many keys with the same expiry: drop arbitrary ones.
      for (const k of keys.keys()) {
        if (keys.size < this.capacity) break;
        keys.delete(k);
      }
    }
    keys.set(key, entry);
  }
}

function nowOf(nowMs: number | undefined): number {
  if (nowMs === undefined) return Date.now();
  if (!Number.isSafeInteger(nowMs) || nowMs < 0) throw new RangeError(`nowMs must be an integer >= 0, not ${nowMs}`);
  return nowMs;
}

function decision(o: Outcome, taken: boolean): Decision {
  const [allowed, count, retryAfterMs, limit, remaining, resetAfterMs] = o.six;
  return { allowed: allowed === 1, count, retryAfterMs, limit, remaining, resetAfterMs, leaseId: taken ? o.leaseId : 0 };
}

/** RL.ALL's retry_after: the longest of the denials', -1 (never) longest. */
function longestWait(decisions: readonly Decision[]): number {
  const waits = decisions.filter((d) => !d.allowed).map((d) => d.retryAfterMs);
  return waits.includes(-1) ? -1 : Math.max(0, ...waits);
}

function amount(name: string, text: string | undefined): number {
  const n = text !== undefined && /^[1-9][0-9]{0,15}$/.test(text) ? Number(text) : 0;
  if (n < 1 || n > MAX_AMOUNT) throw new RangeError(`${name} must be from 1 to 2^50, not ${String(text)}`);
  return n;
}

function windowOf(name: string, text: string | undefined): number {
  const ms = text === undefined ? undefined : durationMs(text);
  if (ms === undefined || ms < 1 || ms > MAX_WINDOW_MS) throw new RangeError(`${name} must be from 1 ms to 3650 days, not ${String(text)}`);
  return ms;
}

/** A clause's algorithm and numbers, from its words in RL.ALL. */
function limitOf(c: Clause): Limit {
  const [limit, window, ...options] = c.args;
  const flags = new Set<string>();
  const values = new Map<string, string>();
  for (let i = 0; i < options.length; i++) {
    const word = (options[i] as string).toUpperCase();
    if (word === "ALIGNED" || word === "APPROX") flags.add(word);
    else values.set(word, options[++i] ?? "");
  }
  if (c.refund || values.has("REFUND")) throw new RangeError(`a local check takes no REFUND (key ${c.key})`);
  const algorithm =
    c.algorithm === "FIXED" ? "fixed" : c.algorithm === "TOKEN" ? "token" : c.algorithm === "CONCURRENT" ? "concurrency" : flags.has("APPROX") ? "approx" : "sliding";
  const n = amount(algorithm === "token" ? "rate" : "limit", limit);
  const burst = values.get("BURST");
  return {
    algorithm,
    key: c.key,
    limit: n,
    windowMs: windowOf(algorithm === "concurrency" ? "lease" : "window", window),
    aligned: flags.has("ALIGNED"),
    capacity: burst === undefined ? n : amount("burst", burst),
    cost: values.has("COST") ? amount("cost", values.get("COST")) : 1,
  };
}

/** One clause on the state its key holds (a state of another algorithm, after a policy changed, counts as none). */
function decideOne(l: Limit, state: State | undefined, now: number): Outcome {
  switch (l.algorithm) {
    case "fixed":
      return fixed(l.limit, l.windowMs, l.aligned, state?.kind === "fixed" ? state : undefined, now, l.cost);
    case "sliding":
      return sliding(l.limit, l.windowMs, state?.kind === "sliding" ? state : undefined, now, l.cost);
    case "approx":
      return approx(l.limit, l.windowMs, state?.kind === "approx" ? state : undefined, now, l.cost);
    case "token":
      return token(l.limit, l.windowMs, l.capacity, state?.kind === "token" ? state : undefined, now, l.cost);
    case "concurrency":
      return concurrent(l.limit, l.windowMs, state?.kind === "concurrency" ? state : undefined, now, l.cost);
  }
}

function admit(six: Six, state: State, expiresAtMs: number, leaseId = 0): Outcome {
  return { six, commit: { state, expiresAtMs }, leaseId };
}

function deny(count: number, retryAfter: number, limit: number, resetAfter: number): Outcome {
  return { six: [0, count, retryAfter, limit, Math.max(0, limit - count), resetAfter], commit: undefined, leaseId: 0 };
}

/** FIXED: a counter per window `[start, start + window)`. A clock that steps back stands still at the window's start. */
function fixed(limit: number, window: number, aligned: boolean, state: FixedState | undefined, now: number, cost: number): Outcome {
  const live = state !== undefined && Math.max(now, state.startMs) < state.endMs ? state : undefined;
  let current: FixedState;
  if (live !== undefined) {
    current = live;
    now = Math.max(now, live.startMs);
  } else {
    const startMs = aligned ? now - (now % window) : now;
    current = { kind: "fixed", startMs, endMs: startMs + window, count: 0 };
  }
  const untilEnd = current.endMs - now;
  const count = current.count + cost;
  if (count <= limit) return admit([1, count, 0, limit, limit - count, untilEnd], { ...current, count }, current.endMs);
  // The next window starts empty: any cost within the limit fits then.
  return deny(current.count, cost > limit ? -1 : untilEnd, limit, live !== undefined ? untilEnd : 0);
}

/** SLIDING (exact): the costs logged in `(now - window, now]`. */
function sliding(limit: number, window: number, state: SlidingState | undefined, now: number, cost: number): Outcome {
  const entries = state?.entries ?? [];
  const newest = entries.length > 0 ? (entries[entries.length - 1] as readonly [number, number])[0] : 0;
  now = Math.max(now, newest);
  const cutoff = Math.max(0, now - window);
  const live = entries.filter(([t]) => t > cutoff);
  const count = live.reduce((sum, [, c]) => sum + c, 0);
  if (count + cost <= limit) {
    const last = live[live.length - 1];
    const logged = last !== undefined && last[0] === now ? [...live.slice(0, -1), [now, last[1] + cost] as const] : [...live, [now, cost] as const];
    return admit([1, count + cost, 0, limit, limit - count - cost, window], { kind: "sliding", entries: logged }, now + window);
  }
  let retry = -1;
  if (cost <= limit) {
    // The oldest entries leave first: wait until enough of them have.
    const mustLeave = count + cost - limit;
    let passed = 0;
    retry = window;
    for (const [t, c] of live) {
      passed += c;
      if (passed >= mustLeave) {
        retry = Math.max(0, t + window - now);
        break;
      }
    }
  }
  return deny(count, retry, limit, count > 0 ? Math.max(0, newest + window - now) : 0);
}

/** SLIDING APPROX: `current + floor(previous * left / window)` over windows aligned on the clock. */
function approx(limit: number, window: number, state: ApproxState | undefined, now: number, cost: number): Outcome {
  now = Math.max(now, state?.startMs ?? 0);
  const start = now - (now % window);
  let current = 0;
  let previous = 0;
  if (state !== undefined && state.startMs === start) {
    current = state.current;
    previous = state.previous;
  } else if (state !== undefined && state.startMs + window === start) {
    previous = state.current;
  }
  const left = window - (now - start);
  const count = current + Number((BigInt(previous) * BigInt(left)) / BigInt(window));
  // The counters matter until the window after this one ends.
  const expiresAtMs = start + 2 * window;
  if (count + cost <= limit) {
    const next: ApproxState = { kind: "approx", startMs: start, current: current + cost, previous };
    return admit([1, count + cost, 0, limit, limit - count - cost, expiresAtMs - now], next, expiresAtMs);
  }
  const retry = cost > limit ? -1 : approxWait(current, previous, left, window, limit - cost);
  const reset = current > 0 ? expiresAtMs - now : previous > 0 ? start + window - now : 0;
  return deny(count, retry, limit, reset);
}

/** The most ms left in a window at which `floor(previous * left / window) <= room`; undefined when even 1 ms left is too many. */
function maxLeft(previous: number, room: number, window: number): number | undefined {
  if (previous === 0) return window;
  const x = Number((BigInt(room + 1) * BigInt(window) - 1n) / BigInt(previous));
  return x >= 1 ? Math.min(x, window) : undefined;
}

/** The least wait after which `count + cost <= limit`, `room` being `limit - cost`, nothing else admitted meanwhile. */
function approxWait(current: number, previous: number, left: number, window: number, room: number): number {
  if (room >= current) {
    // Later in this window: the previous window's weight shrinks.
    const x = maxLeft(previous, room - current, window);
    if (x !== undefined) return left - Math.min(x, left);
  }
  // In the next window, this window's count becomes the weighted one.
  const x = maxLeft(current, room, window);
  return x !== undefined ? left + window - x : left + window;
}

function ceilDiv(a: bigint, b: bigint): bigint {
  return (a + b - 1n) / b;
}

/** A reply's integer: saturating at 2^63 - 1 as the module's (a token bucket's reset can be longer). */
function reply(v: bigint): number {
  return Number(v < MAX_REPLY ? v : MAX_REPLY);
}
const MAX_REPLY = 2n ** 63n - 1n;

/** TOKEN: the shortfall kept in 1/window ms tokens, so one ms refills exactly `rate` units: exact integers; waits round up, tokens down. */
function token(rate: number, window: number, capacity: number, state: TokenState | undefined, now: number, cost: number): Outcome {
  const w = BigInt(window);
  const r = BigInt(rate);
  const full = BigInt(capacity) * w;
  let short = 0n;
  if (state !== undefined) {
    now = Math.max(now, state.atMs);
    // A changed window rescales the shortfall, towards fewer tokens.
    const missing = state.windowMs === window ? state.missing : ceilDiv(state.missing * w, BigInt(state.windowMs));
    const left = missing - BigInt(now - state.atMs) * r;
    short = left < 0n ? 0n : left < full ? left : full;
  }
  const after = short + BigInt(cost) * w;
  if (after <= full) {
    const count = reply(ceilDiv(after, w));
    const reset = reply(ceilDiv(after, r));
    const next: TokenState = { kind: "token", atMs: now, windowMs: window, missing: after };
    return admit([1, count, 0, capacity, Math.max(0, capacity - count), reset], next, now + reset);
  }
  const wait = ceilDiv(after - full, r);
  const retry = cost > capacity ? -1 : Math.max(1, reply(wait));
  return deny(reply(ceilDiv(short, w)), retry, capacity, reply(ceilDiv(short, r)));
}

/** From this ms a key that starts afresh gives ids of at least `nextId`. */
function idsCaughtUpMs(nextId: number): number {
  return Math.ceil(Math.max(0, nextId - 1) / IDS_PER_MS);
}

/** CONCURRENT: `cost` slots as one lease, held `[now, now + lease)` unless released first. */
function concurrent(limit: number, leaseMs: number, state: LeasesState | undefined, now: number, cost: number): Outcome {
  const held = (state?.leases ?? []).filter((x) => x.endMs > now);
  const nextId = state?.nextId ?? 0;
  const count = held.reduce((sum, x) => sum + x.slots, 0);
  const latest = held.reduce((max, x) => Math.max(max, x.endMs), 0);
  const reset = Math.max(0, Math.max(latest, idsCaughtUpMs(nextId)) - now);
  if (count + cost <= limit) {
    // A new key's first id comes from the clock, the others from the counter.
    const id = nextId === 0 ? now * IDS_PER_MS + 1 : nextId;
    if (id > MAX_LEASE_ID) return deny(count, -1, limit, reset);
    const endMs = now + leaseMs;
    const expiresAtMs = Math.max(latest, endMs, idsCaughtUpMs(id + 1));
    const next: LeasesState = { kind: "concurrency", nextId: id + 1, leases: [...held, { id, endMs, slots: cost }] };
    return admit([1, count + cost, 0, limit, limit - count - cost, expiresAtMs - now], next, expiresAtMs, id);
  }
  if (cost > limit) return deny(count, -1, limit, reset);
  // The least wait after which enough slots have ended for the cost.
  const mustEnd = count + cost - limit;
  let ended = 0;
  let retry = 0;
  for (const x of [...held].sort((a, b) => a.endMs - b.endMs || a.slots - b.slots)) {
    ended += x.slots;
    if (ended >= mustEnd) {
      retry = x.endMs - now;
      break;
    }
  }
  return deny(count, retry, limit, reset);
}
