/**
 * The integrations' own connection (src/resp.ts) against real servers:
 * the URL, the replies RL.ALL and the server's own commands give, a reply
 * split across reads, AUTH and SELECT, a dropped connection and its
 * reconnection, a time limit per command, a server that is not there,
 * close().
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { NoAnswer, ReplyError, ReplyWaiter, RespConnection, encodeCommand, parseRedisUrl } from "../src/resp.js";
import { HttpLimiter, parseConfig, type Policy, type Verdict, type VerdictTarget } from "../src/http/index.js";
import { clause, encodeAll, encodeOne } from "../src/http/decide.js";
import type { Check } from "../src/http/plan.js";
import { REDIS_SERVER, freePort, sleep, startServer, type Server } from "./helpers.js";

/** Retries `f` until it resolves, for at most `ms`. */
async function eventually<T>(f: () => Promise<T>, ms = 5000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      return await f();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(20);
    }
  }
}

describe("parseRedisUrl", () => {
  it("reads host, port, TLS, user, password and database, with redis-cli's defaults", () => {
    assert.deepEqual(parseRedisUrl("redis://127.0.0.1"), { host: "127.0.0.1", port: 6379, tls: false, username: undefined, password: undefined, db: 0 });
    assert.deepEqual(parseRedisUrl("rediss://al%40ice:p%3Ass@cache.internal:6380/3"), {
      host: "cache.internal",
      port: 6380,
      tls: true,
      username: "al@ice",
      password: "p:ss",
      db: 3,
    });
    assert.deepEqual(parseRedisUrl("redis://:secret@[::1]:7000/"), { host: "::1", port: 7000, tls: false, username: undefined, password: "secret", db: 0 });
  });

  it("refuses what is not a redis:// URL, naming the option", () => {
    assert.throws(() => parseRedisUrl("127.0.0.1:6379"), /url: "127.0.0.1:6379" is not a URL|the scheme must be/);
    assert.throws(() => parseRedisUrl("http://127.0.0.1:6379"), /url: .*the scheme must be redis:\/\/ or rediss:\/\//);
    assert.throws(() => parseRedisUrl("redis://127.0.0.1/x"), /url: .*the path must be a database number/);
    assert.throws(() => parseRedisUrl("not a url"), /url: "not a url" is not a URL/);
  });

  it("encodes a command as RESP, its arguments' lengths in UTF-8 bytes", () => {
    assert.equal(encodeCommand(["SET", "k", "é"]), "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\né\r\n");
  });
});

describe("RL.ALL encoded from parts made once per policy", () => {
  it("is the argv the client libraries are sent, byte for byte", () => {
    const config = parseConfig({
      policies: [
        { name: "f", algorithm: "fixed", limit: 10, window: "1m", aligned: true, overridable: true },
        { name: "t", algorithm: "token", limit: 5, window: "1s", burst: 20 },
        { name: "a", algorithm: "approx", limit: 7, window: "10s", cost: "header:X-Cost" },
      ],
    });
    const policy = (name: string) => config.policies.get(name) as Policy;
    const subject = { kind: "ip", value: "203.0.113.7", tag: "ip:203.0.113.7" };
    const checks: Check[] = [
      { policy: policy("f"), subject, key: "rl:{ip:203.0.113.7}:f", okey: "rl:{ip:203.0.113.7}:override:f", cost: 1 },
      { policy: policy("t"), subject, key: "rl:{ip:203.0.113.7}:t", okey: undefined, cost: 1 },
      { policy: policy("a"), subject, key: "préfixe:{ip:203.0.113.7}:a", okey: undefined, cost: 1125899906842624 },
    ];
    const argv = ["RL.ALL"];
    for (const c of checks) {
      const made = clause(c, "COST");
      argv.push(made.algorithm, made.key, ...made.args, ...(made.override === undefined ? [] : ["OVERRIDE", made.override]));
    }
    assert.equal(encodeAll(checks), encodeCommand(argv));
    assert.equal(encodeAll(checks.slice(1, 2)), encodeCommand(["RL.ALL", "TOKEN", "rl:{ip:203.0.113.7}:t", "5", "1000ms", "BURST", "20", "COST", "1"]));
    // One check alone (the one-policy way), with OVERRIDE, and with a cost and a key of more bytes than characters.
    for (const c of checks) {
      const made = clause(c, "COST");
      const alone = ["RL.ALL", made.algorithm, made.key, ...made.args, ...(made.override === undefined ? [] : ["OVERRIDE", made.override])];
      assert.equal(encodeOne(c), encodeCommand(alone));
    }
  });
});

describe("RespConnection", () => {
  let server: Server;
  before(async () => {
    server = await startServer(REDIS_SERVER, "resp");
    // The admin connection stays authenticated as the default user.
    await server.admin.call("CONFIG", "SET", "requirepass", "s3cret");
  });
  after(() => server.stop());
  const url = (auth = "s3cret", db = "") => `redis://:${auth}@127.0.0.1:${server.port}${db}`;

  it("answers each command in order: integers, strings, nil, arrays, RL.ALL's reply; an error reply rejects and the connection goes on", async () => {
    const conn = new RespConnection(url());
    try {
      // Sent while it connects: queued, then written after AUTH.
      const replies = await Promise.all([
        conn.send(["SET", "resp:a", "é"]),
        conn.send(["GET", "resp:a"]),
        conn.send(["GET", "resp:missing"]),
        conn.send(["INCRBY", "resp:n", "-5"]),
        conn.send(["RL.ALL", "FIXED", "resp:{s}:p", "10", "60000ms", "COST", "3"]),
        conn.send(["MGET", "resp:a", "resp:missing"]),
      ]);
      assert.deepEqual(replies.slice(0, 4), ["OK", "é", null, -5]);
      assert.deepEqual(replies[4], [1, 0, [1, 3, 0, 10, 7, 60000]]);
      assert.deepEqual(replies[5], ["é", null]);
      await assert.rejects(conn.send(["RL.FIXED", "resp:x", "0", "1s"]), (err: Error) => err instanceof ReplyError && /^ERR /.test(err.message));
      await assert.rejects(conn.send(["INCR", "resp:a"]), ReplyError);
      assert.equal(await conn.send(["PING"]), "PONG");
      assert.equal(conn.ready, true);
    } finally {
      conn.close();
    }
  });

  it("reads replies split across many reads, and many commands of one turn in one write", async () => {
    const conn = new RespConnection(url());
    try {
      const big = "x".repeat(3 * 1024 * 1024);
      await conn.send(["SET", "resp:big", big]);
      const sent = [];
      for (let i = 0; i < 2000; i++) sent.push(conn.send(i % 500 === 0 ? ["GET", "resp:big"] : ["INCR", "resp:count"]));
      const replies = await Promise.all(sent);
      let count = 0;
      replies.forEach((reply, i) => {
        if (i % 500 === 0) assert.equal(reply, big);
        else assert.equal(reply, ++count);
      });
    } finally {
      conn.close();
    }
  });

  it("selects the URL's database", async () => {
    const conn = new RespConnection(url("s3cret", "/2"));
    try {
      await conn.send(["SET", "resp:db", "two"]);
      assert.equal(await server.admin.call("GET", "resp:db"), null);
      await server.admin.call("SELECT", "2");
      assert.equal(await server.admin.call("GET", "resp:db"), "two");
      await server.admin.call("SELECT", "0");
    } finally {
      conn.close();
    }
  });

  it("a refused AUTH fails the connect: what was queued rejects naming AUTH", async () => {
    const conn = new RespConnection(url("wrong"));
    try {
      await assert.rejects(conn.send(["PING"]), /AUTH failed: WRONGPASS|AUTH failed: ERR/);
    } finally {
      conn.close();
    }
  });

  it("a dropped connection rejects what was in flight, refuses at once while down, and comes back", async () => {
    const conn = new RespConnection(url());
    try {
      assert.equal(await conn.send(["CLIENT", "SETNAME", "resp-drop"]), "OK");
      // A call the server holds, then the connection killed under it.
      const held = assert.rejects(conn.send(["BLPOP", "resp:never", "5"]), /librl: Redis 127\.0\.0\.1:[0-9]+: /);
      await server.admin.call("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes");
      await held;
      await assert.rejects(conn.send(["PING"]), /the connection is down/);
      assert.equal(await eventually(() => conn.send(["PING"])), "PONG");
    } finally {
      conn.close();
    }
  });

  it("a time limit per command, on one timer: a command with no reply within it rejects with NoAnswer, its late reply is dropped, the ones behind it are answered", async () => {
    const conn = new RespConnection(url());
    try {
      assert.equal(await conn.send(["PING"]), "PONG");
      const started = performance.now();
      // The server holds each BLPOP 1 s: the shorter limit runs out first, whatever the order they were sent in.
      const long = conn.sendEncodedWithin(encodeCommand(["BLPOP", "resp:never:a", "1"]), 400);
      const short = conn.sendEncodedWithin(encodeCommand(["BLPOP", "resp:never:b", "1"]), 100);
      const unbounded = conn.sendEncoded(encodeCommand(["ECHO", "behind"]));
      await assert.rejects(short, (err: Error) => err instanceof NoAnswer && err.name === "RedisTimeout" && err.message === "no answer within 100 ms");
      assert.ok(performance.now() - started >= 99, "not before its limit");
      await assert.rejects(long, (err: Error) => err instanceof NoAnswer && err.message === "no answer within 400 ms");
      assert.ok(performance.now() - started < 1000, "before the server answered");
      // The held commands' replies (nil) come later and are dropped; the next command gets its own reply.
      assert.equal(await unbounded, "behind");
      assert.equal(await conn.sendEncodedWithin(encodeCommand(["ECHO", "next"]), 1000), "next");
    } finally {
      conn.close();
    }
  });

  it("HttpLimiter.check given no measureBody measures a body through the request's own measureBody; with neither, the body cannot be measured: 413", async () => {
    const config = {
      max_body_bytes: 100,
      headers: "legacy",
      policies: [{ name: "bytes", algorithm: "fixed", limit: 1000, window: "1m", key: "global", cost: "body-bytes" }],
    };
    const core = new HttpLimiter({ url: url(), config });
    try {
      const selection = core.select("POST", "/upload");
      const facts = { method: "POST", path: "/upload", peer: "203.0.113.9", user: undefined, header: () => undefined };
      const measured: number[] = [];
      const own = await core.check({ ...facts, measureBody: (max: number) => (measured.push(max), Promise.resolve(40)) }, selection);
      assert.deepEqual(measured, [100]);
      assert.equal(own.pass, true);
      assert.equal(own.pass && own.headers["X-RateLimit-Remaining"], "960");
      const unmeasured = await core.check(facts, selection);
      assert.equal(unmeasured.pass, false);
      assert.equal(!unmeasured.pass && unmeasured.refusal.status, 413);
    } finally {
      core.close();
    }
  });

  it("a one-policy route counts each subject under its own key past the subjects it keeps ready, IPv6 clients by their network", async () => {
    const nonce = `${process.pid}-${Date.now()}`;
    const config = {
      headers: "legacy",
      exempt_loopback: false,
      policies: [
        { name: "h", algorithm: "fixed", limit: 1, window: "1m", key: "header:X-Client" },
        { name: "i", algorithm: "fixed", limit: 2, window: "1m", key: "ip" },
      ],
      routes: [
        { path: "/h", policies: ["h"] },
        { path: "/i", policies: ["i"] },
      ],
    };
    const core = new HttpLimiter({ url: url(), config });
    const facts = (path: string, peer: string, client?: string) => ({
      method: "GET",
      path,
      peer,
      user: undefined,
      header: (name: string) => (name === "x-client" ? client : undefined),
    });
    const pass = async (path: string, peer: string, client?: string) => (await core.check(facts(path, peer, client), core.select("GET", path))).pass;
    try {
      // More subjects than the route keeps ready (1,024), then the first again: still counted, under its own key.
      const first = `first-${nonce}`;
      assert.equal(await pass("/h", "203.0.113.1", first), true);
      for (let i = 0; i < 1100; i++) assert.equal(await pass("/h", "203.0.113.1", `s${i}-${nonce}`), true);
      assert.equal(await pass("/h", "203.0.113.1", first), false);
      assert.equal(await pass("/h", "203.0.113.1", `s5-${nonce}`), false);
      assert.equal(core.key("h", first), `rl:{header:x-client:${first}}:h`);
      // Two addresses of one /56 (ipv6_prefix's default) are one subject; another /56 is another.
      const net = `2001:db8:${(Date.now() % 65536).toString(16)}`;
      assert.equal(await pass("/i", `${net}:100::1`), true);
      assert.equal(await pass("/i", `${net}:1ff::2`), true);
      assert.equal(await pass("/i", `${net}:100::3`), false);
      assert.equal(await pass("/i", `${net}:200::1`), true);
    } finally {
      core.close();
    }
  });

  it("sendEncodedTo: each waiter hears its own reply or error reply, in order; one that throws leaves the replies behind it to theirs", async () => {
    const heard: string[] = [];
    class Waiter extends ReplyWaiter {
      constructor(
        readonly name: string,
        readonly throws = false,
      ) {
        super();
      }
      resolve(value: unknown): void {
        heard.push(`${this.name}=${JSON.stringify(value)}`);
        if (this.throws) throw new Error("the waiter's own failure");
      }
      reject(err: Error): void {
        heard.push(`${this.name}!${err instanceof ReplyError ? "ReplyError" : err.message}`);
      }
    }
    const conn = new RespConnection(url());
    // The waiter's throw is the caller's own error, thrown from a microtask: caught here, once.
    const thrown: unknown[] = [];
    const listeners = process.listeners("uncaughtException");
    process.removeAllListeners("uncaughtException");
    process.on("uncaughtException", (err) => thrown.push(err));
    try {
      assert.equal(await conn.send(["DEL", "resp:counter"]), 0);
      conn.sendEncodedTo(encodeCommand(["ECHO", "a"]), 1000, new Waiter("a", true));
      conn.sendEncodedTo(encodeCommand(["INCR", "resp:counter"]), 1000, new Waiter("b"));
      await conn.send(["SET", "resp:text", "t"]);
      conn.sendEncodedTo(encodeCommand(["INCR", "resp:text"]), 1000, new Waiter("c"));
      conn.sendEncodedTo(encodeCommand(["ECHO", "d"]), Infinity, new Waiter("d"));
      assert.equal(await conn.send(["ECHO", "behind"]), "behind");
      assert.deepEqual(heard, ['a="a"', "b=1", "c!ReplyError", 'd="d"']);
      await sleep(10);
      assert.equal(thrown.length, 1);
      assert.match((thrown[0] as Error).message, /the waiter's own failure/);
    } finally {
      process.removeAllListeners("uncaughtException");
      for (const l of listeners) process.on("uncaughtException", l);
      await conn.send(["DEL", "resp:text", "resp:counter"]).catch(() => undefined);
      conn.close();
    }
  });

  it("sendEncodedTo while the connection is down or closed rejects the waiter after the call returns, never inside it", async () => {
    const conn = new RespConnection(`redis://127.0.0.1:${await freePort()}`);
    await assert.rejects(conn.send(["PING"]), /ECONNREFUSED/);
    const errors: string[] = [];
    let returned = false;
    const heard = new Promise<void>((resolve) => {
      class Waiter extends ReplyWaiter {
        resolve(): void {
          errors.push("a reply");
          resolve();
        }
        reject(err: Error): void {
          errors.push(`${returned ? "after" : "inside"}: ${err.message}`);
          resolve();
        }
      }
      conn.close();
      conn.sendEncodedTo(encodeCommand(["PING"]), 1000, new Waiter());
      returned = true;
    });
    await heard;
    assert.deepEqual(errors, [`after: librl: Redis 127.0.0.1:${conn.address.port}: the connection was closed`]);
  });

  it("HttpLimiter.checkInto gives the target check()'s verdicts: admitted with headers, refused, a fail mode's while Redis is down, an error", async () => {
    const nonce = `${process.pid}-${Date.now()}`;
    const config = {
      headers: "legacy",
      exempt_loopback: false,
      timeout: "200ms",
      policies: [{ name: "h", algorithm: "fixed", limit: 1, window: "1m", key: "header:X-Client" }],
    };
    const facts = (client: string) => ({ method: "GET", path: "/", peer: "203.0.113.1", user: undefined, header: (n: string) => (n === "x-client" ? client : undefined) });
    const into = (core: HttpLimiter, client: string) =>
      new Promise<Verdict>((resolve, reject) => {
        const target: VerdictTarget = { verdict: resolve, error: reject };
        core.checkInto(facts(client), core.select("GET", "/"), target);
      });
    const core = new HttpLimiter({ url: url(), config });
    try {
      const first = await into(core, `c-${nonce}`);
      assert.equal(first.pass, true);
      assert.deepEqual(first.pass && first.headers, (await core.check(facts(`d-${nonce}`), core.select("GET", "/"))).pass && { ...first.headers });
      const second = await into(core, `c-${nonce}`);
      assert.equal(second.pass, false);
      assert.equal(!second.pass && second.refusal.status, 429);
    } finally {
      core.close();
    }
    // Redis not there: fail: open admits, fail: closed refuses with 503 (the breaker's way after the first).
    const port = await freePort();
    for (const [fail, pass] of [["open", true], ["closed", false]] as const) {
      const down = new HttpLimiter({ url: `redis://127.0.0.1:${port}`, config: { ...config, fail }, logger: { warn: () => {} } });
      try {
        for (let i = 0; i < 3; i++) {
          const verdict = await into(down, `c-${nonce}`);
          assert.equal(verdict.pass, pass, `fail: ${fail}, request ${i}`);
          if (!verdict.pass) assert.equal(verdict.refusal.status, 503);
        }
      } finally {
        down.close();
      }
    }
    // A hook that throws is logged, never thrown; a selection naming nothing passes unchecked.
    const quiet = new HttpLimiter({ url: url(), config, onDecision: () => {
      throw new Error("hook");
    }, logger: { warn: () => {} } });
    try {
      assert.equal((await into(quiet, `e-${nonce}`)).pass, true);
      const none = await new Promise<Verdict>((resolve, reject) => quiet.checkInto(facts("x"), { policies: [], route: undefined }, { verdict: resolve, error: reject }));
      assert.deepEqual(none, { pass: true, headers: {}, after: undefined, release: undefined });
    } finally {
      quiet.close();
    }
  });

  it("a server that is not there: commands reject; close() ends it for good", async () => {
    const conn = new RespConnection(`redis://127.0.0.1:${await freePort()}`);
    await assert.rejects(conn.send(["PING"]), /ECONNREFUSED/);
    await assert.rejects(conn.send(["PING"]), /ECONNREFUSED|the connection is down/);
    conn.close();
    await assert.rejects(conn.send(["PING"]), /the connection was closed/);
  });
});

describe("RespConnection over TLS (rediss://)", () => {
  // A self-signed certificate for localhost, made by openssl; a server without TLS support skips.
  const dir = mkdtempSync(path.join(tmpdir(), "librl-tls-"));
  const cert = path.join(dir, "cert.pem");
  const key = path.join(dir, "key.pem");
  let made = true;
  try {
    execFileSync("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"], {
      stdio: "ignore",
    });
  } catch {
    made = false;
  }
  let server: Server | undefined;
  let tlsPort = 0;
  before(async () => {
    if (!made) return;
    tlsPort = await freePort();
    try {
      server = await startServer(REDIS_SERVER, "resp-tls", ["--tls-port", String(tlsPort), "--tls-cert-file", cert, "--tls-key-file", key, "--tls-auth-clients", "no"]);
    } catch {
      server = undefined;
    }
  });
  after(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("verifies the server's certificate: an untrusted one, or one for another name, rejects naming why; a trusted one answers", async (t) => {
    if (server === undefined) return t.skip("needs openssl and a redis-server built with TLS");
    const untrusted = new RespConnection(`rediss://localhost:${tlsPort}`);
    await assert.rejects(untrusted.send(["PING"]), /librl: Redis localhost:[0-9]+: self-signed certificate/);
    untrusted.close();
    // Trusted as Node trusts a certificate authority of the system's: NODE_EXTRA_CA_CERTS, read at start-up (another process).
    const script = `const { RespConnection } = require(${JSON.stringify(path.resolve(__dirname, "..", "src", "resp.js"))});
      const run = async (url) => { const c = new RespConnection(url); try { return String(await c.send(["PING"])); } catch (e) { return e.message; } finally { c.close(); } };
      (async () => console.log(JSON.stringify([await run("rediss://localhost:${tlsPort}"), await run("rediss://127.0.0.1:${tlsPort}")])))();`;
    const out = execFileSync(process.execPath, ["-e", script], { env: { ...process.env, NODE_EXTRA_CA_CERTS: cert }, encoding: "utf8" });
    const [byName, byAddress] = JSON.parse(out) as [string, string];
    assert.equal(byName, "PONG");
    assert.match(byAddress, /IP: 127\.0\.0\.1 is not in the cert's list/);
  });
});

describe("HttpLimiter's url option", () => {
  const config = { policies: [{ name: "p", algorithm: "fixed", limit: 1, window: "1s" }] };

  it("takes a client or a url, not both, and refuses a bad url at start-up", () => {
    assert.throws(() => new HttpLimiter({ config } as never), /give the `client` option .* or `url`/);
    assert.throws(() => new HttpLimiter({ config, url: "redis://127.0.0.1:1", client: {} as never }), /give `client` or `url`, not both/);
    assert.throws(() => new HttpLimiter({ config, url: 6379 as never }), /the `url` option must be a string/);
    assert.throws(() => new HttpLimiter({ config, url: "http://127.0.0.1:6379" }), /url: .*the scheme must be redis:\/\//);
  });
});
