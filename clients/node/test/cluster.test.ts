/**
 * A real 3-primary Redis Cluster (redis-server 7.0 with the module): every
 * call (leases included) goes straight to the node owning its key — zero COMMAND GETKEYS and
 * zero MOVED on every node in steady state — for ioredis Cluster and
 * node-redis cluster (and the older majors), client-side CROSSSLOT checks,
 * and calls that keep succeeding while a slot holding a limiter key moves.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Concurrent, CrossSlotError, Fixed, Limiter, Sliding, Token, keySlot } from "../src/index.js";
import { ALL_VARIANTS, CLIENT_NAMES, connectCluster, kindOf, type Connected, type VariantName } from "./clients.js";
import { hold, withConnection } from "./fixtures.js";
import { keyInRange, sleep, startCluster, type TestCluster } from "./helpers.js";

let cluster: TestCluster;
hold(startCluster, (c) => (cluster = c));

/** Per node: COMMAND GETKEYS calls, MOVED and ASK errors, and calls of the RL commands. */
async function routingStats() {
  return cluster.perNode(async (admin) => ({
    getkeys: (await admin.commandCalls("command|getkeys")) + (await admin.commandCalls("command")),
    moved: await admin.errorCount("MOVED"),
    ask: await admin.errorCount("ASK"),
    rl:
      (await admin.commandCalls("rl.fixed")) +
      (await admin.commandCalls("rl.sliding")) +
      (await admin.commandCalls("rl.token")) +
      (await admin.commandCalls("rl.concurrent")) +
      (await admin.commandCalls("rl.all")),
  }));
}

// (node-redis 4's legacyMode is a standalone-client feature.)
for (const variant of ALL_VARIANTS.filter((v) => v !== "node-redis4-legacy")) {
  describe(`cluster ${variant}`, () => {
    let conn: Connected;
    let rl: Limiter;
    const tag = `${variant}-${process.pid}`;
    hold(() => connectCluster(variant, cluster.ports), (c) => {
      conn = c;
      rl = new Limiter(c.client);
    });

    it("tells a cluster apart", () => {
      assert.equal(rl.clientKind, `${kindOf(variant)}-cluster`);
    });

    it("routes every call to the node owning its key: zero COMMAND GETKEYS, zero MOVED", async () => {
      // Keys on every node, as an application spreads them.
      const keys = Array.from({ length: 60 }, (_, i) => `rl:${tag}:user${i}`);
      const owners = new Set(keys.map((k) => cluster.nodes.findIndex((n) => keySlot(k) >= n.slots[0] && keySlot(k) <= n.slots[1])));
      assert.equal(owners.size, 3, "the keys cover all three nodes");
      await rl.fixed(keys[0]!, 10, 60); // the client has its slot map now
      await cluster.resetStats();

      let calls = 0;
      for (const [i, k] of keys.entries()) {
        await rl.fixed(k, 100, 60);
        await rl.sliding(`${k}:s`, 100, 60, { approx: i % 2 === 0 });
        await rl.token(`${k}:t`, 10, "1s", { burst: 20 });
        await rl.fixed(`{${k}}:o`, 100, 60, { override: `{${k}}:override` });
        await rl.all([Fixed(`{${k}}:s`, 5, 1), Sliding(`{${k}}:m`, 50, "1m"), Token(`{${k}}:d`, 1000, "1d")]);
        await rl.fixed(k, 100, 60, { peek: true });
        const lease = await rl.acquire(`{${k}}:c`, 10, "1m", { override: `{${k}}:override` });
        await lease.renew();
        await lease.release();
        const held = await rl.all([Fixed(`{${k}}:s2`, 5, 1), Concurrent(`{${k}}:c`, 10, "1m")]);
        await rl.heldLease(Concurrent(`{${k}}:c`, 10, "1m"), held.decisions[1]!).release();
        calls += 11;
      }
      const concurrent = await Promise.all(keys.map((k) => rl.token(`${k}:t`, 10, "1s", { burst: 20 })));
      calls += concurrent.length;

      const stats = await routingStats();
      for (const [i, s] of stats.entries()) {
        assert.equal(s.getkeys, 0, `node ${i}: COMMAND GETKEYS calls`);
        assert.equal(s.moved, 0, `node ${i}: MOVED errors`);
        assert.equal(s.ask, 0, `node ${i}: ASK errors`);
        assert.ok(s.rl > 0, `node ${i} served some calls`);
      }
      assert.equal(stats.reduce((sum, s) => sum + s.rl, 0), calls, "every call reached a node exactly once");
    });

    it("checks client-side that a call's keys share a slot, suggesting a hash tag", async () => {
      const a = keyInRange(`a:${tag}:`, 0, 5460, keySlot);
      const b = keyInRange(`b:${tag}:`, 10923, 16383, keySlot);
      await assert.rejects(rl.all([Fixed(a, 1, 60), Fixed(b, 1, 60)]), (err: Error) => {
        assert.ok(err instanceof CrossSlotError);
        assert.match(err.message, /RL\.ALL .*one hash slot.*hash tag.*\{user42\}:min/);
        return true;
      });
      await assert.rejects(rl.fixed(a, 1, 60, { override: b }), CrossSlotError);
      await assert.rejects(rl.overrideDelete(a, b), CrossSlotError);
      await assert.rejects(rl.overrideList(0), /each primary/);
      const ok = await rl.all([Fixed(`{${a}}:min`, 5, 60), Token(`{${a}}:day`, 100, "1d")]);
      assert.equal(ok.allowed, true);
    });

    it("server errors come back as the library's own error class", async () => {
      const k = `err:${tag}`;
      await assert.rejects(rl.fixed(k, 1, "0"), (err: Error) => {
        assert.ok(err instanceof conn.errorClass, err.constructor.name);
        assert.match(err.message, /window/);
        return true;
      });
    });

    it("many calls at once into a half-moved slot whose key is on the target each run once, after ASK", async () => {
      const k = `{askburst:${tag}}:rl`;
      const slot = keySlot(k);
      const source = await cluster.ownerOf(slot);
      const target = cluster.nodes.find((n) => n !== source)!;
      await rl.fixed(k, 1_000_000, "1h");
      let pauses = 0;
      let burst: PromiseSettledResult<unknown>[] = [];
      // The second pause comes after the key's MIGRATE, before the slot is handed over.
      await cluster.moveSlot(slot, target, async () => {
        if (++pauses === 2) {
          burst = await Promise.allSettled(Array.from({ length: 40 }, () => rl.fixed(k, 1_000_000, "1h")));
        }
      });
      assert.ok(pauses >= 2, "the slot was half-moved with its key on the target");
      assert.deepEqual(burst.filter((r) => r.status === "rejected").map((r) => String(r.reason)), []);
      assert.equal(burst.length, 40);
      // A peek answers with the count a call would make: 41 calls, plus one.
      assert.equal((await rl.fixed(k, 1_000_000, "1h", { peek: true })).count, 42, "each call counted once");
    });

    it("keeps succeeding while the slot of its key moves to another node", async () => {
      const k = `{reshard:${tag}}:rl`;
      const slot = keySlot(k);
      const source = await cluster.ownerOf(slot);
      const target = cluster.nodes.find((n) => n !== source)!;
      let ok = 0;
      const failures: unknown[] = [];
      let stop = false;
      const loop = async () => {
        while (!stop) {
          try {
            const d = await rl.fixed(k, 1_000_000, "1h");
            assert.equal(d.allowed, true);
            ok++;
          } catch (err) {
            failures.push(err);
          }
        }
      };
      await cluster.resetStats();
      const loops = [loop(), loop()];
      await sleep(50);
      const beforeMove = ok;
      const moved = await cluster.moveSlot(slot, target, () => sleep(30));
      await sleep(100);
      const afterMove = ok;
      await sleep(100);
      stop = true;
      await Promise.all(loops);
      assert.deepEqual(failures.map(String), []);
      assert.ok(moved >= 1, "the limiter key was migrated (with any other key of its slot)");
      assert.ok(beforeMove > 0 && afterMove > beforeMove && ok > afterMove, `${beforeMove} ${afterMove} ${ok}`);
      assert.equal((await cluster.ownerOf(slot)).id, target.id);
      // The state moved with the key: every admitted call is counted once.
      const peek = await rl.fixed(k, 1_000_000, "1h", { peek: true });
      assert.equal(peek.count, ok + 1);
      assert.equal(await target.server.admin.call("EXISTS", k), 1);
      assert.equal(await source.server.admin.call("CLUSTER", "COUNTKEYSINSLOT", slot), 0);
      const during = await routingStats();
      assert.ok(
        during.reduce((sum, s) => sum + s.moved + s.ask, 0) > 0,
        "calls met the move (ASK or MOVED) and followed it",
      );
      // Steady state again: no more redirections.
      await cluster.resetStats();
      for (let i = 0; i < 20; i++) await rl.fixed(k, 1_000_000, "1h");
      const stats = await routingStats();
      assert.deepEqual(stats.map((s) => s.moved + s.ask), [0, 0, 0]);
    });
  });
}

