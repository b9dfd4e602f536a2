/**
 * RL.CONCURRENT leases (docs/commands.md, RL.CONCURRENT): what an acquire
 * took, given back with `release()`, extended with `renew()`, and renewed
 * in the background by `keepAlive()` for long work.
 */
import { durationMs, leaseActionCall, type Clause, type LimiterCall } from "./args.js";
import type { Decision } from "./reply.js";

/** `withLease` could not take a slot: the limit is full. `decision` is the refusal. */
export class LeaseRefusedError extends Error {
  override readonly name = "LeaseRefusedError";
  constructor(readonly decision: Decision) {
    super(
      `librl: no free slot (${decision.count} of ${decision.limit} held)` +
        (decision.retryAfterMs >= 0 ? `; one frees within ${decision.retryAfterMs} ms, or at a release` : "; the cost exceeds the limit"),
    );
  }
}

/**
 * The lease is not held any more: it ended (nobody renewed it in time, or
 * its key was deleted) and its slots may be someone else's; stop the work.
 * `decision` is the server's refusal of the renewal, when it said so; else
 * the renewals failed on the way (`cause`).
 */
export class LeaseLostError extends Error {
  override readonly name = "LeaseLostError";
  constructor(
    message: string,
    readonly decision?: Decision,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export interface KeepAliveOptions {
  /** Called once if the lease is lost (the same error aborts `lease.signal`). */
  onLost?: (error: LeaseLostError) => void;
}

/** Sends one RL.CONCURRENT call (the Limiter's path: prefix, routing, durability, TRYAGAIN). */
export type SendLeaseCall = (call: LimiterCall) => Promise<Decision>;

/** Renewals that fail on the way in a row before the lease counts as lost: a third would come after it had ended. */
const FAILED_RENEWALS_LOST = 2;

/**
 * One acquire's lease: admitted or refused (a refusal is not an error),
 * and, when admitted with an id, the slots it holds until `release()`, or
 * until it ends by itself `lease` after it was taken or last renewed.
 */
export class Lease {
  /** The acquire's reply (or, for `heldLease`, the one it was given). */
  readonly decision: Decision;
  /** The key, limit, lease and override that RELEASE and RENEW repeat. */
  readonly #limit: Clause;
  readonly #send: SendLeaseCall;
  #release: Promise<Decision | null> | undefined;
  #lost: LeaseLostError | undefined;
  #controller: AbortController | undefined;
  #timer: NodeJS.Timeout | undefined;
  #onLost: ((error: LeaseLostError) => void) | undefined;

  /** @internal Made by `Limiter.acquire` and `Limiter.heldLease`. */
  constructor(decision: Decision, limit: Clause, send: SendLeaseCall) {
    this.decision = decision;
    this.#limit = limit;
    this.#send = send;
  }

  /** The acquire was admitted (its slots are taken, unless it was a PEEK or `cost: 0`). */
  get allowed(): boolean {
    return this.decision.allowed;
  }

  /** The lease id; 0 when the call holds none (refused, PEEK, `cost: 0`, `rl.mode` off, monitor's would-be refusal). */
  get id(): number {
    return this.decision.leaseId;
  }

  /** Holding slots as far as this process knows: an id, not released, not known lost. */
  get held(): boolean {
    return this.id > 0 && this.#release === undefined && this.#lost === undefined;
  }

  /** Why the lease is known to be lost, if it is. */
  get lost(): LeaseLostError | undefined {
    return this.#lost;
  }

  /** Aborted (its reason a LeaseLostError) when the lease is known to be lost: pass it to the work. */
  get signal(): AbortSignal {
    this.#controller ??= new AbortController();
    if (this.#lost !== undefined && !this.#controller.signal.aborted) this.#controller.abort(this.#lost);
    return this.#controller.signal;
  }

  /**
   * `RELEASE id`: the slots back at once, and the background renewal
   * stopped. Resolves to the server's answer (`allowed` false if the lease
   * had already ended: not an error), or null when it holds nothing. Sent
   * once: later calls get the same answer (after a failure on the way, the
   * next call sends it again).
   */
  release(): Promise<Decision | null> {
    this.#stopRenewing();
    if (this.id <= 0) return Promise.resolve(null);
    if (this.#release === undefined) {
      const sent = this.#send(leaseActionCall(this.#limit, "RELEASE", this.id));
      this.#release = sent;
      sent.catch(() => {
        if (this.#release === sent) this.#release = undefined;
      });
    }
    return this.#release;
  }

  /**
   * `RENEW id`: the lease lasts its length from now (never shorter than it
   * already lasts). Rejects with a LeaseLostError when it is not held any
   * more (it ended, or was released); null when it holds nothing.
   */
  async renew(): Promise<Decision | null> {
    if (this.id <= 0) return null;
    if (this.#release !== undefined) throw new LeaseLostError("librl: the lease was released");
    if (this.#lost !== undefined) throw this.#lost;
    const d = await this.#send(leaseActionCall(this.#limit, "RENEW", this.id));
    if (d.allowed) return d;
    const lost = new LeaseLostError(
      `librl: lease ${this.id} on ${JSON.stringify(this.#limit.key)} is not held any more (it ended): its slots may be someone else's`,
      d,
    );
    if (this.#release === undefined) this.#markLost(lost);
    throw lost;
  }

  /**
   * Renews the lease in the background every third of its length (of the
   * acquire's resetAfterMs when that is shorter, as when an override made
   * leases shorter), until `release()` or `stopKeepAlive()`. If the lease is
   * lost (the server refuses a renewal, or two in a row fail on the way),
   * it stops, `lost` is set, `signal` aborts and `onLost` is called. The
   * timer does not keep the process alive. Returns `signal`.
   */
  keepAlive(options: KeepAliveOptions = {}): AbortSignal {
    if (options === null || typeof options !== "object") throw new TypeError("keepAlive(): options must be an object");
    if (options.onLost !== undefined && typeof options.onLost !== "function") {
      throw new TypeError("keepAlive(): onLost must be a function");
    }
    this.#onLost = options.onLost;
    const signal = this.signal;
    if (!this.held || this.#timer !== undefined) return signal;
    const leaseMs = durationMs(this.#limit.args[1] as string) ?? this.decision.resetAfterMs;
    const reset = this.decision.resetAfterMs;
    const everyMs = Math.max(1, Math.floor((reset > 0 ? Math.min(leaseMs, reset) : leaseMs) / 3));
    let failed = 0;
    const tick = () => {
      this.renew().then(
        () => {
          failed = 0;
          schedule();
        },
        (err: unknown) => {
          if (!this.held) return; // released meanwhile, or lost (and reported)
          if (++failed < FAILED_RENEWALS_LOST) return schedule();
          this.#markLost(
            new LeaseLostError(`librl: lease ${this.id}: ${failed} renewals in a row failed; it may have ended`, undefined, {
              cause: err,
            }),
          );
        },
      );
    };
    const schedule = () => {
      if (!this.held || this.#timer === undefined) return;
      this.#timer = setTimeout(tick, everyMs);
      this.#timer.unref();
    };
    this.#timer = setTimeout(tick, everyMs);
    this.#timer.unref();
    return signal;
  }

  /** Stops the background renewal (the lease stays held until released or ended). */
  stopKeepAlive(): void {
    this.#stopRenewing();
  }

  #stopRenewing(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #markLost(lost: LeaseLostError): void {
    if (this.#lost !== undefined) return;
    this.#lost = lost;
    this.#stopRenewing();
    this.#controller?.abort(lost);
    const onLost = this.#onLost;
    if (onLost !== undefined) queueMicrotask(() => onLost(lost));
  }
}
