/**
 * Real servers for the tests: redis-server and valkey-server with the
 * module loaded, on free loopback ports, and a 3-primary Redis Cluster.
 * Every process started here is killed when the test file ends, also on
 * failure (and check.sh kills any left by pid file).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, Socket } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";

const PACKAGE_DIR = path.resolve(__dirname, "..", "..");
const REPO_DIR = path.resolve(PACKAGE_DIR, "..", "..");

export const MODULE = process.env["LIBRL_MODULE"] ?? path.join(REPO_DIR, "target", "release", "librl.so");

/**
 * The server binaries' paths, relative to the repository, as
 * scripts/servers.env writes them once for the Makefile and every suite.
 */
const SERVERS_ENV: ReadonlyMap<string, string> = new Map(
  readFileSync(path.join(REPO_DIR, "scripts", "servers.env"), "utf8")
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("#") && line.includes("="))
    .map((line) => {
      const at = line.indexOf("=");
      return [line.slice(0, at).trim(), line.slice(at + 1).trim()] as const;
    }),
);

/**
 * The binary named by `variable`: the variable when set, else where
 * scripts/servers.env says scripts/install-deps.sh puts it, else (Debian's
 * redis-server 7.0, which servers.env does not name) redis-server on PATH.
 */
function serverBinary(variable: string, name: string): string {
  const fromEnv = process.env[variable];
  if (fromEnv) return fromEnv;
  const relative = SERVERS_ENV.get(variable);
  if (relative === undefined) return "redis-server";
  const installed = path.join(REPO_DIR, relative);
  if (!existsSync(installed)) {
    throw new Error(
      `${installed} (${name}) is missing: run scripts/install-deps.sh test (make test does), or set ${variable}`,
    );
  }
  return installed;
}

/**
 * The four supported servers, as the project's Rust tests name them, each
 * with the variable naming its binary. LIBRL_SERVERS (e.g.
 * "redis7,valkey9") runs only those.
 */
const FLAVORS = [
  { name: "redis7", env: "REDIS_SERVER" },
  { name: "redis8", env: "REDIS8_SERVER" },
  { name: "valkey8", env: "VALKEY8_SERVER" },
  { name: "valkey9", env: "VALKEY_SERVER" },
] as const;

function selectedFlavors(): ReadonlyArray<(typeof FLAVORS)[number]> {
  const list = process.env["LIBRL_SERVERS"]?.trim();
  if (!list) return FLAVORS;
  return list.split(",").map((raw) => {
    const name = raw.trim().toLowerCase();
    const flavor = FLAVORS.find((f) => f.name === name);
    if (!flavor) throw new Error(`LIBRL_SERVERS: unknown server ${JSON.stringify(name)}; known: redis7, redis8, valkey8, valkey9`);
    return flavor;
  });
}

/** Redis 7.0: the cluster tests' server. */
export const REDIS_SERVER = serverBinary("REDIS_SERVER", "redis7");

/**
 * The cluster servers of the tests that move slots: Redis 7.0 and Valkey 9.1
 * (whose atomic CLUSTER MIGRATESLOTS they also use), or those of them
 * LIBRL_SERVERS names.
 */
export const MIGRATION_SERVERS: ReadonlyArray<{ name: "redis7" | "valkey9"; bin: string }> = selectedFlavors()
  .filter((f): f is (typeof FLAVORS)[0] | (typeof FLAVORS)[3] => f.name === "redis7" || f.name === "valkey9")
  .map((f) => ({ name: f.name, bin: serverBinary(f.env, f.name) }));

/** The servers every standalone test runs on. */
export const SERVERS: ReadonlyArray<{ name: string; bin: string }> = selectedFlavors().map((f) => ({
  name: f.name,
  bin: serverBinary(f.env, f.name),
}));

if (!existsSync(MODULE)) {
  throw new Error(`librl module not found at ${MODULE}: build it (cargo build --release) or set LIBRL_MODULE`);
}

const BASE_DIR = (() => {
  const base = process.env["LIBRL_NODE_TEST_TMP"] ?? tmpdir();
  mkdirSync(base, { recursive: true });
  return mkdtempSync(path.join(base, "librl-node-"));
})();

