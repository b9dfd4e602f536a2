/**
 * Calls while their slot moves (docs/contributing.md, "Calls while a slot
 * moves"): a real 3-primary cluster, one slot filled with 20,000 limiter
 * keys and moved key by key (MIGRATE in batches of 100, 10 ms apart; on
 * Valkey 9 also atomically), while one caller per kind calls into it
 * through the package: no OVERRIDE, an OVERRIDE never set, an OVERRIDE that
 * exists, an RL.ALL over a 1 h and a 300 ms key, and a lease taken and
 * given back with an OVERRIDE never set. A half-moved slot answers
 * TRYAGAIN to every call naming an absent key for the whole move; the
 * package splits such a call into one-key calls, so none fails, none waits
 * for the move, and every count is exact afterwards. Each run prints its
 * figures (t.diagnostic).
 */
import assert from "node:assert/strict";
import { performance } from "node:perf_hooks";
import { describe, it, type TestContext } from "node:test";
import { Concurrent, Fixed, Limiter, Sliding, Token, keySlot } from "../src/index.js";
import { CLIENT_NAMES, connectCluster, type ClientName } from "./clients.js";
import { hold } from "./fixtures.js";
import { MIGRATION_SERVERS, sleep, startCluster, type ClusterNode, type TestCluster } from "./helpers.js";

const TAG = "{hot}";
const SLOT = keySlot(TAG);
/** Keys in the slot besides the callers' own, so that it takes seconds to move. */
const FILL = 20_000;
/** A limit no caller reaches: every call is admitted, so counts are exact. */
const HIGH = 2 ** 40;
/**
 * Slowest call the test accepts: a split call takes a few round trips (an
 * acquire and its release, up to six), never the move, which takes 3 s or
 * more key by key; room for a loaded 2-core machine.
 */
const MAX_CALL_MS = 2_000;

/** What one kind of caller met. */
class Tally {
  calls = 0;
  admitted = 0;
  readonly errors = new Map<string, number>();
  slowestMs = 0;
  longestGapMs = 0;
  #lastOk = performance.now();

