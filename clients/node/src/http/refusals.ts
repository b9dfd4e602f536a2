/**
 * Refusals (docs/http.md, Refusals): the responses the limiter makes
 * itself, RFC 9457 problem bodies (or the deny message as text), each
 * `detail` exactly as the contract writes it.
 */
import type { Decision } from "../reply.js";
import type { Deny, Policy } from "./configuration.js";
import { retryAfterSecs, shownLimit, type Checked } from "./headers.js";

/** A response the limiter answers itself, instead of the handler. */
export interface Refusal {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly contentType: string;
  readonly body: string;
}

export const PROBLEM_TYPE = "application/problem+json";
export const JSON_TYPE = "application/json";

/** An RFC 9457 problem response; `extra` members go after the standard ones. */
export function problem(status: number, title: string, detail: string, extra: Record<string, unknown> = {}): Refusal {
  const body = { type: "about:blank", title, status, detail, ...extra };
  return { status, headers: {}, contentType: PROBLEM_TYPE, body: JSON.stringify(body) };
}

/** `60s`, `1500ms`: a window as the 429 detail writes it. */
export function windowText(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
}

/** The 429 detail: when to retry, or that no wait helps; `limit` as the headers show it. */
export function deniedDetail(policy: Policy, limit: number, decision: Decision, cost: number): string {
  if (policy.algorithm === "concurrency") {
    const what = `"${policy.name}" (${limit} at once)`;
    return decision.retryAfterMs < 0
      ? `This request costs ${cost}, more than concurrency limit ${what} ever admits.`
      : `Concurrency limit ${what} reached; retry in ${retryAfterSecs(decision)} s.`;
  }
  const what = `"${policy.name}" (${limit} per ${windowText(policy.windowMs)})`;
  return decision.retryAfterMs < 0
    ? `This request costs ${cost}, more than rate limit ${what} ever admits at once.`
    : `Rate limit ${what} exceeded; retry in ${retryAfterSecs(decision)} s.`;
}

/** The rate-limit headers, then the refusal's own extra ones (`deny.headers`). */
function withExtra(headers: Readonly<Record<string, string>>, deny: Deny): Readonly<Record<string, string>> {
  return deny.headers === undefined ? headers : { ...headers, ...deny.headers };
}

/**
 * A `text` or `json` refusal (`deny.body`), or undefined for a problem
 * body, which the caller writes.
 */
function asGiven(deny: Deny, headers: Readonly<Record<string, string>>): Refusal | undefined {
  if (deny.body === "text") return { status: deny.status, headers: withExtra(headers, deny), contentType: deny.contentType, body: deny.message };
  if (deny.body === "json") return { status: deny.status, headers: withExtra(headers, deny), contentType: JSON_TYPE, body: deny.json as string };
  return undefined;
}

/**
 * The refusal for the most restrictive denial (`deny`'s status and body:
 * the configuration's, or the matched route's), with the rate-limit
 * headers and `deny.headers`.
 */
export function denied(deny: Deny, c: Checked, cost: number, headers: Readonly<Record<string, string>>): Refusal {
  const given = asGiven(deny, headers);
  if (given !== undefined) return given;
  const { policy, decision } = c;
  const limit = shownLimit(c);
  if (decision.retryAfterMs >= 0) {
    // The usual refusal: the body's parts around the wait, made once per deny, policy and limit.
    const parts = retryParts(deny, policy, limit);
    const body = `${parts.head}${retryAfterSecs(decision) as number}${parts.middle}${decision.retryAfterMs}}`;
    return { status: deny.status, headers: withExtra(headers, deny), contentType: PROBLEM_TYPE, body };
  }
  return { status: deny.status, headers: withExtra(headers, deny), contentType: PROBLEM_TYPE, body: deniedBody(deny, policy, limit, decision, cost) };
}

/**
 * The problem body of a denial. The title names the refusal, whatever
 * status it is sent with. Written out rather than through JSON.stringify
 * of an object (half the time of a refused request's own work): the same
 * bytes, members in the same order.
 */
