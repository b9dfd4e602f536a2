/**
 * Fail modes (docs/http.md, Fail modes): what a request gets when Redis
 * fails, before or in the middle of its exchange. `open` passes it and
 * keeps what Redis admitted counted (a request that is served stays
 * counted; its leases are released when its response is finished);
 * `closed` gives back what Redis admitted (refunds, releases), then
 * refuses it with a 503 (a request that is refused is counted by no policy);
 * `local` decides in the process (core.ts with local.ts) and gives back
 * what Redis admitted when it refuses. Each warns at most once every 10 s.
 */
import type { Limiter } from "../limiter.js";
import { giveBack, type Failed } from "./decide.js";
import type { Logger } from "./hook.js";

/** How often the fail-mode warning is logged at most. */
const WARN_INTERVAL_MS = 10_000;

export class FailMode {
  #lastWarning = -Infinity;

  constructor(
    readonly mode: "open" | "closed" | "local",
    private readonly limiter: Limiter,
    private readonly timeoutMs: number,
    private readonly logger: Logger,
  ) {}

  /** Applies `open` or `closed` to a failed exchange: the hook's outcome, once any refund is done. */
  async apply(failed: Failed): Promise<"fail_open" | "fail_closed"> {
    const closed = this.mode === "closed";
    this.#warn(
      `librl: Redis did not answer (${failed.error.message}); ${closed ? "refusing requests (fail: closed)" : "passing requests unlimited (fail: open)"}`,
    );
    if (!closed) return "fail_open";
    // Before the 503 is sent, bounded by its own timeout; a failure is logged.
    if (failed.admitted.length > 0) await giveBack(this.limiter, failed.admitted, this.timeoutMs, this.logger, "a request refused by fail: closed");
    return "fail_closed";
  }

  /**
   * `local`: warns (at most once every 10 s), and gives back what Redis
   * admitted before it failed when the local decision refuses the request
   * (a refused request is counted by no policy).
   */
  async local(failed: Failed, refused: boolean): Promise<void> {
    this.#warn(`librl: Redis did not answer (${failed.error.message}); deciding requests in the process (fail: local)`);
    if (refused && failed.admitted.length > 0) await giveBack(this.limiter, failed.admitted, this.timeoutMs, this.logger, "a request refused by fail: local");
  }

  #warn(message: string): void {
    const now = Date.now();
    if (now - this.#lastWarning < WARN_INTERVAL_MS) return;
    this.#lastWarning = now;
    this.logger.warn(message);
  }
}
