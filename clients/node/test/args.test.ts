/** Unit tests: argument vectors, client-side checks, slots, the denial cache's clock. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import * as args from "../src/args.js";
import { DenialCache } from "../src/cache.js";
import Redis, { Cluster } from "ioredis";
import Redis5 from "ioredis5";
import { createClient, createCluster } from "redis";
import { Fixed, Limiter, Sliding, Token, keySlot, type Decision } from "../src/index.js";
import { crc16 } from "../src/slot.js";
import { redis4 } from "./clients.js";
import { parseAllDecision, parseDecision, parseOverrideInfo, parseOverrideList } from "../src/reply.js";

const argv = (call: Parameters<typeof args.limiterArgv>[0], prefix = "") => args.limiterArgv(call, prefix);

describe("RL.FIXED argv", () => {
  it("positional arguments only", () => {
    assert.deepEqual(argv(args.fixedCall("k", 10, 60, undefined)), ["RL.FIXED", "k", "10", "60"]);
    assert.deepEqual(argv(args.fixedCall("k", 10, "1500ms", {})), ["RL.FIXED", "k", "10", "1500ms"]);
  });
  it("every option, in a fixed order", () => {
    assert.deepEqual(
      argv(args.fixedCall("k", 5, "15m", { aligned: true, cost: 2, block: "1h", override: "o", peek: true })),
      ["RL.FIXED", "k", "5", "15m", "ALIGNED", "COST", "2", "BLOCK", "1h", "OVERRIDE", "o", "PEEK"],
    );
    assert.deepEqual(argv(args.fixedCall("k", 5, 60, { refund: 3 })), ["RL.FIXED", "k", "5", "60", "REFUND", "3"]);
  });
  it("false and undefined options are left out", () => {
    assert.deepEqual(
      argv(args.fixedCall("k", 5, 60, { aligned: false, peek: false, cost: undefined, override: undefined })),
      ["RL.FIXED", "k", "5", "60"],
    );
  });
  it("a key prefix applies to key and okey", () => {
    assert.deepEqual(argv(args.fixedCall("k", 5, 60, { override: "o" }), "app:"), [
      "RL.FIXED", "app:k", "5", "60", "OVERRIDE", "app:o",
    ]);
    assert.deepEqual(args.clauseKeys(args.fixedCall("k", 5, 60, { override: "o" }), "app:"), ["app:k", "app:o"]);
    assert.deepEqual(args.clauseKeys(args.fixedCall("k", 5, 60, {}), ""), ["k"]);
  });
});

describe("RL.SLIDING and RL.TOKEN argv", () => {
  it("sliding with approx and every common option", () => {
    assert.deepEqual(
      argv(args.slidingCall("s", 30, 60, { approx: true, cost: 4, block: 10, override: "o", peek: true })),
      ["RL.SLIDING", "s", "30", "60", "APPROX", "COST", "4", "BLOCK", "10", "OVERRIDE", "o", "PEEK"],
    );
    assert.deepEqual(argv(args.slidingCall("s", 30, "1m", { refund: 1 })), ["RL.SLIDING", "s", "30", "1m", "REFUND", "1"]);
  });
  it("token with burst, reserve, wait, block", () => {
    assert.deepEqual(
      argv(args.tokenCall("t", 10, "1s", { burst: 50, cost: 5, reserve: "200ms", block: "1m", override: "o", peek: true })),
      ["RL.TOKEN", "t", "10", "1s", "BURST", "50", "COST", "5", "RESERVE", "200ms", "BLOCK", "1m", "OVERRIDE", "o", "PEEK"],
    );
    assert.deepEqual(argv(args.tokenCall("t", 10, 1, { wait: 0 })), ["RL.TOKEN", "t", "10", "1", "WAIT", "0"]);
    assert.deepEqual(argv(args.tokenCall("t", 10, 1, { refund: 2, burst: 20 })), [
      "RL.TOKEN", "t", "10", "1", "BURST", "20", "REFUND", "2",
    ]);
  });
  it("large integers up to 2^50 are sent exactly", () => {
    assert.deepEqual(argv(args.tokenCall("t", 2 ** 50, "3650d", { burst: 2 ** 50 })), [
      "RL.TOKEN", "t", "1125899906842624", "3650d", "BURST", "1125899906842624",
    ]);
  });
});

describe("RL.ALL argv", () => {
  it("clauses in order, each with its options, PEEK last", () => {
    const clauses = [
      Fixed("{u}:s", 5, 1, { aligned: true }),
      Sliding("{u}:m", 100, "1m", { approx: true, cost: 2, override: "{u}:o" }),
      Token("{u}:t", 10, "1s", { burst: 20, reserve: "1s", block: 30 }),
    ];
    assert.deepEqual(args.allArgv(clauses, true, ""), [
      "RL.ALL",
      "FIXED", "{u}:s", "5", "1", "ALIGNED",
      "SLIDING", "{u}:m", "100", "1m", "APPROX", "COST", "2", "OVERRIDE", "{u}:o",
      "TOKEN", "{u}:t", "10", "1s", "BURST", "20", "RESERVE", "1s", "BLOCK", "30",
      "PEEK",
    ]);
    assert.deepEqual(args.allArgv([Fixed("a", 1, 1, { refund: 1, override: "o" })], false, "p:"), [
      "RL.ALL", "FIXED", "p:a", "1", "1", "REFUND", "1", "OVERRIDE", "p:o",
    ]);
  });
  it("clauses are frozen and take no peek", () => {
    assert.ok(Object.isFrozen(Fixed("a", 1, 1)));
    assert.throws(() => Fixed("a", 1, 1, { peek: true } as never), /unknown option "peek"/);
    assert.equal(args.checkAllOptions({ peek: true }), true);
    assert.equal(args.checkAllOptions(undefined), false);
    assert.throws(() => args.checkAllOptions({ aligned: true }), /unknown option "aligned"/);
  });
});

describe("RL.OVERRIDE argv (container form)", () => {
  it("SET, GET, DEL, LIST", () => {
    assert.deepEqual(args.overrideSetArgv("o", 5000, "1m", { burst: 100, ttl: "24h" }, ""), [
      "RL.OVERRIDE", "SET", "o", "5000", "1m", "BURST", "100", "TTL", "24h",
    ]);
    assert.deepEqual(args.overrideSetArgv("o", 5, 60, undefined, "p:"), ["RL.OVERRIDE", "SET", "p:o", "5", "60"]);
    assert.deepEqual(args.overrideGetArgv("o", "p:"), ["RL.OVERRIDE", "GET", "p:o"]);
    assert.deepEqual(args.overrideDeleteArgv(["a", "b"], ""), ["RL.OVERRIDE", "DEL", "a", "b"]);
    assert.deepEqual(args.overrideListArgv(0, undefined), ["RL.OVERRIDE", "LIST", "0"]);
    assert.deepEqual(args.overrideListArgv("1234", { match: "rl:*", count: 50 }), [
      "RL.OVERRIDE", "LIST", "1234", "MATCH", "rl:*", "COUNT", "50",
    ]);
    assert.deepEqual(args.overrideListArgv(18446744073709551615n, {}), ["RL.OVERRIDE", "LIST", "18446744073709551615"]);
  });
  it("checks", () => {
    assert.throws(() => args.overrideDeleteArgv([], ""), /at least one okey/);
    assert.throws(() => args.overrideDeleteArgv(["a", 3], ""), /okey 1 must be a string/);
    assert.throws(() => args.overrideListArgv(-1, {}), /cursor/);
    assert.throws(() => args.overrideListArgv("abc", {}), /cursor/);
    assert.throws(() => args.overrideSetArgv("o", 5, 60, { ttl: 1.5 }, ""), /ttl must be an integer number of seconds/);
    assert.throws(() => args.overrideSetArgv("o", 5, 60, { window: 1 }, ""), /unknown option "window"/);
  });
});

describe("client-side errors", () => {
  it("type mistakes are TypeErrors naming the argument", () => {
    assert.throws(() => args.fixedCall(42, 10, 60, {}), { name: "TypeError", message: /fixed\(\): key must be a string/ });
    assert.throws(() => args.fixedCall("k", "10", 60, {}), /fixed\(\): limit must be an integer number, got the string "10"/);
    assert.throws(() => args.fixedCall("k", 1.5, 60, {}), /limit must be an integer number/);
    assert.throws(() => args.fixedCall("k", NaN, 60, {}), /limit must be an integer number/);
    assert.throws(() => args.tokenCall("k", 10, 60, { burst: "5" }), /token\(\): burst must be an integer/);
    assert.throws(() => args.fixedCall("k", 10, 1.5, {}), /window must be an integer number of seconds or a string such as "1500ms"/);
    assert.throws(() => args.fixedCall("k", 10, "", {}), /window must be/);
    assert.throws(() => args.fixedCall("k", 10, null, {}), /window must be/);
    assert.throws(() => args.fixedCall("k", 10, 60, { aligned: 1 }), /option aligned must be a boolean/);
    assert.throws(() => args.fixedCall("k", 10, 60, { override: 7 }), /option override must be a string/);
    assert.throws(() => args.fixedCall("k", 10, 60, { costs: 2 }), /unknown option "costs"/);
    assert.throws(() => args.fixedCall("k", 10, 60, { approx: true }), /unknown option "approx"/);
    assert.throws(() => args.slidingCall("k", 10, 60, { aligned: true }), /unknown option "aligned"/);
    assert.throws(() => args.fixedCall("k", 10, 60, { burst: 3 }), /unknown option "burst"/);
    assert.throws(() => args.fixedCall("k", 10, 60, { reserve: 3 }), /unknown option "reserve"/);
    assert.throws(() => args.fixedCall("k", 10, 60, "PEEK"), /options must be an object/);
    assert.throws(() => args.fixedCall("k", 10, 60, null), /options must be an object/);
  });
  it("mutually exclusive options", () => {
    assert.throws(() => args.fixedCall("k", 10, 60, { cost: 1, refund: 1 }), /cost and refund are mutually exclusive/);
    assert.throws(() => Sliding("k", 10, 60, { cost: 1, refund: 1 }), /Sliding\(\): cost and refund/);
    assert.throws(() => args.tokenCall("k", 10, 60, { reserve: 1, wait: 1 }), /reserve and wait are mutually exclusive/);
    assert.throws(() => Token("k", 10, 60, { reserve: "1s", wait: "1s" }), /Token\(\): reserve and wait/);
  });
  it("ranges are left to the server (its errors name the argument)", () => {
    assert.deepEqual(argv(args.fixedCall("k", 0, -1, { cost: 0 })), ["RL.FIXED", "k", "0", "-1", "COST", "0"]);
  });
});

describe("hash slots", () => {
  it("CRC16/XMODEM check value", () => {
    assert.equal(crc16(Buffer.from("123456789")), 0x31c3);
  });
  it("slots as Redis Cluster computes them, with hash tags", () => {
    assert.equal(keySlot("foo"), 12182);
    assert.equal(keySlot("bar"), 5061);
    assert.equal(keySlot("{user1000}.following"), keySlot("{user1000}.followers"));
    assert.equal(keySlot("{user1000}.following"), keySlot("user1000"));
    assert.equal(keySlot("foo{}{bar}"), keySlot("foo{}{bar}")); // empty tag: the whole key
    assert.notEqual(keySlot("foo{}{bar}"), keySlot("bar"));
    assert.equal(keySlot("foo{{bar}}zap"), keySlot("{bar"));
    assert.equal(keySlot("foo{bar}{zap}"), keySlot("bar"));
    assert.equal(keySlot(""), 0);
    assert.equal(keySlot("é"), keySlot(Buffer.from("é", "utf8")));
  });
});

describe("reply parsing", () => {
  it("decisions", () => {
    assert.deepEqual(parseDecision([1, 1, 0, 10, 9, 60000], "x"), {
      allowed: true, count: 1, retryAfterMs: 0, limit: 10, remaining: 9, resetAfterMs: 60000,
    });
    assert.deepEqual(parseDecision([0, 3, -1, 3, 0, 5], "x").retryAfterMs, -1);
    assert.throws(() => parseDecision("OK", "RL.FIXED"), /unexpected reply to RL.FIXED/);
    const all = parseAllDecision([0, 50, [1, 1, 0, 5, 4, 10], [0, 5, 50, 5, 0, 50]], 2);
    assert.equal(all.allowed, false);
    assert.equal(all.retryAfterMs, 50);
    assert.equal(all.decisions.length, 2);
    assert.equal(all.decisions[1]!.allowed, false);
    assert.throws(() => parseAllDecision([1, 0, [1, 1, 0, 5, 4, 10]], 2), /RL.ALL/);
  });
  it("overrides", () => {
    assert.equal(parseOverrideInfo(null), null);
    assert.deepEqual(parseOverrideInfo([5000, 60000, 0, -1]), { limit: 5000, windowMs: 60000, burst: 0, ttlMs: -1 });
    assert.deepEqual(parseOverrideList(["0", [["o", 5, 1000, 7, 99], [Buffer.from("p"), 1, 2, 0, -1]]]), {
      cursor: "0",
      overrides: [
        { okey: "o", limit: 5, windowMs: 1000, burst: 7, ttlMs: 99 },
        { okey: "p", limit: 1, windowMs: 2, burst: 0, ttlMs: -1 },
      ],
    });
  });
});

describe("denial cache", () => {
  const denied = (retry: number, reset = retry): Decision => ({
    allowed: false, count: 5, retryAfterMs: retry, limit: 5, remaining: 0, resetAfterMs: reset,
  });
  /** A cache on a clock the test moves. */
  const withClock = (maxEntries?: number) => {
    const clock = { ms: 1000 };
    const cache = new DenialCache(maxEntries === undefined ? {} : { maxEntries }, () => clock.ms);
    return { clock, cache };
  };

  it("keeps only denials with retryAfterMs > 0", () => {
    const { cache } = withClock();
    cache.offer("a", ["k"], { ...denied(100), allowed: true, retryAfterMs: 0 }, cache.generation);
    cache.offer("b", ["k"], denied(-1), cache.generation);
    cache.offer("c", ["k"], denied(0), cache.generation);
    assert.equal(cache.size, 0);
    cache.offer("d", ["k"], denied(100), cache.generation);
    assert.equal(cache.size, 1);
  });
  it("ages retryAfterMs and resetAfterMs, rounding up, and expires", () => {
    const { clock, cache } = withClock();
    cache.offer("a", ["k"], denied(40, 60), cache.generation);
    assert.deepEqual(cache.get("a"), denied(40, 60));
    clock.ms += 10.2;
    const later = cache.get("a") as Decision;
    assert.equal(later.retryAfterMs, 30); // 29.8 rounded up: never early
    assert.equal(later.resetAfterMs, 50);
    assert.equal(later.count, 5);
    clock.ms += 29.7;
    assert.equal((cache.get("a") as Decision).retryAfterMs, 1);
    clock.ms += 0.1; // 40 ms since the reply: the server admits again
    assert.equal(cache.get("a"), undefined);
    assert.equal(cache.size, 0);
  });
  it("ages RL.ALL replies clause by clause", () => {
    const { clock, cache } = withClock();
    cache.offer(
      "all",
      ["a", "b"],
      { allowed: false, retryAfterMs: 50, decisions: [{ ...denied(0, 10), allowed: true }, denied(50, 80)] },
      cache.generation,
    );
    clock.ms += 5;
    const hit = cache.get("all");
    assert.ok(hit !== undefined && "decisions" in hit);
    assert.equal(hit.retryAfterMs, 45);
    assert.deepEqual(hit.decisions.map((d) => [d.retryAfterMs, d.resetAfterMs]), [[0, 5], [45, 75]]);
    clock.ms += 20;
    const later = cache.get("all");
    assert.ok(later !== undefined && "decisions" in later);
    assert.equal(later.decisions[0]!.resetAfterMs, 0); // never below 0
  });
  it("does not keep a denial read before a refund or an override change", () => {
    const { cache } = withClock();
    const before = cache.generation;
    cache.clearKey("other");
    cache.offer("a", ["k"], denied(1000), before);
    assert.equal(cache.size, 0);
    const again = cache.generation;
    cache.clear();
    cache.offer("a", ["k"], denied(1000), again);
    assert.equal(cache.size, 0);
    cache.offer("a", ["k"], denied(1000), cache.generation);
    assert.equal(cache.size, 1);
  });
  it("clearKey drops every entry involving the key; clear drops all", () => {
    const { cache } = withClock();
    cache.offer("1", ["a"], denied(1000), cache.generation);
    cache.offer("2", ["a", "b"], denied(1000), cache.generation);
    cache.offer("3", ["b"], denied(1000), cache.generation);
    cache.clearKey("a");
    assert.equal(cache.get("1"), undefined);
    assert.equal(cache.get("2"), undefined);
    assert.notEqual(cache.get("3"), undefined);
    cache.clear();
    assert.equal(cache.size, 0);
  });
  it("is bounded: expired entries go first, then the oldest", () => {
    const { clock, cache } = withClock(3);
    cache.offer("short", ["s"], denied(1), cache.generation);
    cache.offer("x", ["x"], denied(10_000), cache.generation);
    cache.offer("y", ["y"], denied(10_000), cache.generation);
    clock.ms += 2;
    cache.offer("z", ["z"], denied(10_000), cache.generation);
    assert.equal(cache.size, 3);
    assert.notEqual(cache.get("x"), undefined);
    cache.offer("w", ["w"], denied(10_000), cache.generation);
    assert.equal(cache.size, 3);
    assert.equal(cache.get("x"), undefined);
    assert.notEqual(cache.get("w"), undefined);
    assert.throws(() => new DenialCache({ maxEntries: 0 }), /maxEntries/);
  });
});

