/**
 * The conformance runner (conformance/README.md, The runner contract):
 * every case of conformance/cases/*.json, in Express and in Fastify, each
 * with ioredis and with node-redis, over real HTTP against a real
 * redis-server with the module (and a real 3-primary cluster for the
 * `cluster` cases; a port where nothing listens for `down`). The four
 * framework x client combinations run side by side, each on its own
 * servers; a combination's cases run in order, each after a FLUSHALL.
 */
import assert from "node:assert/strict";
import { request as httpRequest, type OutgoingHttpHeaders } from "node:http";
import { readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import Redis, { Cluster } from "ioredis";
import { createClient, createCluster } from "redis";
import type { RedisLikeClient } from "../src/index.js";
import { keySlot } from "../src/slot.js";
import { FRAMEWORKS, startApp, type FrameworkName } from "../examples/app.js";
import { CLIENT_NAMES, type ClientName } from "./clients.js";
import { REDIS_SERVER, freePort, sleep, startCluster, startServer, type Admin, type Reply, type Server, type TestCluster } from "./helpers.js";

const CASES_DIR =
  process.env["LIBRL_CONFORMANCE_CASES"] ?? path.resolve(__dirname, "..", "..", "..", "..", "conformance", "cases");
/** Per framework, the cases it does not pass yet (conformance/README.md, Pending): reported as PENDING, not run. */
const PENDING = (
  JSON.parse(readFileSync(path.resolve(CASES_DIR, "..", "pending.json"), "utf8")) as { cases: Record<string, string[]> }
).cases;
/** Pending for every framework here: this runner need not read it yet. */
const pendingEverywhere = (c: { name: string }): boolean => FRAMEWORKS.every((f) => (PENDING[f] ?? []).includes(c.name));
/** What this runner can do beyond the base contract: the `local` fail mode. */
const CAPABILITIES = new Set<string>(["fail-local"]);

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Text, or `{"hex": ...}`: exactly those bytes. */
type Bytes = string | { hex: string };

interface HttpRequest {
  method?: string;
  path: Bytes;
  /** A value, or a list of values sent as that many header lines. */
  headers?: Record<string, Bytes | Bytes[]>;
  body?: string;
  chunked?: boolean;
  /** Closes the socket this long after the request was sent, unread (the step expects nothing). */
  disconnect_after_ms?: number;
}
interface HttpExpect {
  status?: number;
  headers?: Record<string, Json>;
  absent?: string[];
  content_type?: string;
  body?: Record<string, Json>;
  body_text?: string;
  /** The handler failed: a 500, or the connection closed unanswered. */
  failed?: boolean;
  /** From sending the request to having read the whole response (a queued request waits for its turn). */
  elapsed_ms?: Json;
}
/** One request of a parallel step, sent `after_ms` after the step began. */
interface ParallelRequest {
  request: HttpRequest;
  expect?: HttpExpect;
  after_ms?: number;
}
type Step =
  | { request: HttpRequest; expect?: HttpExpect; repeat?: number; within_ms?: number }
  | { reload: Record<string, unknown>; expect: "reloaded" | { error: string } }
  | { parallel: ParallelRequest[] }
  | { sleep_ms: number }
  | { redis: string[]; expect: Json }
  | { redis_pause_ms: number }
  | { check: "every_key_expires" };

interface Case {
  name: string;
  rule?: string;
  redis?: "standalone" | "cluster" | "down" | "hang";
  requires?: string[];
  config: Record<string, unknown>;
  startup_error?: string;
  steps?: Step[];
}

function loadCases(): Case[] {
  const files = readdirSync(CASES_DIR).filter((f) => f.endsWith(".json")).sort();
  const cases = files.flatMap((f) => (JSON.parse(readFileSync(path.join(CASES_DIR, f), "utf8")) as { cases: Case[] }).cases);
  const names = new Set<string>();
  for (const c of cases) {
    assert.ok(!names.has(c.name), `case name ${c.name} is used twice`);
    names.add(c.name);
  }
  return cases;
}

// ---------------------------------------------------------------------------
// The case format, read strictly: a member this runner does not know (a
// typo such as "header" for "headers") fails instead of checking nothing.

/** Cases for a Redis that hangs need the black-box runner's listener (conformance/tests/hanging.py): it runs them for both frameworks. */
const LEFT_TO_THE_BLACK_BOX = new Set(["hang"]);

const CASE_FIELDS = ["name", "rule", "redis", "requires", "config", "startup_error", "cross_field", "steps"];
const REQUEST_FIELDS = ["method", "path", "headers", "body", "chunked", "disconnect_after_ms"];
const EXPECT_FIELDS = ["status", "headers", "absent", "content_type", "body", "body_text", "failed", "elapsed_ms"];
const PARALLEL_FIELDS = ["request", "expect", "after_ms"];
/** Each step's kind, by the member that names it, and every member it may have. */
const STEP_FIELDS: Readonly<Record<string, readonly string[]>> = {
  request: ["request", "expect", "repeat", "within_ms"],
  reload: ["reload", "expect"],
  parallel: ["parallel"],
  sleep_ms: ["sleep_ms"],
  redis: ["redis", "expect"],
  redis_pause_ms: ["redis_pause_ms"],
  check: ["check"],
};

/** What is not in the format a case is written in, or undefined. */
function formatError(c: Case): string | undefined {
  const extra = (value: object, allowed: readonly string[], where: string) => {
    const unknown = Object.keys(value).filter((k) => !allowed.includes(k));
    return unknown.length === 0 ? undefined : `${where}: unknown member ${unknown.join(", ")}`;
  };
  const top = extra(c, CASE_FIELDS, "case");
  if (top !== undefined) return top;
  if ((c.startup_error === undefined) === (c.steps === undefined)) return "case: give steps or startup_error";
  const requestError = (r: { request: HttpRequest; expect?: HttpExpect }, where: string): string | undefined =>
    extra(r.request, REQUEST_FIELDS, `${where} request`) ??
    extra(r.expect ?? {}, EXPECT_FIELDS, `${where} expect`) ??
    (r.request.disconnect_after_ms !== undefined && r.expect !== undefined ? `${where}: a request disconnected unread expects nothing` : undefined) ??
    (r.expect?.failed === true && r.expect.status !== undefined ? `${where} expect: failed is the status` : undefined);
  for (const [i, step] of (c.steps ?? []).entries()) {
    const kind = Object.keys(STEP_FIELDS).find((k) => k in step);
    if (kind === undefined) return `step ${i}: not a step`;
    let why = extra(step, STEP_FIELDS[kind] as readonly string[], `step ${i}`);
    if (why === undefined && "request" in step) why = requestError(step, `step ${i}`);
    if (why === undefined && "parallel" in step) {
      if (!Array.isArray(step.parallel) || step.parallel.length < 2) why = `step ${i}: parallel is not a list of two or more requests`;
      for (const [j, sub] of (Array.isArray(step.parallel) ? step.parallel : []).entries()) {
        why ??= extra(sub, PARALLEL_FIELDS, `step ${i} parallel[${j}]`) ?? requestError(sub, `step ${i} parallel[${j}]`);
      }
    }
    if (why !== undefined) return why;
  }
  return undefined;
}

// ---------------------------------------------------------------------------
// Matching expected values (conformance/README.md, Matchers).

function isMatcher(e: Json): e is { [key: string]: Json } {
  return typeof e === "object" && e !== null && !Array.isArray(e) && ("range" in e || "re" in e || "any" in e);
}

/** Why `actual` does not match `expected`, or undefined when it does. */
function mismatch(expected: Json, actual: unknown): string | undefined {
  const show = () => `expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`;
  if (isMatcher(expected)) {
    if ("any" in expected) return undefined;
    if ("range" in expected) {
      const [lo, hi] = expected["range"] as [number, number];
      const n = typeof actual === "string" && /^-?[0-9]+$/.test(actual) ? Number(actual) : actual;
      return typeof n === "number" && Number.isInteger(n) && n >= lo && n <= hi ? undefined : show();
    }
    const re = new RegExp(`^(?:${String(expected["re"])})$`, "s");
    return typeof actual === "string" && re.test(actual) ? undefined : show();
  }
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual) || actual.length !== expected.length) return show();
    for (let i = 0; i < expected.length; i++) {
      const why = mismatch(expected[i] as Json, actual[i] as unknown);
      if (why !== undefined) return `[${i}]: ${why}`;
    }
    return undefined;
  }
  if (typeof expected === "object" && expected !== null) {
    if (typeof actual !== "object" || actual === null || Array.isArray(actual)) return show();
    for (const [k, v] of Object.entries(expected)) {
      const why = mismatch(v as Json, (actual as Record<string, unknown>)[k]);
      if (why !== undefined) return `.${k}: ${why}`;
    }
    return undefined;
  }
  return actual === expected ? undefined : show();
}

