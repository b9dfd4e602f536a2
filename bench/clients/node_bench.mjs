#!/usr/bin/env node
// Client-side cost of the Node package: µs per `await limiter.fixed(...)`
// against the same client's `await client.incr(...)`, one call at a time
// (round-trip latency as an application sees it), for ioredis and
// node-redis, on a standalone redis-server and on a 3-primary cluster.
// Prints one JSON object per client on stdout; progress goes to stderr.
//
//   node bench/clients/node_bench.mjs --module target/release/librl.so \
//        --redis-server redis-server [--calls 2000]
//
// Uses clients/node's own dependencies (run `npm ci` there first) and
// builds its dist/ first. Starts and stops its own servers on free loopback
// ports.
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "..", "..");
const pkgDir = path.join(repo, "clients", "node");

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}
const MODULE = path.resolve(arg("module", path.join(repo, "target", "release", "librl.so")));
const REDIS_SERVER = arg("redis-server", "redis-server");
const CALLS = Number(arg("calls", "2000"));
const BLOCK = 50; // calls per timed block (see measure)
const WARMUP = 300; // untimed calls of each kind first

if (!existsSync(MODULE)) throw new Error(`module not found: ${MODULE}`);
if (!existsSync(path.join(pkgDir, "node_modules"))) {
  throw new Error(`run npm ci in ${pkgDir} first`);
}
// Always measure the current sources: (re)build dist/ (a few seconds).
execFileSync(path.join(pkgDir, "node_modules", ".bin", "tsc"), ["-p", "tsconfig.build.json"], {
  cwd: pkgDir,
  stdio: "inherit",
});
const require = createRequire(path.join(pkgDir, "package.json"));
const { Limiter } = require(path.join(pkgDir, "dist", "index.js"));
const IORedis = require("ioredis");
const nodeRedis = require("redis");
const versions = {
  ioredis: require("ioredis/package.json").version,
  "node-redis": require("redis/package.json").version,
};

