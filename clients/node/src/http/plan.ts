/**
 * Plan (docs/http.md, One decision per request, step 1): which checks a
 * request needs. The route's policies, each with its subject and keys; then each one's cost (a bad cost header
 * or a body too large refuses the request here, before any Redis call).
 */
import type { Policy } from "./configuration.js";
import { MAX_UNITS } from "./durations.js";
import { trimOws, type Identity, type Subject } from "./identity.js";
import { keyBase, limiterKey, overrideKey } from "./keys.js";
import { badCost, badCodeCost, tooLarge, type Refusal } from "./refusals.js";

/** A policy that applies to a request, with its subject and keys. */
export interface Planned {
  readonly policy: Policy;
  readonly subject: Subject;
  readonly key: string;
  /** The override key, for an overridable policy. */
  readonly okey: string | undefined;
}

/** One policy applied to one request, with its cost. */
export interface Check extends Planned {
  readonly cost: number;
}

/**
 * The checks a request needs before costs: each policy with its subject
 * and keys, in check order.
 */
export function plan(policies: readonly Policy[], identity: Identity, prefix: string): Planned[] {
  const planned: Planned[] = [];
  for (const policy of policies) {
    const subject = identity.subject(policy.key);
    const base = keyBase(prefix, subject.tag);
    planned.push({
      policy,
      subject,
      key: limiterKey(base, policy.name),
      okey: policy.overridable ? overrideKey(base, policy.name) : undefined,
    });
  }
  return planned;
}

/**
 * A cost header's value (docs/http.md, Cost): every line joined with ", ",
 * trimmed of spaces and tabs, must be decimal digits with a value from 1
 * to 2^50. `undefined` (absent) costs 1; null: not a cost (400).
 */
export function costHeader(value: string | undefined): number | null {
  if (value === undefined) return 1;
  const digits = trimOws(value);
  if (!/^[0-9]+$/.test(digits)) return null;
  const cost = Number(digits);
  return cost >= 1 && cost <= MAX_UNITS ? cost : null;
}

/** A cost resolver's answer (docs/http.md, Resolvers): an integer (a number or a bigint) from 1 to 2^50; null: anything else (400). */
export function codeCost(value: unknown): number | null {
  if (typeof value === "bigint") return value >= 1n && value <= BigInt(MAX_UNITS) ? Number(value) : null;
  return typeof value === "number" && Number.isInteger(value) && value >= 1 && value <= MAX_UNITS ? value : null;
}

/** Calls the request's cost resolver of that name; it may return a promise. */
export type ResolveCost = (name: string) => unknown;

/** Reads the body of a request without Content-Length, up to `max` bytes: its length, or undefined past max. */
export type MeasureBody = (max: number) => Promise<number | undefined>;

/**
 * Each planned check's cost: an integer, the body's size (its
 * Content-Length, or the body read to be measured, up to
 * `maxBodyBytes`: larger is 413), or a request header (400 when it is not
 * a cost). The body is measured first, so a request that is both too
 * large and badly costed is a 413, as in the Rust and Python integrations.
 */
export async function costs(
  planned: readonly Planned[],
  header: (name: string) => string | undefined,
  maxBodyBytes: number,
  measureBody: MeasureBody,
  resolveCost?: ResolveCost,
): Promise<Check[] | Refusal> {
  let bodyCost = 0;
  if (planned.some((p) => p.policy.cost.kind === "body-bytes")) {
    const declared = header("content-length");
    const length = declared !== undefined && /^[0-9]+$/.test(declared) ? Number(declared) : await measureBody(maxBodyBytes);
    if (length === undefined || length > maxBodyBytes) return tooLarge(maxBodyBytes);
    bodyCost = Math.min(Math.max(length, 1), MAX_UNITS);
  }
  // Cost resolvers, in check order; an error is a bad cost (400), as any other answer that is not one.
  let fromCode: (number | null)[] | undefined;
  if (resolveCost !== undefined && planned.some((p) => p.policy.cost.kind === "code")) {
    fromCode = [];
    for (const p of planned) {
      const spec = p.policy.cost;
      if (spec.kind !== "code") fromCode.push(null);
      else {
        try {
          fromCode.push(codeCost(await resolveCost(spec.name)));
        } catch {
          fromCode.push(null);
        }
      }
    }
  }
  return costsOf(planned, { header }, bodyCost, fromCode);
}

/**
 * Each planned check's cost, the body's (`body-bytes`) given: what costs()
 * does once the body is measured, and all it does for policies that do not
 * count bytes (then synchronously, on every request).
 */
export function costsOf(
  planned: readonly Planned[],
  facts: { header(name: string): string | undefined },
  bodyCost: number,
  fromCode?: readonly (number | null)[],
): Check[] | Refusal {
  const checks: Check[] = [];
  for (let i = 0; i < planned.length; i++) {
    const p = planned[i] as Planned;
    const spec = p.policy.cost;
    let cost: number;
    if (spec.kind === "units") cost = spec.units;
    else if (spec.kind === "body-bytes") cost = bodyCost;
    else if (spec.kind === "code") {
      const resolved = fromCode?.[i] ?? null;
      if (resolved === null) return badCodeCost(spec.name, p.policy.name);
      cost = resolved;
    } else {
      const fromHeader = costHeader(facts.header(spec.header));
      if (fromHeader === null) return badCost(spec.name, p.policy.name);
      cost = fromHeader;
    }
    checks.push({ policy: p.policy, subject: p.subject, key: p.key, okey: p.okey, cost });
  }
  return checks;
}