// ---------------------------------------------------------------------------
// HTTP.

interface HttpResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * As Node's HTTP client writes it: a header value or a request target as
 * Latin-1 text, one character per byte (text as its UTF-8 bytes).
 */
function wire(value: Bytes): string {
  return (typeof value === "string" ? Buffer.from(value, "utf8") : Buffer.from(value.hex, "hex")).toString("latin1");
}

/** The app closed the connection without answering (a failed handler, in some frameworks). */
class NoResponse extends Error {}

/**
 * One request on a connection of its own; with `disconnect_after_ms`, the
 * socket is closed that long after the request was sent, unread: undefined.
 */
function send(port: number, req: HttpRequest): Promise<HttpResponse | undefined> {
  const headers: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(req.headers ?? {})) headers[name] = Array.isArray(value) ? value.map(wire) : wire(value);
  if (req.body !== undefined && !req.chunked) headers["Content-Length"] = Buffer.byteLength(req.body);
  return new Promise((resolve, reject) => {
    const r = httpRequest(
      { host: "127.0.0.1", localAddress: "127.0.0.1", port, method: req.method ?? "GET", path: wire(req.path), headers, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const out: Record<string, string> = {};
          // Every line of a header, joined: `headers` keeps only the first line of some names (Retry-After, Content-Type).
          for (const [k, lines] of Object.entries(res.headersDistinct)) {
            if (lines !== undefined) out[k] = lines.join(", ");
          }
          resolve({ status: res.statusCode ?? 0, headers: out, body: Buffer.concat(chunks).toString("utf8") });
        });
        res.on("error", reject);
      },
    );
    const dropAfter = req.disconnect_after_ms;
    r.on("error", (err: NodeJS.ErrnoException) => {
      if (dropAfter !== undefined) return; // the socket this runner closed
      reject(err.code === "ECONNRESET" || /socket hang up/.test(err.message) ? new NoResponse(err.message) : err);
    });
    if (req.body !== undefined) r.write(req.body);
    r.end();
    if (dropAfter !== undefined) setTimeout(() => (r.destroy(), resolve(undefined)), dropAfter);
  });
}

