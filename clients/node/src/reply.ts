/** Replies -> typed results. */

/** What one limiter (RL.FIXED, RL.SLIDING, RL.TOKEN or an RL.ALL clause) answered. */
export interface Decision {
  /** The call was admitted and its cost recorded. */
  readonly allowed: boolean;
  /** Units counted against the limit after this call (TOKEN: capacity - tokens, rounded up). */
  readonly count: number;
  /** ms until a call with the same cost would be admitted; 0 when admitted; -1 when no wait helps. With RESERVE, the wait before acting on an admitted call. */
  readonly retryAfterMs: number;
  /** The effective limit (after any override); TOKEN: the capacity. */
  readonly limit: number;
  /** max(0, limit - count). */
  readonly remaining: number;
  /** ms until the limiter is back to empty (TOKEN: full; CONCURRENT: until the last lease ends): the key's remaining life. */
  readonly resetAfterMs: number;
  /**
   * RL.CONCURRENT and CONCURRENT clauses: the lease this call took, released
   * or renewed (an integer below 2^53, so exact in a number); 0 when it
   * holds none, and for the other limiters.
   */
  readonly leaseId: number;
}

/** What RL.ALL answered: all-or-nothing over its clauses. */
export interface AllDecision {
  /** Every clause admitted the call, and every clause recorded it. */
  readonly allowed: boolean;
  /** 0 when admitted; else the largest retryAfterMs of the denying clauses, or -1 if any is -1. */
  readonly retryAfterMs: number;
  /** One decision per clause, in the order given. */
  readonly decisions: readonly Decision[];
}

/** An override as RL.OVERRIDE GET reports it. */
export interface OverrideInfo {
  readonly limit: number;
  readonly windowMs: number;
  /** 0 when the override has no burst. */
  readonly burst: number;
  /** ms the override has left; -1 when it has no TTL. */
  readonly ttlMs: number;
}

/** One entry of RL.OVERRIDE LIST. */
export interface OverrideEntry extends OverrideInfo {
  readonly okey: string;
}

/** One page of RL.OVERRIDE LIST: iterate until `cursor` is `"0"` again. */
export interface OverrideListPage {
  /** The cursor for the next call; `"0"` when the iteration is complete. */
  readonly cursor: string;
  readonly overrides: readonly OverrideEntry[];
}

function unexpected(what: string, reply: unknown): Error {
  let shown: string;
  try {
    shown = JSON.stringify(reply) ?? String(reply);
  } catch {
    shown = String(reply);
  }
  return new Error(`librl: unexpected reply to ${what}: ${shown.slice(0, 200)}`);
}

function integer(value: unknown, what: string, reply: unknown): number {
  if (typeof value === "number") return value;
  if (typeof value === "bigint") return Number(value);
  if (typeof value === "string" && /^-?[0-9]+$/.test(value)) return Number(value);
  throw unexpected(what, reply);
}

function text(value: unknown, what: string, reply: unknown): string {
  if (typeof value === "string") return value;
  if (value instanceof Uint8Array) return Buffer.from(value).toString("utf8");
  if (typeof value === "number") return String(value);
  throw unexpected(what, reply);
}

/**
 * A limiter reply: six integers, a seventh (the lease id) from RL.CONCURRENT
 * and CONCURRENT clauses. Fields after the ones this package knows are
 * ignored: a later module may add some (docs/commands.md, The limiter reply).
 */
export function parseDecision(reply: unknown, what: string): Decision {
  if (!Array.isArray(reply) || reply.length < 6) throw unexpected(what, reply);
  return {
    allowed: integer(reply[0], what, reply) === 1,
    count: integer(reply[1], what, reply),
    retryAfterMs: integer(reply[2], what, reply),
    limit: integer(reply[3], what, reply),
    remaining: integer(reply[4], what, reply),
    resetAfterMs: integer(reply[5], what, reply),
    leaseId: reply.length > 6 ? integer(reply[6], what, reply) : 0,
  };
}

/** RL.ALL's reply: `[allowed, retry_after, reply1, ..., replyN]`; anything after the N clauses' replies is ignored. */
export function parseAllDecision(reply: unknown, clauses: number): AllDecision {
  if (!Array.isArray(reply) || reply.length < clauses + 2) throw unexpected("RL.ALL", reply);
  const decisions: Decision[] = [];
  for (let i = 2; i < clauses + 2; i++) decisions.push(parseDecision(reply[i], "RL.ALL"));
  return {
    allowed: integer(reply[0], "RL.ALL", reply) === 1,
    retryAfterMs: integer(reply[1], "RL.ALL", reply),
    decisions,
  };
}

/**
 * RL.ALL's reply to one clause, as that clause's decision (the commonest
 * request's: no AllDecision or array made); one that contradicts itself
 * (the whole admitted, the clause not, or the other way) is unexpected.
 */
export function parseAllOne(reply: unknown): Decision {
  if (!Array.isArray(reply) || reply.length < 3) throw unexpected("RL.ALL", reply);
  const allowed = integer(reply[0], "RL.ALL", reply) === 1;
  integer(reply[1], "RL.ALL", reply);
  const decision = parseDecision(reply[2], "RL.ALL");
  if (decision.allowed !== allowed) throw unexpected("RL.ALL", reply);
  return decision;
}

/**
 * An override's four values (limit, window, burst, TTL) from `at` on in
 * `items`: RL.OVERRIDE GET's whole reply, or a LIST entry after its okey.
 */
function overrideValues(items: unknown[], at: number, what: string, reply: unknown): OverrideInfo {
  return {
    limit: integer(items[at], what, reply),
    windowMs: integer(items[at + 1], what, reply),
    burst: integer(items[at + 2], what, reply),
    ttlMs: integer(items[at + 3], what, reply),
  };
}

export function parseOverrideInfo(reply: unknown): OverrideInfo | null {
  if (reply === null || reply === undefined) return null;
  const what = "RL.OVERRIDE GET";
  if (!Array.isArray(reply) || reply.length < 4) throw unexpected(what, reply);
  return overrideValues(reply, 0, what, reply);
}

export function parseOverrideList(reply: unknown): OverrideListPage {
  const what = "RL.OVERRIDE LIST";
  if (!Array.isArray(reply) || reply.length < 2 || !Array.isArray(reply[1])) throw unexpected(what, reply);
  const overrides = (reply[1] as unknown[]).map((entry) => {
    if (!Array.isArray(entry) || entry.length < 5) throw unexpected(what, reply);
    return { okey: text(entry[0], what, reply), ...overrideValues(entry, 1, what, reply) };
  });
  return { cursor: text(reply[0], what, reply), overrides };
}

export function parseCount(reply: unknown, what: string): number {
  return integer(reply, what, reply);
}
