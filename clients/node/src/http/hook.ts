/**
 * The decision hook (docs/http.md, Decision hook): what happened to a
 * checked request, given once to the application's callback, whose
 * errors are logged and never fail the request.
 */
import type { Decision } from "../reply.js";
import type { Checked } from "./headers.js";

/** One checked policy, as the decision hook sees it. */
export interface CheckReport {
  readonly policy: string;
  /** The key's middle part: `ip:203.0.113.9`, `user:alice`, `api-key:<32 hex>`, `global`. */
  readonly subject: string;
  readonly key: string;
  readonly cost: number;
  /** The module's reply to this policy's clause; undefined when Redis could not answer. */
  readonly decision: Decision | undefined;
}

/**
 * What happened to a request (docs/http.md, Decision hook):
 * - `allowed`: every policy admitted it;
 * - `denied`: a policy refused it;
 * - `would_deny`: a policy would have refused it; shadow mode let it pass;
 * - `fail_open` / `fail_closed`: Redis did not answer in time; passed / 503.
 */
export type Outcome = "allowed" | "denied" | "would_deny" | "fail_open" | "fail_closed";

/** The decision hook's argument, once per checked request. */
export interface DecisionEvent {
  readonly outcome: Outcome;
  /** Whether the decision was made in the process (`fail: local` while Redis could not answer). */
  readonly local: boolean;
  readonly method: string;
  /** The request's path as received, without the query string. */
  readonly path: string;
  /** The matched route's `path` from the configuration, or undefined. */
  readonly route: string | undefined;
  /** One per checked policy, in check order. */
  readonly checks: readonly CheckReport[];
  /** Why Redis could not answer (fail_open, fail_closed, and a local decision). */
  readonly error: Error | undefined;
}

/**
 * The outcome of an answered check (docs/http.md, Shadow mode): `denied`
 * when an enforced policy denies in an enforced request, `would_deny`
 * when only shadow policies (or a shadow request) deny, else `allowed`.
 */
export function outcomeOf(shadowRequest: boolean, checked: readonly Checked[]): "allowed" | "denied" | "would_deny" {
  let outcome: "allowed" | "would_deny" = "allowed";
  for (const c of checked) {
    if (c.decision.allowed) continue;
    if (!shadowRequest && !c.policy.shadow) return "denied";
    outcome = "would_deny";
  }
  return outcome;
}

export type DecisionHook = (event: DecisionEvent) => void;

export interface Logger {
  warn(message: string): void;
}

/** Calls the hook; an exception in it is logged and ignored. */
export function callHook(hook: DecisionHook, event: DecisionEvent, logger: Logger): void {
  try {
    hook(event);
  } catch (err) {
    logger.warn(`librl: the decision hook threw: ${(err as Error).message}`);
  }
}