/** One request of a step, sent and checked: why it does not match, or undefined. */
async function requestStep(port: number, request: HttpRequest, expect: HttpExpect | undefined): Promise<string | undefined> {
  let res: HttpResponse | undefined;
  const start = performance.now();
  try {
    res = await send(port, request);
  } catch (err) {
    if (err instanceof NoResponse) return expect?.failed === true ? undefined : `no response: ${err.message}`;
    throw err;
  }
  const elapsed = Math.round(performance.now() - start);
  if (res === undefined || expect === undefined) return undefined;
  const why = checkResponse(res, expect);
  if (why !== undefined || expect.elapsed_ms === undefined) return why;
  const late = mismatch(expect.elapsed_ms, elapsed);
  return late === undefined ? undefined : `elapsed_ms: ${late}`;
}

function checkResponse(res: HttpResponse, e: HttpExpect): string | undefined {
  const seen = `(status ${res.status}, headers ${JSON.stringify(res.headers)}, body ${JSON.stringify(res.body.slice(0, 500))})`;
  if (e.failed === true && res.status !== 500) return `status: expected a failed handler's 500 (or no response), got ${res.status} ${seen}`;
  if (e.status !== undefined && res.status !== e.status) return `status: expected ${e.status}, got ${res.status} ${seen}`;
  for (const [name, value] of Object.entries(e.headers ?? {})) {
    const actual = res.headers[name.toLowerCase()];
    if (actual === undefined) return `header ${name}: missing ${seen}`;
    const why = mismatch(value, actual);
    if (why !== undefined) return `header ${name}: ${why} ${seen}`;
  }
  for (const name of e.absent ?? []) {
    if (res.headers[name.toLowerCase()] !== undefined) return `header ${name}: expected absent ${seen}`;
  }
  if (e.content_type !== undefined && !(res.headers["content-type"] ?? "").startsWith(e.content_type)) {
    return `content-type: expected ${e.content_type}... ${seen}`;
  }
  if (e.body !== undefined) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(res.body);
    } catch {
      return `body: not JSON ${seen}`;
    }
    const why = mismatch(e.body as Json, parsed);
    if (why !== undefined) return `body${why} ${seen}`;
  }
  if (e.body_text !== undefined && res.body !== e.body_text) return `body: expected ${JSON.stringify(e.body_text)} ${seen}`;
  return undefined;
}

