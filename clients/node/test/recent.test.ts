/**
 * The HTTP integrations' per-request cache (src/http/recent.ts): a key is
 * kept on its second coming, in its hash's slot; a key seen once keeps
 * nothing and evicts nothing; a lookup never answers for another key.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Recent } from "../src/http/recent.js";

describe("Recent", () => {
  it("keeps a key on its second coming, not its first", () => {
    const recent = new Recent<number>(8);
    assert.equal(recent.get("a"), undefined);
    recent.offer("a", 1);
    assert.equal(recent.get("a"), undefined, "seen once: nothing kept");
    recent.offer("a", 2);
    assert.equal(recent.get("a"), 2);
  });

  it("a flood of keys seen once evicts no kept key, and no key is answered for another", () => {
    const recent = new Recent<string>(4);
    const kept = ["k0", "k1", "k2", "k3", "k4", "k5"];
    for (const k of kept) {
      recent.offer(k, `value of ${k}`);
      recent.offer(k, `value of ${k}`);
    }
    const before = kept.filter((k) => recent.get(k) !== undefined);
    assert.ok(before.length >= 1);
    for (let i = 0; i < 10_000; i++) {
      const key = `once-${i}`;
      assert.equal(recent.get(key), undefined);
      recent.offer(key, `value of ${key}`);
    }
    for (const k of kept) assert.equal(recent.get(k), before.includes(k) ? `value of ${k}` : undefined, k);
  });

  it("two keys of one slot take it in turn, each answered only with its own value", () => {
    const recent = new Recent<string>(1);
    for (let i = 0; i < 3; i++) {
      for (const k of ["x", "y"]) {
        const found = recent.get(k);
        assert.ok(found === undefined || found === k, k);
        if (found === undefined) {
          recent.offer(k, k);
          recent.offer(k, k);
        }
        assert.equal(recent.get(k), k);
      }
    }
  });

  it("a size that is not a power of two is refused", () => {
    assert.throws(() => new Recent(0), RangeError);
    assert.throws(() => new Recent(48), RangeError);
  });
});