function deniedBody(deny: Deny, policy: Policy, limit: number, decision: Decision, cost: number): string {
  const detail = JSON.stringify(deniedDetail(policy, limit, decision, cost));
  const retry = decision.retryAfterMs < 0 ? "null" : String(decision.retryAfterMs);
  return (
    `{"type":"about:blank","title":"Too Many Requests","status":${deny.status},"detail":${detail},` +
    `"policy":${policyJson(policy)},"limit":${limit},"retry_after":${retry}}`
  );
}

/** A denial body with a wait, split around the wait's seconds and its ms: `head` + seconds + `middle` + ms + `}`. */
interface RetryParts {
  readonly head: string;
  readonly middle: string;
}

const RETRY_PARTS = new WeakMap<Deny, WeakMap<Policy, Map<number, RetryParts>>>();

/**
 * deniedBody's bytes around the wait, made once per deny, policy and
 * limit shown (an override's limit keeps its own beside the policy's): a body made whole
 * for a wait of 1000 ms (1 s), split at its two numbers. The detail ends
 * `retry in 1 s."` right before the `"policy"` member (`","policy":` with
 * bare quotes occurs nowhere else: a policy name's quotes are escaped),
 * and the body ends `1000}`.
 */
function retryParts(deny: Deny, policy: Policy, limit: number): RetryParts {
  let byPolicy = RETRY_PARTS.get(deny);
  if (byPolicy === undefined) {
    byPolicy = new WeakMap();
    RETRY_PARTS.set(deny, byPolicy);
  }
  let byLimit = byPolicy.get(policy);
  if (byLimit === undefined) {
    byLimit = new Map();
    byPolicy.set(policy, byLimit);
  }
  let parts = byLimit.get(limit);
  if (parts === undefined) {
    // Overrides may give each subject a limit of its own: keep a few, not one per subject ever seen.
    if (byLimit.size >= 16) byLimit.clear();
    const whole = deniedBody(deny, policy, limit, { allowed: false, count: 0, retryAfterMs: 1000, limit, remaining: 0, resetAfterMs: 0, leaseId: 0 }, 1);
    const secs = whole.indexOf('retry in 1 s.","policy":') + "retry in ".length;
    parts = { head: whole.slice(0, secs), middle: whole.slice(secs + 1, whole.length - "1000}".length) };
    byLimit.set(limit, parts);
  }
  return parts;
}

const POLICY_JSON = new WeakMap<Policy, string>();

/** A policy's name as a JSON string, made once. */
function policyJson(policy: Policy): string {
  let json = POLICY_JSON.get(policy);
  if (json === undefined) {
    json = JSON.stringify(policy.name);
    POLICY_JSON.set(policy, json);
  }
  return json;
}

/** 503 (`fail_deny`): Redis cannot answer and `fail: closed`; no rate-limit headers. */
export function unavailable(failDeny: Deny): Refusal {
  const given = asGiven(failDeny, {});
  if (given !== undefined) return given;
  const refusal = problem(failDeny.status, "Service Unavailable", "The rate limiter is unavailable, and this service does not admit unlimited requests.");
  return failDeny.headers === undefined ? refusal : { ...refusal, headers: failDeny.headers };
}

/** 400: a cost header that is not an integer from 1 to 2^50 (`header` as configured). */
export function badCost(header: string, policy: string): Refusal {
  return problem(400, "Bad Request", `${header} must be an integer from 1 to 2^50.`, { policy });
}

/** 400: a cost resolver gave something other than an integer from 1 to 2^50 (`resolver`: the name in `code:<name>`). */
export function badCodeCost(resolver: string, policy: string): Refusal {
  return problem(400, "Bad Request", `The cost "${resolver}" must be an integer from 1 to 2^50.`, { policy });
}

/** 413: a body larger than `max_body_bytes`, declared or read. */
export function tooLarge(max: number): Refusal {
  return problem(413, "Content Too Large", `The body may be at most ${max} bytes.`);
}