describe("telling clients apart (client objects that are never connected)", () => {
  it("ioredis Redis and Cluster, node-redis client and cluster, v4 too", () => {
    const io = new Redis({ lazyConnect: true });
    const ioc = new Cluster([{ port: 1 }], { lazyConnect: true });
    assert.equal(new Limiter(io).clientKind, "ioredis");
    assert.equal(new Limiter(ioc).clientKind, "ioredis-cluster");
    assert.equal(new Limiter(new Redis5({ lazyConnect: true })).clientKind, "ioredis");
    assert.equal(new Limiter(createClient()).clientKind, "node-redis");
    assert.equal(new Limiter(createCluster({ rootNodes: [] })).clientKind, "node-redis-cluster");
    assert.equal(new Limiter(redis4.createClient()).clientKind, "node-redis");
    assert.equal(new Limiter(redis4.createClient({ legacyMode: true })).clientKind, "node-redis");
    assert.equal(new Limiter(redis4.createCluster({ rootNodes: [] })).clientKind, "node-redis-cluster");
    assert.equal(new Limiter(new Redis({ lazyConnect: true, keyPrefix: "a:" })).keyPrefix, "a:");
    assert.equal(new Limiter(new Cluster([], { lazyConnect: true, keyPrefix: "c:" })).keyPrefix, "c:");
    assert.equal(new Limiter(createClient({ keyPrefix: "n:" })).keyPrefix, "n:");
    io.disconnect();
    ioc.disconnect();
  });
  it("refuses what is not a client", () => {
    assert.throws(() => new Limiter({} as never), /needs an ioredis Redis or Cluster, or a node-redis client/);
    assert.throws(() => new Limiter(null as never), TypeError);
    assert.throws(() => new Limiter(new Redis({ lazyConnect: true }).pipeline() as never), /not a pipeline or MULTI/);
    assert.throws(() => new Limiter(createClient().multi() as never), /not a pipeline or MULTI/);
    const io = new Redis({ lazyConnect: true });
    assert.throws(() => new Limiter(io, { denialcache: true } as never), /unknown option "denialcache"/);
    assert.throws(() => new Limiter(io, { denialCache: "yes" } as never), /denialCache/);
    assert.throws(() => new Limiter(io, { keyPrefix: 1 } as never), /keyPrefix/);
    assert.throws(() => new Limiter(io, { ioredisCommand: {} }), /Command class/);
    io.disconnect();
  });
});
