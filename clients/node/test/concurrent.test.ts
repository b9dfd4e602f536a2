/**
 * RL.CONCURRENT through the package, on the four servers with both client
 * libraries: leases taken, released (once), renewed and lost; withLease's
 * scope that always releases; the background renewal; WAIT on a connection
 * of the Limiter's own while the client's other calls go on; RL.ALL's
 * CONCURRENT clause and heldLease; PEEK, cost 0, overrides, modes; and many
 * callers at once never holding more than the limit.
 */
import assert from "node:assert/strict";
import { performance } from "node:perf_hooks";
import { describe, it } from "node:test";
import Redis from "ioredis";
import {
  Concurrent,
  Fixed,
  HeldCallTimeoutError,
  Lease,
  LeaseLostError,
  LeaseRefusedError,
  Limiter,
  Token,
} from "../src/index.js";
import { connectStandalone } from "./clients.js";
import { assertDecision, eachClient, hold, uniqueKeys } from "./fixtures.js";
import { SERVERS, sleep, startServer, type Server } from "./helpers.js";

const key = uniqueKeys("cc");

// The servers run side by side; each one's tests run in order.
describe("concurrency limits", { concurrency: true }, () => {
for (const { name: serverName, bin } of SERVERS) {
  describe(`concurrency limits, ${serverName}`, { concurrency: 1 }, () => {
    let server: Server;
    hold(() => startServer(bin, `cc-${serverName}`), (s) => (server = s));

    eachClient((clientName) => connectStandalone(clientName, server.port), (ctx) => {
      it("acquire takes a lease with its id; a full limit refuses; release gives the slot back, once", async () => {
        const k = key("basic");
        const a = await ctx.rl.acquire(k, 2, "30s");
        const b = await ctx.rl.acquire(k, 2, "30s");
        assert.ok(a instanceof Lease);
        assertDecision(a.decision, { allowed: true, count: 1, retryAfterMs: 0, limit: 2, remaining: 1, resetAfterMs: 30000 });
        assert.ok(a.id > 0 && Number.isSafeInteger(a.id) && b.id === a.id + 1, `${a.id} ${b.id}`);
        assert.ok(a.held && a.allowed);
        const refused = await ctx.rl.acquire(k, 2, "30s");
        assertDecision(refused.decision, { allowed: false, count: 2, leaseId: 0, remaining: 0 });
        assert.ok(refused.decision.retryAfterMs > 29000 && refused.decision.retryAfterMs <= 30000);
        assert.equal(refused.held, false);
        assert.equal(await refused.release(), null, "a refusal holds nothing to release");
        assert.equal(await refused.renew(), null);

        const releases = await server.admin.commandCalls("rl.concurrent");
        const [first, second] = await Promise.all([a.release(), a.release()]);
        assertDecision(first as never, { allowed: true, count: 1, leaseId: a.id });
        assert.equal(second, first, "later calls get the first answer");
        assert.equal(await a.release(), first);
        assert.equal(await server.admin.commandCalls("rl.concurrent"), releases + 1, "RELEASE sent once");
        assert.equal(a.held, false);
        assert.equal((await ctx.rl.acquire(k, 2, "30s")).allowed, true, "the released slot is free");
        // The server's answer for a lease that had already ended: not an error.
        const ended = ctx.rl.heldLease(Concurrent(k, 2, "30s"), a.id);
        assertDecision((await ended.release()) as never, { allowed: false, leaseId: 0, count: 2 });
      });

      it("renew extends a lease; an ended or released one rejects with LeaseLostError", async () => {
        const k = key("renew");
        // Long enough that a loaded machine renews it before it ends.
        const lease = await ctx.rl.acquire(k, 3, "10s");
        const renewed = await lease.renew();
        assertDecision(renewed as never, { allowed: true, leaseId: lease.id, count: 1 });
        await lease.release();
        await assert.rejects(lease.renew(), LeaseLostError);

        const short = await ctx.rl.acquire(k, 3, "100ms");
        await sleep(150);
        await assert.rejects(short.renew(), (err: Error) => {
          assert.ok(err instanceof LeaseLostError);
          assertDecision(err.decision!, { allowed: false, leaseId: 0 });
          return true;
        });
        assert.ok(short.lost instanceof LeaseLostError);
        assert.equal(short.held, false);
        assert.equal(short.signal.aborted, true);
        assert.ok(short.signal.reason instanceof LeaseLostError);
      });

      it("withLease runs the work holding a slot and releases it however the work ends", async () => {
        const k = key("scope");
        const result = await ctx.rl.withLease(k, 1, "30s", async (lease) => {
          assert.ok(lease.held);
          assertDecision((await ctx.rl.acquire(k, 1, "30s", { cost: 0 })).decision, { count: 1 });
          return "done";
        });
        assert.equal(result, "done");
        assertDecision((await ctx.rl.acquire(k, 1, "30s", { cost: 0 })).decision, { count: 0 });

        await assert.rejects(
          ctx.rl.withLease(k, 1, "30s", { cost: 1 }, () => {
            throw new Error("the work failed");
          }),
          /the work failed/,
        );
        assertDecision((await ctx.rl.acquire(k, 1, "30s", { cost: 0 })).decision, { count: 0 });

        const holder = await ctx.rl.acquire(k, 1, "30s");
        let ran = false;
        await assert.rejects(
          ctx.rl.withLease(k, 1, "30s", async () => {
            ran = true;
          }),
          (err: Error) => {
            assert.ok(err instanceof LeaseRefusedError);
            assertDecision(err.decision, { allowed: false, count: 1, limit: 1 });
            assert.match(err.message, /no free slot \(1 of 1 held\)/);
            return true;
          },
        );
        assert.equal(ran, false, "the work does not run without its slot");
        await holder.release();
        await assert.rejects(ctx.rl.withLease(k, 1, "30s", { peek: true } as never, async () => 1), /peek/);
        await assert.rejects(ctx.rl.withLease(k, 1, "30s", { onLost: () => {} }, async () => 1), /onLost needs keepAlive/);
        await assert.rejects(ctx.rl.withLease(k, 1, "30s", {} as never), /give the function/);
      });

      it("keepAlive renews every third of the lease, stops on release, and reports a lost lease", async () => {
        const k = key("keep");
        const lease = await ctx.rl.acquire(k, 2, "1s");
        const signal = lease.keepAlive();
        // More than twice the lease: a renewal every 333 ms keeps it, with room
        // for a loaded machine to be late by most of a period.
        await sleep(2200);
        assert.equal(signal.aborted, false);
        assertDecision((await ctx.rl.acquire(k, 2, "1s", { cost: 0 })).decision, { count: 1 });
        await lease.release();
        const calls = await server.admin.commandCalls("rl.concurrent");
        await sleep(700); // more than a renewal period
        assert.equal(await server.admin.commandCalls("rl.concurrent"), calls, "no renewal after the release");

        // Deleted elsewhere: the next renewal is refused, and the work is told.
        const lost: Error[] = [];
        const doomed = await ctx.rl.acquire(k, 2, "1s");
        const doomedSignal = doomed.keepAlive({ onLost: (err) => lost.push(err) });
        await server.admin.call("DEL", k);
        await sleep(700); // more than a renewal period
        assert.equal(lost.length, 1);
        assert.ok(lost[0] instanceof LeaseLostError);
        assert.equal(doomedSignal.aborted, true);
        assert.equal(doomedSignal.reason, lost[0]);
        assert.equal(doomed.held, false);

        const kept = await ctx.rl.withLease(k, 2, "1s", { keepAlive: true }, async (held) => {
          await sleep(2200);
          return held.signal.aborted;
        });
        assert.equal(kept, false, "withLease's keepAlive held the lease past its length");
        assertDecision((await ctx.rl.acquire(k, 2, "1s", { cost: 0 })).decision, { count: 0 });
      });

      it("wait: a refused acquire waits for a release, on a connection of its own while the client's calls go on", async () => {
        const k = key("wait");
        const holder = await ctx.rl.acquire(k, 1, "30s");
        const start = performance.now();
        const waiting = ctx.rl.acquire(k, 1, "30s", { wait: "20s" });
        let answered = false;
        void waiting.finally(() => (answered = true));
        await sleep(150);
        // The client's own connection answers meanwhile: behind the wait, it
        // could not answer before the held acquire does (at the release below).
        assertDecision(await ctx.rl.fixed(key("other"), 5, 60), { allowed: true });
        assert.equal(answered, false, "an ordinary call is not held behind the wait");
        await holder.release();
        const got = await waiting;
        const took = performance.now() - start;
        assert.equal(got.allowed, true);
        assert.ok(got.id > holder.id);
        assert.ok(took >= 140 && took < 10_000, `took ${took} ms (woken by the release, not at the end of its wait)`);
        await got.release();
        // Refused at the deadline, having taken nothing.
        const full = await ctx.rl.acquire(k, 1, "30s");
        const late = await ctx.rl.acquire(k, 1, "30s", { wait: "200ms" });
        assertDecision(late.decision, { allowed: false, leaseId: 0, count: 1 });
        await full.release();
      });

      it("RL.ALL's Concurrent clause takes its lease with the others, all or nothing; heldLease gives it back", async () => {
        const f = key("all-f");
        const c = key("all-c");
        const inflight = Concurrent(c, 1, "30s");
        const all = await ctx.rl.all([Fixed(f, 2, 60), inflight]);
        assert.equal(all.allowed, true);
        const id = all.decisions[1]!.leaseId;
        assert.ok(id > 0);
        assert.equal(all.decisions[0]!.leaseId, 0);
        const denied = await ctx.rl.all([Fixed(f, 2, 60), inflight]);
        assert.equal(denied.allowed, false);
        assert.equal(denied.decisions[1]!.leaseId, 0);
        assertDecision((await ctx.rl.fixed(f, 2, 60, { cost: 0 })), { count: 1 }); // nothing recorded by the denial
        const lease = ctx.rl.heldLease(inflight, all.decisions[1]!);
        assert.equal(lease.id, id);
        assertDecision((await lease.release()) as never, { allowed: true, count: 0, leaseId: id });
        assert.equal(ctx.rl.heldLease(inflight, id).held, true);
        assert.throws(() => ctx.rl.heldLease(Fixed(f, 1, 1), id), /Concurrent\(\) clause/);
        assert.throws(() => ctx.rl.heldLease(inflight, "7" as never), /lease id/);
        assert.throws(() => ctx.rl.heldLease(inflight, 1.5), /lease id must be an integer/);
        // A peeked RL.ALL takes no lease.
        const peek = await ctx.rl.all([Token(key("all-t"), 10, 1), inflight], { peek: true });
        assert.equal(peek.allowed, true);
        assert.equal(peek.decisions[1]!.leaseId, 0);
      });

      it("peek and cost 0 take no lease; an override's limit and window are the limit and the lease", async () => {
        const k = key("peek");
        const peek = await ctx.rl.acquire(k, 2, "30s", { peek: true });
        assertDecision(peek.decision, { allowed: true, count: 1, leaseId: 0 });
        assert.equal(await peek.release(), null);
        assert.equal(await server.admin.call("EXISTS", k), 0);
        const o = key("o");
        await ctx.rl.overrideSet(o, 1, "2s");
        const held = await ctx.rl.acquire(k, 5, "30s", { override: o });
        assertDecision(held.decision, { allowed: true, limit: 1, resetAfterMs: 2000 });
        assertDecision((await ctx.rl.acquire(k, 5, "30s", { override: o })).decision, { allowed: false, limit: 1 });
        assertDecision((await held.renew()) as never, { allowed: true, resetAfterMs: 2000 });
        // The release goes without the override: its reply's limit is the call's own.
        assertDecision((await held.release()) as never, { allowed: true, count: 0, limit: 5 });
      });

      it("a denied acquire is never answered from the denial cache (a release ends it early)", async () => {
        const cached = new Limiter(ctx.conn.client, { denialCache: true });
        const k = key("cache");
        const holder = await cached.acquire(k, 1, "30s");
        const calls = await server.admin.commandCalls("rl.concurrent");
        assert.equal((await cached.acquire(k, 1, "30s")).allowed, false);
        assert.equal((await cached.all([Concurrent(k, 1, "30s")])).allowed, false);
        await holder.release();
        assert.equal((await cached.acquire(k, 1, "30s")).allowed, true);
        assert.equal(await server.admin.commandCalls("rl.concurrent"), calls + 3);
      });

      it("server errors come back as the client library's own error class", async () => {
        await assert.rejects(ctx.rl.acquire(key("err"), 0, "30s"), (err: Error) => {
          assert.ok(err instanceof ctx.conn.errorClass, err.constructor.name);
          assert.match(err.message, /^ERR limit/);
          return true;
        });
        const f = key("err-f");
        await ctx.rl.fixed(f, 1, 60);
        await assert.rejects(ctx.rl.acquire(f, 1, "30s"), /WRONGTYPE/);
        await assert.rejects(ctx.rl.acquire(f, 1, 1.5), /acquire\(\): lease must be/);
      });

      it("many callers at once never hold more than the limit, and every slot comes back", async () => {
        const k = key("race");
        let inflight = 0;
        let most = 0;
        let admitted = 0;
        const worker = async (w: number) => {
          for (let i = 0; i < 8; i++) {
            const lease = await ctx.rl.acquire(k, 3, "30s");
            if (!lease.allowed) {
              await sleep(1 + ((w + i) % 3));
              continue;
            }
            admitted++;
            most = Math.max(most, ++inflight);
            await sleep((w * 7 + i * 3) % 5);
            inflight--;
            await lease.release();
          }
        };
        await Promise.all(Array.from({ length: 12 }, (_, w) => worker(w)));
        assert.ok(most <= 3 && most >= 1, `at most ${most} held`);
        assert.ok(admitted >= 8, `${admitted} admitted`);
        assertDecision((await ctx.rl.acquire(k, 3, "30s", { cost: 0 })).decision, { count: 0 });
      });
    });

    it("modes: off admits without a lease; monitor keeps the would-be refusal's retryAfterMs", async () => {
      const conn = await connectStandalone("ioredis", server.port);
      const rl = new Limiter(conn.client);
      const k = key("mode");
      try {
        await server.admin.call("CONFIG", "SET", "rl.mode", "off");
        const off = await rl.acquire(k, 1, "30s");
        assertDecision(off.decision, { allowed: true, leaseId: 0, count: 0 });
        assert.equal(await off.release(), null);
        off.keepAlive();
        assert.equal(off.signal.aborted, false);
        await server.admin.call("CONFIG", "SET", "rl.mode", "monitor");
        const held = await rl.acquire(k, 1, "30s");
        const over = await rl.acquire(k, 1, "30s");
        assertDecision(over.decision, { allowed: true, leaseId: 0 });
        assert.ok(over.decision.retryAfterMs > 0);
        await held.release();
      } finally {
        await server.admin.call("CONFIG", "SET", "rl.mode", "on");
        await conn.close();
      }
    });

    it("a held call with no reply within its wait and the client's command timeout rejects, and the client goes on", async () => {
      const client = new Redis({ port: server.port, host: "127.0.0.1", commandTimeout: 300, lazyConnect: true });
      await client.connect();
      const rl = new Limiter(client);
      const k = key("timeout");
      try {
        // A wait longer than the client's command timeout is fine: the held call is timed by its wait.
        const holder = await rl.acquire(k, 1, "30s");
        const waiting = rl.acquire(k, 1, "30s", { wait: "2s" });
        await sleep(500);
        await holder.release();
        assert.equal((await waiting).allowed, true);
        // The server does not answer within the wait and the grace after it.
        await server.admin.call("CLIENT", "PAUSE", 1500, "ALL");
        const start = performance.now();
        await assert.rejects(rl.acquire(key("timeout-2"), 1, "30s", { wait: "100ms" }), (err: Error) => {
          assert.ok(err instanceof HeldCallTimeoutError, `${err.name}: ${err.message}`);
          assert.match(err.message, /no reply within 400 ms/);
          return true;
        });
        const took = performance.now() - start;
        assert.ok(took >= 390 && took < 1400, `rejected after ${took} ms`);
      } finally {
        await server.admin.call("CLIENT", "UNPAUSE");
        rl.close();
        client.disconnect();
      }
      await assert.rejects(rl.acquire(k, 1, "30s", { wait: 1 }), /closed/);
    });
  });
}
});
