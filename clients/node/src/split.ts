/**
 * Calls while their slot moves (docs/operations.md, While a slot moves).
 * While a slot is half-moved key by key, the cluster answers TRYAGAIN to a
 * call naming several keys unless all of them exist on the side it asks:
 * an OVERRIDE okey that was never set, or an RL.ALL clause whose key has
 * expired, gets TRYAGAIN for the whole move, so retrying cannot help. A
 * call naming one key is always served (by the source, or by the target
 * after ASK), so on TRYAGAIN the Limiter splits the call into such calls:
 *
 * - a call with OVERRIDE okey reads the override first (RL.OVERRIDE GET),
 *   then runs without OVERRIDE, with the override's values in place of its
 *   own when one is stored;
 * - RL.ALL runs its clauses one by one; if one denies, the clauses already
 *   admitted are given back (REFUND their cost, RELEASE a lease) and the
 *   others are answered with PEEK, and the RL.ALL decision is built from
 *   those replies as the server builds it.
 */
import { clauseOption, clauseOptions, leaseActionCall, type Clause, type LimiterCall } from "./args.js";
import type { AllDecision, Decision, OverrideInfo } from "./reply.js";

/**
 * Whether `err` is the cluster's TRYAGAIN (a call that ran nowhere), also
 * as the last error of ioredis's "Too many Cluster redirections".
 */
export function isTryAgain(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const message = err.message;
  return message.startsWith("TRYAGAIN") || /^Too many Cluster redirections\. Last error: (?:\w+: )?TRYAGAIN/.test(message);
}

/** What a split sends: each a call naming one key. */
export interface SplitIo {
  /** `RL.OVERRIDE GET okey` (okey as the caller gave it). */
  overrideGet(okey: string): Promise<OverrideInfo | null>;
  /** A limiter call without OVERRIDE. */
  call(call: LimiterCall): Promise<Decision>;
}

/**
 * The clause without OVERRIDE: with the override's limit, window (a lease,
 * for CONCURRENT) and burst in place of its own when one is stored, as the
 * server applies it (docs/commands.md, Arguments: OVERRIDE), else as it is.
 */
export function withOverride<C extends Clause>(clause: C, o: OverrideInfo | null): C {
  if (o === null) return { ...clause, override: undefined };
  const args = [String(o.limit), `${o.windowMs}ms`];
  for (const [name, value] of clauseOptions(clause.args)) {
    // A token bucket's capacity is the override's burst, or else its rate.
    if (name === "BURST") continue;
    args.push(name);
    if (value !== undefined) args.push(value);
  }
  if (clause.algorithm === "TOKEN" && o.burst > 0) args.push("BURST", String(o.burst));
  return { ...clause, args, override: undefined };
}

async function resolved<C extends Clause>(clause: C, io: SplitIo): Promise<C> {
  return clause.override === undefined ? clause : withOverride(clause, await io.overrideGet(clause.override));
}

/** A single limiter call that met TRYAGAIN: its override read first, then the call alone. */
export async function splitCall(call: LimiterCall, io: SplitIo): Promise<Decision> {
  return io.call(await resolved(call, io));
}

/** A TOKEN clause's WAIT as RESERVE: the split waits itself once every clause has admitted. */
function reserving(clause: Clause): Clause {
  if (clause.algorithm !== "TOKEN" || clauseOption(clause, "WAIT") === undefined) return clause;
  const args = [clause.args[0] as string, clause.args[1] as string];
  for (const [name, value] of clauseOptions(clause.args)) {
    args.push(name === "WAIT" ? "RESERVE" : name);
    if (value !== undefined) args.push(value);
  }
  return { ...clause, args };
}

