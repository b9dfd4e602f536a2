/**
 * Decide (docs/http.md, One decision per request, steps 2 and 3): the
 * Redis exchange. One RL.ALL per subject, in the order subjects first
 * appear; after a denial the later groups are peeked (every check gets a
 * reply) and the admitted ones refunded, so a refused request is counted
 * by no policy. The whole exchange has `timeout`; a failure reports the
 * groups Redis had admitted, for the fail mode to keep or refund. A
 * `concurrency` policy's clause takes a lease, given back with a release
 * where the others are refunded (docs/http.md, Concurrency limits).
 */
import { Concurrent, type Clause } from "../args.js";
import type { Limiter } from "../limiter.js";
import { parseAllDecision, type Decision } from "../reply.js";
import { NoAnswer, bulk } from "../resp.js";
import type { Policy } from "./configuration.js";
import type { Logger } from "./hook.js";
import type { Check } from "./plan.js";

/** What Redis answered: admitted or not, and every check's reply, in check order. */
export interface Answered {
  readonly answered: true;
  readonly admitted: boolean;
  readonly decisions: readonly Decision[];
}

/** A subject group Redis admitted: its checks and their replies (a concurrency check's carries its lease). */
export interface Taken {
  readonly checks: readonly Check[];
  readonly decisions: readonly Decision[];
}

/** Redis failed (an error, or no answer within the timeout) after admitting `admitted`. */
export interface Failed {
  readonly answered: false;
  readonly error: Error;
  /** The subject groups Redis had admitted before it failed (counted, and their leases held, until given back). */
  readonly admitted: readonly Taken[];
}

export { NoAnswer };

const ARGS_HEAD = new WeakMap<Policy, readonly string[]>();

/** A policy's clause arguments before COST/REFUND (limit, window or lease, ALIGNED, APPROX, BURST), built once per policy. */
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

const ARGS_CONSUME = new WeakMap<Policy, readonly string[]>();

/**
 * What a consuming clause adds after its COST (docs/http.md, Lockouts and
 * queues): `BLOCK <block>` and a token policy's `RESERVE <queue>`; a
 * refund carries neither (it books no turn and starts no block).
 */
function argsConsume(p: Policy): readonly string[] {
  let tail = ARGS_CONSUME.get(p);
  if (tail === undefined) {
    const args: string[] = [];
    if (p.blockMs !== undefined) args.push("BLOCK", `${p.blockMs}ms`);
    if (p.queueMs !== undefined && p.algorithm === "token") args.push("RESERVE", `${p.queueMs}ms`);
    tail = args;
    ARGS_CONSUME.set(p, tail);
  }
  return tail;
}

/**
 * How long an admitted request waits for its turn: the latest turn its
 * enforced `queue` policies booked with RESERVE (an admitted reply's
 * retry_after), 0 for none. The wait is the application's (a timer),
 * never a WAIT holding the shared connection.
 */
export function turnMs(checks: readonly Check[], decisions: readonly Decision[]): number {
  let wait = 0;
  checks.forEach((c, i) => {
    const d = decisions[i];
    if (c.policy.queueMs !== undefined && !c.policy.shadow && d !== undefined && d.allowed) wait = Math.max(wait, d.retryAfterMs);
  });
  return wait;
}

const ALGORITHM = { fixed: "FIXED", sliding: "SLIDING", approx: "SLIDING", token: "TOKEN", concurrency: "CONCURRENT" } as const;

/**
 * A check as an RL.ALL clause, consuming (`COST`) or giving back (`REFUND`)
 * its cost; a concurrency check only consumes (its lease is released).
 */
