/**
 * The breaker (docs/http.md, Fail modes) on its own clock: its back-off
 * (1 s, doubled per failed probe, at most 30 s), one probe at a time, and
 * which errors open it. The conformance cases check it over HTTP with a
 * Redis that hangs.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { BACKOFF_MAX_MS, Breaker, unavailable } from "../src/http/breaker.js";
import { NoAnswer } from "../src/http/decide.js";

class ReplyError extends Error {}

describe("the breaker", () => {
  it("opens on a failure, lets one probe through per back-off, doubles it up to 30 s, and closes on an answer", () => {
    let now = 0;
    const b = new Breaker(() => now);
    assert.equal(b.asks(), true);
    b.ended(new NoAnswer("no answer within 250 ms"));
    assert.equal(b.asks(), false, "open: the fail mode at once");
    now = 999;
    assert.equal(b.asks(), false);
    now = 1000;
    assert.equal(b.asks(), true, "the probe");
    assert.equal(b.asks(), false, "one probe at a time");
    b.ended(new Error("connect ECONNREFUSED"));
    now = 2999;
    assert.equal(b.asks(), false, "the back-off doubled to 2 s");
    let backoff = 2000;
    for (let i = 0; i < 10; i++) {
      now += backoff;
      assert.equal(b.asks(), true);
      b.ended(new NoAnswer("no answer"));
      backoff = Math.min(backoff * 2, BACKOFF_MAX_MS);
    }
    now += BACKOFF_MAX_MS - 1;
    assert.equal(b.asks(), false, "capped at 30 s");
    now += 1;
    assert.equal(b.asks(), true);
    b.ended(undefined);
    assert.equal(b.asks(), true, "closed");
    assert.equal(b.asks(), true);
    b.ended(new NoAnswer("no answer"));
    now += 999;
    assert.equal(b.asks(), false, "the back-off starts from 1 s again");
    now += 1;
    assert.equal(b.asks(), true);
  });

  it("a request sent before it opened that fails is no probe; an error reply closes it, as any answer", () => {
    let now = 0;
    const b = new Breaker(() => now);
    b.ended(new NoAnswer("first"));
    b.ended(new NoAnswer("sent before it opened"));
    now = 1000;
    assert.equal(b.asks(), true, "the back-off is still 1 s");
    const wrongType = new ReplyError("WRONGTYPE Operation against a key holding the wrong kind of value");
    Object.defineProperty(wrongType, "name", { value: "ReplyError" });
    b.ended(wrongType);
    assert.equal(b.asks(), true);
  });

  it("tells Redis failing from Redis answering that the call was wrong", () => {
    const reply = (message: string) => Object.assign(new ReplyError(message), { name: "ReplyError" });
    assert.equal(unavailable(reply("WRONGTYPE Operation against a key holding the wrong kind of value")), false);
    assert.equal(unavailable(reply("ERR limit must be an integer")), false);
    assert.equal(unavailable(reply("LOADING Redis is loading the dataset in memory")), true);
    assert.equal(unavailable(reply("CLUSTERDOWN The cluster is down")), true);
    assert.equal(unavailable(new NoAnswer("no answer within 250 ms")), true);
    assert.equal(unavailable(new Error("Connection is closed.")), true);
  });
});
