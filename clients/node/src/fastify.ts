/**
 * librl/fastify: the HTTP rate limiter as a Fastify plugin (Fastify 4 and
 * 5). Registered once, it checks every request in a `preParsing` hook
 * (after `onRequest`, where authentication sets `request.user`; before the
 * body is parsed): a route's `config: { librl: { policies: [...] } }`
 * names its policies, else the configuration's `routes` apply. No import
 * of fastify: the plugin is marked global the way fastify-plugin does it.
 */
import { Readable } from "node:stream";
import type { IncomingMessage, ServerResponse } from "node:http";
import { HttpLimiter, type HttpLimiterOptions, type RequestInfo, type Selection, type Verdict, type VerdictTarget } from "./http/core.js";
import { defaultUser, headerOf, onResponseDone, pathOf, readUpTo } from "./http/request.js";
import { queryOf } from "./http/sources.js";

export { ConfigError, loadConfig, parseConfig, type Config } from "./http/configuration.js";
export type { DecisionEvent, Outcome, CheckReport, Logger } from "./http/hook.js";

/** The parts of a Fastify request the plugin reads. */
export interface FastifyRequestLike {
  readonly raw: IncomingMessage;
  readonly method: string;
  readonly url: string;
  readonly user?: unknown;
  readonly routeOptions?: { readonly config?: unknown; readonly url?: string | undefined };
  /** Fastify 4 before `routeOptions`. */
  readonly routeConfig?: unknown;
}

/** The parts of a Fastify reply the plugin writes. */
export interface FastifyReplyLike {
  readonly statusCode: number;
  /** Node's response underneath. */
  readonly raw: ServerResponse;
  code(status: number): FastifyReplyLike;
  header(name: string, value: string): FastifyReplyLike;
  headers(values: Readonly<Record<string, string>>): FastifyReplyLike;
  send(payload?: unknown): FastifyReplyLike;
}

type Hook = (...args: never[]) => unknown;

/** The parts of a Fastify instance the plugin uses. */
export interface FastifyInstanceLike {
  /** The instance's options (read: whether its router ends the path at a `;`). */
  readonly initialConfig?: unknown;
  addHook(name: string, hook: Hook): unknown;
  decorate(name: string, value: unknown): unknown;
  hasDecorator?(name: string): boolean;
}

export interface FastifyRateLimitOptions extends HttpLimiterOptions<FastifyRequestLike> {
  /**
   * The authenticated user for `key: user` policies. Default:
   * `request.user` (a string or number, or its `id`, else its `username`),
   * where @fastify/jwt and @fastify/passport put it.
   */
  user?: (request: FastifyRequestLike) => string | undefined;
}

/** A route's own policies: `{ config: { librl: { policies: ["ip-second"] } } }`; `policies: []` exempts it. */
export interface LibrlRouteConfig {
  librl?: { policies: string[] };
}

const AFTER = Symbol("librl.after");

const RELEASE = Symbol("librl.release");

type WithAfter = {
  [AFTER]?: ((status: number) => Promise<void>) | undefined;
  [RELEASE]?: (() => Promise<void>) | undefined;
};

/** A callback hook's continuation: an error, or the payload stream for the body parsers. */
type Done = (err: unknown, payload?: Payload) => void;

/**
 * What the limiter reads of a Fastify request, and where its verdict goes
 * (a class: no closures or accessors made per request; the one object the
 * commonest request makes to hear its verdict, HttpLimiter.checkInto).
 */
class FastifyFacts implements RequestInfo, VerdictTarget {
  /** The body read to be measured, which the body parsers get in place of the request. */
  replaced: Payload | undefined = undefined;

  constructor(
    readonly request: FastifyRequestLike,
    readonly path: string,
    private readonly resolveUser: (request: FastifyRequestLike) => string | undefined,
    private readonly payload: Payload,
    private readonly reply: FastifyReplyLike,
    private readonly done: Done,
  ) {}

  /** Admitted: the headers, then the route; refused: the refusal, sent. */
  verdict(verdict: Verdict): void {
    const reply = this.reply;
    if (!verdict.pass) {
      const { refusal } = verdict;
      reply.code(refusal.status);
      reply.headers(refusal.headers);
      reply.header("content-type", refusal.contentType);
      // A Buffer: Fastify would add "; charset=utf-8" to a JSON type given a string.
      // The reply is sent: `done` is not called (Fastify's early response from a callback hook).
      reply.send(Buffer.from(refusal.body, "utf8"));
      return;
    }
    reply.headers(verdict.headers);
    const { after, release } = verdict;
    const request = this.request as WithAfter;
    if (after !== undefined) request[AFTER] = after;
    if (release !== undefined) {
      request[RELEASE] = release;
      // A concurrency policy's slots are held until the response is over
      // (a stream at its end), or the client goes away.
      onResponseDone(reply.raw, () => void release());
    }
    this.done(null, this.replaced ?? this.payload);
  }

  /** The check failed (an error of a resolver, or of the configuration): Fastify's error handling. */
  error(err: unknown): void {
    this.done(err);
  }

  /** A body without Content-Length, read to be measured (only then). */
  async measureBody(max: number): Promise<number | undefined> {
    const body = await readUpTo(this.payload, max);
    if (body === undefined) return undefined;
    const replaced = Readable.from([body]) as Payload;
    replaced.receivedEncodedLength = body.length;
    this.replaced = replaced;
    return body.length;
  }

