/**
 * `scripts/serve-example express|fastify`: the example app on PORT
 * (default 8080; HOST default 127.0.0.1), with the configuration file named
 * by LIBRL_POLICIES (YAML or JSON), against REDIS_URL (default
 * redis://127.0.0.1:6379) or the cluster of REDIS_CLUSTER_NODES
 * (comma-separated host:port), until killed; SIGHUP reloads the file.
 * A standalone server is reached through the integration's own connection
 * made from the URL (docs/http/node.md, Redis clients); a cluster through
 * ioredis. LIBRL_NODE_CLIENT=ioredis or node-redis hands the integration
 * that client instead. Redis need not be up: the fail mode covers it.
 */
import Redis, { Cluster } from "ioredis";
import { createClient, createCluster } from "redis";
import type { RedisLikeClient } from "../src/index.js";
import type { HttpLimiterOptions } from "../src/http/index.js";
import { FRAMEWORKS, startApp, type FrameworkName } from "./app.js";

function fail(message: string): never {
  console.error(`serve-example: ${message}`);
  process.exit(2);
}

/** Where the integration finds Redis: `url` (its own connection) or a client. */
function redis(): Pick<HttpLimiterOptions, "client" | "url"> {
  const which = process.env["LIBRL_NODE_CLIENT"] ?? "url";
  const url = process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379";
  if (which === "url" && (process.env["REDIS_CLUSTER_NODES"] ?? "").trim() === "") return { url };
  return { client: client(which === "url" ? "ioredis" : which) };
}

function client(which: string): RedisLikeClient {
  const nodes = (process.env["REDIS_CLUSTER_NODES"] ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "")
    .map((hostPort) => {
      const m = /^(.*):([0-9]+)$/.exec(hostPort.replace(/^redis:\/\//, ""));
      if (!m) fail(`REDIS_CLUSTER_NODES: ${hostPort} is not host:port`);
      return { host: m[1] as string, port: Number(m[2]) };
    });
  const url = process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379";
  if (which === "ioredis") {
    const c = nodes.length > 0 ? new Cluster(nodes) : new Redis(url);
    c.on("error", (err: Error) => console.error(`redis: ${err.message}`));
    return c;
  }
  if (which !== "node-redis") fail(`LIBRL_NODE_CLIENT=${which}: use url, ioredis or node-redis`);
  const c =
    nodes.length > 0
      ? createCluster({ rootNodes: nodes.map((n) => ({ url: `redis://${n.host}:${n.port}` })) })
      : createClient({ url });
  c.on("error", (err: Error) => console.error(`redis: ${err.message}`));
  // Served while connecting: requests meanwhile get the fail mode.
  c.connect().catch((err: Error) => console.error(`redis: ${err.message}`));
  return c;
}

async function main(): Promise<void> {
  const framework = process.argv[2] as FrameworkName;
  if (!FRAMEWORKS.includes(framework)) fail(`usage: serve.js ${FRAMEWORKS.join("|")}`);
  const config = process.env["LIBRL_POLICIES"];
  if (!config) fail("set LIBRL_POLICIES to a policy file (YAML or JSON)");
  const port = Number(process.env["PORT"] ?? 8080);
  if (!Number.isInteger(port) || port < 0 || port > 65535) fail(`PORT=${process.env["PORT"]} is not a port`);
  const host = process.env["HOST"] ?? "127.0.0.1";
  const app = await startApp(framework, { ...redis(), config }, { port, host });
  console.log(`librl ${framework} example on http://${host}:${app.port}/ (policies: ${config})`);
  // SIGHUP re-reads the file (docs/http/node.md, Reload): in-flight requests finish on the old one; a bad file leaves it.
  process.on("SIGHUP", () => {
    try {
      app.core.reload(config);
      console.error("librl: configuration reloaded");
    } catch (err) {
      console.error((err as Error).message);
    }
  });
}

main().catch((err: Error) => fail(err.message));
