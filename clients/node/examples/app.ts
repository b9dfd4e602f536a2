/**
 * The example app (docs/http.md, Conformance and examples) in Express and
 * in Fastify: every path and method answers `ok`, with the status of
 * `X-Conformance-Status`, after `X-Conformance-Delay-Ms` (an asynchronous
 * sleep, so a slow request holds its concurrency slot while others are
 * served); `X-Conformance-Fail: 1` makes the handler fail as handlers fail
 * in each framework (Express: passes an error to next; Fastify: throws),
 * and `X-Conformance-User` authenticates the request as that user in each
 * framework's own idiom (`req.user`, `request.user`); the test resolvers
 * `conformance-cost`, `conformance-limit` and `conformance-mode` are
 * registered. The conformance runner serves it on free loopback
 * ports; scripts/examples/{express,fastify}.sh serve it on PORT.
 * In an application, the imports are `librl/express` and `librl/fastify`.
 */
import type { AddressInfo } from "node:net";
import { METHODS, type Server } from "node:http";
import express from "express";
import Fastify from "fastify";
import { rateLimit } from "../src/express.js";
import { librl } from "../src/fastify.js";
import type { HttpLimiter, HttpLimiterOptions, LimitGiven, RequestMode, Resolvers } from "../src/http/index.js";

export type FrameworkName = "express" | "fastify";
export const FRAMEWORKS: readonly FrameworkName[] = ["express", "fastify"];

export interface RunningApp {
  readonly port: number;
  /** The limiter underneath (its `reload()`). */
  readonly core: HttpLimiter;
  close(): Promise<void>;
}

/** The X-Conformance-User name: Node.js hands header values as Latin-1 text, and the name is UTF-8. */
function userOf(value: unknown): string | undefined {
  return typeof value === "string" && value !== "" ? Buffer.from(value, "latin1").toString("utf8") : undefined;
}

/** X-Conformance-Attribute's `NAME=VALUE`, split at the first `=` (the value's bytes UTF-8, as the user's name). */
function attributeOf(value: unknown): [string, string] | undefined {
  if (typeof value !== "string") return undefined;
  const eq = value.indexOf("=");
  return eq < 0 ? undefined : [value.slice(0, eq), Buffer.from(value.slice(eq + 1), "latin1").toString("utf8")];
}

function statusOf(value: unknown): number {
  const n = Number(value);
  return Number.isInteger(n) && n >= 200 && n <= 599 ? n : 200;
}

/** A request header as both frameworks give it (Node's `headers`). */
function headerOf(request: unknown, name: string): string | undefined {
  const value = (request as { headers: Record<string, string | string[] | undefined> }).headers[name];
  return Array.isArray(value) ? value.join(", ") : value;
}

/**
 * The test resolvers every example app registers (conformance/README.md,
 * What the app behind the middleware does), given Express's `req` or
 * Fastify's `request` (both have Node's `headers`).
 */
export const CONFORMANCE_RESOLVERS: Resolvers = {
  cost: {
    // A decimal integer whatever its size (the integration refuses what is not a cost); anything else as given.
    "conformance-cost": (request) => {
      const text = headerOf(request, "x-conformance-cost");
      if (text === undefined) return 1;
      return /^[0-9]+$/.test(text) ? Number(text) : text;
    },
  },
  limit: {
    // `<limit>/<window ms>` or `<limit>/<window ms>/<burst>`; absent: the policy does not apply.
    "conformance-limit": (request): LimitGiven | undefined => {
      const text = headerOf(request, "x-conformance-limit");
      if (text === undefined) return undefined;
      const [limit, windowMs, burst] = text.split("/").map(Number);
      return { limit: limit as number, windowMs: windowMs as number, ...(burst === undefined ? {} : { burst }) };
    },
  },
  mode: {
    "conformance-mode": (request) => (headerOf(request, "x-conformance-mode") ?? "enforce") as RequestMode,
  },
};

/** The app's options: the test resolvers unless others are given. */
function withResolvers(options: HttpLimiterOptions): HttpLimiterOptions {
  return options.resolvers === undefined ? { ...options, resolvers: CONFORMANCE_RESOLVERS } : options;
}

