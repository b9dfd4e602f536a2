/**
 * Headers (docs/http.md, Headers): the IETF draft's `RateLimit-Policy` and
 * `RateLimit`, the legacy `X-RateLimit-*`, and `Retry-After`, from the
 * module's replies; and the most restrictive policy they describe.
 */
import type { Decision } from "../reply.js";
import type { HeadersMode, Policy } from "./configuration.js";

/** One policy's check, with the reply it got. */
export interface Checked {
  readonly policy: Policy;
  readonly decision: Decision;
}

/** Whole seconds, rounded up. */
export function ceilSecs(ms: number): number {
  return Math.ceil(Math.max(0, ms) / 1000);
}

/** `Retry-After` seconds (at least 1), or undefined when no wait helps. */
export function retryAfterSecs(d: Decision): number | undefined {
  return d.retryAfterMs < 0 ? undefined : Math.max(1, ceilSecs(d.retryAfterMs));
}

/**
 * The index of the check a client most needs to see: among the denials,
 * the longest wait (a cost no wait can fit first); with none, the
 * smallest share of its limit left, then the later reset, then the first
 * in check order. `refused` (an enforced policy refused the request): only
 * the enforced policies' denials are candidates, so that Retry-After and
 * the refusal name a policy that refused it. Undefined for no checks.
 */
export function mostRestrictive(checked: readonly Checked[], refused = false): number | undefined {
  let best: number | undefined;
  for (let i = 0; i < checked.length; i++) {
    const c = checked[i] as Checked;
    if (refused && (c.decision.allowed || c.policy.shadow)) continue;
    if (best === undefined || tighter(c.decision, (checked[best] as Checked).decision)) best = i;
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
export function shownLimit(c: Checked): number {
  const { policy, decision } = c;
  if (policy.algorithm === "token" && policy.burst !== undefined && decision.limit === policy.burst) return policy.limit;
  return decision.limit;
}

/** A policy's `RateLimit-Policy` item at the limit it last showed: made again only when that limit changes (an override). */
const POLICY_ITEMS = new WeakMap<Policy, { readonly limit: number; readonly text: string }>();

/** One check's `RateLimit-Policy` item: `"<name>";q=<limit>;w=<secs>`, and the unit of a body-bytes policy. */
function policyItem(c: Checked): string {
  const limit = shownLimit(c);
  let item = POLICY_ITEMS.get(c.policy);
  if (item === undefined || item.limit !== limit) {
    const unit = c.policy.cost.kind === "body-bytes" ? ';qu="content-bytes"' : "";
    // A concurrency policy has no window (docs/http.md, Concurrency limits).
    const window = c.policy.algorithm === "concurrency" ? "" : `;w=${ceilSecs(c.policy.windowMs)}`;
    item = { limit, text: `"${c.policy.name}";q=${limit}${window}${unit}` };
    POLICY_ITEMS.set(c.policy, item);
  }
  return item.text;
}

/**
 * The rate-limit headers for the checks made, in check order. `refused`:
 * the request is refused by an enforced policy's denial, which adds
 * `Retry-After` when a wait can help. `legacyReset: unix` makes
 * `X-RateLimit-Reset` the Unix time of the reset, from `nowMs`.
 */
export function rateLimitHeaders(
  mode: HeadersMode,
  checked: readonly Checked[],
  refused: boolean,
  legacyReset: "seconds" | "unix" = "seconds",
  nowMs: number = Date.now(),
): Record<string, string> {
  // One check (the commonest request) is its own most restrictive, unless a refusal skips it.
  const one = checked.length === 1 ? (checked[0] as Checked) : undefined;
  const worst = one !== undefined && !(refused && (one.decision.allowed || one.policy.shadow)) ? 0 : mostRestrictive(checked, refused);
  const out: Record<string, string> = {};
  if (worst === undefined) return out;
  const w = checked[worst] as Checked;
  const reset = ceilSecs(w.decision.resetAfterMs);
  if (mode === "both" || mode === "ietf") {
    out["RateLimit-Policy"] = checked.length === 1 ? policyItem(w) : checked.map(policyItem).join(", ");
    out["RateLimit"] = `"${w.policy.name}";r=${w.decision.remaining};t=${reset}`;
  }
  if (mode === "draft6") {
    // express-rate-limit's draft-6 names, all of the most restrictive policy.
    out["RateLimit-Limit"] = String(shownLimit(w));
    out["RateLimit-Remaining"] = String(w.decision.remaining);
    out["RateLimit-Reset"] = String(reset);
    out["RateLimit-Policy"] = w.policy.algorithm === "concurrency" ? String(shownLimit(w)) : `${shownLimit(w)};w=${ceilSecs(w.policy.windowMs)}`;
  }
  if (mode === "both" || mode === "legacy") {
    out["X-RateLimit-Limit"] = String(shownLimit(w));
    out["X-RateLimit-Remaining"] = String(w.decision.remaining);
    out["X-RateLimit-Reset"] = String(legacyReset === "unix" ? Math.ceil((nowMs + Math.max(0, w.decision.resetAfterMs)) / 1000) : reset);
  }
  if (refused && !w.decision.allowed) {
    const secs = retryAfterSecs(w.decision);
    if (secs !== undefined) out["Retry-After"] = String(secs);
  }
  return out;
}