describe("cluster with a key prefix", () => {
  for (const name of CLIENT_NAMES) {
    it(`${name}: the client's keyPrefix is applied, and routing uses the prefixed keys`, async () => {
      await withConnection(connectCluster(name as VariantName, cluster.ports, { keyPrefix: "app:" }), async (conn) => {
        const rl = new Limiter(conn.client);
        assert.equal(rl.keyPrefix, "app:");
        await rl.fixed("warm", 1, 60);
        await cluster.resetStats();
        const keys = Array.from({ length: 30 }, (_, i) => `pfx:${name}:${process.pid}:${i}`);
        for (const k of keys) {
          await rl.fixed(`{${k}}`, 5, 60, { override: `{${k}}:override` });
          await rl.all([Fixed(`{${k}}:a`, 5, 60), Sliding(`{${k}}:b`, 5, 60)]);
        }
        const stats = await routingStats();
        assert.deepEqual(stats.map((s) => s.moved + s.ask), [0, 0, 0]);
        const stored = `app:{${keys[0]}}`;
        const owner = await cluster.ownerOf(keySlot(stored));
        assert.equal(await owner.server.admin.call("EXISTS", stored), 1);
        assert.equal(await owner.server.admin.call("EXISTS", `{${keys[0]}}`), 0);
      });
    });
  }
});

describe("cluster with the denial cache", () => {
  for (const name of CLIENT_NAMES) {
    it(name, async () => {
      await withConnection(connectCluster(name as VariantName, cluster.ports), async (conn) => {
        const rl = new Limiter(conn.client, { denialCache: true });
        const k = `cache:${name}:${process.pid}`;
        await rl.fixed(k, 1, 60);
        const denied = await rl.fixed(k, 1, 60);
        assert.equal(denied.allowed, false);
        await cluster.resetStats();
        for (let i = 0; i < 100; i++) assert.equal((await rl.fixed(k, 1, 60)).allowed, false);
        const stats = await routingStats();
        assert.equal(stats.reduce((sum, s) => sum + s.rl, 0), 0, "answered locally");
      });
    });
  }
});