const children = new Set<ChildProcess>();
function killChildren(): void {
  for (const child of children) child.kill("SIGKILL");
  children.clear();
}
process.on("exit", killChildren);
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.once(signal, () => {
    killChildren();
    process.exit(128 + (signal === "SIGINT" ? 2 : signal === "SIGTERM" ? 15 : 1));
  });
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A free loopback TCP port (the kernel's pick). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

// ---------------------------------------------------------------------------
// A minimal RESP2 connection for administration and assertions, independent
// of the client libraries under test.

export type Reply = string | number | null | Error | Reply[];

export class Admin {
  readonly #socket: Socket;
  #buffer = Buffer.alloc(0);
  readonly #waiting: Array<{ resolve: (r: Reply) => void; reject: (e: Error) => void }> = [];
  #closed: Error | undefined;

  private constructor(socket: Socket) {
    this.#socket = socket;
    socket.on("data", (chunk: Buffer) => {
      this.#buffer = Buffer.concat([this.#buffer, chunk]);
      for (;;) {
        const parsed = parse(this.#buffer, 0);
        if (parsed === undefined) break;
        this.#buffer = this.#buffer.subarray(parsed[1]);
        this.#waiting.shift()?.resolve(parsed[0]);
      }
    });
    const fail = (err: Error) => {
      this.#closed = err;
      for (const w of this.#waiting.splice(0)) w.reject(err);
    };
    socket.on("error", fail);
    socket.on("close", () => fail(new Error("connection closed")));
  }

  static connect(port: number): Promise<Admin> {
    return new Promise((resolve, reject) => {
      const socket = new Socket();
      socket.once("error", reject);
      socket.connect(port, "127.0.0.1", () => {
        socket.off("error", reject);
        resolve(new Admin(socket));
      });
    });
  }

  /** Sends a command; resolves to its reply (an error reply resolves to an Error). */
  raw(...args: Array<string | number>): Promise<Reply> {
    if (this.#closed) return Promise.reject(this.#closed);
    let out = `*${args.length}\r\n`;
    for (const arg of args) {
      const s = String(arg);
      out += `$${Buffer.byteLength(s)}\r\n${s}\r\n`;
    }
    return new Promise((resolve, reject) => {
      this.#waiting.push({ resolve, reject });
      this.#socket.write(out);
    });
  }

  /** As raw, but an error reply rejects. */
  async call(...args: Array<string | number>): Promise<Reply> {
    const reply = await this.raw(...args);
    if (reply instanceof Error) throw reply;
    return reply;
  }

  /** INFO fields of a section, names lower-cased (module command names keep their case there). */
  async info(section: string): Promise<Map<string, string>> {
    const text = String(await this.call("INFO", section));
    const map = new Map<string, string>();
    for (const line of text.split("\r\n")) {
      const i = line.indexOf(":");
      if (i > 0 && !line.startsWith("#")) map.set(line.slice(0, i).toLowerCase(), line.slice(i + 1));
    }
    return map;
  }

  /** calls= of one command in INFO commandstats (0 when absent). */
  async commandCalls(name: string): Promise<number> {
    const stat = (await this.info("commandstats")).get(`cmdstat_${name.toLowerCase()}`);
    const m = stat === undefined ? null : /calls=(\d+)/.exec(stat);
    return m ? Number(m[1]) : 0;
  }

  /** count= of one error prefix in INFO errorstats (0 when absent). */
  async errorCount(prefix: string): Promise<number> {
    const stat = (await this.info("errorstats")).get(`errorstat_${prefix.toLowerCase()}`);
    const m = stat === undefined ? null : /count=(\d+)/.exec(stat);
    return m ? Number(m[1]) : 0;
  }

  close(): void {
    this.#socket.destroy();
  }
}

function parse(buf: Buffer, at: number): [Reply, number] | undefined {
  const eol = buf.indexOf("\r\n", at);
  if (eol < 0) return undefined;
  const type = String.fromCharCode(buf[at] as number);
  const line = buf.toString("utf8", at + 1, eol);
  const next = eol + 2;
  switch (type) {
    case "+":
      return [line, next];
    case "-":
      return [new Error(line), next];
    case ":":
      return [Number(line), next];
    case "$": {
      const len = Number(line);
      if (len < 0) return [null, next];
      if (buf.length < next + len + 2) return undefined;
      return [buf.toString("utf8", next, next + len), next + len + 2];
    }
    case "*": {
      const len = Number(line);
      if (len < 0) return [null, next];
      const items: Reply[] = [];
      let pos = next;
      for (let i = 0; i < len; i++) {
        const item = parse(buf, pos);
        if (item === undefined) return undefined;
        items.push(item[0]);
        pos = item[1];
      }
      return [items, pos];
    }
    default:
      throw new Error(`unexpected RESP type ${type}`);
  }
}

// ---------------------------------------------------------------------------
// Servers.

export class Server {
  constructor(
    readonly name: string,
    readonly port: number,
    readonly dir: string,
    readonly process: ChildProcess,
    readonly admin: Admin,
  ) {}

  async stop(): Promise<void> {
    this.admin.close();
    if (this.process.exitCode !== null || this.process.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => this.process.once("exit", () => resolve()));
    this.process.kill("SIGKILL");
    await exited;
    children.delete(this.process);
  }
}

let serial = 0;

export async function startServer(bin: string, name: string, extra: string[] = []): Promise<Server> {
  const port = await freePort();
  const dir = path.join(BASE_DIR, `${name}-${++serial}-${port}`);
  mkdirSync(dir, { recursive: true });
  const log = path.join(dir, "server.log");
  const args = [
    "--port", String(port),
    "--bind", "127.0.0.1",
    "--dir", dir,
    "--pidfile", path.join(dir, "server.pid"),
    "--logfile", log,
    "--save", "",
    "--appendonly", "no",
    "--loadmodule", MODULE,
    ...extra,
  ];
  const child = spawn(bin, args, { stdio: ["ignore", "ignore", "pipe"] });
  children.add(child);
  let stderr = "";
  child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
  const spawnError = new Promise<never>((_, reject) => child.once("error", reject));
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (child.exitCode !== null) {
      const tail = existsSync(log) ? readFileSync(log, "utf8").slice(-2000) : "";
      throw new Error(`${bin} exited with ${child.exitCode}: ${stderr}${tail}`);
    }
    try {
      const admin = await Promise.race([Admin.connect(port), spawnError]);
      const pong = await admin.raw("PING");
      if (pong === "PONG") return new Server(name, port, dir, child, admin);
      admin.close();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") throw new Error(`${bin} not found`);
    }
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`${bin} did not answer PING on port ${port}`);
    }
    await sleep(20);
  }
}

// ---------------------------------------------------------------------------
// A 3-primary Redis Cluster.

export interface ClusterNode {
  server: Server;
  id: string;
  slots: [number, number];
}

export class TestCluster {
  constructor(readonly nodes: ClusterNode[]) {}

  get ports(): number[] {
    return this.nodes.map((n) => n.server.port);
  }

  /** The node that currently owns `slot`, as its own CLUSTER SLOTS says on node 0. */
  async ownerOf(slot: number): Promise<ClusterNode> {
    const slots = (await this.nodes[0]!.server.admin.call("CLUSTER", "SLOTS")) as Reply[][];
    for (const range of slots) {
      const [lo, hi, master] = range as [number, number, Reply[]];
      if (slot >= lo && slot <= hi) {
        const port = master[1] as number;
        const node = this.nodes.find((n) => n.server.port === port);
        if (node) return node;
      }
    }
    throw new Error(`no owner for slot ${slot}`);
  }

  async resetStats(): Promise<void> {
    for (const n of this.nodes) await n.server.admin.call("CONFIG", "RESETSTAT");
  }

  /** Sums of commandstats calls / errorstats counts over every node. */
  async perNode<T>(f: (admin: Admin) => Promise<T>): Promise<T[]> {
    return Promise.all(this.nodes.map((n) => f(n.server.admin)));
  }

  /** Moves `slot` (and its keys) to `target`: SETSLOT IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE. */
  async moveSlot(slot: number, target: ClusterNode, between?: () => Promise<void>): Promise<number> {
    const source = await this.ownerOf(slot);
    if (source === target) return 0;
    await target.server.admin.call("CLUSTER", "SETSLOT", slot, "IMPORTING", source.id);
    await source.server.admin.call("CLUSTER", "SETSLOT", slot, "MIGRATING", target.id);
    if (between) await between();
    let moved = 0;
    for (;;) {
      const keys = (await source.server.admin.call("CLUSTER", "GETKEYSINSLOT", slot, 100)) as string[];
      if (keys.length === 0) break;
      await source.server.admin.call("MIGRATE", "127.0.0.1", target.server.port, "", 0, 5000, "KEYS", ...keys);
      moved += keys.length;
      if (between) await between();
    }
    await target.server.admin.call("CLUSTER", "SETSLOT", slot, "NODE", target.id);
    await source.server.admin.call("CLUSTER", "SETSLOT", slot, "NODE", target.id);
    for (const n of this.nodes) {
      if (n !== source && n !== target) await n.server.admin.call("CLUSTER", "SETSLOT", slot, "NODE", target.id);
    }
    return moved;
  }

  /** Until every node's CLUSTER SLOTS names `target` as the owner of `slot`. */
  async waitForOwner(slot: number, target: ClusterNode): Promise<void> {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const owners = await Promise.all(
        this.nodes.map(async (n) => {
          const slots = (await n.server.admin.call("CLUSTER", "SLOTS")) as Reply[][];
          const range = slots.find((r) => slot >= (r[0] as number) && slot <= (r[1] as number));
          return range === undefined ? undefined : ((range[2] as Reply[])[1] as number);
        }),
      );
      if (owners.every((port) => port === target.server.port)) return;
      if (Date.now() > deadline) throw new Error(`slot ${slot}: owners ${JSON.stringify(owners)}, not ${target.server.port}`);
      await sleep(20);
    }
  }

  /** Valkey 9: moves `slot` with CLUSTER MIGRATESLOTS, in one step, and waits until every node knows. */
  async moveSlotAtomically(slot: number, target: ClusterNode): Promise<void> {
    const source = await this.ownerOf(slot);
    await source.server.admin.call("CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", slot, slot, "NODE", target.id);
    await this.waitForOwner(slot, target);
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.server.stop()));
  }
}

