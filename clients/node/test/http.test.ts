/**
 * What the Express middleware and the Fastify plugin give beyond the
 * conformance cases, over real HTTP against a real server with the module:
 * per-route policies in each framework's idiom, the user resolver, the
 * decision hook feeding a prom-client counter, configuration files (JSON,
 * YAML, an injected parser), the warnings of shadow and fail-open, the
 * body a chunked upload leaves for the handler, and Express 4 and Fastify 4.
 */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { connect, type AddressInfo } from "node:net";
import { createHash } from "node:crypto";
import type { Server as HttpServer } from "node:http";
import { Readable } from "node:stream";
import { after, before, describe, it } from "node:test";
import express from "express";
import Fastify from "fastify";
import Redis from "ioredis";
import { Counter, Registry } from "prom-client";
import { parse as parseYaml } from "yaml";
import { FRAMEWORKS, startApp } from "../examples/app.js";
import { rateLimit } from "../src/express.js";
import { librl } from "../src/fastify.js";
import { ConfigError, loadConfig, parseConfig, type DecisionEvent } from "../src/http/index.js";
import { Limiter } from "../src/limiter.js";
import { refund } from "../src/http/decide.js";
import { REDIS_SERVER, freePort, sleep, startServer, type Server } from "./helpers.js";

/**
 * The older majors, loaded without their type declarations (installed
 * under npm aliases beside the current ones); only what the test calls.
 */
interface Express4App {
  use(...handlers: unknown[]): void;
  post(path: string, ...handlers: unknown[]): void;
  listen(port: number, host: string, ready: () => void): HttpServer;
}
const express4 = require("express4") as () => Express4App;
interface Fastify4App {
  addContentTypeParser(type: string, options: object, parser: (...args: never[]) => void): void;
  register(plugin: unknown, options: unknown): Promise<unknown>;
  get(path: string, ...args: unknown[]): void;
  post(path: string, handler: (request: { body: Buffer }) => Promise<string>): void;
  listen(options: { port: number; host: string }): Promise<unknown>;
  close(): Promise<unknown>;
  server: HttpServer;
}
const fastify4 = require("fastify4") as () => Fastify4App;

const POLICIES = [
  { name: "two", algorithm: "fixed", limit: 2, window: "60s" },
  { name: "one", algorithm: "fixed", limit: 1, window: "60s" },
  { name: "by-user", algorithm: "fixed", limit: 1, window: "60s", key: "user" },
  { name: "bytes", algorithm: "fixed", limit: 100, window: "60s", cost: "body-bytes" },
];
const base = { exempt_loopback: false, policies: POLICIES };

async function listen(app: express.Express): Promise<{ url: string; close: () => Promise<void> }> {
  const server: HttpServer = await new Promise((resolve) => {
    const s = app.listen(0, "127.0.0.1", () => resolve(s));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

async function statuses(url: string, n: number, init?: RequestInit): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const res = await fetch(url, init);
    await res.arrayBuffer();
    out.push(res.status);
  }
  return out;
}

/**
 * Sends one request with the request target and header lines exactly as
 * given (fetch would normalize the target and merge the lines); resolves
 * to the status and the response's head.
 */
function rawRequest(port: number, target: string, lines: readonly string[] = []): Promise<{ status: number; head: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => {
      socket.write(`GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n${lines.map((l) => `${l}\r\n`).join("")}\r\n`, "latin1");
    });
    let text = "";
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => (text += chunk));
    socket.on("end", () => {
      const head = text.slice(0, text.indexOf("\r\n\r\n"));
      resolve({ status: Number(head.split(" ")[1]), head });
    });
    socket.on("error", reject);
  });
}