/** The handler's part common to both frameworks: the delay, then whether to fail. */
async function handle(header: (name: string) => unknown): Promise<void> {
  const delay = Number(header("x-conformance-delay-ms"));
  if (Number.isInteger(delay) && delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
  if (header("x-conformance-fail") === "1") throw new Error("the handler failed (X-Conformance-Fail)");
}

/** Express: an auth middleware sets req.user, then the limiter, then the catch-all handler. */
export function expressApp(options: HttpLimiterOptions): express.Express & { librl: HttpLimiter } {
  const limiter = rateLimit(withResolvers(options));
  const app = express();
  app.disable("x-powered-by");
  app.use((req, _res, next) => {
    const user = userOf(req.header("x-conformance-user"));
    if (user !== undefined) (req as { user?: unknown }).user = { id: user };
    const attribute = attributeOf(req.header("x-conformance-attribute"));
    if (attribute !== undefined) (req as unknown as Record<string, unknown>)[attribute[0]] = attribute[1];
    next();
  });
  app.use(limiter);
  app.use((req, res, next) => {
    handle((name) => req.header(name)).then(
      () => res.status(statusOf(req.header("x-conformance-status"))).type("text/plain").send("ok"),
      next, // Express's error handler answers 500
    );
  });
  return Object.assign(app, { librl: limiter.core });
}

/** Fastify: an onRequest hook sets request.user, the plugin, and catch-all routes of every method that accept any body. */
export async function fastifyApp(options: HttpLimiterOptions): Promise<ReturnType<typeof Fastify>> {
  const app = Fastify();
  app.decorateRequest("user", null);
  app.addHook("onRequest", async (request) => {
    const user = userOf(request.headers["x-conformance-user"]);
    if (user !== undefined) (request as unknown as { user: unknown }).user = { id: user };
    const attribute = attributeOf(request.headers["x-conformance-attribute"]);
    if (attribute !== undefined) (request as unknown as Record<string, unknown>)[attribute[0]] = attribute[1];
  });
  // Any body, of any type, is accepted (and ignored) by the catch-all app.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "buffer", bodyLimit: 64 * 1024 * 1024 }, (_req, body, done) => done(null, body));
  await app.register(librl, withResolvers(options));
  // Every method Node's parser reads (M-SEARCH, PROPFIND...), not only the ones Fastify routes by default.
  for (const method of METHODS) if (!app.supportedMethods.includes(method)) app.addHttpMethod(method, { hasBody: true });
  // A throw is Fastify's 500.
  const handler = async (request: { headers: Record<string, unknown> }, reply: { code(n: number): { type(t: string): { send(b: string): unknown } } }) => {
    await handle((name) => request.headers[name]);
    return reply.code(statusOf(request.headers["x-conformance-status"])).type("text/plain").send("ok");
  };
  app.all("/", handler);
  app.all("/*", handler);
  return app;
}

/** Builds the app (a bad configuration throws here) and serves it (default: a free loopback port). */
export async function startApp(
  framework: FrameworkName,
  options: HttpLimiterOptions,
  listen: { port: number; host: string } = { port: 0, host: "127.0.0.1" },
): Promise<RunningApp> {
  if (framework === "express") {
    const app = expressApp(options);
    const server: Server = await new Promise((resolve, reject) => {
      const s = app.listen(listen.port, listen.host, (err?: Error) => (err ? reject(err) : resolve(s)));
    });
    return {
      port: (server.address() as AddressInfo).port,
      core: app.librl,
      close: () =>
        new Promise<void>((resolve) => {
          server.closeAllConnections();
          server.close(() => resolve());
          // The connection the middleware made from `url` (Fastify's plugin closes its own with the instance).
          app.librl.close();
        }),
    };
  }
  const app = await fastifyApp(options);
  await app.listen(listen);
  return {
    port: (app.server.address() as AddressInfo).port,
    core: (app as unknown as { librl: HttpLimiter }).librl,
    close: async () => {
      app.server.closeAllConnections();
      await app.close();
    },
  };
}
