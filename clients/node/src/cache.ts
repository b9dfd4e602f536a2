/**
 * The opt-in denial cache: after a denied call with retryAfterMs > 0, the
 * same call is answered locally until that time has passed, or the cache's
 * max age has (1 s by default), whichever comes first: a change made
 * elsewhere (an override, a DEL, rl.mode) reaches the process within it.
 */
import { performance } from "node:perf_hooks";
import type { AllDecision, Decision } from "./reply.js";

interface Entry<T> {
  /** performance.now() when the call was sent (the server decided after it). */
  readonly sentAt: number;
  /** The entry lives while now - sentAt < this: the reply's wait, at most the max age. */
  readonly lifeMs: number;
  /** performance.now() when the reply arrived: its waits are aged from then. */
  readonly at: number;
  readonly reply: T;
  readonly keys: readonly string[];
}

export interface DenialCacheOptions {
  /** Entries kept at most (expired ones go first, then the oldest); default 10,000. */
  maxEntries?: number;
  /**
   * The longest a denial is answered locally, in ms, however long its
   * retryAfterMs (a BLOCK of an hour included); default 1000. 0 caches
   * nothing.
   */
  maxAgeMs?: number;
}

/** What a call reads from the cache before it is sent, and gives back with its reply. */
export interface Ticket {
  readonly generation: number;
  readonly at: number;
}

/** retryAfterMs/resetAfterMs reduced by the elapsed time, rounded up so never early. */
function age(ms: number, elapsed: number): number {
  if (ms <= 0) return ms; // 0 and -1 keep their meaning
  return Math.max(0, Math.ceil(ms - elapsed));
}

function agedDecision(d: Decision, elapsed: number): Decision {
  return {
    allowed: d.allowed,
    count: d.count,
    retryAfterMs: age(d.retryAfterMs, elapsed),
    limit: d.limit,
    remaining: d.remaining,
    resetAfterMs: age(d.resetAfterMs, elapsed),
    leaseId: d.leaseId,
  };
}

function isAll(reply: Decision | AllDecision): reply is AllDecision {
  return (reply as AllDecision).decisions !== undefined;
}

export class DenialCache {
  readonly #entries = new Map<string, Entry<Decision | AllDecision>>();
  /** key -> ids of the entries that involve it, for refunds. */
  readonly #byKey = new Map<string, Set<string>>();
  readonly #maxEntries: number;
  readonly #maxAgeMs: number;
  /** Bumped by every refund and override change: a denial read before one is not cached. */
  #generation = 0;

  readonly #now: () => number;

  /** `now` is the monotonic clock in ms (tests pass their own). */
  constructor(options: DenialCacheOptions = {}, now: () => number = () => performance.now()) {
    this.#now = now;
    for (const name of Object.keys(options)) {
      if (name !== "maxEntries" && name !== "maxAgeMs") {
        throw new TypeError(`denialCache: unknown option ${JSON.stringify(name)} (expected maxEntries, maxAgeMs)`);
      }
    }
    const max = options.maxEntries ?? 10_000;
    if (!Number.isSafeInteger(max) || max < 1) {
      throw new TypeError(`denialCache.maxEntries must be a positive integer, got ${String(max)}`);
    }
    this.#maxEntries = max;
    const maxAge = options.maxAgeMs ?? 1000;
    if (!Number.isSafeInteger(maxAge) || maxAge < 0) {
      throw new TypeError(`denialCache.maxAgeMs must be an integer number of ms, 0 or more, got ${String(maxAge)}`);
    }
    this.#maxAgeMs = maxAge;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** Taken before sending a call; given to offer() with the reply. */
  ticket(): Ticket {
    return { generation: this.#generation, at: this.#now() };
  }

  /** The cached answer to call `id`, aged to now, or undefined. */
  get(id: string): Decision | AllDecision | undefined {
    const entry = this.#entries.get(id);
    if (entry === undefined) return undefined;
    const now = this.#now();
    if (now - entry.sentAt >= entry.lifeMs) {
      this.#delete(id, entry);
      return undefined;
    }
    const elapsed = now - entry.at;
    const reply = entry.reply;
    if (isAll(reply)) {
      return {
        allowed: reply.allowed,
        retryAfterMs: age(reply.retryAfterMs, elapsed),
        decisions: reply.decisions.map((d) => agedDecision(d, elapsed)),
      };
    }
    return agedDecision(reply, elapsed);
  }

  /**
   * Remembers a reply if it is a denial with a positive retryAfterMs, and no
   * refund, override change or forgetting went through this cache since
   * the ticket was taken (the denial may have been decided before it). Its
   * life counts from the ticket, when the call was sent, so it never
   * outlives the server's denial; an RL.ALL denial lives until the first of
   * its denying clauses could change its answer.
   */
  offer(id: string, keys: readonly string[], reply: Decision | AllDecision, ticket: Ticket): void {
    if (reply.allowed || !(reply.retryAfterMs > 0) || ticket.generation !== this.#generation) return;
    const waitMs = isAll(reply)
      ? Math.min(...reply.decisions.filter((d) => !d.allowed).map((d) => d.retryAfterMs))
      : reply.retryAfterMs;
    const lifeMs = Math.min(waitMs, this.#maxAgeMs);
    const now = this.#now();
    if (!(now - ticket.at < lifeMs)) return;
    const old = this.#entries.get(id);
    if (old !== undefined) this.#delete(id, old);
    if (this.#entries.size >= this.#maxEntries) this.#makeRoom();
    this.#entries.set(id, { sentAt: ticket.at, lifeMs, at: now, reply, keys });
    for (const key of keys) {
      let ids = this.#byKey.get(key);
      if (ids === undefined) this.#byKey.set(key, (ids = new Set()));
      ids.add(id);
    }
  }

  /** Forgets every entry that involves `key` (a limiter key or an okey: a refund on it, or an operator's change). */
  clearKey(key: string): void {
    this.#generation++;
    const ids = this.#byKey.get(key);
    if (ids === undefined) return;
    for (const id of [...ids]) {
      const entry = this.#entries.get(id);
      if (entry !== undefined) this.#delete(id, entry);
    }
    this.#byKey.delete(key);
  }

  clear(): void {
    this.#generation++;
    this.#entries.clear();
    this.#byKey.clear();
  }

  #delete(id: string, entry: Entry<unknown>): void {
    this.#entries.delete(id);
    for (const key of entry.keys) {
      const ids = this.#byKey.get(key);
      if (ids === undefined) continue;
      ids.delete(id);
      if (ids.size === 0) this.#byKey.delete(key);
    }
  }

  #makeRoom(): void {
    const now = this.#now();
    for (const [id, entry] of this.#entries) {
      if (now - entry.sentAt >= entry.lifeMs) this.#delete(id, entry);
    }
    // Still full: drop the oldest insertions (a Map iterates in insertion order).
    for (const [id, entry] of this.#entries) {
      if (this.#entries.size < this.#maxEntries) break;
      this.#delete(id, entry);
    }
  }
}
