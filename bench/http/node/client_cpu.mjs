// The app CPU one RL.ALL costs through each client path the Node
// integrations can take, without HTTP (docs/http/node.md, Redis clients):
// 20 calls in flight, each loop sending the next when its reply comes.
//   REDIS_URL=redis://127.0.0.1:6379 taskset -c 1 node client_cpu.mjs [calls]
// Paths: ioredis's call(); the same with enableAutoPipelining; the
// integration's short way over an ioredis client (corked writes); over the
// connection it makes from a URL. Needs the module loaded in that server
// and clients/node built (dist/).
import { Redis } from "ioredis";
const dist = process.env.LIBRL_DIST ?? new URL("../../../clients/node/dist", import.meta.url).pathname;
const { Limiter } = await import(`${dist}/index.js`);
const { RespConnection } = await import(`${dist}/resp.js`);

const url = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
const calls = Number(process.argv[2] ?? 40000);
const inFlight = 20;
const argv = (key) => ["RL.ALL", "FIXED", key, "1000000000", "60000ms", "COST", "1"];

const paths = {
  "ioredis call()": () => {
    const c = new Redis(url);
    return [(key) => c.call(...argv(key)), () => c.disconnect()];
  },
  "ioredis call(), enableAutoPipelining": () => {
    const c = new Redis(url, { enableAutoPipelining: true });
    return [(key) => c.call(...argv(key)), () => c.disconnect()];
  },
  "librl over an ioredis client": () => {
    const c = new Redis(url);
    const direct = new Limiter(c, { keyPrefix: "" }).directAll;
    return [(key) => direct(argv(key), [key]), () => c.disconnect()];
  },
  "librl's own connection (url)": () => {
    const c = new RespConnection(url);
    const direct = new Limiter(c, { keyPrefix: "" }).directAll;
    return [(key) => direct(argv(key), [key]), () => c.close()];
  },
};

async function run(send, n) {
  const loop = async (i) => {
    for (let j = 0; j < n / inFlight; j++) await send(`bench:{ip:127.0.0.${i}}:open`);
  };
  await Promise.all(Array.from({ length: inFlight }, (_, i) => loop(i)));
}

for (const [name, make] of Object.entries(paths)) {
  const [send, close] = make();
  await run(send, 4000); // connected, and the path compiled
  const cpu = process.cpuUsage();
  const start = process.hrtime.bigint();
  await run(send, calls);
  const used = process.cpuUsage(cpu);
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  console.log(`${name.padEnd(40)} ${((used.user + used.system) / calls).toFixed(1).padStart(5)} µs CPU per call, ${Math.round(calls / seconds)} calls/s`);
  close();
}
