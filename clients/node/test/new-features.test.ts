/**
 * What the module gains with the contract's "A request's whole life" and the
 * RL.OVERRIDE container form: REFUND, BLOCK, RESERVE, WAIT, and
 * RL.OVERRIDE SET|GET|DEL|LIST (the only form the package emits). Each test
 * covers one feature, so a module that lacks one fails exactly its tests.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Fixed, Limiter, Sliding, Token, keySlot } from "../src/index.js";
import { CLIENT_NAMES, connectCluster, connectStandalone } from "./clients.js";
import { assertDecision, eachClient, hold, uniqueKeys, withConnection } from "./fixtures.js";
import { SERVERS, keyInRange, sleep, startCluster, startServer, type Server, type TestCluster } from "./helpers.js";

const key = uniqueKeys("nf");

// The servers run side by side; each one's tests run in order.
describe("new features, standalone", { concurrency: true }, () => {
for (const { name: serverName, bin } of SERVERS) {
  describe(`new features, standalone ${serverName}`, { concurrency: 1 }, () => {
    let server: Server;
    hold(() => startServer(bin, `nf-${serverName}`), (s) => (server = s));

    eachClient((clientName) => connectStandalone(clientName, server.port), (ctx) => {
      it("RL.OVERRIDE SET/GET/DEL/LIST (container form)", async () => {
        const o = key("o");
        await ctx.rl.overrideSet(o, 5000, "1m", { burst: 6000, ttl: "24h" });
        const got = await ctx.rl.overrideGet(o);
        assert.ok(got !== null);
        assert.deepEqual({ ...got, ttlMs: 0 }, { limit: 5000, windowMs: 60000, burst: 6000, ttlMs: 0 });
        assert.ok(got.ttlMs > 86_000_000 && got.ttlMs <= 86_400_000);
        await ctx.rl.overrideSet(o, 7, 60);
        assert.deepEqual(await ctx.rl.overrideGet(o), { limit: 7, windowMs: 60000, burst: 0, ttlMs: -1 });
        assertDecision(await ctx.rl.fixed(key("k"), 1, 1, { override: o }), { limit: 7 });
        const p = key("p");
        await ctx.rl.overrideSet(p, 1, 1);
        const seen = new Map<string, number>();
        let cursor = "0";
        do {
          const page = await ctx.rl.overrideList(cursor, { match: `nf:*:${process.pid}:*`, count: 1 });
          for (const entry of page.overrides) seen.set(entry.okey, entry.limit);
          cursor = page.cursor;
        } while (cursor !== "0");
        assert.equal(seen.get(o), 7);
        assert.equal(seen.get(p), 1);
        assert.equal(await ctx.rl.overrideDelete(o, p, key("none")), 2);
        assert.equal(await ctx.rl.overrideGet(o), null);
        assert.ok((await server.admin.commandCalls("rl.override|set")) >= 3, "sent as the container form");
      });

      it("REFUND gives units back", async () => {
        const k = key("refund");
        await ctx.rl.fixed(k, 10, 60, { cost: 5 });
        assertDecision(await ctx.rl.fixed(k, 10, 60, { refund: 3 }), { allowed: true, count: 2, retryAfterMs: 0, remaining: 8 });
        assertDecision(await ctx.rl.fixed(k, 10, 60, { refund: 100 }), { count: 0 });
        const s = key("refund-s");
        await ctx.rl.sliding(s, 10, 60, { cost: 4 });
        assertDecision(await ctx.rl.sliding(s, 10, 60, { refund: 1 }), { allowed: true, count: 3 });
        const t = key("refund-t");
        await ctx.rl.token(t, 10, "1h", { cost: 10 });
        assertDecision(await ctx.rl.token(t, 10, "1h", { refund: 4 }), { allowed: true, remaining: 4 });
        const all = await ctx.rl.all([Fixed(k, 10, 60, { refund: 1 }), Token(t, 10, "1h", { refund: 1 })]);
        assert.equal(all.allowed, true);
      });

      it("BLOCK: a denial blocks the key for the duration", async () => {
        const k = key("block");
        assertDecision(await ctx.rl.fixed(k, 1, "200ms", { block: "10s" }), { allowed: true });
        const denied = await ctx.rl.fixed(k, 1, "200ms", { block: "10s" });
        assert.equal(denied.allowed, false);
        assert.ok(denied.retryAfterMs > 9000, `retry ${denied.retryAfterMs}`);
        const still = await ctx.rl.sliding(key("block-s"), 1, 1, { block: 5 });
        assert.equal(still.allowed, true);
        const clause = await ctx.rl.all([Fixed(k, 1, "200ms", { block: "10s" })]);
        assert.equal(clause.allowed, false);
        assert.ok(clause.retryAfterMs > 9000);
      });

      it("RESERVE admits against future tokens and says how long to wait", async () => {
        const k = key("reserve");
        assertDecision(await ctx.rl.token(k, 10, "1s", { burst: 1, reserve: "1s" }), { allowed: true, retryAfterMs: 0 });
        const queued = await ctx.rl.token(k, 10, "1s", { burst: 1, reserve: "1s" });
        assert.equal(queued.allowed, true);
        assert.ok(queued.retryAfterMs > 0 && queued.retryAfterMs <= 100, `retry ${queued.retryAfterMs}`);
        const next = await ctx.rl.token(k, 10, "1s", { burst: 1, reserve: "1s" });
        assert.equal(next.allowed, true);
        // queued behind the previous reservation, one token interval later
        assert.ok(next.retryAfterMs > queued.retryAfterMs && next.retryAfterMs <= 200, `retry ${next.retryAfterMs}`);
        const tooLong = await ctx.rl.token(k, 10, "1s", { burst: 1, reserve: 0 });
        assert.equal(tooLong.allowed, false);
      });

      it("WAIT returns when the reserved time has come", async () => {
        const k = key("wait");
        const start = performance.now();
        await ctx.rl.token(k, 10, "1s", { burst: 1 }); // empties the bucket: the next token is 100 ms away
        const d = await ctx.rl.token(k, 10, "1s", { burst: 1, wait: "1s" });
        const took = performance.now() - start;
        assertDecision(d, { allowed: true, retryAfterMs: 0 });
        assert.ok(took >= 99 && took < 1000, `took ${took} ms`);
      });

      it("denial cache: a REFUND through the same Limiter clears that key's entries", async () => {
        const cached = new Limiter(ctx.conn.client, { denialCache: true });
        const k = key("cache-refund");
        await cached.fixed(k, 1, 60);
        assert.equal((await cached.fixed(k, 1, 60)).allowed, false); // cached now
        await cached.fixed(k, 1, 60, { refund: 1 });
        assert.equal((await cached.fixed(k, 1, 60)).allowed, true, "the refund made room, and the cache knows");
      });

      it("denial cache: override changes clear the whole cache", async () => {
        const cached = new Limiter(ctx.conn.client, { denialCache: true });
        const k = key("cache-ovr");
        const o = key("cache-ovr-o");
        await cached.fixed(k, 1, 60, { override: o });
        assert.equal((await cached.fixed(k, 1, 60, { override: o })).allowed, false);
        await cached.overrideSet(o, 5, 60);
        assertDecision(await cached.fixed(k, 1, 60, { override: o }), { allowed: true, limit: 5 });
        assertDecision(await cached.fixed(k, 1, 60, { override: o, cost: 3 }), { allowed: true, count: 5 });
        assertDecision(await cached.fixed(k, 1, 60, { override: o }), { allowed: false, limit: 5 }); // cached
        await cached.overrideDelete(o);
        // From the server again: the override is gone, so the limit is the call's own.
        assertDecision(await cached.fixed(k, 1, 60, { override: o }), { allowed: false, limit: 1 });
      });

      it("denial cache: a block lifted elsewhere is honoured within the max age; forgetDenials and clearDenialCache apply it at once", async () => {
        // A max age with room for a loaded machine between the denial and the check below.
        const cached = new Limiter(ctx.conn.client, { denialCache: { maxAgeMs: 1500 } });
        const k = key("cache-lift");
        const call = () => cached.fixed(k, 1, 60, { block: "1h" });
        const blockAndLift = async () => {
          await call();
          const blocked = await call();
          assert.equal(blocked.allowed, false);
          assert.ok(blocked.retryAfterMs > 3_500_000, String(blocked.retryAfterMs));
          await server.admin.call("DEL", k); // an operator lifts the block
        };

        await blockAndLift();
        // After the denial's ticket: its life has surely run out once 1.5 s have passed from here.
        const deniedBy = performance.now();
        const calls = await server.admin.commandCalls("rl.fixed");
        assert.equal((await call()).allowed, false, "answered locally within the max age");
        assert.equal(await server.admin.commandCalls("rl.fixed"), calls);
        // A timer measures from the event loop's cached clock, which can be a few ms behind
        // performance.now(), the cache's clock: wait on the cache's own clock.
        await sleep(1500);
        while (performance.now() - deniedBy < 1500) await sleep(1);
        assertDecision(await call(), { allowed: true, count: 1 }); // the lifted block reached the process

        await server.admin.call("DEL", k);
        await blockAndLift();
        cached.forgetDenials(k);
        assertDecision(await call(), { allowed: true, count: 1 });

        await server.admin.call("DEL", k);
        await blockAndLift();
        cached.clearDenialCache();
        assertDecision(await call(), { allowed: true, count: 1 });
        assert.throws(() => cached.forgetDenials(5 as never), /forgetDenials\(\): key 0/);
      });
    });
  });
}

});

describe("new features, cluster", () => {
  let cluster: TestCluster;
  hold(startCluster, (c) => (cluster = c));

  for (const clientName of CLIENT_NAMES) {
    it(`${clientName}: RL.OVERRIDE SET/GET/DEL route by okey, no MOVED`, async () => {
      await withConnection(connectCluster(clientName, cluster.ports), async (conn) => {
        const rl = new Limiter(conn.client);
        const okeys = [0, 5461, 10923].map((lo) => keyInRange(`ovr:${clientName}:${process.pid}:`, lo, lo + 5460, keySlot));
        await rl.fixed("warm-up", 1, 1);
        await cluster.resetStats();
        for (const o of okeys) {
          await rl.overrideSet(o, 9, 60, { burst: 10 });
          assert.deepEqual(await rl.overrideGet(o), { limit: 9, windowMs: 60000, burst: 10, ttlMs: -1 });
          assertDecision(await rl.token(`{${o}}:t`, 1, 60, { override: o }), { limit: 10 });
          assert.equal(await rl.overrideDelete(o), 1);
        }
        const errors = await cluster.perNode(async (a) => (await a.errorCount("MOVED")) + (await a.errorCount("ASK")));
        assert.deepEqual(errors, [0, 0, 0]);
      });
    });

    it(`${clientName}: REFUND, BLOCK and RESERVE clauses in RL.ALL on a cluster`, async () => {
      await withConnection(connectCluster(clientName, cluster.ports), async (conn) => {
        const rl = new Limiter(conn.client);
        const tag = `{opts:${clientName}:${process.pid}}`;
        await rl.sliding(`${tag}:a`, 5, 60, { cost: 2 });
        const all = await rl.all([
          Sliding(`${tag}:a`, 5, 60, { refund: 1 }),
          Token(`${tag}:b`, 5, 60, { reserve: "1s" }),
          Fixed(`${tag}:c`, 5, 60, { block: "1m" }),
        ]);
        assert.equal(all.allowed, true);
        assert.equal(all.decisions[0]!.count, 1);
      });
    });
  }
});