// ---------------------------------------------------------------------------
// Redis: the servers of one framework x client combination.

let clusterTurn: Promise<unknown> = Promise.resolve();

/**
 * One cluster starts at a time, and a start that lost its bus port (picked
 * free, then taken by another test's server before the bind) is retried.
 */
function startClusterInTurn(): Promise<TestCluster> {
  const start = async (): Promise<TestCluster> => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await startCluster();
      } catch (err) {
        if (attempt === 3 || !/Address already in use/.test(String(err))) throw err;
      }
    }
  };
  const started = clusterTurn.then(start, start);
  clusterTurn = started.catch(() => {});
  return started;
}

/** The clients under test, and `url`: the integration's own connection made from a URL (standalone only). */
type RunnerClient = ClientName | "url";
const RUNNER_CLIENTS: readonly RunnerClient[] = [...CLIENT_NAMES, "url"];

class Backends {
  standalone!: Server;
  cluster: TestCluster | undefined;
  #clients = new Map<string, { client: RedisLikeClient; close: () => Promise<void> }>();
  #downPort: number | undefined;

  constructor(readonly clientName: RunnerClient) {}

  /** What the app is given to reach Redis: a client, or (`url`) the URL its integration connects to itself. */
  async redis(kind: "standalone" | "cluster" | "down"): Promise<{ client: RedisLikeClient } | { url: string }> {
    if (this.clientName !== "url") return { client: await this.client(kind) };
    if (kind === "cluster") throw new Error("the integration's own connection is standalone only");
    const port = kind === "down" ? (this.#downPort ??= await freePort()) : this.standalone.port;
    return { url: `redis://127.0.0.1:${port}` };
  }

  async start(needCluster: boolean): Promise<void> {
    this.standalone = await startServer(REDIS_SERVER, `conformance-${this.clientName}`);
    if (needCluster) this.cluster = await startClusterInTurn();
  }

  primaries(kind: "standalone" | "cluster"): Admin[] {
    if (kind === "standalone") return [this.standalone.admin];
    return (this.cluster as TestCluster).nodes.map((n) => n.server.admin);
  }

  /** The client the app is given; standalone and cluster clients are kept for the combination's cases. */
  async client(kind: "standalone" | "cluster" | "down"): Promise<RedisLikeClient> {
    if (kind === "down") {
      const made = await this.#connect("down", [await freePort()]);
      this.#clients.set(`down-${this.#clients.size}`, made);
      return made.client;
    }
    let made = this.#clients.get(kind);
    if (made === undefined) {
      const ports = kind === "standalone" ? [this.standalone.port] : (this.cluster as TestCluster).ports;
      made = await this.#connect(kind, ports);
      this.#clients.set(kind, made);
    }
    return made.client;
  }

  async #connect(kind: "standalone" | "cluster" | "down", ports: number[]) {
    const port = ports[0] as number;
    if (this.clientName === "ioredis") {
      // Connected (slots loaded) before the first case: a request of a case
      // must not spend its `timeout` on the client's start on a busy machine.
      if (kind === "cluster") {
        const c = new Cluster(ports.map((p) => ({ host: "127.0.0.1", port: p })), { lazyConnect: true });
        c.on("error", () => {});
        await c.connect();
        // ioredis connects to each primary at its first command: do it now.
        await Promise.all(c.nodes("master").map((node) => node.ping()));
        return { client: c, close: async () => void c.disconnect() };
      }
      const r = new Redis({ host: "127.0.0.1", port, retryStrategy: () => 100, lazyConnect: true });
      r.on("error", () => {});
      // The app starts whether or not Redis answers: a client that is still connecting is handed over.
      const connecting = r.connect().catch(() => {});
      if (kind !== "down") await connecting;
      return { client: r, close: async () => void r.disconnect() };
    }
    if (kind === "cluster") {
      const c = createCluster({ rootNodes: ports.map((p) => ({ url: `redis://127.0.0.1:${p}` })) });
      c.on("error", () => {});
      await c.connect();
      return { client: c, close: async () => void c.destroy() };
    }
    const r = createClient({ url: `redis://127.0.0.1:${port}`, socket: { reconnectStrategy: () => 100 } });
    r.on("error", () => {});
    // The app starts whether or not Redis answers: a client that is still connecting is handed over.
    const connecting = r.connect().catch(() => {});
    if (kind !== "down") await connecting;
    return { client: r, close: async () => void r.destroy() };
  }

