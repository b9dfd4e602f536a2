/**
 * Standalone servers (Redis 7.0 and 8.2, Valkey 8.1 and 9.1, module loaded)
 * through ioredis and node-redis: decisions, RL.ALL, PEEK, errors, key prefixes and
 * the denial cache. Options the module gains with "A request's whole life"
 * and the RL.OVERRIDE container form are in new-features.test.ts.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Fixed, Limiter, Sliding, Token } from "../src/index.js";
import { OLDER_VARIANTS, connectStandalone, kindOf } from "./clients.js";
import { assertDecision, eachClient, hold, uniqueKeys, withConnection } from "./fixtures.js";
import { SERVERS, sleep, startServer, type Server } from "./helpers.js";
import { createClientPool } from "redis";

const key = uniqueKeys("t");

// The servers run side by side; each one's tests run in order.
describe("standalone", { concurrency: true }, () => {
for (const { name: serverName, bin } of SERVERS) {
  describe(`standalone ${serverName}`, { concurrency: 1 }, () => {
    let server: Server;
    hold(() => startServer(bin, serverName), (s) => (server = s));

    eachClient((clientName) => connectStandalone(clientName, server.port), (ctx, clientName) => {
      it("tells the client apart", () => {
        assert.equal(ctx.rl.clientKind, clientName);
        assert.equal(ctx.rl.keyPrefix, "");
      });

      it("fixed: admits up to the limit, then denies with the window's time left", async () => {
        const k = key("fixed");
        assertDecision(await ctx.rl.fixed(k, 3, "1m"), {
          allowed: true, count: 1, retryAfterMs: 0, limit: 3, remaining: 2, resetAfterMs: 60000,
        });
        assertDecision(await ctx.rl.fixed(k, 3, 60, { cost: 2 }), { allowed: true, count: 3, remaining: 0 });
        const denied = await ctx.rl.fixed(k, 3, 60);
        assertDecision(denied, { allowed: false, count: 3, remaining: 0 });
        assert.ok(denied.retryAfterMs > 59000 && denied.retryAfterMs <= 60000);
        assert.equal(denied.resetAfterMs, denied.retryAfterMs);
        assertDecision(await ctx.rl.fixed(k, 3, 60, { cost: 4 }), { allowed: false, retryAfterMs: -1 });
        const pttl = Number(await server.admin.call("PTTL", k));
        assert.ok(pttl > 59000 && pttl <= 60000, `PTTL ${pttl}`);
      });

      it("fixed: aligned windows and millisecond windows", async () => {
        const d = await ctx.rl.fixed(key("aligned"), 10, "1m", { aligned: true });
        assert.ok(d.allowed && d.resetAfterMs <= 60000 && d.resetAfterMs > 0);
        const ms = await ctx.rl.fixed(key("ms"), 10, "1500ms");
        assert.equal(ms.resetAfterMs, 1500);
      });

      it("peek changes nothing", async () => {
        const k = key("peek");
        assertDecision(await ctx.rl.fixed(k, 5, 60, { peek: true }), { allowed: true, count: 1, remaining: 4 });
        assert.equal(await server.admin.call("EXISTS", k), 0);
        await ctx.rl.fixed(k, 5, 60);
        assertDecision(await ctx.rl.fixed(k, 5, 60, { peek: true }), { count: 2 });
        assertDecision(await ctx.rl.fixed(k, 5, 60), { count: 2 });
      });

      it("sliding: exact log and approx", async () => {
        const k = key("sliding");
        for (let i = 1; i <= 3; i++) assertDecision(await ctx.rl.sliding(k, 3, "10s"), { allowed: true, count: i });
        const denied = await ctx.rl.sliding(k, 3, "10s");
        assert.equal(denied.allowed, false);
        assert.ok(denied.retryAfterMs > 9000);
        const a = key("approx");
        assertDecision(await ctx.rl.sliding(a, 2, 60, { approx: true, cost: 2 }), { allowed: true, count: 2 });
        assertDecision(await ctx.rl.sliding(a, 2, 60, { approx: true }), { allowed: false });
      });

      it("token: a burst empties the bucket, one token per interval", async () => {
        const k = key("token");
        // 10 tokens per 10 s: one a second, so a loaded machine's delays cannot refill one.
        assertDecision(await ctx.rl.token(k, 10, "10s", { burst: 50, cost: 50 }), {
          allowed: true, count: 50, limit: 50, remaining: 0, resetAfterMs: 50000,
        });
        const d = await ctx.rl.token(k, 10, "10s", { burst: 50 });
        assert.equal(d.allowed, false);
        assert.ok(d.retryAfterMs > 0 && d.retryAfterMs <= 1000, String(d.retryAfterMs));
      });

      it("all: all-or-nothing over clauses", async () => {
        const s = key("all-s");
        const m = key("all-m");
        const t = key("all-t");
        const ok = await ctx.rl.all([Fixed(s, 2, 1, { aligned: true }), Sliding(m, 5, "1m"), Token(t, 10, "1s")]);
        assert.equal(ok.allowed, true);
        assert.equal(ok.retryAfterMs, 0);
        assert.deepEqual(ok.decisions.map((d) => [d.allowed, d.count]), [[true, 1], [true, 1], [true, 1]]);
        // A second clause that cannot admit: nothing is recorded anywhere.
        const no = await ctx.rl.all([Sliding(m, 5, "1m"), Fixed(key("all-x"), 1, 60, { cost: 2 })]);
        assert.equal(no.allowed, false);
        assert.equal(no.retryAfterMs, -1);
        assert.equal(no.decisions[0]!.allowed, true);
        assert.equal(no.decisions[1]!.allowed, false);
        assertDecision(await ctx.rl.sliding(m, 5, "1m", { peek: true }), { count: 2 }); // 1 recorded + the peek's own
        const peek = await ctx.rl.all([Fixed(s, 2, 1, { aligned: true })], { peek: true });
        assert.equal(peek.decisions.length, 1);
      });

      it("overrides through the dotted names still work with the limiters' OVERRIDE option", async () => {
        const o = key("ovr");
        const k = key("ovr-k");
        await server.admin.call("RL.OVERRIDE.SET", o, 7, "1m");
        assertDecision(await ctx.rl.fixed(k, 1, 60, { override: o }), { allowed: true, limit: 7, remaining: 6 });
        assertDecision(await ctx.rl.fixed(key("ovr-none"), 1, 60, { override: key("missing") }), { limit: 1 });
      });

      it("server errors surface as the client library's own error class", async () => {
        const k = key("err");
        await server.admin.call("SET", k, "a string");
        await assert.rejects(ctx.rl.fixed(k, 1, 60), (err: Error) => {
          assert.ok(err instanceof ctx.conn.errorClass, `${err.constructor.name}: ${err.message}`);
          assert.match(err.message, /^WRONGTYPE/);
          return true;
        });
        await assert.rejects(ctx.rl.fixed(key("err"), 1, "0"), (err: Error) => {
          assert.ok(err instanceof ctx.conn.errorClass);
          assert.match(err.message, /^ERR .*window/i);
          return true;
        });
        await assert.rejects(ctx.rl.all([Fixed(k, 1, 60)]), ctx.conn.errorClass);
        const s = key("wrong-algo");
        await ctx.rl.sliding(s, 1, 60);
        await assert.rejects(ctx.rl.sliding(s, 1, 60, { approx: true }), /WRONGTYPE/);
      });

      it("client-side mistakes reject before anything is sent", async () => {
        const before = await server.admin.commandCalls("rl.fixed");
        await assert.rejects(ctx.rl.fixed("k", "3" as never, 60), TypeError);
        await assert.rejects(ctx.rl.fixed("k", 3, 60, { cost: 1, refund: 1 }), /mutually exclusive/);
        await assert.rejects(ctx.rl.all([]), /at least one clause/);
        await assert.rejects(ctx.rl.all([{ key: "k" } as never]), /clause 0 is not a clause/);
        assert.equal(await server.admin.commandCalls("rl.fixed"), before);
      });

      it("concurrent calls: exactly the limit is admitted", async () => {
        const k = key("race");
        const results = await Promise.all(Array.from({ length: 200 }, () => ctx.rl.fixed(k, 120, 60)));
        assert.equal(results.filter((d) => d.allowed).length, 120);
      });

      it("applies the client's keyPrefix (or the Limiter's own) to keys and okeys", async () => {
        const prefixed = await connectStandalone(clientName, server.port, { keyPrefix: "app:" });
        try {
          const p = new Limiter(prefixed.client);
          assert.equal(p.keyPrefix, "app:");
          const k = key("prefixed");
          const o = key("prefixed-o");
          await server.admin.call("RL.OVERRIDE.SET", `app:${o}`, 9, 60);
          assertDecision(await p.fixed(k, 1, 60, { override: o }), { limit: 9 });
          assert.equal(await server.admin.call("EXISTS", `app:${k}`), 1);
          assert.equal(await server.admin.call("EXISTS", k), 0);
          await p.all([Fixed(k, 1, 60, { override: o }), Token(k + "t", 1, 60)]);
          assert.equal(await server.admin.call("EXISTS", `app:${k}t`), 1);
          const raw = new Limiter(prefixed.client, { keyPrefix: "" });
          await raw.fixed(k, 1, 60);
          assert.equal(await server.admin.call("EXISTS", k), 1);
          const other = new Limiter(ctx.conn.client, { keyPrefix: "x:" });
          await other.fixed(k, 1, 60);
          assert.equal(await server.admin.call("EXISTS", `x:${k}`), 1);
        } finally {
          await prefixed.close();
        }
      });

      it("denial cache: repeated denials are answered locally until retryAfterMs has passed", async () => {
        const cached = new Limiter(ctx.conn.client, { denialCache: true });
        const k = key("cache");
        await cached.fixed(k, 2, "800ms");
        await cached.fixed(k, 2, "800ms");
        const calls0 = await server.admin.commandCalls("rl.fixed");
        const first = await cached.fixed(k, 2, "800ms");
        assert.equal(first.allowed, false);
        let last = first.retryAfterMs;
        for (let i = 0; i < 50; i++) {
          const d = await cached.fixed(k, 2, "800ms");
          assert.equal(d.allowed, false);
          assert.ok(d.retryAfterMs <= last && d.retryAfterMs > 0);
          assert.equal(d.resetAfterMs, d.retryAfterMs);
          last = d.retryAfterMs;
        }
        assert.equal(await server.admin.commandCalls("rl.fixed"), calls0 + 1, "only the first denial reached the server");
        // Other arguments are another call; -1 is never cached.
        await cached.fixed(k, 2, "800ms", { cost: 2 });
        await cached.fixed(k, 2, "800ms", { cost: 3 });
        await cached.fixed(k, 2, "800ms", { cost: 3 });
        assert.equal(await server.admin.commandCalls("rl.fixed"), calls0 + 4);
        // After the wait, the same call goes to the server and is admitted.
        await sleep(last + 5);
        assertDecision(await cached.fixed(k, 2, "800ms"), { allowed: true, count: 1 });
      });

      it("denial cache covers RL.ALL and never answers early", async () => {
        const cached = new Limiter(ctx.conn.client, { denialCache: true });
        const a = key("cache-all");
        const clauses = [Fixed(a, 1, "600ms"), Sliding(a + "s", 10, 60)];
        assert.equal((await cached.all(clauses)).allowed, true);
        const denied = await cached.all(clauses);
        assert.equal(denied.allowed, false);
        const calls = await server.admin.commandCalls("rl.all");
        const again = await cached.all(clauses);
        assert.equal(again.allowed, false);
        assert.equal(await server.admin.commandCalls("rl.all"), calls);
        await sleep(again.retryAfterMs + 2); // (+2: timers are not as exact as the cache)
        assert.equal((await cached.all(clauses)).allowed, true, "admitted once the cached wait has passed");
      });
    });

    for (const variant of OLDER_VARIANTS) {
      it(`older client API: ${variant}`, async () => {
        await withConnection(connectStandalone(variant, server.port), async (conn) => {
          const rl = new Limiter(conn.client);
          assert.equal(rl.clientKind, kindOf(variant));
          const k = key(variant);
          assertDecision(await rl.fixed(k, 2, 60), { allowed: true, count: 1, limit: 2, remaining: 1 });
          assertDecision(await rl.sliding(k + "s", 2, "1m", { approx: true }), { allowed: true, count: 1 });
          assertDecision(await rl.token(k + "t", 10, "10s", { burst: 20, cost: 20 }), { allowed: true, remaining: 0 });
          const all = await rl.all([Fixed(k, 2, 60), Token(k + "t", 10, "10s", { burst: 20 })]);
          assert.equal(all.allowed, false);
          assert.ok(all.retryAfterMs > 0 && all.retryAfterMs <= 1000);
          assertDecision(await rl.fixed(k, 2, 60, { peek: true }), { count: 2 }); // RL.ALL recorded nothing
          await server.admin.call("SET", k + "str", "x");
          await assert.rejects(rl.fixed(k + "str", 1, 60), (err: Error) => {
            assert.ok(err instanceof conn.errorClass, err.constructor.name);
            assert.match(err.message, /^WRONGTYPE/);
            return true;
          });
          const many = await Promise.all(Array.from({ length: 50 }, () => rl.fixed(k + "race", 30, 60)));
          assert.equal(many.filter((d) => d.allowed).length, 30);
        });
      });
    }

    for (const [label, options] of [
      ["ioredis with RESP2", { protocol: 2 }],
      ["ioredis with stringNumbers", { stringNumbers: true }],
    ] as const) {
      it(label, async () => {
        await withConnection(connectStandalone("ioredis", server.port, options), async (conn) => {
          const rl = new Limiter(conn.client);
          assertDecision(await rl.fixed(key("proto"), 5, 60), { allowed: true, count: 1, limit: 5, resetAfterMs: 60000 });
          const all = await rl.all([Fixed(key("proto"), 1, 1), Token(key("proto"), 2 ** 50, "1s")]);
          assert.deepEqual(all.decisions.map((d) => d.limit), [1, 2 ** 50]);
        });
      });
    }

    it("node-redis client pool", async () => {
      const pool = createClientPool({ url: `redis://127.0.0.1:${server.port}` }, { maximum: 4 });
      pool.on("error", () => {});
      await pool.connect();
      try {
        const rl = new Limiter(pool);
        assert.equal(rl.clientKind, "node-redis");
        const k = key("pool");
        const results = await Promise.all(Array.from({ length: 40 }, () => rl.fixed(k, 25, 60)));
        assert.equal(results.filter((d) => d.allowed).length, 25);
      } finally {
        pool.destroy();
      }
    });

    it("node-redis with RESP3", async () => {
      await withConnection(connectStandalone("node-redis", server.port, { resp3: true }), async (conn) => {
        const rl = new Limiter(conn.client);
        assertDecision(await rl.token(key("resp3"), 5, 1), { allowed: true, count: 1, limit: 5 });
        const all = await rl.all([Fixed(key("resp3"), 1, 1)]);
        assert.equal(all.allowed, true);
      });
    });
  });
}
});