  async call(f: () => Promise<boolean>): Promise<void> {
    const start = performance.now();
    try {
      const admitted = await f();
      const end = performance.now();
      this.longestGapMs = Math.max(this.longestGapMs, end - this.#lastOk);
      this.#lastOk = end;
      if (admitted) this.admitted++;
    } catch (err) {
      const kind = String((err as Error).message).split(/[.:]/)[0] ?? "?";
      this.errors.set(kind, (this.errors.get(kind) ?? 0) + 1);
    } finally {
      this.calls++;
      this.slowestMs = Math.max(this.slowestMs, performance.now() - start);
    }
  }

  finish(): void {
    this.longestGapMs = Math.max(this.longestGapMs, performance.now() - this.#lastOk);
  }

  get errorCount(): number {
    return [...this.errors.values()].reduce((a, b) => a + b, 0);
  }
}

/** TRYAGAIN, ASK and MOVED replies over every node since the last reset. */
async function redirections(cluster: TestCluster) {
  const per = await cluster.perNode(async (admin) => [
    await admin.errorCount("TRYAGAIN"),
    await admin.errorCount("ASK"),
    await admin.errorCount("MOVED"),
  ]);
  return {
    tryagain: per.reduce((s, p) => s + p[0]!, 0),
    ask: per.reduce((s, p) => s + p[1]!, 0),
    moved: per.reduce((s, p) => s + p[2]!, 0),
  };
}

/** Fills the slot with FILL one-hour limiter keys, pipelined on its owner. */
async function fill(cluster: TestCluster): Promise<void> {
  const owner = await cluster.ownerOf(SLOT);
  for (let i = 0; i < FILL; i += 1000) {
    await Promise.all(
      Array.from({ length: Math.min(1000, FILL - i) }, (_, j) =>
        owner.server.admin.call("RL.FIXED", `${TAG}:fill:${i + j}`, 10, "1h"),
      ),
    );
  }
}

/**
 * One run: the callers of `client` in the slot while it moves to the next
 * node (`atomic`: with CLUSTER MIGRATESLOTS), then the checks.
 */
async function run(t: TestContext, cluster: TestCluster, client: ClientName, atomic: boolean, serverName: string): Promise<void> {
  const conn = await connectCluster(client, cluster.ports);
  const rl = new Limiter(conn.client);
  try {
    const id = `${client}:${atomic ? "atomic" : "keys"}:${process.pid}`;
    const k = (what: string) => `${TAG}:${id}:${what}`;
    const unset = k("never-set");
    await cluster.nodes[0]!.server.admin.call("CLUSTER", "COUNTKEYSINSLOT", SLOT); // the nodes answer
    await rl.overrideSet(k("okey"), HIGH, "1h");

    const callers: Record<string, { tally: Tally; call: () => Promise<boolean>; pauseEvery?: number }> = {
      "no OVERRIDE": { tally: new Tally(), call: async () => (await rl.fixed(k("plain"), HIGH, "1h")).allowed },
      "OVERRIDE never set": {
        tally: new Tally(),
        call: async () => (await rl.fixed(k("unset"), HIGH, "1h", { override: unset })).allowed,
      },
      "OVERRIDE set": {
        tally: new Tally(),
        call: async () => (await rl.fixed(k("set"), HIGH, "1h", { override: k("okey") })).allowed,
      },
      "RL.ALL 1 h + 300 ms": {
        tally: new Tally(),
        call: async () =>
          (await rl.all([Fixed(k("all-hour"), HIGH, "1h"), Sliding(k("all-300ms"), HIGH, "300ms")])).allowed,
        // Now and then the 300 ms key expires before the next call, so the
        // call names a key that exists nowhere.
        pauseEvery: 4,
      },
      "acquire + release, OVERRIDE never set": {
        tally: new Tally(),
        call: async () => {
          const lease = await rl.acquire(k("lease"), 1000, "1h", { override: unset });
          if (!lease.allowed) return false;
          const released = await lease.release();
          assert.equal(released?.allowed, true, "the lease was still held");
          return true;
        },
      },
    };
    // Step 2: every subject called once, so its key exists when the move starts.
    for (const { call } of Object.values(callers)) assert.equal(await call(), true);

    let moving = true;
    let roundsAfter = 0;
    const loops = Object.values(callers).map(async ({ tally, call, pauseEvery }) => {
      let after = 0;
      while (moving || after < 1) {
        const wasMoving = moving;
        await tally.call(call);
        if (!wasMoving) after++;
        else if (pauseEvery !== undefined && tally.calls % pauseEvery === 0) await sleep(350);
      }
      roundsAfter++;
      tally.finish();
    });

    await cluster.resetStats();
    const source = await cluster.ownerOf(SLOT);
    const target = cluster.nodes[(cluster.nodes.indexOf(source) + 1) % cluster.nodes.length] as ClusterNode;
    const start = performance.now();
    await sleep(50);
    if (atomic) await cluster.moveSlotAtomically(SLOT, target);
    else {
      await cluster.moveSlot(SLOT, target, () => sleep(10));
      await cluster.waitForOwner(SLOT, target);
    }
    const moveMs = performance.now() - start;
    moving = false;
    await Promise.all(loops);
    assert.equal(roundsAfter, Object.keys(callers).length);
    const seen = await redirections(cluster);

    const lines = [
      `${serverName}, ${client}, ${atomic ? "atomic (MIGRATESLOTS)" : "key by key"}: moved in ${moveMs.toFixed(0)} ms; ` +
        `servers replied TRYAGAIN ${seen.tryagain}, ASK ${seen.ask}, MOVED ${seen.moved}`,
      ...Object.entries(callers).map(
        ([kind, { tally }]) =>
          `  ${kind}: ${tally.calls} calls, ${tally.errorCount} errors ${JSON.stringify(Object.fromEntries(tally.errors))}, ` +
          `slowest ${tally.slowestMs.toFixed(0)} ms, longest without success ${tally.longestGapMs.toFixed(0)} ms`,
      ),
    ];
    for (const line of lines) t.diagnostic(line);

    for (const [kind, { tally }] of Object.entries(callers)) {
      assert.equal(tally.errorCount, 0, `${kind}: ${JSON.stringify(Object.fromEntries(tally.errors))}`);
      assert.ok(tally.slowestMs < MAX_CALL_MS, `${kind}: slowest call ${tally.slowestMs} ms`);
      assert.equal(tally.admitted, tally.calls, `${kind}: every call admitted`);
    }
    // Counts exact: each subject counts the calls admitted, plus step 2's.
    const count = async (key: string, override?: string) =>
      (await rl.fixed(key, HIGH, "1h", { cost: 0, ...(override ? { override } : {}) })).count;
    assert.equal(await count(k("plain")), callers["no OVERRIDE"]!.tally.admitted + 1);
    assert.equal(await count(k("unset"), unset), callers["OVERRIDE never set"]!.tally.admitted + 1);
    assert.equal(await count(k("set"), k("okey")), callers["OVERRIDE set"]!.tally.admitted + 1);
    assert.equal(await count(k("all-hour")), callers["RL.ALL 1 h + 300 ms"]!.tally.admitted + 1);
    assert.equal((await rl.acquire(k("lease"), 1000, "1h", { cost: 0 })).decision.count, 0, "every lease given back");
    // Every key moved.
    assert.equal(await source.server.admin.call("CLUSTER", "COUNTKEYSINSLOT", SLOT), 0);
    assert.ok(Number(await target.server.admin.call("CLUSTER", "COUNTKEYSINSLOT", SLOT)) >= FILL);
  } finally {
    rl.close(); // the connections of its held calls, if any
    await conn.close();
  }
}

/**
 * A slot held half-moved (IMPORTING/MIGRATING set, some keys migrated) for
 * as long as `body` runs, then moved the rest of the way.
 */
async function halfMoved(
  cluster: TestCluster,
  slot: number,
  moveNow: readonly string[],
  body: (source: ClusterNode, target: ClusterNode) => Promise<void>,
): Promise<void> {
  const source = await cluster.ownerOf(slot);
  const target = cluster.nodes[(cluster.nodes.indexOf(source) + 1) % cluster.nodes.length] as ClusterNode;
  await target.server.admin.call("CLUSTER", "SETSLOT", slot, "IMPORTING", source.id);
  await source.server.admin.call("CLUSTER", "SETSLOT", slot, "MIGRATING", target.id);
  if (moveNow.length > 0) {
    await source.server.admin.call("MIGRATE", "127.0.0.1", target.server.port, "", 0, 5000, "KEYS", ...moveNow);
  }
  try {
    await body(source, target);
  } finally {
    await cluster.moveSlot(slot, target);
    await cluster.waitForOwner(slot, target);
  }
}

/**
 * The split on TRYAGAIN, call by call, on a slot held half-moved: what each
 * kind of call answers, and what it leaves on the servers.
 */
async function splitCases(cluster: TestCluster, client: ClientName): Promise<void> {
  const conn = await connectCluster(client, cluster.ports);
  const rl = new Limiter(conn.client);
  const tag = `{split:${client}:${process.pid}}`;
  const k = (what: string) => `${tag}:${what}`;
  const slot = keySlot(tag);
  const owner = await cluster.ownerOf(slot);
  const setup = owner.server.admin;
  try {
    // Before the move: keys on the source, some of which then go to the target.
    for (const what of ["src", "src-o", "moved", "full-1", "full-2", "lease-src"]) await setup.call("RL.FIXED", k(what), 1000, "1h");
    await setup.call("DEL", k("lease-src"));
    await setup.call("RL.CONCURRENT", k("lease-src"), 5, "1h");
    await setup.call("RL.OVERRIDE", "SET", k("okey-src"), 2, "1h");
    await setup.call("RL.OVERRIDE", "SET", k("okey-moved"), 3, "1h", "BURST", 4);
    await setup.call("DEL", k("full-1"), k("full-2"));
    await setup.call("RL.FIXED", k("full-1"), 1, "1h");
    await setup.call("RL.FIXED", k("full-2"), 1, "1h");
    await cluster.resetStats();

    await halfMoved(cluster, slot, [k("moved"), k("okey-moved")], async (source, target) => {
      const count = async (key: string) => (await rl.fixed(key, 1000, "1h", { cost: 0 })).count;
      // An override never set: the call alone, with its own limit.
      const d = await rl.fixed(k("src"), 1000, "1h", { override: k("never") });
      assert.deepEqual([d.allowed, d.count, d.limit], [true, 2, 1000]);
      // An override on the source applied to a key on the target (and the converse).
      assert.deepEqual((await rl.fixed(k("moved"), 1000, "1h", { override: k("okey-src") })).limit, 2);
      const t = await rl.token(k("src-t"), 100, "1s", { burst: 500, override: k("okey-moved") });
      assert.deepEqual([t.allowed, t.limit], [true, 4], "the override's burst is the capacity");
      // A lease taken, renewed and given back with an override never set.
      const lease = await rl.acquire(k("lease-src"), 5, "1h", { override: k("never") });
      assert.equal(lease.decision.count, 2);
      assert.equal((await lease.renew())?.allowed, true);
      assert.equal((await lease.release())?.count, 1);

      // RL.ALL over a key on the source and keys nowhere yet: clause by clause.
      const admitted = await rl.all([Fixed(k("src"), 1000, "1h"), Sliding(k("new-s"), 10, "1m"), Concurrent(k("new-c"), 1, "1h")]);
      assert.equal(admitted.allowed, true);
      assert.equal(admitted.retryAfterMs, 0);
      assert.deepEqual(admitted.decisions.map((x) => x.count), [3, 1, 1]);
      assert.ok(admitted.decisions[2]!.leaseId > 0);
      // A later clause denies: the earlier ones are given back, the lease id is 0.
      const denied = await rl.all([Fixed(k("src"), 1000, "1h"), Concurrent(k("new-c"), 1, "1h"), Fixed(k("nowhere"), 5, 60)]);
      assert.equal(denied.allowed, false);
      assert.ok(denied.retryAfterMs > 3_000_000, String(denied.retryAfterMs));
      assert.deepEqual(denied.decisions.map((x) => [x.allowed, x.leaseId]), [[true, 0], [false, 0], [true, 0]]);
      assert.equal(await count(k("src")), 3, "the admitted clause was refunded");
      const keysInSlot = async () =>
        [
          ...((await source.server.admin.call("CLUSTER", "GETKEYSINSLOT", slot, 1000)) as string[]),
          ...((await target.server.admin.call("CLUSTER", "GETKEYSINSLOT", slot, 1000)) as string[]),
        ];
      assert.ok(!(await keysInSlot()).includes(k("nowhere")), "the clause after the denial was peeked");
      // A lease taken before a denial is released; -1 wins.
      const over = await rl.all([Concurrent(k("lease-2"), 5, "1h"), Fixed(k("over"), 1, 60, { cost: 2 })]);
      assert.deepEqual([over.allowed, over.retryAfterMs], [false, -1]);
      assert.equal((await rl.acquire(k("lease-2"), 5, "1h", { cost: 0 })).decision.count, 0, "the lease was released");
      // A later denying clause with BLOCK starts its block, as in RL.ALL.
      const blocked = await rl.all([
        Fixed(k("full-1"), 1, "1h"),
        Fixed(k("full-2"), 1, "1h", { block: "2h" }),
        Fixed(k("nowhere-2"), 1, "1h"),
      ]);
      assert.equal(blocked.allowed, false);
      assert.ok(blocked.decisions[1]!.retryAfterMs > 3_600_000, "the second clause's block started");
      // PEEK writes nothing.
      const peek = await rl.all([Fixed(k("src"), 1000, "1h"), Fixed(k("nowhere-3"), 1, 60)], { peek: true });
      assert.deepEqual([peek.allowed, peek.decisions[0]!.count], [true, 4]);
      assert.equal(await count(k("src")), 3);
      // A WAIT clause's reservation (the next token, 100 ms away) is waited
      // for, as the server would hold the reply: not its whole 5 s max_wait.
      await rl.token(k("bucket"), 10, "1s", { burst: 1 });
      const start = performance.now();
      const waited = await rl.all([Token(k("bucket"), 10, "1s", { burst: 1, wait: "5s" }), Fixed(k("nowhere-4"), 5, 60)]);
      const took = performance.now() - start;
      assert.equal(waited.allowed, true);
      assert.equal(waited.retryAfterMs, 0);
      assert.ok(took >= 80 && took < 4000, `held ${took} ms`);
      // What RL.ALL refuses before any clause runs, so does the split.
      await assert.rejects(rl.all([Fixed(k("src"), 1, 1), Fixed(k("src"), 1, 1, { override: k("never") })]), /more than one RL.ALL clause/);
    });
    const seen = await redirections(cluster);
    assert.ok(seen.tryagain >= 10, `the calls met TRYAGAIN (${seen.tryagain}) and were split`);
  } finally {
    rl.close(); // the connections of its held calls, if any
    await conn.close();
  }
}

describe("calls while their slot moves", { concurrency: 1 }, () => {
  for (const { name: serverName, bin } of MIGRATION_SERVERS) {
    describe(serverName, { concurrency: 1 }, () => {
      let cluster: TestCluster;
      hold(async () => {
        const c = await startCluster(bin);
        await fill(c);
        return c;
      }, (c) => (cluster = c));

      for (const client of CLIENT_NAMES) {
        it(`${client}: a call that meets TRYAGAIN is split into one-key calls, with RL.ALL's answer and counts`, async () => {
          await splitCases(cluster, client);
        });
        it(`${client}: key by key, 0 errors, counts exact`, async (t) => {
          await run(t, cluster, client, false, serverName);
        });
        if (serverName === "valkey9") {
          it(`${client}: atomically (CLUSTER MIGRATESLOTS), 0 errors, counts exact`, async (t) => {
            await run(t, cluster, client, true, serverName);
          });
        }
      }
    });
  }
});