export function clause(c: Check, as: "COST" | "REFUND"): Clause {
  return {
    algorithm: ALGORITHM[c.policy.algorithm],
    key: c.key,
    args: as === "COST" ? [...argsHead(c.policy), as, String(c.cost), ...argsConsume(c.policy)] : [...argsHead(c.policy), as, String(c.cost)],
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

/** A lease a request holds: the check that took it, and its id. */
export interface Held {
  readonly check: Check;
  readonly id: number;
}

/** The leases the replies took: the concurrency checks' lease ids above 0 (none in monitor or off mode). */
export function leasesOf(checks: readonly Check[], decisions: readonly Decision[]): Held[] {
  const held: Held[] = [];
  // A plain loop: it runs on every admitted request (no closure made for it).
  for (let i = 0; i < checks.length; i++) {
    const check = checks[i] as Check;
    const id = decisions[i]?.leaseId ?? 0;
    if (check.policy.algorithm === "concurrency" && id > 0) held.push({ check, id });
  }
  return held;
}

/**
 * Releases leases, all at once, within `timeoutMs` (if given): `RL.CONCURRENT key
 * limit lease RELEASE id` without OVERRIDE (a release frees the lease's
 * slots whatever the limit, and names one key). A release that fails is
 * logged, never thrown: the lease ends by itself after its length.
 */
export async function release(
  limiter: Limiter,
  held: readonly Held[],
  timeoutMs: number | undefined,
  logger: Logger,
  why: string,
): Promise<void> {
  if (held.length === 0) return;
  const one = async ({ check, id }: Held) => {
    try {
      const limit = Concurrent(check.key, check.policy.limit, `${check.policy.windowMs}ms`);
      const sent = limiter.heldLease(limit, id).release();
      await (timeoutMs === undefined ? sent : within(timeoutMs, sent));
    } catch (err) {
      logger.warn(`librl: could not release lease ${id} on ${check.key} (${why}): ${(err as Error).message}`);
    }
  };
  await Promise.all(held.map(one));
}

/** Gives back what admitted groups took: the rate policies refunded, the leases released. */
export async function giveBack(limiter: Limiter, taken: readonly Taken[], timeoutMs: number, logger: Logger, why: string): Promise<void> {
  const rate = taken.flatMap((t) => t.checks.filter((c) => c.policy.algorithm !== "concurrency"));
  const held = taken.flatMap((t) => leasesOf(t.checks, t.decisions));
  await Promise.all([
    rate.length > 0 ? refund(limiter, rate, timeoutMs, logger, why) : undefined,
    release(limiter, held, timeoutMs, logger, why),
  ]);
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

/** Sends a prebuilt RL.ALL argv (Limiter.directAll) and resolves to its raw reply. */
export type DirectAll = (argv: readonly string[], keys: readonly string[]) => Promise<unknown>;

/** Sends a RESP-encoded RL.ALL within `timeoutMs` (Limiter.directEncoded: the integration's own connection). */
export type EncodedAll = (command: string, timeoutMs: number) => Promise<unknown>;

/** A policy's clause, RESP-encoded around its key and cost: the algorithm; the head and COST; how many arguments the head and COST are. */
interface EncodedClause {
  readonly algorithm: string;
  readonly head: string;
  readonly count: number;
  /** An RL.ALL of this clause alone up to its key: the array's length (without OVERRIDE), the command, the algorithm. */
  readonly alone: string;
  /** The same, for a clause with OVERRIDE (two arguments more). */
  readonly aloneOverride: string;
}

const ENCODED = new WeakMap<Policy, EncodedClause>();
const COST_ONE = bulk("1");
const OVERRIDE = bulk("OVERRIDE");

function encodedClause(p: Policy): EncodedClause {
  let e = ENCODED.get(p);
  if (e === undefined) {
    const head = [...argsHead(p), "COST"];
    const algorithm = bulk(ALGORITHM[p.algorithm]);
    const args = 1 + 3 + head.length;
    e = {
      algorithm,
      head: head.map(bulk).join(""),
      count: head.length,
      alone: `*${args}\r\n$6\r\nRL.ALL\r\n${algorithm}`,
      aloneOverride: `*${args + 2}\r\n$6\r\nRL.ALL\r\n${algorithm}`,
    };
    ENCODED.set(p, e);
  }
  return e;
}

/** One check's RL.ALL as RESP (the commonest request: one policy): no array, the parts made once per policy. */
export function encodeOne(c: Check): string {
  const e = encodedClause(c.policy);
  const clause = bulk(c.key) + e.head + (c.cost === 1 ? COST_ONE : bulk(String(c.cost)));
  return c.okey === undefined ? e.alone + clause : e.aloneOverride + clause + OVERRIDE + bulk(c.okey);
}

/** The checks' RL.ALL as RESP: the parts made once per policy, the request's keys and costs encoded here. */
export function encodeAll(checks: readonly Check[]): string {
  if (checks.length === 1) return encodeOne(checks[0] as Check);
  let args = 1;
  let body = "";
  for (const c of checks) {
    const e = encodedClause(c.policy);
    body += e.algorithm + bulk(c.key) + e.head + (c.cost === 1 ? COST_ONE : bulk(String(c.cost)));
    args += 3 + e.count;
    if (c.okey !== undefined) {
      body += OVERRIDE + bulk(c.okey);
      args += 2;
    }
  }
  return `*${args}\r\n$6\r\nRL.ALL\r\n${body}`;
}

/**
 * The exchange of checks that share one subject (one RL.ALL, atomic: a
 * denial leaves nothing to give back), sent the short way: the argv built
 * from each policy's clause head, made once, and the request's keys and
 * costs (encoded straight to RESP where the connection takes it). Rate
 * policies only (a concurrency lease takes decide()'s way). Resolves to
 * the raw reply, within `timeoutMs`: the caller reads it (answeredOf) in
 * its own continuation, one promise fewer per request.
 */
export function sendOne(direct: DirectAll, checks: readonly Check[], timeoutMs: number, encoded?: EncodedAll): Promise<unknown> {
  // The integration's own connection bounds the wait itself (one timer for all its calls).
  return encoded === undefined ? within(timeoutMs, sendArgv(direct, checks)) : encoded(encodeAll(checks), timeoutMs);
}

/** RL.ALL's reply to `clauses` clauses as an answer (an unexpected reply throws). */
export function answeredOf(reply: unknown, clauses: number): Answered {
  const all = parseAllDecision(reply, clauses);
  return { answered: true, admitted: all.allowed, decisions: all.decisions };
}

/** A failed exchange that admitted nothing. */
export function failedOf(err: unknown): Failed {
  return { answered: false, error: err instanceof Error ? err : new Error(String(err)), admitted: [] };
}

/** The checks' RL.ALL as an argv, sent through a client library. */
function sendArgv(direct: DirectAll, checks: readonly Check[]): Promise<unknown> {
  const argv = ["RL.ALL"];
  const keys: string[] = [];
  for (const c of checks) {
    argv.push(ALGORITHM[c.policy.algorithm], c.key, ...argsHead(c.policy), "COST", String(c.cost));
    keys.push(c.key);
    if (c.okey !== undefined) {
      argv.push("OVERRIDE", c.okey);
      keys.push(c.okey);
    }
  }
  return direct(argv, keys);
}

/**
 * The shadow policies' exchange (docs/http.md, One decision per request,
 * step 4): one RL.ALL of their clauses per subject, sent whatever the
 * enforced groups answered, never with PEEK and never refunded; each
 * check's reply, in check order. Rejects when Redis fails or the time runs out.
 */
export function decideShadow(limiter: Limiter, checks: readonly Check[], timeoutMs: number): Promise<Decision[]> {
  const decisions = new Array<Decision>(checks.length);
  const work = (async () => {
    for (const group of groupIndices(checks)) {
      const reply = await limiter.all(group.map((i) => clause(checks[i] as Check, "COST")));
      group.forEach((i, j) => (decisions[i] = reply.decisions[j] as Decision));
    }
    return decisions;
  })();
  return within(timeoutMs, work);
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
  /** The groups Redis admitted and nothing has been given back for. */
  admitted: Taken[];
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
    if (admitted && reply.allowed) state.admitted.push({ checks: members, decisions: reply.decisions });
    else admitted = false;
  }
  // Denied: the groups admitted before the denial give back their costs and leases.
  while (!admitted && !state.abandoned && state.admitted.length > 0) {
    // Taken off the list before it is sent, so a failure meanwhile cannot give it back twice.
    const taken = state.admitted.shift() as Taken;
    const why = "another subject refused the request";
    const rate = taken.checks.filter((c) => c.policy.algorithm !== "concurrency");
    try {
      if (rate.length > 0) await limiter.all(rate.map((c) => clause(c, "REFUND")));
    } catch (err) {
      logger.warn(`librl: could not refund ${rate.map((c) => c.key).join(", ")} (${why}): ${(err as Error).message}`);
    }
    // (Within the exchange's own timeout.)
    await release(limiter, leasesOf(taken.checks, taken.decisions), undefined, logger, why);
  }
  return { answered: true, admitted, decisions };
}
