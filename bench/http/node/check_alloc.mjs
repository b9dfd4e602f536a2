// What one HttpLimiter check (checkInto, as both adapters call it) costs on the
// integration's own connection, without HTTP (docs/http/node.md, Redis
// clients): bytes allocated on the JS heap per check, and the process's
// CPU per check, 20 checks in flight, on bench/http/policies.json's
// routes (`open`: one client address, never refused; `half`: a fresh
// X-Client subject and a spent one in turn). Allocation is read as the
// heap's growth over 4,000 checks with a new space too large to be
// collected meanwhile (the flags below), so it does not move with the
// machine's load; the CPU does.
//   node --expose-gc --min-semi-space-size=128 --max-semi-space-size=128 \
//     check_alloc.mjs redis://127.0.0.1:6379 open|half
// Needs the module loaded in that server and clients/node built (dist/);
// LIBRL_DIST: another build of it (an A/B of two builds).
import { readFileSync } from "node:fs";

const dist = process.env.LIBRL_DIST ?? new URL("../../../clients/node/dist", import.meta.url).pathname;
const { HttpLimiter } = await import(`${dist}/http/index.js`);
const [url, load] = process.argv.slice(2);
if (url === undefined || !["open", "half"].includes(load) || typeof globalThis.gc !== "function") {
  console.error("usage: node --expose-gc --min-semi-space-size=128 --max-semi-space-size=128 check_alloc.mjs REDIS_URL open|half");
  process.exit(2);
}
const policies = JSON.parse(readFileSync(new URL("../policies.json", import.meta.url), "utf8"));
const core = new HttpLimiter({ url, config: { ...policies, headers: "legacy" } });
const path = `/${load}`;
const selection = core.select("GET", path);

/**
 * A request as the adapters describe it (a class: the same shape every
 * time), and where its verdict goes, as the adapters' own: the next check
 * of its lane starts from there, so the loop itself makes no promise.
 */
class Facts {
  constructor(client, lane) {
    this.client = client;
    this.lane = lane;
  }
  get method() {
    return "GET";
  }
  get path() {
    return path;
  }
  get peer() {
    return "127.0.0.1";
  }
  get user() {
    return undefined;
  }
  header(name) {
    return name === "x-client" ? this.client : undefined;
  }
  verdict() {
    this.lane.next();
  }
  error(err) {
    this.lane.fail(err);
  }
}

// The adapters' way: checkInto (the verdict to the request's own object);
// a build without it, check() and one continuation, as its adapters did.
const into = typeof core.checkInto === "function";
const nonce = String(Date.now());
let n = 0;
class Lane {
  constructor(count, done, fail) {
    this.left = count;
    this.done = done;
    this.fail = fail;
  }
  next() {
    if (this.left-- === 0) return this.done();
    const i = n++;
    const facts = new Facts(load === "half" ? (i % 2 === 0 ? `fresh-${nonce}-${i}` : `spent-${nonce}`) : undefined, this);
    if (into) core.checkInto(facts, selection, facts);
    else core.check(facts, selection).then((v) => facts.verdict(v), (e) => facts.error(e));
  }
}
function run(total) {
  return new Promise((resolve, reject) => {
    let running = 20;
    const done = () => --running === 0 && resolve();
    for (let l = 0; l < 20; l++) new Lane(total / 20, done, reject).next();
  });
}

await run(20_000); // connected, and the path compiled
const bytes = [];
const cpu = [];
for (let r = 0; r < 5; r++) {
  globalThis.gc();
  const heap = process.memoryUsage().heapUsed;
  const start = process.cpuUsage();
  await run(4000);
  const used = process.cpuUsage(start);
  cpu.push((used.user + used.system) / 4000);
  bytes.push((process.memoryUsage().heapUsed - heap) / 4000);
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(JSON.stringify({ load, bytes_per_check: Math.round(median(bytes)), cpu_us_per_check: Number(median(cpu).toFixed(1)) }));
core.close();
