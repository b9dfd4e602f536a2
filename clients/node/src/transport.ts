/**
 * Which client we were given, and how to send a command to the node that
 * owns its key. Duck typing, no imports of either client library:
 *
 * - ioredis: the object has a boolean `isCluster` and the functions
 *   `sendCommand` and `call`; `isCluster` tells `Cluster` from `Redis`.
 * - node-redis cluster (v4, v5, v6): `sendCommand`, and `masters` and
 *   `slots` properties.
 * - node-redis client (or anything else with `sendCommand(args)`, such as a
 *   client pool or sentinel): `sendCommand`. A v4 client in legacyMode is
 *   used through its `.v4` interface.
 * - Refused: ioredis pipelines (`isPipeline`) and node-redis MULTI objects
 *   (`exec` and `addCommand`), whose commands resolve only at exec.
 */

import { RespConnection } from "./resp.js";
import { keySlot } from "./slot.js";

/** The client kinds a Limiter knows. */
export type ClientKind = "ioredis" | "ioredis-cluster" | "node-redis" | "node-redis-cluster" | "librl";

export interface Transport {
  readonly kind: ClientKind;
  readonly isCluster: boolean;
  /** The client's own key prefix (ioredis `keyPrefix`, node-redis 6 `keyPrefix`), or "". */
  readonly keyPrefix: string;
  /**
   * Sends `argv` (command name first, all strings). `keys` are the command's
   * keys: a cluster routes by the first one; none means any node.
   */
  send(argv: readonly string[], keys: readonly string[], readonly: boolean): Promise<unknown>;
  /**
   * Sends `argv` and, right behind it on the same connection (the node
   * owning `keys[0]` in a cluster), `WAIT numreplicas timeout`: resolves to
   * both replies, the command's first. One round trip.
   */
  sendWithWait(argv: readonly string[], keys: readonly string[], wait: readonly [number, number]): Promise<[unknown, unknown]>;
  /**
   * Sends one command already RESP-encoded, rejecting with NoAnswer past
   * `timeoutMs`: only the integrations' own connection (resp.ts) takes one.
   */
  readonly sendEncoded?: ((command: string, timeoutMs: number) => Promise<unknown>) | undefined;
}

function waitArgv(wait: readonly [number, number]): string[] {
  return ["WAIT", String(wait[0]), String(wait[1])];
}

/** The part of ioredis's Command class this package uses. */
interface IoredisCommand {
  getKeys(): Array<string | Buffer>;
  promise: Promise<unknown>;
  reject: (err: Error) => void;
}
export type IoredisCommandClass = new (
  name: string,
  args: string[],
  options: { replyEncoding?: BufferEncoding; readOnly?: boolean },
) => IoredisCommand;

type AnyFunction = (...args: never[]) => unknown;
type Obj = Record<string, unknown>;

function isObject(value: unknown): value is Obj {
  return (typeof value === "object" || typeof value === "function") && value !== null;
}

function prefixString(prefix: unknown): string {
  if (typeof prefix === "string") return prefix;
  if (prefix instanceof Uint8Array) return Buffer.from(prefix).toString("utf8");
  return "";
}

function ioredisModuleMatches(mod: unknown, client: object): IoredisCommandClass | undefined {
  try {
    if (!isObject(mod) || typeof mod["Command"] !== "function") return undefined;
    for (const name of ["Redis", "Cluster"]) {
      const ctor = mod[name];
      if (typeof ctor === "function" && client instanceof (ctor as new () => unknown)) {
        return mod["Command"] as IoredisCommandClass;
      }
    }
  } catch {
    // a module whose getters throw is not ioredis
  }
  return undefined;
}

/**
 * The Command class of the ioredis that built `client`: the `ioredis` this
 * package resolves, else any loaded ioredis whose Redis or Cluster class
 * the client is an instance of (an application may have its own copy or
 * version).
 */
export function findIoredisCommand(client: object): IoredisCommandClass | undefined {
  try {
    const found = ioredisModuleMatches(require("ioredis"), client);
    if (found !== undefined) return found;
  } catch {
    // not resolvable from here: look at what the application loaded
  }
  const cache = typeof require === "function" ? require.cache : undefined;
  if (cache === undefined) return undefined;
  for (const mod of Object.values(cache)) {
    if (mod === undefined || !/ioredis/i.test(mod.filename) || !/[\\/]built[\\/]index\.js$/.test(mod.filename)) {
      continue;
    }
    const found = ioredisModuleMatches(mod.exports, client);
    if (found !== undefined) return found;
  }
  return undefined;
}

