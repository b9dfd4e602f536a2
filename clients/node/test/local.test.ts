/**
 * The `local` fail mode's limiter (docs/http.md, Fail modes), without
 * Redis: all-or-nothing checks, concurrency slots, the key bound, and bad
 * input refused before anything changes. Its decisions against
 * librl-core's are conformance/vectors/algorithms.json, run by
 * vectors.test.ts.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Algorithm, Clause } from "../src/args.js";
import { LocalLimiter } from "../src/http/local.js";

/** A clause as decide.ts builds it: limit, window, options, COST. */
function clause(algorithm: Algorithm, key: string, limit: number, window: string, options: readonly string[] = [], cost = 1): Clause {
  return { algorithm, key, args: [String(limit), window, ...options, "COST", String(cost)], override: undefined, refund: false };
}
const fixed = (key: string, limit: number, window: string, cost = 1): Clause => clause("FIXED", key, limit, window, [], cost);
const slots = (key: string, limit: number, lease: string): Clause => clause("CONCURRENT", key, limit, lease);

function counts(local: LocalLimiter, clauses: readonly Clause[], nowMs: number): number[] {
  return local.check(clauses, { peek: true, nowMs }).decisions.map((d) => d.count);
}

describe("the local limiter", () => {
  it("counts a request one clause refuses by none", () => {
    const local = new LocalLimiter(100);
    const minute = fixed("m", 10, "60s");
    const burst = fixed("b", 1, "10s");
    const first = local.check([minute, burst], { nowMs: 1000 });
    assert.ok(first.allowed);
    assert.deepEqual(first.decisions.map((d) => d.count), [1, 1]);
    for (const nowMs of [1001, 2000, 3000]) {
      const all = local.check([minute, burst], { nowMs });
      assert.ok(!all.allowed);
      assert.ok(all.decisions[0]?.allowed, "the minute clause alone admits");
      assert.equal(all.retryAfterMs, all.decisions[1]?.retryAfterMs);
    }
    assert.equal(local.check([minute], { nowMs: 3000 }).decisions[0]?.count, 2);
    assert.equal(local.check([minute, burst], { nowMs: 10_999 }).retryAfterMs, 1);
    assert.ok(local.check([minute, burst], { nowMs: 11_000 }).allowed);
  });

  it("answers the longest wait, and never longest of all", () => {
    const local = new LocalLimiter(10);
    const pair = [fixed("a", 1, "1s"), fixed("b", 1, "5s")];
    assert.ok(local.check(pair, { nowMs: 0 }).allowed);
    assert.equal(local.check(pair, { nowMs: 0 }).retryAfterMs, 5000);
    const never = local.check([fixed("a", 1, "1s"), fixed("c", 1, "1s", 2)], { nowMs: 0 });
    assert.equal(never.retryAfterMs, -1);
    assert.equal(never.decisions[1]?.remaining, 1);
  });

  it("peeks without recording", () => {
    const local = new LocalLimiter(10);
    for (let i = 0; i < 3; i++) assert.equal(local.check([fixed("k", 1, "1s")], { peek: true, nowMs: 0 }).decisions[0]?.count, 1);
    assert.equal(local.size, 0);
  });

  it("fills then refuses with every algorithm", () => {
    const cases: [Clause, number][] = [
      [fixed("f", 3, "60s"), 3],
      [clause("SLIDING", "s", 3, "60s"), 3],
      [clause("SLIDING", "a", 3, "60s", ["APPROX"]), 3],
      [clause("TOKEN", "t", 3, "60s", ["BURST", "5"]), 5],
      [slots("c", 2, "60s"), 2],
    ];
    for (const [c, admitted] of cases) {
      const local = new LocalLimiter(10);
      for (let i = 0; i < admitted; i++) assert.ok(local.check([c], { nowMs: 1000 }).allowed, `${c.key} call ${i}`);
      const refused = local.check([c], { nowMs: 1000 });
      assert.ok(!refused.allowed, c.key);
      assert.equal(refused.decisions[0]?.remaining, 0);
    }
  });

  it("holds concurrency slots until released or ended", () => {
    const local = new LocalLimiter(10);
    const c = slots("c", 2, "10s");
    const a = local.check([c], { nowMs: 5 }).decisions[0];
    const b = local.check([c], { nowMs: 6 }).decisions[0];
    assert.deepEqual([a?.leaseId, b?.leaseId], [5001, 5002]);
    const full = local.check([c], { nowMs: 7 }).decisions[0];
    assert.deepEqual([full?.allowed, full?.leaseId, full?.retryAfterMs], [false, 0, 9998]);
    assert.ok(local.release(c, 5001, 8));
    assert.ok(!local.release(c, 5001, 8), "released once");
    const d = local.check([c], { nowMs: 9 }).decisions[0];
    assert.deepEqual([d?.allowed, d?.count, d?.leaseId], [true, 2, 5003]);
    assert.ok(!local.release(c, 5002, 10_006), "a lease that ended frees nothing");
    assert.equal(local.check([c], { nowMs: 10_006 }).decisions[0]?.count, 2);
  });

  it("takes no slot for a refused request", () => {
    const local = new LocalLimiter(10);
    const once = fixed("f", 1, "10s");
    assert.ok(local.check([slots("c", 1, "10s"), once], { nowMs: 0 }).allowed);
    const refused = local.check([slots("d", 1, "10s"), once], { nowMs: 1 });
    assert.ok(!refused.allowed);
    assert.ok(refused.decisions[0]?.allowed);
    assert.equal(refused.decisions[0]?.leaseId, 0, "nothing taken");
    assert.ok(local.check([slots("d", 1, "10s")], { nowMs: 2 }).allowed);
  });

  it("drops a key released empty, whose next ids stay above the old ones", () => {
    const local = new LocalLimiter(10);
    const c = slots("c", 1, "10s");
    const id = local.check([c], { nowMs: 100 }).decisions[0]?.leaseId ?? 0;
    assert.ok(local.release(c, id, 200));
    assert.equal(local.size, 0);
    assert.equal(local.check([c], { nowMs: 200 }).decisions[0]?.leaseId, 200_001);
  });

  it("evicts the keys closest to expiry when full, expired ones first", () => {
    const local = new LocalLimiter(20);
    for (let i = 0; i < 10; i++) {
      local.check([fixed(`short${i}`, 5, "1s")], { nowMs: 0 });
      local.check([fixed(`long${i}`, 5, "1h")], { nowMs: 0 });
    }
    assert.equal(local.size, 20);
    local.check([fixed("new", 5, "60s")], { nowMs: 0 });
    assert.equal(local.size, 11, "the tenth closest to expiry and its equals went");
    assert.deepEqual(counts(local, [fixed("long0", 5, "1h"), fixed("short0", 5, "1s")], 0), [2, 1]);
    local.check(Array.from({ length: 9 }, (_, i) => fixed(`x${i}`, 5, "60s")), { nowMs: 0 });
    assert.equal(local.size, 20);
    local.check([fixed("one-more", 5, "60s")], { nowMs: 60_000 });
    assert.equal(local.size, 11, "the expired keys went, nothing live");
    assert.deepEqual(counts(local, Array.from({ length: 10 }, (_, i) => fixed(`long${i}`, 5, "1h")), 60_000), Array(10).fill(2));
  });

  it("never evicts a key for itself", () => {
    const local = new LocalLimiter(1);
    assert.ok(local.check([fixed("a", 2, "60s")], { nowMs: 0 }).allowed);
    assert.equal(local.check([fixed("a", 2, "60s")], { nowMs: 0 }).decisions[0]?.count, 2);
    assert.ok(local.check([fixed("b", 2, "60s")], { nowMs: 0 }).allowed);
    assert.equal(local.size, 1);
    assert.deepEqual(counts(local, [fixed("a", 2, "60s")], 0), [1], "a was evicted: afresh");
  });

  it("starts afresh when a key's algorithm changed, and rescales a token window", () => {
    const local = new LocalLimiter(10);
    assert.ok(local.check([fixed("k", 1, "60s")], { nowMs: 0 }).allowed);
    assert.ok(local.check([clause("TOKEN", "k", 1, "60s")], { nowMs: 0 }).allowed);
    assert.ok(local.check([clause("TOKEN", "t", 4, "1s", [], 2)], { nowMs: 0 }).allowed);
    const d = local.check([clause("TOKEN", "t", 4, "2s")], { nowMs: 0 }).decisions[0];
    assert.deepEqual([d?.count, d?.remaining, d?.resetAfterMs], [3, 1, 1500]);
  });

  it("stands still when the clock steps back, and reads the wall clock without nowMs", () => {
    const local = new LocalLimiter(10);
    assert.ok(local.check([fixed("k", 2, "1s")], { nowMs: 5000 }).allowed);
    const d = local.check([fixed("k", 2, "1s")], { nowMs: 10 }).decisions[0];
    assert.deepEqual([d?.allowed, d?.count, d?.resetAfterMs], [true, 2, 1000]);
    assert.ok(local.check([fixed("w", 1, "60s")]).allowed);
    assert.ok(!local.check([fixed("w", 1, "60s")]).allowed);
    const id = local.check([slots("c", 1, "60s")]).decisions[0]?.leaseId ?? 0;
    assert.ok(local.release(slots("c", 1, "60s"), id));
  });

  it("saturates a reply's integers as the module does", () => {
    // 2^50 tokens refilled at 1 per 3650 days: full again after ~2^88 ms.
    const local = new LocalLimiter(10);
    const d = local.check([clause("TOKEN", "k", 1, "3650d", ["BURST", String(2 ** 50)], 2 ** 50)], { nowMs: 0 }).decisions[0];
    assert.deepEqual([d?.allowed, d?.count, d?.resetAfterMs], [true, 2 ** 50, Number(2n ** 63n - 1n)]);
  });

  it("reads no override, block or reservation", () => {
    const local = new LocalLimiter(10);
    const t: Clause = { ...clause("TOKEN", "k", 1, "60s", ["RESERVE", "10s", "BLOCK", "1m"]), override: "okey" };
    assert.ok(local.check([t], { nowMs: 0 }).allowed);
    const d = local.check([t], { nowMs: 0 }).decisions[0];
    assert.deepEqual([d?.allowed, d?.retryAfterMs], [false, 60_000], "no turn booked");
  });

  it("refuses bad input before anything changes", () => {
    const bad: Clause[] = [
      fixed("k", 0, "60s"),
      fixed("k", 2 ** 50 + 1, "60s"),
      fixed("k", 1, "0ms"),
      fixed("k", 1, "3651d"),
      fixed("k", 1, "soon"),
      fixed("k", 1, "60s", 0),
      { ...fixed("k", 1, "60s"), refund: true },
      clause("TOKEN", "k", 1, "60s", ["BURST", "0"]),
      clause("CONCURRENT", "k", 1, "60s", [], 2 ** 51),
    ];
    for (const c of bad) {
      const local = new LocalLimiter(10);
      assert.throws(() => local.check([fixed("good", 1, "60s"), c], { nowMs: 0 }), RangeError, JSON.stringify(c.args));
      assert.equal(local.size, 0);
    }
    const local = new LocalLimiter(10);
    assert.throws(() => local.check([fixed("k", 1, "60s")], { nowMs: -1 }), RangeError);
    assert.throws(() => local.check([fixed("k", 1, "60s")], { nowMs: 1.5 }), RangeError);
    assert.throws(() => local.release(fixed("k", 1, "60s"), 1), RangeError);
    assert.throws(() => new LocalLimiter(Number.NaN), RangeError);
    assert.equal(local.size, 0);
  });
});
