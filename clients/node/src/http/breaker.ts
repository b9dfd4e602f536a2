/**
 * The breaker (docs/http.md, Fail modes): after an exchange fails on the
 * way or times out, requests apply the fail mode at once, without waiting
 * on Redis, for a back-off (1 s, doubled after each failed probe, at most
 * 30 s), while one request at a time probes Redis; a probe that gets an
 * answer closes it. One per limiter: it outlives reloads, as Redis does.
 */

/** The first back-off, and its cap (docs/http.md, Fail modes: fixed, not configuration). */
export const BACKOFF_FIRST_MS = 1_000;
export const BACKOFF_MAX_MS = 30_000;

/** Error replies that say the server cannot serve now, not that the call was wrong. */
const UNAVAILABLE_REPLY = /^(LOADING|BUSY|MASTERDOWN|CLUSTERDOWN|TRYAGAIN)\b/;

/** The error classes ioredis, node-redis and the integrations' own connection (resp.ts) give a Redis error reply. */
const REPLY_ERRORS = new Set(["ReplyError", "ErrorReply", "SimpleError", "BlobError"]);

/**
 * Whether `err` says Redis could not answer (a connection refused, reset
 * or closed, no answer in time, a server loading or down) rather than that
 * it answered the call was wrong (WRONGTYPE, a CROSSSLOT refusal): only
 * the first opens the breaker.
 */
export function unavailable(err: Error): boolean {
  if (REPLY_ERRORS.has(err.constructor.name) || REPLY_ERRORS.has(err.name)) return UNAVAILABLE_REPLY.test(err.message);
  return err.name !== "CrossSlotError";
}

/** The breaker decided without asking Redis. */
export class BreakerOpen extends Error {
  override readonly name = "BreakerOpen";
  constructor() {
    super("Redis failed lately; the fail mode applies without waiting on it until the next probe");
  }
}

export class Breaker {
  /** When the next probe may go (ms on `clock`); undefined while Redis answers. */
  #until: number | undefined;
  #backoff = BACKOFF_FIRST_MS;
  #probing = false;

  /** `clock`: milliseconds, monotonic (tests give their own). */
  constructor(private readonly clock: () => number = () => performance.now()) {}

  /** Whether this request asks Redis (as usual, or as the probe); one field read while closed. */
  asks(): boolean {
    if (this.#until === undefined) return true;
    if (this.#probing || this.clock() < this.#until) return false;
    this.#probing = true;
    return true;
  }

  /** An exchange ended: answered (`err` undefined, or an error reply), or failed on the way. */
  ended(err: Error | undefined): void {
    if (err === undefined || !unavailable(err)) {
      if (this.#until !== undefined) {
        this.#until = undefined;
        this.#backoff = BACKOFF_FIRST_MS;
        this.#probing = false;
      }
      return;
    }
    if (this.#probing) this.#backoff = Math.min(this.#backoff * 2, BACKOFF_MAX_MS);
    // A request sent before the breaker opened fails too: it is no probe.
    else if (this.#until !== undefined) return;
    this.#probing = false;
    this.#until = this.clock() + this.#backoff;
  }
}