describe("HTTP integrations", { concurrency: 1 }, () => {
  let server: Server;
  let client: Redis;
  before(async () => {
    server = await startServer(REDIS_SERVER, "http");
    client = new Redis({ host: "127.0.0.1", port: server.port });
  });
  after(async () => {
    client?.disconnect();
    await server?.stop();
  });
  const flush = () => server.admin.call("FLUSHALL");

  it("Express: .policies() on a route and a router; a missing name is refused when the middleware is built", async () => {
    await flush();
    const limiter = rateLimit({ client, config: { ...base, routes: [{ path: "/", policies: [] }] } });
    const app = express();
    const api = express.Router();
    api.use(limiter.policies("two"));
    api.get("/items", (_req, res) => void res.send("items"));
    app.use("/api", api);
    app.post("/login", limiter.policies("one"), (_req, res) => void res.send("in"));
    app.get("/free", (_req, res) => void res.send("free"));
    const { url, close } = await listen(app);
    try {
      assert.deepEqual(await statuses(`${url}/api/items`, 3), [200, 200, 429]);
      assert.deepEqual(await statuses(`${url}/login`, 2, { method: "POST" }), [200, 429]);
      assert.deepEqual(await statuses(`${url}/free`, 3), [200, 200, 200]);
    } finally {
      await close();
    }
    assert.throws(() => limiter.policies("two", "nope"), (err: Error) => err instanceof ConfigError && err.message === 'librl: configuration: policies[1]: no policy is named "nope"');
  });

  it("Express: a refusal's own headers replace those an earlier middleware set, the others stay; without any, the same refusal", async () => {
    await flush();
    const limiter = rateLimit({ client, config: { ...base, headers: "legacy", routes: [{ path: "/", policies: [] }] } });
    const app = express();
    app.disable("x-powered-by");
    app.use("/cors", (_req, res, next) => {
      res.setHeader("Access-Control-Allow-Origin", "*");
      res.setHeader("X-RateLimit-Limit", "999");
      next();
    });
    app.get("/cors", limiter.policies("one"), (_req, res) => void res.send("in"));
    app.get("/bare", limiter.policies("one"), (_req, res) => void res.send("in"));
    const { url, close } = await listen(app);
    try {
      for (const [path, cors] of [["/cors", "*"], ["/bare", null]] as const) {
        await flush(); // both paths count the same client under "one"
        assert.equal((await fetch(`${url}${path}`)).status, 200);
        const refused = await fetch(`${url}${path}`);
        const body = await refused.text();
        assert.equal(refused.status, 429);
        assert.equal(refused.headers.get("access-control-allow-origin"), cors);
        assert.equal(refused.headers.get("x-ratelimit-limit"), "1");
        assert.equal(refused.headers.get("x-ratelimit-remaining"), "0");
        assert.equal(refused.headers.get("content-type"), "application/problem+json");
        assert.equal(refused.headers.get("content-length"), String(Buffer.byteLength(body)));
        assert.equal((JSON.parse(body) as { policy: string }).policy, "one");
      }
    } finally {
      await close();
    }
  });

  it("Fastify: a route's config names its policies, [] exempts it, and a missing name fails at ready()", async () => {
    await flush();
    const app = Fastify();
    await app.register(librl, { client, config: { ...base, routes: [{ path: "/", policies: ["two"] }] } });
    app.get("/login", { config: { librl: { policies: ["one"] } } }, async () => "in");
    app.get("/health", { config: { librl: { policies: [] } } }, async () => "up");
    app.get("/other", async () => "other");
    await app.listen({ port: 0, host: "127.0.0.1" });
    const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    try {
      assert.deepEqual(await statuses(`${url}/login`, 2), [200, 429]);
      // Exactly the contract's type: Fastify appends a charset to a JSON type sent as a string.
      const refused = await fetch(`${url}/login`);
      assert.equal(refused.headers.get("content-type"), "application/problem+json");
      await refused.arrayBuffer();
      assert.deepEqual(await statuses(`${url}/health`, 3), [200, 200, 200]);
      assert.deepEqual(await statuses(`${url}/other`, 3), [200, 200, 429]);
    } finally {
      await app.close();
    }
    const bad = Fastify();
    await bad.register(librl, { client, config: base });
    await assert.rejects(
      async () => {
        bad.get("/x", { config: { librl: { policies: ["missing"] } } }, async () => "x");
        await bad.ready();
      },
      /config\.librl\.policies\[0\]: no policy is named "missing"/,
    );
    await bad.close();
  });

  it("key: user reads req.user (id or username) by default, or the resolver given", async () => {
    await flush();
    const config = { ...base, routes: [{ path: "/", policies: ["by-user"] }] };
    const app = express();
    app.use((req, _res, next) => {
      (req as { user?: unknown }).user = { username: "carol" };
      next();
    });
    app.use(rateLimit({ client, config }));
    app.use((_req, res) => void res.send("ok"));
    const byDefault = await listen(app);
    assert.deepEqual(await statuses(byDefault.url, 2), [200, 429]);
    await byDefault.close();
    assert.equal(await server.admin.call("EXISTS", "rl:{user:carol}:by-user"), 1);

    const custom = express();
    custom.use(rateLimit({ client, config, user: (req) => req.headers["x-tenant-user"] as string | undefined }));
    custom.use((_req, res) => void res.send("ok"));
    const resolved = await listen(custom);
    assert.deepEqual(await statuses(resolved.url, 1, { headers: { "X-Tenant-User": "dave" } }), [200]);
    await resolved.close();
    assert.equal(await server.admin.call("EXISTS", "rl:{user:dave}:by-user"), 1);
  });

  it("attribute: a string, an integer or a bigint the application set keys the policy; anything else is no value (the ip)", async () => {
    await flush();
    const config = { exempt_loopback: false, policies: [{ name: "p", algorithm: "fixed", limit: 1, window: "60s", key: "attribute:project" }] };
    // What the application's code sets, by the X-Project header's name.
    const values: Record<string, unknown> = {
      text: " acme\t",
      integer: 42,
      large: 1e21,
      bigint: 12n,
      fraction: 1.5,
      flag: true,
      object: { id: "x" },
      empty: "  ",
      none: null,
    };
    const expressApp = express();
    expressApp.use((req, _res, next) => {
      (req as unknown as Record<string, unknown>)["project"] = values[req.headers["x-project"] as string];
      next();
    });
    expressApp.use(rateLimit({ client, config }));
    expressApp.use((_req, res) => void res.send("ok"));
    const fastifyApp = Fastify();
    fastifyApp.decorateRequest("project", null);
    fastifyApp.addHook("onRequest", async (request) => {
      (request as unknown as Record<string, unknown>)["project"] = values[request.headers["x-project"] as string];
    });
    await fastifyApp.register(librl, { client, config });
    fastifyApp.get("/", async () => "ok");
    await fastifyApp.listen({ port: 0, host: "127.0.0.1" });
    const byExpress = await listen(expressApp);
    const urls = { express: byExpress.url, fastify: `http://127.0.0.1:${(fastifyApp.server.address() as AddressInfo).port}` };
    try {
      for (const [framework, url] of Object.entries(urls)) {
        await flush();
        for (const name of Object.keys(values)) await statuses(url, 1, { headers: { "X-Project": name } });
        const keys = ((await server.admin.call("KEYS", "*")) as string[]).sort();
        assert.deepEqual(
          keys,
          ["rl:{attribute:project:1000000000000000000000}:p", "rl:{attribute:project:12}:p", "rl:{attribute:project:42}:p", "rl:{attribute:project:acme}:p", "rl:{ip:127.0.0.1}:p"],
          framework,
        );
      }
    } finally {
      await byExpress.close();
      await fastifyApp.close();
    }
  });

  it("resolvers: async ones are awaited; a limit or mode resolver that fails or gives nonsense fails the request; a cost one that throws is a 400", async () => {
    await flush();
    const policies = [
      { name: "plan", algorithm: "fixed", limit: "code:plan", key: "user" },
      { name: "elements", algorithm: "fixed", limit: 100, window: "60s", cost: "code:rows" },
    ];
    const resolvers = {
      limit: {
        plan: async (req: { headers: Record<string, unknown> }) => {
          const given = req.headers["x-plan"];
          if (given === "boom") throw new Error("the plan store is down");
          if (given === "nonsense") return { limit: 0, windowMs: 1000 };
          return given === undefined ? undefined : { limit: Number(given), windowMs: 60_000 };
        },
      },
      cost: {
        rows: (req: { headers: Record<string, unknown> }) => {
          if (req.headers["x-rows"] === "throw") throw new Error("unreadable body");
          return Promise.resolve(BigInt((req.headers["x-rows"] as string | undefined) ?? "1"));
        },
      },
    };
    const app = express();
    app.use(rateLimit({ client, config: { policies, routes: [{ path: "/plan", policies: ["plan"] }, { path: "/rows", policies: ["elements"] }] }, resolvers }));
    app.use((_req, res) => void res.send("ok"));
    app.use((err: Error, _req: unknown, res: express.Response, _next: unknown) => void res.status(500).send(err.message));
    const { url, close } = await listen(app);
    try {
      assert.deepEqual(await statuses(`${url}/plan`, 2, { headers: { "X-Plan": "1" } }), [200, 429]);
      // Nothing given: the policy does not apply.
      const free = await fetch(`${url}/plan`);
      assert.equal(free.status, 200);
      assert.equal(free.headers.get("ratelimit-policy"), null);
      for (const [plan, text] of [
        ["boom", "the plan store is down"],
        ["nonsense", 'librl: the limit resolver "plan" gave {"limit":0,"windowMs":1000}, not { limit, windowMs } as integers from 1'],
      ]) {
        const failed = await fetch(`${url}/plan`, { headers: { "X-Plan": plan as string } });
        assert.equal(failed.status, 500);
        assert.equal(await failed.text(), text);
      }
      const rows = await fetch(`${url}/rows`, { headers: { "X-Rows": "40" } });
      assert.equal(rows.headers.get("x-ratelimit-remaining"), "60");
      const thrown = await fetch(`${url}/rows`, { headers: { "X-Rows": "throw" } });
      assert.equal(thrown.status, 400);
      assert.equal(((await thrown.json()) as { detail: string }).detail, 'The cost "rows" must be an integer from 1 to 2^50.');
    } finally {
      await close();
    }
    // A mode resolver answering something else fails the request too.
    const modal = express();
    modal.use(rateLimit({ client, config: { mode: "code:m", policies: POLICIES }, resolvers: { mode: { m: () => "loud" as "off" } } }));
    modal.use((_req, res) => void res.send("ok"));
    modal.use((err: Error, _req: unknown, res: express.Response, _next: unknown) => void res.status(500).send(err.message));
    const m = await listen(modal);
    try {
      const r = await fetch(m.url);
      assert.equal(r.status, 500);
      assert.equal(await r.text(), 'librl: the mode resolver "m" gave "loud", not enforce, shadow or off');
    } finally {
      await m.close();
    }
    // Registered by name, per field: a Config read without them is checked when the middleware is built.
    const loaded = parseConfig({ policies }, resolvers);
    assert.throws(() => rateLimit({ client, config: loaded }), /^ConfigError: librl: configuration: policies\[0\]\.limit: no limit resolver is registered as "plan"$/);
    assert.throws(() => rateLimit({ client, config: { policies }, resolvers: { limit: { plan: "no" } } as never }), /resolvers\.limit\.plan must be a function/);
    assert.throws(() => rateLimit({ client, config: { policies }, resolvers: { costs: {} } as never }), /resolvers\.costs: resolvers are cost, limit or mode/);
  });

  it("the decision hook feeds a prom-client counter; a hook that throws is logged and ignored", async () => {
    await flush();
    const registry = new Registry();
    const decisions = new Counter({
      name: "librl_http_decisions_total",
      help: "Requests checked by librl, by outcome and policy",
      labelNames: ["outcome", "policy"],
      registers: [registry],
    });
    const events: DecisionEvent[] = [];
    const onDecision = (event: DecisionEvent) => {
      events.push(event);
      for (const check of event.checks) decisions.inc({ outcome: event.outcome, policy: check.policy });
    };
    const app = Fastify();
    await app.register(librl, { client, config: { ...base, routes: [{ path: "/", policies: ["one"] }] }, onDecision });
    app.get("/*", async () => "ok");
    await app.listen({ port: 0, host: "127.0.0.1" });
    const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    assert.deepEqual(await statuses(`${url}/a?q=1`, 2), [200, 429]);
    await app.close();
    const text = await registry.metrics();
    assert.match(text, /librl_http_decisions_total\{outcome="allowed",policy="one"\} 1/);
    assert.match(text, /librl_http_decisions_total\{outcome="denied",policy="one"\} 1/);
    const first = events[0] as DecisionEvent;
    assert.equal(first.path, "/a");
    assert.equal(first.route, "/");
    assert.equal(first.local, false);
    assert.deepEqual(
      { ...first.checks[0], decision: undefined },
      { policy: "one", subject: "ip:127.0.0.1", key: "rl:{ip:127.0.0.1}:one", cost: 1, decision: undefined },
    );
    assert.equal(first.checks[0]?.decision?.remaining, 0);

    await flush();
    const warnings: string[] = [];
    const throwing = express();
    throwing.use(
      rateLimit({
        client,
        config: { ...base, routes: [{ path: "/", policies: ["one"] }] },
        onDecision: () => {
          throw new Error("metrics down");
        },
        logger: { warn: (m) => warnings.push(m) },
      }),
    );
    throwing.use((_req, res) => void res.send("ok"));
    const t = await listen(throwing);
    assert.deepEqual(await statuses(t.url, 2), [200, 429]);
    await t.close();
    assert.equal(warnings.filter((w) => w.includes("metrics down")).length, 2);
  });

  it("shadow mode logs the would-deny; fail-open warns at most once per 10 s", async () => {
    await flush();
    const warnings: string[] = [];
    const logger = { warn: (m: string) => warnings.push(m) };
    const shadow = express();
    shadow.use(rateLimit({ client, config: { ...base, mode: "shadow", routes: [{ path: "/", policies: ["one"] }] }, logger }));
    shadow.use((_req, res) => void res.send("ok"));
    const s = await listen(shadow);
    assert.deepEqual(await statuses(`${s.url}/x`, 3), [200, 200, 200]);
    await s.close();
    assert.equal(warnings.filter((w) => /shadow mode: GET \/x would be refused by policy "one"/.test(w)).length, 2);

    warnings.length = 0;
    const down = new Redis({ host: "127.0.0.1", port: await freePort(), retryStrategy: () => 50 });
    down.on("error", () => {});
    const open = express();
    open.use(rateLimit({ client: down, config: { ...base, timeout: "50ms", routes: [{ path: "/", policies: ["one"] }] }, logger }));
    open.use((_req, res) => void res.send("ok"));
    const o = await listen(open);
    assert.deepEqual(await statuses(o.url, 3), [200, 200, 200]);
    await o.close();
    down.disconnect();
    assert.equal(warnings.length, 1, warnings.join("\n"));
    assert.match(warnings[0] as string, /Redis did not answer .*fail: open/);
  });

  it("fail: local decides in the process while Redis is down: the hook says local, a concurrency slot is freed when the response ends", async () => {
    const events: DecisionEvent[] = [];
    const down = new Redis({ host: "127.0.0.1", port: await freePort(), retryStrategy: () => 50 });
    down.on("error", () => {});
    const policies = [
      { name: "two", algorithm: "fixed", limit: 2, window: "60s" },
      { name: "slot", algorithm: "concurrency", limit: 1, lease: "60s" },
    ];
    const app = express();
    app.use(rateLimit({ client: down, config: { fail: "local", timeout: "50ms", policies }, onDecision: (e) => events.push(e), logger: { warn: () => {} } }));
    app.use((_req, res) => void res.send("ok"));
    const { url, close } = await listen(app);
    try {
      // The slot is free again after each response, so only the fixed limit of 2 refuses.
      assert.deepEqual(await statuses(url, 3), [200, 200, 429]);
      const refused = await fetch(url);
      assert.equal(refused.status, 429);
      assert.equal(((await refused.json()) as { policy: string }).policy, "two");
      assert.equal(refused.headers.get("x-ratelimit-remaining"), "0");
    } finally {
      await close();
      down.disconnect();
    }
    assert.deepEqual(
      events.map((e) => [e.outcome, e.local, e.error !== undefined]),
      [
        ["allowed", true, true],
        ["allowed", true, true],
        ["denied", true, true],
        ["denied", true, true],
      ],
    );
  });

  it("Express: a chunked body measured for body-bytes stays readable as req.body", async () => {
    await flush();
    const app = express();
    app.use(rateLimit({ client, config: { ...base, routes: [{ path: "/", policies: ["bytes"] }] } }));
    app.post("/", (req, res) => void res.send(`got ${Buffer.isBuffer(req.body) ? req.body.toString() : "nothing"}`));
    const { url, close } = await listen(app);
    try {
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new TextEncoder().encode("hello "));
          controller.enqueue(new TextEncoder().encode("world"));
          controller.close();
        },
      });
      const res = await fetch(url, { method: "POST", body, duplex: "half" } as RequestInit);
      assert.equal(await res.text(), "got hello world");
      assert.equal(res.headers.get("x-ratelimit-remaining"), "89");
    } finally {
      await close();
    }
  });

  it("Express 4 and Fastify 4: the same middleware and plugin", async () => {
    await flush();
    const config = { ...base, routes: [{ path: "/", policies: ["two"] }] };
    const limiter = rateLimit({ client, config });
    const app4 = express4();
    app4.post("/login", limiter.policies("one"), (_req: unknown, res: { send(b: string): void }) => res.send("in"));
    app4.use(limiter);
    app4.use((_req: unknown, res: { send(b: string): void }) => res.send("ok"));
    const server: HttpServer = await new Promise((resolve) => {
      const s = app4.listen(0, "127.0.0.1", () => resolve(s));
    });
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      assert.deepEqual(await statuses(`${url}/login`, 2, { method: "POST" }), [200, 429]);
      assert.deepEqual(await statuses(`${url}/a`, 3), [200, 200, 429]);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }

    await flush();
    const f4 = fastify4();
    f4.addContentTypeParser("*", { parseAs: "buffer" }, (_req: unknown, body: Buffer, done: (e: null, b: Buffer) => void) => done(null, body));
    await f4.register(librl, { client, config: { ...base, routes: [{ path: "/", policies: ["two"] }, { path: "/up", policies: ["bytes"] }] } });
    f4.get("/login", { config: { librl: { policies: ["one"] } } }, async () => "in");
    f4.get("/*", async () => "ok");
    f4.post("/up", async (request: { body: Buffer }) => `got ${request.body.length}`);
    await f4.listen({ port: 0, host: "127.0.0.1" });
    const f4url = `http://127.0.0.1:${(f4.server.address() as AddressInfo).port}`;
    try {
      assert.deepEqual(await statuses(`${f4url}/login`, 2), [200, 429]);
      assert.deepEqual(await statuses(`${f4url}/b`, 3), [200, 200, 429]);
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new TextEncoder().encode("hello"));
          controller.close();
        },
      });
      const res = await fetch(`${f4url}/up`, { method: "POST", body, duplex: "half" } as RequestInit);
      assert.equal(await res.text(), "got 5");
      assert.equal(res.headers.get("x-ratelimit-remaining"), "95");
    } finally {
      await f4.close();
    }
  });

  it("configuration files: JSON, YAML with the yaml package or an injected parser, each error naming the field or file", () => {
    const dir = mkdtempSync(path.join(tmpdir(), "librl-config-"));
    const json = path.join(dir, "policies.json");
    writeFileSync(json, JSON.stringify(base));
    assert.equal(loadConfig(json).policies.size, 4);
    const yaml = path.join(dir, "policies.yaml");
    writeFileSync(yaml, "policies:\n  - {name: p, algorithm: token, rate: 5/10s, burst: 7}\n");
    const p = loadConfig(yaml).policies.get("p");
    assert.deepEqual([p?.limit, p?.windowMs, p?.burst], [5, 10_000, 7]);
    let injected = 0;
    loadConfig(yaml, { parseYaml: (text) => (injected++, parseYaml(text)) });
    assert.equal(injected, 1);
    writeFileSync(yaml, "policies:\n  - {name: p, algorithm: fixed, limit: 5, window: 1s, burst: 2}\n");
    assert.throws(() => loadConfig(yaml), /^ConfigError: librl: configuration: policies\[0\]\.burst: burst is for token policies, not fixed$/);
    writeFileSync(json, "{ policies: ");
    assert.throws(() => loadConfig(json), /policies\.json is not JSON/);
    assert.throws(() => loadConfig(path.join(dir, "missing.yaml")), /cannot read .*missing\.yaml/);
    assert.throws(
      () => rateLimit({ client, config: { ...base, timeout: "2m" } }),
      (err: Error) => err instanceof ConfigError && err.field === "timeout" && err.message.startsWith("librl: configuration: timeout:"),
    );
  });

  it("each adapter checks the path its framework routes: absolute-form targets, fragments, and Fastify 4's `;`", async () => {
    // `/limited;x/y` routes to `/limited` in Fastify 4 (useSemicolonDelimiter), whose `/limited/y` route is exempt here.
    const config = {
      ...base,
      routes: [
        { path: "/limited", policies: ["two"] },
        { path: "/limited/y", policies: [] },
      ],
    };
    const targets = ["/limited", "http://127.0.0.1/limited", "/limited#x"];
    const expected = [200, 200, 429];

    await flush();
    const app = express();
    app.use(rateLimit({ client, config }));
    app.get("/limited", (_req, res) => void res.send("limited"));
    const e = await listen(app);
    const port = Number(new URL(e.url).port);
    const got: number[] = [];
    for (const target of targets) got.push((await rawRequest(port, target)).status);
    await e.close();
    assert.deepEqual(got, expected, "express");

    for (const [name, make] of [
      ["fastify 5", () => Fastify()],
      ["fastify 4", () => fastify4() as unknown as ReturnType<typeof Fastify>],
    ] as const) {
      await flush();
      const f = make();
      await f.register(librl, { client, config });
      f.get("/limited", async () => "limited");
      await f.listen({ port: 0, host: "127.0.0.1" });
      const fport = (f.server.address() as AddressInfo).port;
      const statuses: number[] = [];
      for (const target of targets) statuses.push((await rawRequest(fport, target)).status);
      if (name === "fastify 4") statuses.push((await rawRequest(fport, "/limited;x/y")).status);
      await f.close();
      assert.deepEqual(statuses, name === "fastify 4" ? [...expected, 429] : expected, name);
    }
  });

  it("header lines Node keeps apart are read joined, as the bytes sent: two Authorization lines are one API key", async () => {
    await flush();
    const config = { ...base, api_key_header: "Authorization", policies: [{ name: "k", algorithm: "fixed", limit: 5, window: "60s", key: "api-key" }] };
    const app = express();
    app.use(rateLimit({ client, config }));
    app.use((_req, res) => void res.send("ok"));
    const e = await listen(app);
    const port = Number(new URL(e.url).port);
    // Node's `headers` keeps only the first Authorization line.
    assert.equal((await rawRequest(port, "/", ["Authorization: a", "Authorization: b"])).status, 200);
    // A non-ASCII key is hashed from its bytes (FC 6E EF), as every integration hashes it.
    assert.equal((await rawRequest(port, "/", ["Authorization: \u00fcn\u00ef"])).status, 200);
    await e.close();
    const id = (bytes: Buffer) => createHash("sha256").update(bytes).digest("hex").slice(0, 32);
    assert.equal(await server.admin.call("EXISTS", `rl:{api-key:${id(Buffer.from("a, b"))}}:k`), 1);
    assert.equal(await server.admin.call("EXISTS", `rl:{api-key:${id(Buffer.from("fc6eef", "hex"))}}:k`), 1);
  });

  it("a refund Redis does not answer is logged, naming its keys and why it was made", async () => {
    const down = new Redis({ host: "127.0.0.1", port: await freePort(), enableOfflineQueue: false, lazyConnect: true });
    const warnings: string[] = [];
    const policy = parseConfig(base).policies.get("two");
    assert.ok(policy !== undefined);
    const subject = { kind: "ip", value: "203.0.113.7", tag: "ip:203.0.113.7", loopback: false };
    await refund(new Limiter(down), [{ policy, subject, key: "rl:{ip:203.0.113.7}:two", okey: undefined, cost: 1 }], 200, { warn: (m) => warnings.push(m) }, "a request refused by fail: closed");
    down.disconnect();
    assert.equal(warnings.length, 1);
    assert.match(warnings[0] as string, /^librl: could not refund rl:\{ip:203\.0\.113\.7\}:two \(a request refused by fail: closed\): /);
  });

  it("Redis failing mid-exchange: fail open keeps the admitted subject counted, fail closed refunds it before the 503", async () => {
    // The API key's limiter key holds a plain string: its RL.ALL answers WRONGTYPE after the IP's was admitted.
    const policies = [
      { name: "by-ip", algorithm: "fixed", limit: 5, window: "60s" },
      { name: "by-key", algorithm: "fixed", limit: 5, window: "60s", key: "api-key" },
    ];
    const keyOfKey = `rl:{api-key:${createHash("sha256").update("secret").digest("hex").slice(0, 32)}}:by-key`;
    for (const framework of FRAMEWORKS) {
      for (const [fail, status, counted] of [
        ["open", 200, 1],
        ["closed", 503, 0],
      ] as const) {
        await flush();
        await server.admin.call("SET", keyOfKey, "not a limiter");
        const warnings: string[] = [];
        const app = await startApp(framework, {
          client,
          config: { exempt_loopback: false, fail, policies },
          logger: { warn: (m) => warnings.push(m) },
        });
        const res = await fetch(`http://127.0.0.1:${app.port}/`, { headers: { "X-Api-Key": "secret" } });
        await res.arrayBuffer();
        await app.close();
        const where = `${framework}, fail: ${fail}`;
        assert.equal(res.status, status, where);
        const peek = (await server.admin.call("RL.FIXED", "rl:{ip:127.0.0.1}:by-ip", 5, "60s", "PEEK")) as number[];
        // PEEK counts the call it answers for: a count of n + 1 means n are recorded.
        assert.equal(peek[1], counted + 1, where);
        assert.match(warnings.join("\n"), /WRONGTYPE/, where);
      }
    }
  });

  it("Redis failing mid-exchange under fail: local: served, the admitted subject stays counted; refused locally, it is refunded", async () => {
    // As above: the API key's RL.ALL answers WRONGTYPE after the IP's was admitted; the process decides by-key (1 per minute).
    const policies = [
      { name: "by-ip", algorithm: "fixed", limit: 5, window: "60s" },
      { name: "by-key", algorithm: "fixed", limit: 1, window: "60s", key: "api-key" },
    ];
    const keyOfKey = `rl:{api-key:${createHash("sha256").update("secret").digest("hex").slice(0, 32)}}:by-key`;
    for (const framework of FRAMEWORKS) {
      await flush();
      await server.admin.call("SET", keyOfKey, "not a limiter");
      const app = await startApp(framework, { client, config: { exempt_loopback: false, fail: "local", policies }, logger: { warn: () => {} } });
      const counted = async () => ((await server.admin.call("RL.FIXED", "rl:{ip:127.0.0.1}:by-ip", 5, "60s", "PEEK")) as number[])[1];
      try {
        const first = await fetch(`http://127.0.0.1:${app.port}/`, { headers: { "X-Api-Key": "secret" } });
        await first.arrayBuffer();
        assert.equal(first.status, 200, framework);
        assert.equal(await counted(), 2, `${framework}: the served request stays counted by Redis`);
        const second = await fetch(`http://127.0.0.1:${app.port}/`, { headers: { "X-Api-Key": "secret" } });
        assert.equal(second.status, 429, framework);
        assert.equal(((await second.json()) as { policy: string }).policy, "by-key", framework);
        assert.equal(await counted(), 2, `${framework}: the locally refused request is refunded in Redis`);
      } finally {
        await app.close();
      }
    }
  });

  it("a concurrency policy holds its slot while a streamed response runs, and frees it when the stream ends", async () => {
    await flush();
    const config = { exempt_loopback: false, policies: [{ name: "slots", algorithm: "concurrency", limit: 1, lease: "10s" }] };
    // Three chunks 150 ms apart, then the end.
    const chunks = async function* () {
      for (const part of ["a", "b", "c"]) {
        await new Promise((resolve) => setTimeout(resolve, 150));
        yield part;
      }
    };
    const limiter = rateLimit({ client, config });
    const app = express();
    app.use(limiter);
    app.get("/stream", async (_req, res) => {
      res.setHeader("Content-Type", "text/event-stream");
      for await (const part of chunks()) res.write(`data: ${part}\n\n`);
      res.end();
    });
    const expressServer = await listen(app);
    const fastify = Fastify();
    await fastify.register(librl, { client, config });
    fastify.get("/stream", async (_request, reply) => reply.type("text/plain").send(Readable.from(chunks())));
    await fastify.listen({ port: 0, host: "127.0.0.1" });
    const urls = { express: expressServer.url, fastify: `http://127.0.0.1:${(fastify.server.address() as AddressInfo).port}` };
    try {
      for (const [framework, url] of Object.entries(urls)) {
        await flush();
        const streaming = await fetch(`${url}/stream`);
        assert.equal(streaming.status, 200, framework);
        // The headers came; the body is still streaming: the slot is held.
        assert.deepEqual(await statuses(`${url}/stream`, 1), [429], framework);
        assert.equal(await streaming.text(), framework === "express" ? "data: a\n\ndata: b\n\ndata: c\n\n" : "abc");
        // Released when the stream ended (a moment after the client read it).
        await sleep(100);
        assert.equal(await server.admin.call("EXISTS", "rl:{ip:127.0.0.1}:slots"), 0, framework);
      }
    } finally {
      await expressServer.close();
      await fastify.close();
    }
  });

  it("Redis failing mid-exchange with a concurrency policy: fail closed releases its lease before the 503, fail open after the response", async () => {
    const policies = [
      { name: "slots", algorithm: "concurrency", limit: 5, lease: "60s" },
      { name: "by-key", algorithm: "fixed", limit: 5, window: "60s", key: "api-key" },
    ];
    const keyOfKey = `rl:{api-key:${createHash("sha256").update("secret").digest("hex").slice(0, 32)}}:by-key`;
    for (const framework of FRAMEWORKS) {
      for (const [fail, status] of [
        ["open", 200],
        ["closed", 503],
      ] as const) {
        await flush();
        await server.admin.call("SET", keyOfKey, "not a limiter");
        const app = await startApp(framework, { client, config: { exempt_loopback: false, fail, policies }, logger: { warn: () => {} } });
        const res = await fetch(`http://127.0.0.1:${app.port}/`, { headers: { "X-Api-Key": "secret" } });
        await res.arrayBuffer();
        await sleep(100);
        await app.close();
        const where = `${framework}, fail: ${fail}`;
        assert.equal(res.status, status, where);
        assert.equal(await server.admin.call("EXISTS", "rl:{ip:127.0.0.1}:slots"), 0, `${where}: the lease was released`);
      }
    }
  });

  it("the one-policy way keeps each subject's own count while more subjects return than it keeps, among one-off ones", async () => {
    await flush();
    const config = { exempt_loopback: false, headers: "legacy", policies: [{ name: "per-client", algorithm: "fixed", limit: 2, window: "60s", key: "header:X-Client" }] };
    const app = Fastify();
    await app.register(librl, { url: `redis://127.0.0.1:${server.port}`, config });
    app.get("/", async () => "ok");
    await app.ready();
    const get = async (client: string) => {
      const res = await app.inject({ method: "GET", url: "/", headers: { "x-client": client } });
      return `${res.statusCode} ${String(res.headers["x-ratelimit-remaining"])}`;
    };
    try {
      // 200 returning subjects (more than the 64 kept), each after a one-off subject, three rounds.
      for (const [round, expected] of ["200 1", "200 0", "429 0"].entries()) {
        for (let i = 0; i < 200; i++) {
          assert.equal(await get(`once-${round}-${i}`), "200 1", `one-off subject, round ${round}`);
          assert.equal(await get(`client-${i}`), expected, `client-${i}, round ${round}`);
        }
      }
    } finally {
      await app.close();
    }
  });
});