export async function startCluster(bin: string = REDIS_SERVER): Promise<TestCluster> {
  const servers: Server[] = [];
  try {
    for (let i = 0; i < 3; i++) {
      const busPort = await freePort();
      servers.push(
        await startServer(bin, `cluster${i}`, [
          "--cluster-enabled", "yes",
          "--cluster-config-file", "nodes.conf",
          "--cluster-node-timeout", "5000",
          "--cluster-port", String(busPort),
        ]),
      );
    }
    const ranges: Array<[number, number]> = [
      [0, 5460],
      [5461, 10922],
      [10923, 16383],
    ];
    const nodes: ClusterNode[] = [];
    for (const [i, server] of servers.entries()) {
      const range = ranges[i]!;
      // Distinct epochs from the start, as redis-cli --cluster create sets
      // them: no equal epochs left to resolve by gossip while a test moves
      // a slot (a late bump can hand the slot back to its old owner).
      await server.admin.call("CLUSTER", "SET-CONFIG-EPOCH", i + 1);
      await server.admin.call("CLUSTER", "ADDSLOTSRANGE", range[0], range[1]);
      nodes.push({ server, id: String(await server.admin.call("CLUSTER", "MYID")), slots: range });
    }
    for (const server of servers.slice(1)) {
      const busPort = Number(/--cluster-port (\d+)/.exec(server.process.spawnargs.join(" "))?.[1]);
      await servers[0]!.admin.call("CLUSTER", "MEET", "127.0.0.1", server.port, busPort);
    }
    const deadline = Date.now() + 30_000;
    for (;;) {
      let ok = true;
      for (const server of servers) {
        const info = String(await server.admin.call("CLUSTER", "INFO"));
        const slots = (await server.admin.call("CLUSTER", "SLOTS")) as Reply[];
        if (!info.includes("cluster_state:ok") || !info.includes("cluster_known_nodes:3") || slots.length !== 3) {
          ok = false;
        }
      }
      if (ok) break;
      if (Date.now() > deadline) throw new Error("cluster did not reach cluster_state:ok");
      await sleep(50);
    }
    return new TestCluster(nodes);
  } catch (err) {
    await Promise.all(servers.map((s) => s.stop()));
    throw err;
  }
}

/** Writes a note file in the test's tmp dir (for debugging a failed run). */
export function note(name: string, text: string): void {
  writeFileSync(path.join(BASE_DIR, name), text);
}

/** A key whose slot is owned by the given node's range (searching key{prefix}N). */
export function keyInRange(prefix: string, lo: number, hi: number, slotOf: (k: string) => number): string {
  for (let i = 0; ; i++) {
    const key = `${prefix}${i}`;
    const slot = slotOf(key);
    if (slot >= lo && slot <= hi) return key;
  }
}
