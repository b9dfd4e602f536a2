/**
 * `durable: { numreplicas, timeoutMs }`: WAIT right behind every call that
 * may write, on the same connection, on a real primary with a real replica
 * (and on a primary without one, and on the cluster's owners); and
 * `cost: 0`, the read that writes nothing.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DurabilityError, Fixed, Limiter, Token, keySlot } from "../src/index.js";
import { CLIENT_NAMES, connectCluster, connectStandalone, type Connected } from "./clients.js";
import { hold, uniqueKeys, withConnection } from "./fixtures.js";
import { REDIS_SERVER, sleep, startCluster, startServer, type Server, type TestCluster } from "./helpers.js";

const key = uniqueKeys("dur");

async function waitCalls(server: Server): Promise<number> {
  return server.admin.commandCalls("wait");
}

describe("durable and cost 0", { concurrency: 1 }, () => {
  let primary: Server;
  let replica: Server;
  let lonely: Server;
  before(async () => {
    primary = await startServer(REDIS_SERVER, "dur-primary");
    replica = await startServer(REDIS_SERVER, "dur-replica", ["--replicaof", "127.0.0.1", String(primary.port)]);
    lonely = await startServer(REDIS_SERVER, "dur-lonely");
    const deadline = Date.now() + 15_000;
    // Online: the full synchronisation is over and the replica acknowledges writes.
    while (!/slave0:.*state=online/.test(String(await primary.admin.call("INFO", "replication")))) {
      if (Date.now() > deadline) throw new Error("the replica did not connect");
      await sleep(20);
    }
  });
  after(async () => {
    await replica?.stop();
    await primary?.stop();
    await lonely?.stop();
  });

  it("refuses a malformed durable option, naming it", () => {
    const client = { sendCommand() {} };
    for (const bad of [1, { numreplicas: 0, timeoutMs: 10 }, { numreplicas: 1 }, { numreplicas: 1, timeoutMs: 0 }, { n: 1, timeoutMs: 1 }]) {
      assert.throws(() => new Limiter(client, { durable: bad as never }), /durable/);
    }
  });

  for (const clientName of CLIENT_NAMES) {
    describe(clientName, { concurrency: 1 }, () => {
      let conn: Connected;
      let lonelyConn: Connected;
      let rl: Limiter;
      before(async () => {
        conn = await connectStandalone(clientName, primary.port);
        lonelyConn = await connectStandalone(clientName, lonely.port);
        rl = new Limiter(conn.client, { durable: { numreplicas: 1, timeoutMs: 2000 } });
      });
      after(async () => {
        await conn?.close();
        await lonelyConn?.close();
      });

      it("a call returns once the replica has it", async () => {
        const k = key("fixed");
        const d = await rl.fixed(k, 5, "1m");
        assert.equal(d.allowed, true);
        // No sleep: WAIT 1 returned, so the replica applied the call.
        assert.equal(await replica.admin.call("EXISTS", k), 1);
        const all = [key("a"), key("b")].map((x) => `{${x}}`);
        const a = await rl.all([Fixed(all[0]!, 2, 60), Token(`${all[0]}:t`, 5, 60)]);
        assert.equal(a.allowed, true);
        assert.equal(await replica.admin.call("EXISTS", `${all[0]}:t`), 1);
        const o = key("o");
        await rl.overrideSet(o, 9, 60);
        assert.deepEqual(await replica.admin.call("RL.OVERRIDE", "GET", o), [9, 60000, 0, -1]);
        assert.equal(await rl.overrideDelete(o), 1);
        assert.equal(await replica.admin.call("EXISTS", o), 0);
      });

      it("PEEK and a cost of 0 send no WAIT, and cost 0 writes nothing", async () => {
        const k = key("peek");
        await rl.fixed(k, 2, 60);
        const before = await waitCalls(primary);
        const peek = await rl.fixed(k, 2, 60, { peek: true });
        assert.deepEqual([peek.allowed, peek.count, peek.remaining], [true, 2, 0]);
        await rl.all([Fixed(k, 2, 60)], { peek: true });
        assert.equal(await waitCalls(primary), before);
        const read = await rl.fixed(k, 2, 60, { cost: 0 });
        assert.deepEqual([read.allowed, read.count, read.retryAfterMs, read.remaining], [true, 1, 0, 1]);
        const missing = key("none");
        const nothing = await rl.fixed(missing, 2, 60, { cost: 0 });
        assert.deepEqual([nothing.allowed, nothing.count, nothing.remaining, nothing.resetAfterMs], [true, 0, 2, 0]);
        await rl.all([Fixed(missing, 2, 60, { cost: 0 })]);
        assert.equal(await primary.admin.call("EXISTS", missing), 0);
        assert.equal(await waitCalls(primary), before);
      });

      it("too few replicas reject with a DurabilityError carrying the reply", async () => {
        const lonelyRl = new Limiter(lonelyConn.client, { durable: { numreplicas: 1, timeoutMs: 50 } });
        const k = key("lonely");
        const err = await lonelyRl.fixed(k, 3, 60).then(
          () => assert.fail("expected a DurabilityError"),
          (e: unknown) => e,
        );
        assert.ok(err instanceof DurabilityError, String(err));
        assert.equal(err.replicas, 0);
        assert.equal(err.numreplicas, 1);
        assert.equal(err.code, "NOTDURABLE");
        assert.match(err.message, /0 of 1 replicas .* within 50 ms \(WAIT 1 50\)/);
        assert.deepEqual((err.reply as { allowed: boolean; remaining: number }).remaining, 2);
        // The call took effect on the primary all the same.
        assert.equal(await lonely.admin.call("EXISTS", k), 1);
      });

      it("figures: the durable call costs the replica's acknowledgement, in one round trip", async () => {
        const plain = new Limiter(conn.client);
        const n = 300;
        const time = async (limiter: Limiter) => {
          const k = key("bench");
          const start = process.hrtime.bigint();
          for (let i = 0; i < n; i++) await limiter.fixed(k, 1_000_000, 60);
          return Number(process.hrtime.bigint() - start) / 1000 / n;
        };
        await time(plain);
        const plainUs = await time(plain);
        const durableUs = await time(rl);
        const before = await primary.admin.commandCalls("rl.fixed");
        await rl.fixed(key("count"), 5, 60);
        assert.equal((await primary.admin.commandCalls("rl.fixed")) - before, 1);
        console.log(`# ${clientName}: RL.FIXED ${plainUs.toFixed(0)} us a call, durable (WAIT 1) ${durableUs.toFixed(0)} us`);
        assert.ok(durableUs < plainUs * 10 + 2000, `durable ${durableUs} us against plain ${plainUs} us`);
      });
    });
  }

  describe("cluster: WAIT goes to the key's primary", { concurrency: 1 }, () => {
    let cluster: TestCluster;
    hold(startCluster, (c) => (cluster = c));
    for (const clientName of CLIENT_NAMES) {
      it(clientName, async () => {
        await withConnection(connectCluster(clientName, cluster.ports), async (conn) => {
          const rl = new Limiter(conn.client, { durable: { numreplicas: 1, timeoutMs: 20 } });
          const k = key("cluster");
          const owner = await cluster.ownerOf(keySlot(k));
          const waits = await Promise.all(cluster.nodes.map((n) => waitCalls(n.server)));
          await assert.rejects(rl.fixed(k, 3, 60), DurabilityError);
          const after = await Promise.all(cluster.nodes.map((n) => waitCalls(n.server)));
          cluster.nodes.forEach((n, i) => assert.equal(after[i]! - waits[i]!, n === owner ? 1 : 0, `WAIT calls on ${n.server.port}`));
        });
      });
    }
  });
});