/**
 * ioredis's Cluster answers TRYAGAIN by resending the call to a random node
 * after `retryDelayOnTryAgain` (100 ms), which answers MOVED, and so on
 * until `maxRedirections` (16) runs out: over a key-by-key slot move that
 * is a second of waiting and then "Too many Cluster redirections", for a
 * call that cannot run until the move ends (docs/operations.md, While a
 * slot moves). The Cluster handles a call's errors by wrapping its
 * `reject` when the call is sent; this wraps that once more, so TRYAGAIN
 * rejects the call at once (the Limiter then splits it) while MOVED, ASK
 * and the rest go to the Cluster's handling as before.
 */
function surfaceTryAgain(command: IoredisCommand, own: (err: Error) => void): void {
  const cluster = command.reject;
  if (cluster === own) return;
  command.reject = (err: Error) =>
    (typeof err?.message === "string" && err.message.startsWith("TRYAGAIN") ? own : cluster).call(command, err);
}

/** The sockets corked until the event loop's check phase (one per client). */
const corked = new Set<{ uncork(): void }>();

function uncorkAll(): void {
  for (const stream of corked) stream.uncork();
  corked.clear();
}

/**
 * Corks a ready standalone ioredis client's socket until the event loop's
 * check phase (setImmediate), so that the calls of every request read in
 * one turn of the loop leave in one write instead of one system call each:
 * what ioredis's enableAutoPipelining gains, without its pipeline objects
 * (and it does not apply to sendCommand). Each command is still written,
 * in order, in that same turn; nothing waits on a timer.
 */
function coalesce(client: Obj): void {
  const stream = client["stream"] as { cork?: () => void; uncork?: () => void; writable?: boolean } | undefined;
  if (client["status"] !== "ready" || stream === undefined || stream.writable !== true || typeof stream.cork !== "function") return;
  const s = stream as { cork(): void; uncork(): void };
  if (corked.has(s)) return;
  if (corked.size === 0) setImmediate(uncorkAll);
  s.cork();
  corked.add(s);
}

function ioredisTransport(client: Obj, Command: IoredisCommandClass | undefined): Transport {
  const isCluster = client["isCluster"] === true;
  const CommandClass = Command ?? findIoredisCommand(client);
  if (CommandClass === undefined) {
    throw new TypeError(
      "librl: this ioredis client's Command class could not be found; pass it: new Limiter(client, { ioredisCommand: Command }) with Command from the same ioredis",
    );
  }
  const options = isObject(client["options"]) ? client["options"] : {};
  const sendCommand = client["sendCommand"] as (command: IoredisCommand) => Promise<unknown>;
  const send = (argv: readonly string[], keys: readonly string[], readonly: boolean): Promise<unknown> => {
    const command = new CommandClass(argv[0] as string, argv.slice(1), {
      replyEncoding: "utf8",
      readOnly: readonly,
    });
    if (keys.length > 0) {
      // ioredis finds keys only for the commands it knows; declaring ours
      // makes Cluster route by the key's slot (and follow MOVED/ASK).
      const declared = [...keys];
      command.getKeys = () => declared;
    }
    if (!isCluster) {
      coalesce(client);
      return sendCommand.call(client, command);
    }
    const own = command.reject;
    const promise = sendCommand.call(client, command);
    surfaceTryAgain(command, own);
    return promise;
  };
  return {
    kind: isCluster ? "ioredis-cluster" : "ioredis",
    isCluster,
    keyPrefix: prefixString(options["keyPrefix"]),
    send,
    // Both are queued now, in order, on the one connection to the node
    // that owns the key (WAIT routed by the same declared key).
    sendWithWait: (argv, keys, wait) => Promise.all([send(argv, keys, false), send(waitArgv(wait), keys.slice(0, 1), false)]),
  };
}

