/**
 * What the test files share around their tests: a server, cluster or
 * connection held for a describe's tests, a describe per client library, a
 * connection for one test, the tests' unique keys and the check of a
 * Decision's fields.
 */
import assert from "node:assert/strict";
import { after, before, describe } from "node:test";
import { Limiter, type Decision } from "../src/index.js";
import { CLIENT_NAMES, type ClientName, type Connected } from "./clients.js";

/** What a test holds and must release: a server or a cluster (stop), a connection (close). */
type Releasable = { stop(): Promise<void> } | { close(): Promise<void> };

/**
 * Makes a server, cluster or connection before the enclosing describe's
 * tests (the file's, at the top level) and releases it after them, also
 * when they or the making failed; `set` hands it to the variable the tests
 * read.
 */
export function hold<T extends Releasable>(make: () => Promise<T>, set: (value: T) => void): void {
  let held: T | undefined;
  before(async () => {
    held = await make();
    set(held);
  });
  after(async () => {
    if (held === undefined) return;
    await ("stop" in held ? held.stop() : held.close());
  });
}

/** The connection and the Limiter on it that one client library's tests share; set before they run. */
export class ClientContext {
  conn!: Connected;
  rl!: Limiter;
}

/**
 * For each current client library, a describe whose tests run in order and
 * share one connection (`connect`'s, made before them and closed after them)
 * and a Limiter on it; `tests` declares them.
 */
export function eachClient(
  connect: (clientName: ClientName) => Promise<Connected>,
  tests: (ctx: ClientContext, clientName: ClientName) => void,
): void {
  for (const clientName of CLIENT_NAMES) {
    describe(clientName, { concurrency: 1 }, () => {
      const ctx = new ClientContext();
      hold(
        () => connect(clientName),
        (conn) => {
          ctx.conn = conn;
          ctx.rl = new Limiter(conn.client);
        },
      );
      // The connections the Limiter opened for held calls, if any.
      after(() => ctx.rl?.close());
      tests(ctx, clientName);
    });
  }
}

/** Runs `body` on a fresh connection, closed after it whatever happens. */
export async function withConnection(connect: Promise<Connected>, body: (conn: Connected) => Promise<void>): Promise<void> {
  const conn = await connect;
  try {
    await body(conn);
  } finally {
    await conn.close();
  }
}

/** A maker of keys no other test, file or run on these servers uses: `${prefix}:${what}:${pid}:${n}`. */
export function uniqueKeys(prefix: string): (what: string) => string {
  let unique = 0;
  return (what) => `${prefix}:${what}:${process.pid}:${++unique}`;
}

/** Each field of `expected` equals the decision's, named in the message when not. */
export function assertDecision(d: Decision, expected: Partial<Decision>): void {
  for (const [field, value] of Object.entries(expected)) {
    assert.equal(d[field as keyof Decision], value, `${field} in ${JSON.stringify(d)}`);
  }
}