const log = (...a) => console.error("[node_bench]", ...a);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------
// Servers, killed at exit whatever happens.
const base = mkdtempSync(path.join(tmpdir(), "librl-node-bench-"));
const children = new Set();
function killAll() {
  for (const c of children) c.kill("SIGKILL");
  children.clear();
  rmSync(base, { recursive: true, force: true });
}
process.on("exit", killAll);
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => process.exit(1));

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function startServer(name, extra = []) {
  const port = await freePort();
  const dir = path.join(base, `${name}-${port}`);
  mkdirSync(dir, { recursive: true });
  const child = spawn(
    REDIS_SERVER,
    ["--port", String(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no",
      "--logfile", path.join(dir, "log"), "--loadmodule", MODULE, ...extra],
    { stdio: "ignore" },
  );
  children.add(child);
  const admin = new IORedis({ port, host: "127.0.0.1", lazyConnect: true, retryStrategy: null, maxRetriesPerRequest: 0 });
  admin.on("error", () => {});
  const deadline = Date.now() + 15000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${REDIS_SERVER} exited (${name}), see ${dir}/log`);
    try {
      await admin.connect();
      await admin.ping();
      return { port, admin, child };
    } catch {
      admin.disconnect();
      if (Date.now() > deadline) throw new Error(`${name} did not start`);
      await sleep(20);
    }
  }
}

async function startCluster() {
  const nodes = [];
  for (let i = 0; i < 3; i++) {
    const bus = await freePort();
    const node = await startServer(`cluster${i}`, [
      "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
      "--cluster-node-timeout", "5000", "--cluster-port", String(bus),
    ]);
    nodes.push({ ...node, bus });
  }
  const ranges = [[0, 5460], [5461, 10922], [10923, 16383]];
  for (const [i, n] of nodes.entries()) await n.admin.call("CLUSTER", "ADDSLOTSRANGE", ...ranges[i]);
  for (const n of nodes.slice(1)) await nodes[0].admin.call("CLUSTER", "MEET", "127.0.0.1", n.port, n.bus);
  const deadline = Date.now() + 30000;
  for (;;) {
    let ok = true;
    for (const n of nodes) {
      const info = await n.admin.call("CLUSTER", "INFO");
      const slots = await n.admin.call("CLUSTER", "SLOTS");
      if (!info.includes("cluster_state:ok") || slots.length !== 3) ok = false;
    }
    if (ok) return nodes;
    if (Date.now() > deadline) throw new Error("cluster did not reach cluster_state:ok");
    await sleep(50);
  }
}

async function errorCount(admin, prefix) {
  const m = new RegExp(`errorstat_${prefix}:count=(\\d+)`).exec(await admin.info("errorstats"));
  return m ? Number(m[1]) : 0;
}
async function getkeysCalls(admin) {
  const m = /cmdstat_command\|getkeys:calls=(\d+)/.exec(await admin.info("commandstats"));
  return m ? Number(m[1]) : 0;
}
/**
 * Commands a node served for the calls under test: all but INCR, our own
 * administration and the clients' connection handshakes (HELLO, CLIENT ...).
 */
async function clientCommands(admin) {
  let total = 0;
  for (const m of (await admin.info("commandstats")).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (!/^(incr|info|config\|.*|cluster\|.*|ping|hello|client\|.*|select|auth|readonly)$/i.test(m[1])) total += Number(m[2]);
  }
  return total;
}

// ---------------------------------------------------------------------------
// Clients.
async function connect(client, ports) {
  const cluster = ports.length > 1;
  if (client === "ioredis") {
    const c = cluster
      ? new IORedis.Cluster(ports.map((port) => ({ host: "127.0.0.1", port })), { lazyConnect: true })
      : new IORedis({ port: ports[0], host: "127.0.0.1", lazyConnect: true });
    await c.connect();
    return { c, incr: (k) => c.incr(k), close: () => c.disconnect() };
  }
  const c = cluster
    ? nodeRedis.createCluster({ rootNodes: ports.map((port) => ({ url: `redis://127.0.0.1:${port}` })) })
    : nodeRedis.createClient({ url: `redis://127.0.0.1:${ports[0]}` });
  c.on("error", () => {});
  await c.connect();
  return { c, incr: (k) => c.incr(k), close: () => c.destroy() };
}

/**
 * µs per call of sequential awaited calls. rl and incr alternate in blocks
 * of BLOCK calls, and each figure is the median over its blocks, so a load
 * spike on the machine hits both alike and moves neither much.
 */
async function measure(client, ports) {
  const { c, incr, close } = await connect(client, ports);
  try {
    const limiter = new Limiter(c);
    const keys = Array.from({ length: 100 }, (_, i) => `bench:${client}:${i}`);
    const rl = (i) => limiter.fixed(keys[i % keys.length], 1_000_000_000, 3600);
    const inc = (i) => incr(`${keys[i % keys.length]}:incr`);
    for (let i = 0; i < WARMUP; i++) {
      await rl(i);
      await inc(i);
    }
    const blocks = Math.max(1, Math.round(CALLS / BLOCK));
    const rlBlocks = [];
    const incrBlocks = [];
    for (let b = 0; b < blocks; b++) {
      let t = process.hrtime.bigint();
      for (let i = 0; i < BLOCK; i++) await rl(b * BLOCK + i);
      rlBlocks.push(Number(process.hrtime.bigint() - t) / BLOCK / 1000);
      t = process.hrtime.bigint();
      for (let i = 0; i < BLOCK; i++) await inc(b * BLOCK + i);
      incrBlocks.push(Number(process.hrtime.bigint() - t) / BLOCK / 1000);
    }
    const median = (xs) => {
      const s = [...xs].sort((a, b) => a - b);
      return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
    };
    const round = (x) => Math.round(x * 100) / 100;
    const rlUs = median(rlBlocks);
    const incrUs = median(incrBlocks);
    return { rl_us: round(rlUs), incr_us: round(incrUs), ratio: round(rlUs / incrUs), calls: blocks * BLOCK };
  } finally {
    await close();
  }
}

try {
  log(`module ${MODULE}, server ${REDIS_SERVER}, ${CALLS} calls per measurement`);
  const standalone = await startServer("standalone");
  const cluster = await startCluster();
  const clusterPorts = cluster.map((n) => n.port);
  for (const client of ["ioredis", "node-redis"]) {
    log(`${client} standalone`);
    const s = await measure(client, [standalone.port]);
    log(`${client} cluster`);
    for (const n of cluster) await n.admin.config("RESETSTAT");
    const cl = await measure(client, clusterPorts);
    let moved = 0;
    let getkeys = 0;
    let served = 0;
    for (const n of cluster) {
      moved += (await errorCount(n.admin, "MOVED")) + (await errorCount(n.admin, "ASK"));
      getkeys += await getkeysCalls(n.admin);
      served += await clientCommands(n.admin);
    }
    // Warm-up and measured rl calls: how many commands each one cost the cluster.
    const commandsPerCall = Math.round((served / (cl.calls + WARMUP)) * 1000) / 1000;
    console.log(
      JSON.stringify({
        client,
        version: versions[client],
        standalone: s,
        cluster: { ...cl, moved, getkeys, commands_per_call: commandsPerCall },
      }),
    );
  }
  for (const n of [standalone, ...cluster]) n.admin.disconnect();
} finally {
  killAll();
}