/** The call that gives back what an admitted clause took, or undefined when it took nothing. */
function giveBack(clause: Clause, taken: Decision): LimiterCall | undefined {
  if (clause.algorithm === "CONCURRENT") {
    return taken.leaseId > 0 ? leaseActionCall(clause, "RELEASE", taken.leaseId) : undefined;
  }
  if (clause.refund) return undefined;
  const cost = clauseOption(clause, "COST") ?? "1";
  if (cost === "0") return undefined;
  const args = [clause.args[0] as string, clause.args[1] as string];
  for (const [name, value] of clauseOptions(clause.args)) {
    if (name === "ALIGNED" || name === "APPROX") args.push(name);
    else if (name === "BURST") args.push(name, value as string);
  }
  args.push("REFUND", cost);
  return { algorithm: clause.algorithm, key: clause.key, args, override: undefined, refund: true, peek: false };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * An RL.ALL that met TRYAGAIN, clause by clause. The clauses that consume
 * run first, in order, then those that REFUND (a refund cannot be taken
 * back). After a denial the rest are answered with PEEK, except that a
 * clause with BLOCK that would deny is sent, so that its block starts as
 * in RL.ALL; then what the admitted clauses took is given back. Each
 * admitted clause of a denied call reports its reply with lease 0, which is
 * what its PEEK would have said.
 */
export async function splitAll(clauses: readonly Clause[], peek: boolean, io: SplitIo): Promise<AllDecision> {
  const seen = new Set<string>();
  for (const clause of clauses) {
    // RL.ALL refuses this before any clause runs; one at a time, nothing would.
    if (seen.has(clause.key)) throw new Error(`ERR key '${clause.key}' appears in more than one RL.ALL clause`);
    seen.add(clause.key);
  }
  const single = (await Promise.all(clauses.map((clause) => resolved(clause, io)))).map(reserving);
  const order = [...single.keys()].sort((a, b) => Number(single[a]!.refund) - Number(single[b]!.refund));
  const replies = new Array<Decision>(single.length);
  const taken: number[] = [];
  let denied = false;
  for (const i of order) {
    const clause = single[i] as Clause;
    if (peek) {
      replies[i] = await io.call({ ...clause, peek: true });
    } else if (denied) {
      replies[i] = await answerAfterDenial(clause, io);
    } else {
      const d = await io.call({ ...clause, peek: false });
      replies[i] = d;
      if (d.allowed) taken.push(i);
      else denied = true;
    }
  }
  if (denied) {
    for (const i of taken.reverse()) {
      const back = giveBack(single[i] as Clause, replies[i] as Decision);
      if (back !== undefined) await io.call(back);
      replies[i] = { ...(replies[i] as Decision), leaseId: 0 };
    }
  }
  const allowed = peek ? replies.every((d) => d.allowed) : !denied;
  if (!allowed) return { allowed, retryAfterMs: largestWait(replies.filter((d) => !d.allowed)), decisions: replies };
  // Admitted: a WAIT clause's reservation is waited for here, as the server
  // would hold the reply; any longer RESERVE wait is left to the caller.
  const holdMs = peek
    ? 0
    : Math.max(0, ...clauses.map((c, i) => (clauseOption(c, "WAIT") === undefined ? 0 : (replies[i] as Decision).retryAfterMs)));
  const waitMs = largestWait(replies);
  if (holdMs <= 0) return { allowed, retryAfterMs: waitMs, decisions: replies };
  await sleep(holdMs);
  return {
    allowed,
    retryAfterMs: waitMs < 0 ? waitMs : waitMs - holdMs,
    decisions: replies.map((d) => ({ ...d, retryAfterMs: d.retryAfterMs < 0 ? 0 : Math.max(0, d.retryAfterMs - holdMs) })),
  };
}

/** RL.ALL's retry_after over some replies: -1 if any is -1, else the largest. */
function largestWait(replies: readonly Decision[]): number {
  return replies.some((d) => d.retryAfterMs < 0) ? -1 : Math.max(0, ...replies.map((d) => d.retryAfterMs));
}

/**
 * A clause after another denied: its PEEK; but a clause with BLOCK that
 * would deny is sent, so that its denial starts its block (if it admits
 * after all, what it took is given back at once).
 */
async function answerAfterDenial(clause: Clause, io: SplitIo): Promise<Decision> {
  const peeked = await io.call({ ...clause, peek: true });
  if (peeked.allowed || clause.refund || clauseOption(clause, "BLOCK") === undefined) return peeked;
  const d = await io.call({ ...clause, peek: false });
  if (!d.allowed) return d;
  const back = giveBack(clause, d);
  if (back !== undefined) await io.call(back);
  return peeked;
}