function nodeRedisTransport(client: Obj): Transport {
  const isCluster = "masters" in client && "slots" in client;
  let target: Obj = client;
  if (!isCluster) {
    let v4: unknown;
    try {
      v4 = client["v4"]; // node-redis 4 throws here unless the client is in legacyMode
    } catch {
      v4 = undefined;
    }
    if (isObject(v4) && typeof v4["sendCommand"] === "function") target = v4;
  }
  const keyPrefix = prefixString(client["_keyPrefix"]);
  if (isCluster) {
    const sendCommand = client["sendCommand"] as (
      firstKey: string | undefined,
      isReadonly: boolean,
      args: string[],
    ) => Promise<unknown>;
    const send = (argv: readonly string[], keys: readonly string[], readonly: boolean): Promise<unknown> =>
      sendCommand.call(client, keys[0], readonly, argv as string[]).catch((err: unknown) => followAsk(client, argv, err));
    return {
      kind: "node-redis-cluster",
      isCluster: true,
      keyPrefix,
      send,
      // node-redis routes WAIT by its command tips to every primary and
      // keeps the least count, so both go straight down the connection to
      // the key's primary (by the client's slot map; a MOVED rejects).
      async sendWithWait(argv, keys, wait) {
        const slots = client["slots"] as ArrayLike<{ master?: unknown } | undefined> | undefined;
        const master = slots?.[keySlot(keys[0] as string)]?.master;
        const nodeClient = client["nodeClient"] as ((node: unknown) => unknown) | undefined;
        if (master === undefined || typeof nodeClient !== "function") {
          throw new Error("librl: durable: this node-redis cluster does not tell the primary of a slot (slots, nodeClient)");
        }
        const node = (await nodeClient.call(client, master)) as { sendCommand(args: string[]): Promise<unknown> };
        return Promise.all([node.sendCommand(argv as string[]), node.sendCommand(waitArgv(wait))]);
      },
    };
  }
  const sendCommand = target["sendCommand"] as (args: string[]) => Promise<unknown>;
  const send = (argv: readonly string[]): Promise<unknown> => sendCommand.call(target, argv as string[]);
  return {
    kind: "node-redis",
    isCluster: false,
    keyPrefix,
    send,
    // Written one after the other on the client's connection (a pool may
    // use two connections: durable needs a client).
    sendWithWait: (argv, _keys, wait) => Promise.all([send(argv), send(waitArgv(wait))]),
  };
}

/**
 * node-redis 4 follows ASK by awaiting ASKING's reply before it sends the
 * call, so another call on that connection can take the ASKING in between:
 * the call meets MOVED back to the old owner, and after its redirections
 * run out the ASK reaches the caller (docs/operations.md, While a slot
 * moves). A call that ends on ASK was not run anywhere, so it is sent once
 * more with ASKING queued right before it on the new owner's connection,
 * as node-redis 5 does. Any other error, or an ASK to a node the client
 * does not know, goes to the caller unchanged.
 */
async function followAsk(cluster: Obj, argv: readonly string[], err: unknown): Promise<unknown> {
  const message = err instanceof Error ? err.message : "";
  if (!message.startsWith("ASK ")) throw err;
  const address = message.slice(message.lastIndexOf(" ") + 1);
  const masters = cluster["masters"] as ReadonlyArray<{ address?: unknown }> | undefined;
  const master = masters?.find((m) => m.address === address);
  const nodeClient = cluster["nodeClient"] as ((node: unknown) => unknown) | undefined;
  if (master === undefined || typeof nodeClient !== "function") throw err;
  const node = (await nodeClient.call(cluster, master)) as { sendCommand(args: string[]): Promise<unknown> };
  // Both are queued now, in this order, with nothing between them.
  const [, reply] = await Promise.all([node.sendCommand(["ASKING"]), node.sendCommand(argv as string[])]);
  return reply;
}

/** The HTTP integrations' own connection (resp.ts): standalone, one connection. */
function respTransport(conn: RespConnection): Transport {
  const send = (argv: readonly string[]): Promise<unknown> => conn.send(argv);
  return {
    kind: "librl",
    isCluster: false,
    keyPrefix: "",
    send,
    sendWithWait: (argv, _keys, wait) => Promise.all([send(argv), send(waitArgv(wait))]),
    sendEncoded: (command, timeoutMs) => conn.sendEncodedWithin(command, timeoutMs),
  };
}

/** Tells the client apart (see the module comment) and wraps it. */
export function transportFor(client: unknown, ioredisCommand?: IoredisCommandClass): Transport {
  if (client instanceof RespConnection) return respTransport(client);
  if (!isObject(client) || typeof client["sendCommand"] !== "function") {
    throw new TypeError(
      "librl: new Limiter(client) needs an ioredis Redis or Cluster, or a node-redis client or cluster (an object with sendCommand)",
    );
  }
  if (client["isPipeline"] === true || (typeof client["exec"] === "function" && typeof client["addCommand"] === "function")) {
    throw new TypeError(
      "librl: new Limiter() needs the client itself, not a pipeline or MULTI: each limiter call resolves on its own",
    );
  }
  if (typeof client["isCluster"] === "boolean" && typeof (client["call"] as AnyFunction) === "function") {
    return ioredisTransport(client, ioredisCommand);
  }
  return nodeRedisTransport(client);
}