  async stop(): Promise<void> {
    for (const made of this.#clients.values()) await made.close();
    await this.cluster?.stop();
    await this.standalone?.stop();
  }
}

async function redisStep(backends: Backends, kind: "standalone" | "cluster", argv: string[]): Promise<unknown> {
  let admin = backends.primaries(kind)[0] as Admin;
  if (kind === "cluster") {
    // The node owning the command's first key, as the server itself names keys.
    const keys = await admin.raw("COMMAND", "GETKEYS", ...argv);
    if (Array.isArray(keys) && typeof keys[0] === "string") {
      admin = (await (backends.cluster as TestCluster).ownerOf(keySlot(keys[0]))).server.admin;
    }
  }
  const reply = await admin.raw(...argv);
  const plain = (r: Reply): unknown => (r instanceof Error ? r.message : Array.isArray(r) ? r.map(plain) : r);
  return plain(reply);
}

/** Every key in the database has a time to live. */
async function everyKeyExpires(admins: Admin[]): Promise<string | undefined> {
  for (const admin of admins) {
    let cursor = "0";
    do {
      const [next, keys] = (await admin.call("SCAN", cursor, "COUNT", 1000)) as [string, string[]];
      for (const key of keys) {
        const pttl = await admin.call("PTTL", key);
        if (typeof pttl !== "number" || pttl <= 0) return `key ${key} has PTTL ${String(pttl)}`;
      }
      cursor = next;
    } while (cursor !== "0");
  }
  return undefined;
}

async function runCase(c: Case, framework: FrameworkName, backends: Backends): Promise<void> {
  const malformed = formatError(c);
  if (malformed !== undefined) assert.fail(`${c.name}: ${malformed}`);
  const redis = c.redis ?? "standalone";
  if (redis === "hang") assert.fail(`${c.name}: redis: hang is the black-box runner's`);
  const kind = redis;
  if (kind !== "down") {
    for (const admin of backends.primaries(kind)) {
      await admin.call("CLIENT", "UNPAUSE");
      await admin.call("FLUSHALL");
    }
  }
  // Warnings (fail-open, shadow, failed refunds) are shown only with a failing step.
  const warnings: string[] = [];
  const options = { ...(await backends.redis(kind)), config: c.config, logger: { warn: (m: string) => warnings.push(m) } };
  if (c.startup_error !== undefined) {
    await assert.rejects(
      async () => (await startApp(framework, options)).close(),
      (err: Error) => {
        assert.ok(err.message.includes(c.startup_error as string), `the start-up error ${JSON.stringify(err.message)} does not name ${c.startup_error}`);
        return true;
      },
      `the configuration should be refused at start-up, naming ${c.startup_error}`,
    );
    return;
  }
  const app = await startApp(framework, options);
  try {
    for (const [i, step] of (c.steps ?? []).entries()) {
      const fail = (why: string) =>
        assert.fail(`${c.name} [${framework}], step ${i}: ${why}${warnings.length > 0 ? `\nwarnings: ${warnings.join("\n")}` : ""}`);
      if ("request" in step) {
        const start = performance.now();
        for (let n = 0; n < (step.repeat ?? 1); n++) {
          const why = await requestStep(app.port, step.request, step.expect);
          if (why !== undefined) fail(`${step.repeat ? `request ${n + 1} of ${step.repeat}: ` : ""}${why}`);
        }
        const took = performance.now() - start;
        if (step.within_ms !== undefined && took > step.within_ms) fail(`within_ms: the requests took ${Math.round(took)} ms, more than ${step.within_ms}`);
      } else if ("reload" in step) {
        // What the example does on SIGHUP (docs/http.md, Reload), called in the process.
        let got: "reloaded" | { error: string } = "reloaded";
        try {
          app.core.reload(step.reload);
        } catch (err) {
          got = { error: (err as Error).message };
        }
        const expected = step.expect;
        const ok = expected === "reloaded" ? got === "reloaded" : typeof got === "object" && got.error.includes(`: ${expected.error}:`);
        if (!ok) fail(`reload: expected ${JSON.stringify(expected)}, got ${JSON.stringify(got)}`);
      } else if ("parallel" in step) {
        // Each on its own connection, `after_ms` after the step began; all awaited, every mismatch named.
        const whys = await Promise.all(
          step.parallel.map(async (p) => {
            await sleep(p.after_ms ?? 0);
            return requestStep(app.port, p.request, p.expect);
          }),
        );
        const wrong = whys.map((why, j) => (why === undefined ? undefined : `parallel[${j}]: ${why}`)).filter((w) => w !== undefined);
        if (wrong.length > 0) fail(wrong.join("\n"));
      } else if ("sleep_ms" in step) {
        await sleep(step.sleep_ms);
      } else if ("redis_pause_ms" in step) {
        for (const admin of backends.primaries(kind === "down" ? "standalone" : kind)) {
          await admin.call("CLIENT", "PAUSE", step.redis_pause_ms, "ALL");
        }
      } else if ("redis" in step) {
        const why = mismatch(step.expect, await redisStep(backends, kind === "cluster" ? "cluster" : "standalone", step.redis));
        if (why !== undefined) fail(`${step.redis.join(" ")}: ${why}`);
      } else if ("check" in step) {
        const why = await everyKeyExpires(backends.primaries(kind === "cluster" ? "cluster" : "standalone"));
        if (why !== undefined) fail(`every_key_expires: ${why}`);
      } else {
        fail(`unknown step ${JSON.stringify(step)}`);
      }
    }
  } finally {
    await app.close();
  }
}

/**
 * A few requests through a throwaway app before the first case, so that
 * its first steps do not spend the case's `timeout` (250 ms by default) on
 * compiling the request path on a busy machine.
 */
async function warmUp(framework: FrameworkName, backends: Backends): Promise<void> {
  const config = {
    exempt_loopback: false,
    timeout: "10s",
    prefix: "warm-up:",
    policies: [{ name: "w", algorithm: "fixed", limit: 1000, window: "1s" }],
  };
  const app = await startApp(framework, { ...(await backends.redis("standalone")), config });
  try {
    for (let i = 0; i < 30; i++) await send(app.port, { path: "/" });
  } finally {
    await app.close();
  }
}

const CASES = loadCases();
const needCluster = CASES.some((c) => c.redis === "cluster");

describe("conformance", { concurrency: true }, () => {
  it("every case is written in the format this runner reads", () => {
    const wrong = CASES.filter((c) => !pendingEverywhere(c) && !LEFT_TO_THE_BLACK_BOX.has(c.redis ?? "standalone"))
      .map((c) => [c.name, formatError(c)])
      .filter(([, why]) => why !== undefined);
    assert.deepEqual(wrong, []);
  });
  for (const framework of FRAMEWORKS) {
    for (const clientName of RUNNER_CLIENTS) {
      describe(`${framework} + ${clientName}`, { concurrency: 1 }, () => {
        const backends = new Backends(clientName);
        before(async () => {
          await backends.start(needCluster && clientName !== "url");
          await warmUp(framework, backends);
        });
        after(() => backends.stop());
        for (const c of CASES) {
          const missing = (c.requires ?? []).filter((r) => !CAPABILITIES.has(r));
          const skip = (PENDING[framework] ?? []).includes(c.name)
            ? `PENDING: ${framework} does not pass it yet (conformance/pending.json)`
            : LEFT_TO_THE_BLACK_BOX.has(c.redis ?? "standalone")
              ? `redis: ${c.redis}: run by the black-box runner (conformance/tests/test_blackbox.py)`
              : missing.length > 0
              ? `requires ${missing.join(", ")} (not this runner's)`
              : clientName === "url" && c.redis === "cluster"
              ? "a cluster takes a client: the integration's own connection is standalone only"
              : false;
          it(`${c.name} [${framework}, ${clientName}, ${c.redis ?? "standalone"}]`, { skip }, () => runCase(c, framework, backends));
        }
      });
    }
  }
});