  get method(): string {
    return this.request.method;
  }

  get peer(): string | undefined {
    return this.request.raw.socket?.remoteAddress;
  }

  header(name: string): string | undefined {
    return headerOf(this.request.raw, name);
  }

  get user(): string | undefined {
    return this.resolveUser(this.request);
  }

  /** Read only for a `query:` source. */
  get query(): string | undefined {
    return queryOf(this.request.raw.url);
  }

  /** Node joins the Cookie header's lines with "; ". */
  get cookie(): string | undefined {
    return this.request.raw.headers.cookie;
  }

  /** What the application's code left on the request: `request[name]` (declared with decorateRequest). */
  attribute(name: string): unknown {
    return (this.request as unknown as Record<string, unknown>)[name];
  }
}

/** A Readable that Fastify's body parsers accept in place of the request. */
type Payload = Readable & { receivedEncodedLength?: number };

/** Fastify 5's `routerOptions.useSemicolonDelimiter`, else Fastify 4's top-level option (its default: true). */
function semicolonDelimits(initialConfig: unknown): boolean {
  const config = (initialConfig ?? {}) as { useSemicolonDelimiter?: unknown; routerOptions?: { useSemicolonDelimiter?: unknown } };
  return (config.routerOptions?.useSemicolonDelimiter ?? config.useSemicolonDelimiter) === true;
}

/**
 * The plugin: `await app.register(librl, { client, config })`. Decorates
 * the instance with `librl` (the framework-free limiter).
 */
async function librlFastify(fastify: FastifyInstanceLike, options: FastifyRateLimitOptions): Promise<void> {
  const core = new HttpLimiter(options);
  const user = options.user ?? ((request: FastifyRequestLike) => defaultUser(request.user));
  if (typeof user !== "function") throw new TypeError("librl: the `user` option must be a function (request) => string | undefined");
  // Each route's own policies, resolved (and checked) once per configuration.
  const routePolicies = (config: unknown, where: string): Selection | null => {
    if (typeof config !== "object" || config === null) return null;
    const spec = (config as LibrlRouteConfig).librl;
    return spec === undefined ? null : core.selection(config, spec.policies, `${where} config.librl.policies`);
  };

  // With useSemicolonDelimiter (Fastify 4's default), `/a;x/b` routes to `/a`'s handler: the path ends at the `;`.
  const semicolonEnds = semicolonDelimits(fastify.initialConfig);
  const pathOfRequest = (request: FastifyRequestLike): string => {
    const path = pathOf(request.raw.url ?? request.url);
    const semicolon = semicolonEnds ? path.indexOf(";") : -1;
    return semicolon < 0 ? path : path.slice(0, semicolon);
  };

  fastify.decorate("librl", core);
  // The connection the plugin made from `url` ends with the instance.
  fastify.addHook("onClose", ((_instance: unknown, done: () => void) => {
    core.close();
    done();
  }) as Hook);
  // A route naming a missing policy fails when it is added, not at its first request.
  fastify.addHook("onRoute", ((route: { url?: string; method?: unknown; config?: unknown }) => {
    routePolicies(route.config, `route ${String(route.method)} ${route.url ?? ""}`);
  }) as Hook);

  // A callback hook, not an async one: the verdict goes to the request's facts (HttpLimiter.checkInto), no promise.
  fastify.addHook("preParsing", ((request: FastifyRequestLike, reply: FastifyReplyLike, payload: Payload, done: Done) => {
    const path = pathOfRequest(request);
    const chosen = routePolicies(request.routeOptions?.config ?? request.routeConfig, "route") ?? core.select(request.method, path);
    if (chosen.policies.length === 0) return done(null, payload);
    const facts = new FastifyFacts(request, path, user, payload, reply, done);
    core.checkInto(facts, chosen, facts);
  }) as Hook);

  // Before the response is sent: the client's next request sees the refund,
  // and finds a concurrency slot free (a streamed payload holds it until it
  // ends: released above). A callback hook that returns at once for a
  // request with nothing to give back (always added: a reload may bring
  // policies that count after the response).
  fastify.addHook("onSend", ((request: FastifyRequestLike, reply: FastifyReplyLike, payload: unknown, done: (err: unknown, payload?: unknown) => void) => {
    const after = (request as WithAfter)[AFTER];
    const release = (request as WithAfter)[RELEASE];
    if (after === undefined && release === undefined) return done(null, payload);
    const streamed = typeof (payload as { pipe?: unknown } | null)?.pipe === "function";
    (after?.(reply.statusCode) ?? Promise.resolve())
      .then(() => (streamed ? undefined : release?.()))
      .then(
        () => done(null, payload),
        (err: unknown) => done(err),
      );
  }) as Hook);
}

// What fastify-plugin sets: the hooks apply to the whole instance, not an encapsulated child.
Object.assign(librlFastify, {
  [Symbol.for("skip-override")]: true,
  [Symbol.for("fastify.display-name")]: "librl",
  [Symbol.for("plugin-meta")]: { name: "librl", fastify: ">=4" },
});

export { librlFastify as librl };
