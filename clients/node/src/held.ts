/**
 * Calls the server holds (WAIT on RL.TOKEN and RL.CONCURRENT): while the
 * server holds a reply, the connection it came on answers nothing else, and
 * both client libraries multiplex every call over one connection per node.
 * So each held call goes on a connection of the Limiter's own, one per
 * call in flight, duplicated from the application's client (same address
 * or cluster seeds, options, credentials, TLS) and kept for the next held
 * call once it has answered. A node-redis pool, which gives each call a
 * client of its own, is used as it is.
 */
import { clauseOption, durationMs, type Clause } from "./args.js";
import { transportFor, type IoredisCommandClass, type Transport } from "./transport.js";

/** How long a held reply may take beyond its WAIT when the client sets no command timeout. */
export const HELD_REPLY_GRACE_MS = 5_000;
/** Idle held-call connections kept for later held calls; more are closed when their call ends. */
const MAX_IDLE = 4;

/** The longest a call's WAIT may hold it, in ms, or undefined when it has none (or is a PEEK, which never waits). */
export function heldForMs(clauses: readonly Clause[], peek: boolean): number | undefined {
  if (peek) return undefined;
  let longest: number | undefined;
  for (const clause of clauses) {
    const wait = clauseOption(clause, "WAIT");
    if (wait !== undefined) longest = Math.max(longest ?? 0, durationMs(wait) ?? 0);
  }
  return longest;
}

/** No reply to a held call within its WAIT and the grace after it. */
export class HeldCallTimeoutError extends Error {
  override readonly name = "HeldCallTimeoutError";
}

interface Connection {
  readonly transport: Transport;
  close(): void;
}

type Obj = Record<string, unknown>;
type Duplicable = Obj & {
  duplicate(...args: unknown[]): Obj & { connect(): Promise<unknown>; on(event: string, f: () => void): unknown };
};

function noop(): void {}

/** The client's own command timeout in ms (ioredis `commandTimeout`), if it has one. */
function commandTimeout(client: Obj): number | undefined {
  const options = client["options"] as Obj | undefined;
  const own = options?.["commandTimeout"] ?? (options?.["redisOptions"] as Obj | undefined)?.["commandTimeout"];
  return typeof own === "number" && own > 0 ? own : undefined;
}

/**
 * A fresh connection like `client`'s. ioredis: without a command timeout
 * (the Limiter times the held call) and never resending a call after a
 * reconnection (it may have taken a lease).
 */
async function duplicate(client: Duplicable, ioredisCommand: IoredisCommandClass | undefined): Promise<Connection> {
  const ioredis = typeof client["isCluster"] === "boolean";
  const noResend = { commandTimeout: undefined, autoResendUnfulfilledCommands: false };
  let dup: ReturnType<Duplicable["duplicate"]>;
  if (!ioredis) dup = client.duplicate();
  else if (client["isCluster"] === true) {
    const redisOptions = (client["options"] as Obj | undefined)?.["redisOptions"] as Obj | undefined;
    dup = client.duplicate([], { lazyConnect: true, redisOptions: { ...redisOptions, ...noResend } });
  } else dup = client.duplicate({ ...noResend, lazyConnect: true });
  // Errors reach the held calls themselves.
  dup.on("error", noop);
  await dup.connect();
  const close = () => {
    const d = dup as Obj;
    const f = (typeof d["destroy"] === "function" ? d["destroy"] : d["disconnect"]) as () => unknown;
    try {
      Promise.resolve(f.call(dup)).catch(noop);
    } catch {
      // closing a connection that is already gone
    }
  };
  try {
    return { transport: transportFor(dup, ioredisCommand), close };
  } catch (err) {
    close();
    throw err;
  }
}

export class HeldCalls {
  readonly #client: Obj;
  readonly #ioredisCommand: IoredisCommandClass | undefined;
  /** The application's client, used as it is when it cannot be duplicated (a pool). */
  readonly #shared: Transport;
  readonly #graceMs: number;
  readonly #idle: Connection[] = [];
  readonly #busy = new Set<Connection>();
  #closed = false;

  constructor(client: Obj, shared: Transport, ioredisCommand: IoredisCommandClass | undefined) {
    this.#client = client;
    this.#shared = shared;
    this.#ioredisCommand = ioredisCommand;
    this.#graceMs = commandTimeout(client) ?? HELD_REPLY_GRACE_MS;
  }

  /**
   * Runs `f` on a connection of its own, rejecting with a
   * HeldCallTimeoutError (and closing that connection: the server then
   * forgets a waiting acquire) when no reply came within `waitMs` and the
   * grace after it.
   */
  async run<T>(waitMs: number, f: (transport: Transport) => Promise<T>): Promise<T> {
    if (this.#closed) {
      throw new Error("librl: this Limiter is closed; a call with wait needs a connection of its own, which it no longer opens");
    }
    if (typeof this.#client["duplicate"] !== "function") return f(this.#shared);
    const conn = this.#idle.pop() ?? (await duplicate(this.#client as Duplicable, this.#ioredisCommand));
    this.#busy.add(conn);
    const limitMs = waitMs + this.#graceMs;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new HeldCallTimeoutError(`librl: no reply within ${limitMs} ms to a call with wait (its wait and ${this.#graceMs} ms)`)),
        limitMs,
      );
    });
    try {
      const result = await Promise.race([f(conn.transport), timeout]);
      this.#busy.delete(conn);
      if (this.#closed || this.#idle.length >= MAX_IDLE) conn.close();
      else this.#idle.push(conn);
      return result;
    } catch (err) {
      this.#busy.delete(conn);
      // A call still held there when its time ran out: the connection goes.
      // After an error reply it is as good as before.
      if (err instanceof HeldCallTimeoutError || this.#closed || this.#idle.length >= MAX_IDLE) conn.close();
      else this.#idle.push(conn);
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Closes every connection opened for held calls; a held call in flight rejects. */
  close(): void {
    this.#closed = true;
    for (const conn of this.#idle.splice(0)) conn.close();
    for (const conn of this.#busy) conn.close();
    this.#busy.clear();
  }
}
