/**
 * What a checked request gets back (docs/http.md, Headers and Denied): the
 * IETF draft's `RateLimit-Policy` and `RateLimit`, the legacy
 * `X-RateLimit-*`, `Retry-After`, and RFC 9457 problem bodies.
 */
import type { Decision } from "../reply.js";
import type { Config, Policy } from "./config.js";

/** A response the limiter answers itself, instead of the handler. */
export interface Refusal {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly contentType: string;
  readonly body: string;
}

/** One policy's check, with the reply it got. */
export interface Checked {
  readonly policy: Policy;
  readonly decision: Decision;
}

const REASONS: Record<number, string> = {
  400: "Bad Request",
  413: "Content Too Large",
  429: "Too Many Requests",
  503: "Service Unavailable",
};

export const PROBLEM_TYPE = "application/problem+json";

/** Whole seconds, rounded up. */
export function ceilSecs(ms: number): number {
  return Math.ceil(Math.max(0, ms) / 1000);
}

/** `Retry-After` seconds (at least 1), or undefined when no wait helps. */
export function retryAfterSecs(d: Decision): number | undefined {
  return d.retryAfterMs < 0 ? undefined : Math.max(1, ceilSecs(d.retryAfterMs));
}

/**
 * The index of the check a client most needs to see: the denying one (the
 * longest wait; a cost no wait can fit first), else the one with the
 * smallest share of its limit left, then the later reset.
 */
export function mostRestrictive(checked: readonly Checked[]): number | undefined {
  let best: number | undefined;
  for (let i = 0; i < checked.length; i++) {
    if (best === undefined || tighter((checked[i] as Checked).decision, (checked[best] as Checked).decision)) best = i;
  }
  return best;
}

function tighter(a: Decision, b: Decision): boolean {
  if (a.allowed !== b.allowed) return !a.allowed;
  if (!a.allowed) {
    if (a.retryAfterMs < 0 || b.retryAfterMs < 0) return a.retryAfterMs < 0 && b.retryAfterMs >= 0;
    return a.retryAfterMs > b.retryAfterMs;
  }
  // remaining/limit compared without division.
  const left = a.remaining * b.limit - b.remaining * a.limit;
  if (left !== 0) return left < 0;
  return a.resetAfterMs > b.resetAfterMs;
}

/**
 * The `<limit>` a policy advertises: the reply's limit (the effective one,
 * after an override), except a token policy whose capacity is its own
 * configured burst: then its rate per window.
 */
function quota(c: Checked): number {
  const { policy, decision } = c;
  if (policy.algorithm === "token" && policy.burst !== undefined && decision.limit === policy.burst) return policy.limit;
  return decision.limit;
}

/** The rate-limit headers for the checks made; `refused`: the request is answered 429 (adds Retry-After). */
export function rateLimitHeaders(config: Config, checked: readonly Checked[], refused: boolean): Record<string, string> {
  const out: Record<string, string> = {};
  const worst = mostRestrictive(checked);
  if (worst === undefined) return out;
  const w = checked[worst] as Checked;
  const reset = ceilSecs(w.decision.resetAfterMs);
  if (config.headers === "both" || config.headers === "ietf") {
    out["RateLimit-Policy"] = checked
      .map((c) => {
        const unit = c.policy.cost.kind === "body-bytes" ? ';qu="content-bytes"' : "";
        return `"${c.policy.name}";q=${quota(c)};w=${ceilSecs(c.policy.windowMs)}${unit}`;
      })
      .join(", ");
    out["RateLimit"] = `"${w.policy.name}";r=${w.decision.remaining};t=${reset}`;
  }
  if (config.headers === "both" || config.headers === "legacy") {
    out["X-RateLimit-Limit"] = String(quota(w));
    out["X-RateLimit-Remaining"] = String(w.decision.remaining);
    out["X-RateLimit-Reset"] = String(reset);
  }
  if (refused && !w.decision.allowed) {
    const secs = retryAfterSecs(w.decision);
    if (secs !== undefined) out["Retry-After"] = String(secs);
  }
  return out;
}

/** An RFC 9457 problem response; `extra` members go beside the standard ones. */
export function problem(
  status: number,
  detail: string,
  extra: Record<string, unknown> = {},
  title = REASONS[status] ?? "Error",
): Refusal {
  const body = {
    type: "about:blank",
    title,
    status,
    detail,
    ...extra,
  };
  return { status, headers: {}, contentType: PROBLEM_TYPE, body: JSON.stringify(body) };
}

function describeWindow(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
}

/** The refusal for the policy that denied (the configured status and body). */
export function denied(config: Config, c: Checked, cost: number, headers: Record<string, string>): Refusal {
  const { policy, decision } = c;
  let refusal: Refusal;
  if (config.deny.body === "text") {
    refusal = { status: config.deny.status, headers: {}, contentType: "text/plain; charset=utf-8", body: config.deny.message };
  } else {
    const what = `"${policy.name}" (${quota(c)} per ${describeWindow(policy.windowMs)})`;
    const detail =
      decision.retryAfterMs < 0
        ? `This request costs ${cost}, more than rate limit ${what} ever admits at once.`
        : `Rate limit ${what} exceeded; retry in ${retryAfterSecs(decision)} s.`;
    refusal = problem(
      config.deny.status,
      detail,
      {
        policy: policy.name,
        limit: quota(c),
        retry_after: decision.retryAfterMs < 0 ? null : decision.retryAfterMs,
      },
      // The title names the refusal, whatever status it is sent with.
      "Too Many Requests",
    );
  }
  return { ...refusal, headers: { ...headers, ...refusal.headers } };
}

/** 503: Redis cannot answer and `fail: closed`. */
export function unavailable(): Refusal {
  return problem(503, "The rate limiter is unavailable, and this service does not admit unlimited requests.");
}

/** 400: a cost header that is not an integer from 1 to 2^50. */
export function badCost(header: string, policy: string): Refusal {
  return problem(400, `${header} must be an integer from 1 to 2^50.`, { policy });
}

/** 413: a body without Content-Length larger than the limiter reads to measure it. */
export function tooLarge(max: number): Refusal {
  return problem(413, `A body without Content-Length may be at most ${max} bytes.`);
}
