/** Unit tests: argument vectors, client-side checks, slots, the denial cache's clock. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import * as args from "../src/args.js";
import { DenialCache } from "../src/cache.js";
import Redis, { Cluster } from "ioredis";
import Redis5 from "ioredis5";
import { createClient, createCluster } from "redis";
import { Concurrent, Fixed, Limiter, Sliding, Token, keySlot, type Decision } from "../src/index.js";
import { isTryAgain, withOverride } from "../src/split.js";
import { crc16 } from "../src/slot.js";
import { redis4 } from "./clients.js";
import { parseAllDecision, parseAllOne, parseDecision, parseOverrideInfo, parseOverrideList } from "../src/reply.js";

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

describe("RL.CONCURRENT argv", () => {
  it("acquire: limit, lease, then COST, WAIT, OVERRIDE, PEEK", () => {
    assert.deepEqual(argv(args.acquireCall("llm:{k}", 5, "60s", undefined)), ["RL.CONCURRENT", "llm:{k}", "5", "60s"]);
    assert.deepEqual(
      argv(args.acquireCall("c", 5, 30, { cost: 2, wait: "10s", override: "o", peek: true }), "p:"),
      ["RL.CONCURRENT", "p:c", "5", "30", "COST", "2", "WAIT", "10s", "OVERRIDE", "p:o", "PEEK"],
    );
  });
  it("RELEASE repeats the lease's limit, RENEW its override too, with the id", () => {
    const limit = args.acquireCall("c", 5, "1m", { cost: 2, wait: 0, override: "o" });
    assert.deepEqual(argv(args.leaseActionCall(limit, "RELEASE", 1754500000123001)), [
      "RL.CONCURRENT", "c", "5", "1m", "RELEASE", "1754500000123001",
    ]);
    assert.deepEqual(argv(args.leaseActionCall(limit, "RENEW", 7)), ["RL.CONCURRENT", "c", "5", "1m", "RENEW", "7", "OVERRIDE", "o"]);
    assert.deepEqual(argv(args.leaseActionCall(Concurrent("c", 5, 30), "RENEW", 2 ** 53 - 1)), [
      "RL.CONCURRENT", "c", "5", "30", "RENEW", "9007199254740991",
    ]);
  });
  it("the RL.ALL clause takes cost and override, not wait or peek", () => {
    assert.deepEqual(args.allArgv([Fixed("{u}:m", 10, 60), Concurrent("{u}:c", 2, "5m", { cost: 1, override: "{u}:o" })], false, ""), [
      "RL.ALL", "FIXED", "{u}:m", "10", "60", "CONCURRENT", "{u}:c", "2", "5m", "COST", "1", "OVERRIDE", "{u}:o",
    ]);
    assert.throws(() => Concurrent("c", 2, 60, { wait: 1 } as never), /Concurrent\(\): unknown option "wait"/);
    assert.throws(() => Concurrent("c", 2, 60, { peek: true } as never), /unknown option "peek"/);
  });
  it("type mistakes name the argument", () => {
    assert.throws(() => args.acquireCall("c", "5", 60, {}), /acquire\(\): limit must be an integer number/);
    assert.throws(() => args.acquireCall("c", 5, 1.5, {}), /acquire\(\): lease must be an integer number of seconds/);
    assert.throws(() => args.acquireCall("c", 5, 60, { block: "1m" }), /unknown option "block"/);
    assert.throws(() => args.acquireCall("c", 5, 60, { refund: 1 }), /unknown option "refund"/);
  });
});

describe("a clause read back (the split on TRYAGAIN)", () => {
  const o = { limit: 7, windowMs: 90_000, burst: 0, ttlMs: -1 };
  it("options after the positionals, flags without a value", () => {
    assert.deepEqual(args.clauseOptions(Token("t", 10, "1s", { burst: 20, cost: 2, wait: "1s" }).args), [
      ["BURST", "20"], ["COST", "2"], ["WAIT", "1s"],
    ]);
    assert.deepEqual(args.clauseOptions(Fixed("f", 1, 1, { aligned: true, block: 5 }).args), [["ALIGNED", undefined], ["BLOCK", "5"]]);
    assert.equal(args.clauseOption(Fixed("f", 1, 1, { cost: 0 }), "COST"), "0");
    assert.equal(args.durationMs("1500ms"), 1500);
    assert.equal(args.durationMs("2"), 2000);
    assert.equal(args.durationMs("1H"), 3_600_000);
    assert.equal(args.durationMs("soon"), undefined);
  });
  it("an override's limit and window replace the call's own; a token bucket's capacity is the override's burst or its limit", () => {
    assert.deepEqual(withOverride(Fixed("f", 1, 60, { aligned: true, cost: 2, override: "o" }), o), {
      algorithm: "FIXED", key: "f", args: ["7", "90000ms", "ALIGNED", "COST", "2"], override: undefined, refund: false,
    });
    assert.deepEqual(withOverride(Token("t", 10, "1s", { burst: 50, override: "o" }), o).args, ["7", "90000ms"]);
    assert.deepEqual(withOverride(Token("t", 10, "1s", { override: "o" }), { ...o, burst: 30 }).args, [
      "7", "90000ms", "BURST", "30",
    ]);
    assert.deepEqual(withOverride(args.acquireCall("c", 2, "1m", { wait: 5, override: "o" }), o).args, [
      "7", "90000ms", "WAIT", "5",
    ]);
    assert.deepEqual(withOverride(Sliding("s", 3, 60, { approx: true, override: "o" }), null).args, ["3", "60", "APPROX"]);
    assert.equal(withOverride(Sliding("s", 3, 60, { override: "o" }), null).override, undefined);
  });
  it("TRYAGAIN, also as ioredis's last redirection error", () => {
    assert.equal(isTryAgain(new Error("TRYAGAIN Multiple keys request during rehashing of slot")), true);
    assert.equal(
      isTryAgain(new Error("Too many Cluster redirections. Last error: ReplyError: TRYAGAIN Multiple keys request during rehashing of slot")),
      true,
    );
    assert.equal(isTryAgain(new Error("Too many Cluster redirections. Last error: ReplyError: MOVED 1 127.0.0.1:1")), false);
    assert.equal(isTryAgain(new Error("ERR TRYAGAIN is not an option")), false);
    assert.equal(isTryAgain("TRYAGAIN"), false);
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
      allowed: true, count: 1, retryAfterMs: 0, limit: 10, remaining: 9, resetAfterMs: 60000, leaseId: 0,
    });
    assert.deepEqual(parseDecision([0, 3, -1, 3, 0, 5], "x").retryAfterMs, -1);
    assert.throws(() => parseDecision("OK", "RL.FIXED"), /unexpected reply to RL.FIXED/);
    const all = parseAllDecision([0, 50, [1, 1, 0, 5, 4, 10], [0, 5, 50, 5, 0, 50]], 2);
    assert.equal(all.allowed, false);
    assert.equal(all.retryAfterMs, 50);
    assert.equal(all.decisions.length, 2);
    assert.equal(all.decisions[1]!.allowed, false);
    assert.throws(() => parseAllDecision([1, 0, [1, 1, 0, 5, 4, 10]], 2), /RL.ALL/);
    assert.throws(() => parseDecision([1, 1, 0, 10, 9], "RL.FIXED"), /unexpected reply to RL.FIXED/);
  });
  it("RL.ALL of one clause read as its decision; a short, malformed or self-contradicting reply is unexpected", () => {
    assert.deepEqual(parseAllOne([0, 50, [0, 5, 50, 5, 0, 50], "more"]), {
      allowed: false, count: 5, retryAfterMs: 50, limit: 5, remaining: 0, resetAfterMs: 50, leaseId: 0,
    });
    assert.equal(parseAllOne(["1", "0", ["1", "1", "0", "5", "4", "10"]]).remaining, 4);
    assert.throws(() => parseAllOne([1, 0]), /unexpected reply to RL.ALL/);
    assert.throws(() => parseAllOne([1, "x", [1, 1, 0, 5, 4, 10]]), /unexpected reply to RL.ALL/);
    assert.throws(() => parseAllOne([1, 0, [1, 1, 0, 5, 4]]), /unexpected reply to RL.ALL/);
    assert.throws(() => parseAllOne([1, 0, [0, 5, 50, 5, 0, 50]]), /unexpected reply to RL.ALL/);
    assert.throws(() => parseAllOne([0, 50, [1, 1, 0, 5, 4, 10]]), /unexpected reply to RL.ALL/);
  });
  it("RL.CONCURRENT's seventh integer is the lease id, exact up to 2^53 - 1", () => {
    assert.equal(parseDecision([1, 1, 0, 2, 1, 30000, 1754500000123001], "x").leaseId, 1754500000123001);
    assert.equal(parseDecision([1, 1, 0, 2, 1, 30000, "9007199254740991"], "x").leaseId, 2 ** 53 - 1);
    assert.equal(parseDecision([1, 1, 0, 2, 1, 30000, 9007199254740991n], "x").leaseId, 2 ** 53 - 1);
    const all = parseAllDecision([1, 0, [1, 1, 0, 5, 4, 10], [1, 1, 0, 2, 1, 30000, 77]], 2);
    assert.deepEqual(all.decisions.map((d) => d.leaseId), [0, 77]);
  });
  it("replies longer than the package knows: the known fields read, the rest ignored", () => {
    // A later module may add fields at the end (docs/commands.md, The limiter reply).
    assert.deepEqual(parseDecision([0, 3, 500, 3, 0, 500, 0, 42, "new"], "x"), {
      allowed: false, count: 3, retryAfterMs: 500, limit: 3, remaining: 0, resetAfterMs: 500, leaseId: 0,
    });
    const all = parseAllDecision([1, 0, [1, 1, 0, 5, 4, 10, 0, 9], [1, 2, 0, 5, 3, 10, 0], "more"], 2);
    assert.deepEqual(all.decisions.map((d) => d.count), [1, 2]);
    assert.deepEqual(parseOverrideInfo([5000, 60000, 0, -1, 1]), { limit: 5000, windowMs: 60000, burst: 0, ttlMs: -1 });
    assert.deepEqual(parseOverrideList(["0", [["o", 5, 1000, 7, 99, "x"]], "extra"]).overrides, [
      { okey: "o", limit: 5, windowMs: 1000, burst: 7, ttlMs: 99 },
    ]);
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
    allowed: false, count: 5, retryAfterMs: retry, limit: 5, remaining: 0, resetAfterMs: reset, leaseId: 0,
  });
  /** A cache on a clock the test moves. */
  const withClock = (maxEntries?: number, maxAgeMs?: number) => {
    const clock = { ms: 1000 };
    const options = { ...(maxEntries === undefined ? {} : { maxEntries }), ...(maxAgeMs === undefined ? {} : { maxAgeMs }) };
    const cache = new DenialCache(options, () => clock.ms);
    return { clock, cache };
  };

  it("keeps only denials with retryAfterMs > 0", () => {
    const { cache } = withClock();
    cache.offer("a", ["k"], { ...denied(100), allowed: true, retryAfterMs: 0 }, cache.ticket());
    cache.offer("b", ["k"], denied(-1), cache.ticket());
    cache.offer("c", ["k"], denied(0), cache.ticket());
    assert.equal(cache.size, 0);
    cache.offer("d", ["k"], denied(100), cache.ticket());
    assert.equal(cache.size, 1);
  });
  it("ages retryAfterMs and resetAfterMs, rounding up, and expires", () => {
    const { clock, cache } = withClock();
    cache.offer("a", ["k"], denied(40, 60), cache.ticket());
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
  it("keeps a denial at most its max age (1 s by default), however long its retryAfterMs", () => {
    const { clock, cache } = withClock();
    cache.offer("block", ["k"], denied(3_600_000), cache.ticket());
    clock.ms += 999;
    assert.equal((cache.get("block") as Decision).retryAfterMs, 3_600_000 - 999);
    clock.ms += 1;
    assert.equal(cache.get("block"), undefined);
    const short = withClock(undefined, 200);
    short.cache.offer("block", ["k"], denied(3_600_000), short.cache.ticket());
    short.clock.ms += 199;
    assert.notEqual(short.cache.get("block"), undefined);
    short.clock.ms += 1;
    assert.equal(short.cache.get("block"), undefined);
    const none = withClock(undefined, 0);
    none.cache.offer("block", ["k"], denied(3_600_000), none.cache.ticket());
    assert.equal(none.cache.size, 0, "maxAgeMs 0 caches nothing");
  });
  it("counts an entry's life from when the call was sent, and ages its waits from when the reply came", () => {
    const { clock, cache } = withClock();
    const ticket = cache.ticket();
    clock.ms += 30; // the reply took 30 ms to come back
    cache.offer("a", ["k"], denied(40), ticket);
    assert.equal((cache.get("a") as Decision).retryAfterMs, 40, "never a shorter wait than the server's");
    clock.ms += 9;
    assert.equal((cache.get("a") as Decision).retryAfterMs, 31);
    clock.ms += 1;
    assert.equal(cache.get("a"), undefined, "gone when the server's denial may have ended");
    const late = cache.ticket();
    clock.ms += 50;
    cache.offer("b", ["k"], denied(40), late);
    assert.equal(cache.size, 0, "a reply slower than its own denial is not kept");
  });
  it("keeps an RL.ALL denial until the first denying clause could change its answer", () => {
    const { clock, cache } = withClock();
    const all = { allowed: false, retryAfterMs: 100, decisions: [denied(20), denied(100), { ...denied(0), allowed: true }] };
    cache.offer("all", ["a", "b", "c"], all, cache.ticket());
    clock.ms += 19;
    assert.notEqual(cache.get("all"), undefined);
    clock.ms += 1;
    assert.equal(cache.get("all"), undefined);
    cache.offer("never", ["a", "b"], { ...all, decisions: [denied(-1), denied(100)] }, cache.ticket());
    assert.equal(cache.size, 0, "a clause no wait helps is never cached");
  });
  it("refuses a malformed option, naming it", () => {
    assert.throws(() => new DenialCache({ maxAgeMs: -1 }), /maxAgeMs/);
    assert.throws(() => new DenialCache({ maxAgeMs: 1.5 }), /maxAgeMs/);
    assert.throws(() => new DenialCache({ maxAge: 1 } as never), /unknown option "maxAge"/);
  });
  it("ages RL.ALL replies clause by clause", () => {
    const { clock, cache } = withClock();
    cache.offer(
      "all",
      ["a", "b"],
      { allowed: false, retryAfterMs: 50, decisions: [{ ...denied(0, 10), allowed: true }, denied(50, 80)] },
      cache.ticket(),
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
    const before = cache.ticket();
    cache.clearKey("other");
    cache.offer("a", ["k"], denied(1000), before);
    assert.equal(cache.size, 0);
    const again = cache.ticket();
    cache.clear();
    cache.offer("a", ["k"], denied(1000), again);
    assert.equal(cache.size, 0);
    cache.offer("a", ["k"], denied(1000), cache.ticket());
    assert.equal(cache.size, 1);
  });
  it("clearKey drops every entry involving the key; clear drops all", () => {
    const { cache } = withClock();
    cache.offer("1", ["a"], denied(1000), cache.ticket());
    cache.offer("2", ["a", "b"], denied(1000), cache.ticket());
    cache.offer("3", ["b"], denied(1000), cache.ticket());
    cache.clearKey("a");
    assert.equal(cache.get("1"), undefined);
    assert.equal(cache.get("2"), undefined);
    assert.notEqual(cache.get("3"), undefined);
    cache.clear();
    assert.equal(cache.size, 0);
  });
  it("is bounded: expired entries go first, then the oldest", () => {
    const { clock, cache } = withClock(3);
    cache.offer("short", ["s"], denied(1), cache.ticket());
    cache.offer("x", ["x"], denied(10_000), cache.ticket());
    cache.offer("y", ["y"], denied(10_000), cache.ticket());
    clock.ms += 2;
    cache.offer("z", ["z"], denied(10_000), cache.ticket());
    assert.equal(cache.size, 3);
    assert.notEqual(cache.get("x"), undefined);
    cache.offer("w", ["w"], denied(10_000), cache.ticket());
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
