/**
 * Decide (docs/http.md, One decision per request, steps 2 and 3): the
 * Redis exchange. One RL.ALL per subject, in the order subjects first
 * appear; after a denial the later groups are peeked (every check gets a
 * reply) and the admitted ones refunded, so a refused request is counted
 * by no policy. The whole exchange has `timeout`; a failure reports the
 * groups Redis had admitted, for the fail mode to keep or refund.
 */
import type { Clause } from "../args.js";
import type { Limiter } from "../limiter.js";
import type { Decision } from "../reply.js";
import type { Policy } from "./configuration.js";
import type { Logger } from "./hook.js";
import type { Check } from "./plan.js";

/** What Redis answered: admitted or not, and every check's reply, in check order. */
export interface Answered {
  readonly answered: true;
  readonly admitted: boolean;
  readonly decisions: readonly Decision[];
}

/** Redis failed (an error, or no answer within the timeout) after admitting `admitted`. */
export interface Failed {
  readonly answered: false;
  readonly error: Error;
  /** The subject groups Redis had admitted before it failed (counted until refunded). */
  readonly admitted: readonly (readonly Check[])[];
}

export class NoAnswer extends Error {
  override readonly name = "RedisTimeout";
}

const ARGS_HEAD = new WeakMap<Policy, readonly string[]>();

/** A policy's clause arguments before COST/REFUND (limit, window, ALIGNED, APPROX, BURST), built once per policy. */
function argsHead(p: Policy): readonly string[] {
  let head = ARGS_HEAD.get(p);
  if (head === undefined) {
    const args = [String(p.limit), `${p.windowMs}ms`];
    if (p.algorithm === "fixed" && p.aligned) args.push("ALIGNED");
    if (p.algorithm === "approx") args.push("APPROX");
    if (p.algorithm === "token" && p.burst !== undefined) args.push("BURST", String(p.burst));
    head = args;
    ARGS_HEAD.set(p, head);
  }
  return head;
}

const ALGORITHM = { fixed: "FIXED", sliding: "SLIDING", approx: "SLIDING", token: "TOKEN" } as const;

/** A check as an RL.ALL clause, consuming (`COST`) or giving back (`REFUND`) its cost. */
export function clause(c: Check, as: "COST" | "REFUND"): Clause {
  return {
    algorithm: ALGORITHM[c.policy.algorithm],
    key: c.key,
    args: [...argsHead(c.policy), as, String(c.cost)],
    override: c.okey,
    refund: as === "REFUND",
  };
}

/**
 * The checks' indices per subject, in the order subjects first appear:
 * one subject's keys share a hash tag, so each group is one slot.
 */
export function groupIndices(checks: readonly Check[]): number[][] {
  if (checks.length === 1) return [[0]];
  const groups = new Map<string, number[]>();
  checks.forEach((c, i) => {
    const group = groups.get(c.subject.tag);
    if (group === undefined) groups.set(c.subject.tag, [i]);
    else group.push(i);
  });
  return [...groups.values()];
}

/** The checks per subject, in the order subjects first appear. */
export function bySubject(checks: readonly Check[]): Check[][] {
  return groupIndices(checks).map((group) => group.map((i) => checks[i] as Check));
}

/**
 * Runs `work` for at most `ms`. Timers run before I/O in an event loop
 * turn: after a stall of the process, a reply already in the socket is
 * read first (setImmediate runs after the I/O phase), so only a Redis that
 * did not answer times out. A late reply or error of abandoned work is dropped.
 */
export function within<T>(ms: number, work: Promise<T>): Promise<T> {
  // One promise and one timer per call (it runs on every request): what
  // settles first wins, the other is ignored.
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => setImmediate(() => reject(new NoAnswer(`no answer within ${ms} ms`))), ms);
    work.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}

/**
 * Gives the checks' costs back: one RL.ALL of REFUND clauses per subject,
 * all within `timeoutMs`. A refund that fails is logged (`why` says which
 * refund it is) and the next one still runs; past the timeout, those not
 * made are logged.
 */
export async function refund(limiter: Limiter, checks: readonly Check[], timeoutMs: number, logger: Logger, why: string): Promise<void> {
  const groups = bySubject(checks);
  const failed = (group: readonly Check[], err: unknown) =>
    logger.warn(`librl: could not refund ${group.map((c) => c.key).join(", ")} (${why}): ${(err as Error).message}`);
  let next = 0;
  try {
    await within(
      timeoutMs,
      (async () => {
        for (; next < groups.length; next++) {
          const group = groups[next] as Check[];
          try {
            await limiter.all(group.map((c) => clause(c, "REFUND")));
          } catch (err) {
            failed(group, err);
          }
        }
      })(),
    );
  } catch (err) {
    // Timed out: the group in flight and those after it.
    failed(groups.slice(next).flat(), err);
    // Ends the abandoned loop: nothing more is sent.
    next = groups.length;
  }
}

/** The exchange of one request's checks (at least one) within `timeoutMs`. */
export async function decide(limiter: Limiter, checks: readonly Check[], timeoutMs: number, logger: Logger): Promise<Answered | Failed> {
  const state: Exchange = { abandoned: false, admitted: [] };
  try {
    return await within(timeoutMs, exchange(limiter, checks, state, logger));
  } catch (err) {
    state.abandoned = true;
    return { answered: false, error: err instanceof Error ? err : new Error(String(err)), admitted: [...state.admitted] };
  }
}

interface Exchange {
  /** Set when the timeout passed: nothing more is sent. */
  abandoned: boolean;
  /** The groups Redis admitted and no refund has been sent for. */
  admitted: Check[][];
}

async function exchange(limiter: Limiter, checks: readonly Check[], state: Exchange, logger: Logger): Promise<Answered> {
  const decisions = new Array<Decision>(checks.length);
  let admitted = true;
  for (const group of groupIndices(checks)) {
    if (state.abandoned) break;
    const members = group.map((i) => checks[i] as Check);
    const reply = await limiter.all(
      members.map((c) => clause(c, "COST")),
      admitted ? undefined : { peek: true },
    );
    group.forEach((i, j) => (decisions[i] = reply.decisions[j] as Decision));
    if (admitted && reply.allowed) state.admitted.push(members);
    else admitted = false;
  }
  // Denied: the groups admitted before the denial give their costs back.
  while (!admitted && !state.abandoned && state.admitted.length > 0) {
    // Taken off the list before it is sent, so a failure meanwhile cannot refund it twice.
    const group = state.admitted.shift() as Check[];
    try {
      await limiter.all(group.map((c) => clause(c, "REFUND")));
    } catch (err) {
      logger.warn(`librl: could not refund ${group.map((c) => c.key).join(", ")} (another subject refused the request): ${(err as Error).message}`);
    }
  }
  return { answered: true, admitted, decisions };
}
