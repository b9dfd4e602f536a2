// make bench-http's Express and Fastify apps (bench/README.md, "make
// bench-http"): the routes /open and /half served one of four ways:
//   node app.mjs express|fastify none|librl|peer|floor
//   none   no limiter
//   librl  librl's Express middleware or Fastify plugin (clients/node/dist),
//          given the URL: its own connection (docs/http/node.md, Redis clients)
//   peer   express-rate-limit 8 with rate-limit-redis, or @fastify/rate-limit
//          with its Redis store
//   floor  a bare handler sending the same RL.ALL through the same client
//          (librl's own connection, made from the same URL)
// Env: PORT, REDIS_URL, LIBRL_POLICIES (the policies file the driver
// writes), LIBRL_DIST (librl's build, default clients/node/dist). The limits are that file's: /open 1,000,000,000 a minute per
// client address (never refuses), /half 1 per 10 s per X-Client header.
import express from "express";
import Fastify from "fastify";
import fastifyRateLimit from "@fastify/rate-limit";
import { rateLimit as expressRateLimit } from "express-rate-limit";
import { RedisStore } from "rate-limit-redis";
import { Redis } from "ioredis";
// LIBRL_DIST: another build of clients/node's dist/ (an A/B of two builds, side by side).
const dist = process.env.LIBRL_DIST ?? new URL("../../../clients/node/dist", import.meta.url).pathname;
const { rateLimit: librlExpress } = await import(`${dist}/express.js`);
const { librl: librlFastify } = await import(`${dist}/fastify.js`);
const { RespConnection } = await import(`${dist}/resp.js`);

const OPEN = { limit: 1_000_000_000, windowMs: 60_000, window: "60000ms" };
const HALF = { limit: 1, windowMs: 10_000, window: "10000ms" };

const [framework, variant] = process.argv.slice(2);
const url = process.env.REDIS_URL;
// The peer's client (ioredis, as @fastify/rate-limit and rate-limit-redis take it).
const client = variant === "peer" ? new Redis(url) : undefined;
client?.on("error", (err) => console.error(`redis: ${err.message}`));
// The floor's: the connection librl makes from the URL.
const floorConnection = variant === "floor" ? new RespConnection(url) : undefined;
const config = process.env.LIBRL_POLICIES;
const port = Number(process.env.PORT);

/** The floor's check: librl's RL.ALL for this key, and whether it admitted. */
async function floorCheck(key, limits) {
  const reply = await floorConnection.send(["RL.ALL", "FIXED", key, String(limits.limit), limits.window, "COST", "1"]);
  return reply[0] === 1;
}
const openKey = (address) => `rl:{ip:${address}}:open`;
const halfKey = (client) => `rl:{header:x-client:${client}}:half`;

function expressApp() {
  const app = express();
  app.disable("x-powered-by");
  const ok = (_req, res) => res.type("text/plain").send("ok");
  if (variant === "librl") {
    app.use(librlExpress({ url, config }));
  } else if (variant === "peer") {
    const store = (prefix) => new RedisStore({ sendCommand: (...args) => client.call(...args), prefix });
    const peer = (limits, name, extra) =>
      expressRateLimit({
        windowMs: limits.windowMs,
        limit: limits.limit,
        standardHeaders: "draft-8",
        legacyHeaders: true,
        identifier: name,
        store: store(`erl:${name}:`),
        ...extra,
      });
    app.use("/open", peer(OPEN, "open", {}));
    app.use("/half", peer(HALF, "half", { keyGenerator: (req) => req.get("x-client") ?? "" }));
  } else if (variant === "floor") {
    const floor = (keyOf, limits) => (req, res, next) =>
      floorCheck(keyOf(req), limits).then((admitted) => (admitted ? next() : res.status(429).end()), next);
    app.use("/open", floor((req) => openKey(req.socket.remoteAddress), OPEN));
    app.use("/half", floor((req) => halfKey(req.get("x-client")), HALF));
  }
  app.get("/open", ok);
  app.get("/half", ok);
  app.listen(port, "127.0.0.1");
}

async function fastifyApp() {
  const app = Fastify();
  let open = {};
  let half = {};
  if (variant === "librl") {
    await app.register(librlFastify, { url, config });
  } else if (variant === "peer") {
    await app.register(fastifyRateLimit, { global: false, redis: client, nameSpace: "frl:" });
    open = { config: { rateLimit: { max: OPEN.limit, timeWindow: OPEN.windowMs } } };
    half = {
      config: {
        rateLimit: { max: HALF.limit, timeWindow: HALF.windowMs, keyGenerator: (req) => req.headers["x-client"] ?? "" },
      },
    };
  } else if (variant === "floor") {
    const floor = (keyOf, limits) => ({
      onRequest: async (req, reply) => {
        if (!(await floorCheck(keyOf(req), limits))) return reply.code(429).send();
      },
    });
    open = floor((req) => openKey(req.socket.remoteAddress), OPEN);
    half = floor((req) => halfKey(req.headers["x-client"]), HALF);
  }
  const ok = async (_req, reply) => reply.type("text/plain").send("ok");
  app.get("/open", open, ok);
  app.get("/half", half, ok);
  await app.listen({ port, host: "127.0.0.1" });
}

if (!["express", "fastify"].includes(framework) || !["none", "librl", "peer", "floor"].includes(variant)) {
  console.error("usage: node app.mjs express|fastify none|librl|peer|floor");
  process.exit(2);
}
// A clean exit on SIGTERM, so that `node --cpu-prof` writes its profile
// (bench/http/profile_http.py).
process.on("SIGTERM", () => process.exit(0));
await (framework === "express" ? expressApp() : fastifyApp());
