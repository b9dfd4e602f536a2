/**
 * The opt-in denial cache: after a denied call with retryAfterMs > 0, the
 * same call is answered locally until that time has passed.
 */
import { performance } from "node:perf_hooks";
import type { AllDecision, Decision } from "./reply.js";

interface Entry<T> {
  /** performance.now() when the server's reply arrived. */
  readonly at: number;
  /** The reply's retryAfterMs: the entry lives while now - at < this. */
  readonly retryAfterMs: number;
  readonly reply: T;
  readonly keys: readonly string[];
}

export interface DenialCacheOptions {
  /** Entries kept at most (expired ones go first, then the oldest); default 10,000. */
  maxEntries?: number;
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
  /** Bumped by every refund and override change: a denial read before one is not cached. */
  #generation = 0;

  readonly #now: () => number;

  /** `now` is the monotonic clock in ms (tests pass their own). */
  constructor(options: DenialCacheOptions = {}, now: () => number = () => performance.now()) {
    this.#now = now;
    const max = options.maxEntries ?? 10_000;
    if (!Number.isSafeInteger(max) || max < 1) {
      throw new TypeError(`denialCache.maxEntries must be a positive integer, got ${String(max)}`);
    }
    this.#maxEntries = max;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** Read before sending a call; pass it to offer() with the reply. */
  get generation(): number {
    return this.#generation;
  }

  /** The cached answer to call `id`, aged to now, or undefined. */
  get(id: string): Decision | AllDecision | undefined {
    const entry = this.#entries.get(id);
    if (entry === undefined) return undefined;
    const elapsed = this.#now() - entry.at;
    if (elapsed >= entry.retryAfterMs) {
      this.#delete(id, entry);
      return undefined;
    }
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
   * refund or override change went through this cache since `generation`
   * was read (the denial may have been decided before it).
   */
  offer(id: string, keys: readonly string[], reply: Decision | AllDecision, generation: number): void {
    if (reply.allowed || !(reply.retryAfterMs > 0) || generation !== this.#generation) return;
    const old = this.#entries.get(id);
    if (old !== undefined) this.#delete(id, old);
    if (this.#entries.size >= this.#maxEntries) this.#makeRoom();
    this.#entries.set(id, { at: this.#now(), retryAfterMs: reply.retryAfterMs, reply, keys });
    for (const key of keys) {
      let ids = this.#byKey.get(key);
      if (ids === undefined) this.#byKey.set(key, (ids = new Set()));
      ids.add(id);
    }
  }

  /** Forgets every entry that involves `key` (a refund on it). */
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
      if (now - entry.at >= entry.retryAfterMs) this.#delete(id, entry);
    }
    // Still full: drop the oldest insertions (a Map iterates in insertion order).
    for (const [id, entry] of this.#entries) {
      if (this.#entries.size < this.#maxEntries) break;
      this.#delete(id, entry);
    }
  }
}
