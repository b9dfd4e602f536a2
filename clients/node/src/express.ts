/**
 * librl/express: the HTTP rate limiter as Express middleware (Express 4
 * and 5). `rateLimit(options)` is a middleware applying the configuration's
 * `routes`; `.policies(...names)` is a middleware for one router or route.
 * No import of express: the middleware speaks Node's request and response.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { HttpLimiter, type HttpLimiterOptions, type RequestInfo, type Selection, type Verdict, type VerdictTarget } from "./http/core.js";
import { defaultUser, headerOf, onResponseDone, pathOf, readUpTo } from "./http/request.js";
import { queryOf } from "./http/sources.js";
import type { Refusal } from "./http/refusals.js";

export { ConfigError, loadConfig, parseConfig, type Config } from "./http/configuration.js";
export type { DecisionEvent, Outcome, CheckReport, Logger } from "./http/hook.js";

/** The request as Express hands it to middleware (Node's, plus what Express and auth layers add). */
export interface ExpressRequest extends IncomingMessage {
  originalUrl?: string;
  user?: unknown;
  body?: unknown;
}

export type NextFunction = (err?: unknown) => void;
export type Middleware = (req: ExpressRequest, res: ServerResponse, next: NextFunction) => void;

export interface ExpressRateLimitOptions extends HttpLimiterOptions<ExpressRequest> {
  /**
   * The authenticated user for `key: user` policies. Default: `req.user`
   * (a string or number, or its `id`, else its `username`), where Passport
   * and express-jwt put it. Return undefined for an anonymous request.
   */
  user?: (req: ExpressRequest) => string | undefined;
}

export interface ExpressRateLimit extends Middleware {
  /** A middleware checking these named policies (one decision) for the routes it is mounted on. */
  policies(...names: string[]): Middleware;
  /** The framework-free limiter underneath (its `config`, its `limiter`). */
  readonly core: HttpLimiter;
}

/**
 * Runs `after(status)` (the count: failed|succeeded refunds, the
 * concurrency releases) when the handler ends the response, and ends it
 * once that is done: the client's next request sees the refund and finds
 * the slot free.
 */
function holdEnd(res: ServerResponse, after: (status: number) => Promise<void>): void {
  const end = res.end;
  let held = false;
  res.end = function (this: ServerResponse, ...args: unknown[]) {
    if (held) return end.apply(this, args as Parameters<typeof end>);
    held = true;
    after(res.statusCode).then(() => end.apply(this, args as Parameters<typeof end>));
    return this;
  } as typeof end;
}

/**
 * What the limiter reads of an Express request, and where its verdict goes
 * (a class: no closures or accessors made per request; the one object the
 * commonest request makes to hear its verdict, HttpLimiter.checkInto).
 */
class ExpressFacts implements RequestInfo, VerdictTarget {
  constructor(
    private readonly req: ExpressRequest,
    readonly method: string,
    readonly path: string,
    private readonly resolveUser: (req: ExpressRequest) => string | undefined,
    private readonly res: ServerResponse,
    private readonly next: NextFunction,
  ) {}

  /** Admitted: the headers, then the next middleware; refused: the refusal, sent. */
  verdict(verdict: Verdict): void {
    const res = this.res;
    if (!verdict.pass) return send(res, verdict.refusal);
    const headers = verdict.headers;
    // Straight onto Node's response (Express's res.set would add work per header).
    for (const name in headers) res.setHeader(name, headers[name] as string);
    const { after, release } = verdict;
    if (release === undefined) {
      if (after !== undefined) holdEnd(res, after);
    } else {
      // A concurrency policy's slots are held until the handler ends the
      // response (a stream at its end), or the client goes away.
      holdEnd(res, async (status) => {
        await after?.(status);
        await release();
      });
      onResponseDone(res, () => void release());
    }
    this.next();
  }

  /** The check failed (an error of a resolver, or of the configuration): Express's error handling. */
  error(err: unknown): void {
    this.next(err);
  }

  get peer(): string | undefined {
    return this.req.socket?.remoteAddress;
  }

  /** What resolvers receive: Express's `req`. */
  get request(): ExpressRequest {
    return this.req;
  }

  header(name: string): string | undefined {
    return headerOf(this.req, name);
  }

  get user(): string | undefined {
    return this.resolveUser(this.req);
  }

  /** Read only for a `query:` source. */
  get query(): string | undefined {
    return queryOf(this.req.originalUrl ?? this.req.url);
  }

  /** Node joins the Cookie header's lines with "; ". */
  get cookie(): string | undefined {
    return this.req.headers.cookie;
  }

  /** What the application's code left on the request: `req[name]`. */
  attribute(name: string): unknown {
    return (this.req as unknown as Record<string, unknown>)[name];
  }

  /**
   * A body without Content-Length, read to be measured (only then); it
   * stays in req.body as a Buffer (req._body set, so body parsers skip it).
   */
  async measureBody(max: number): Promise<number | undefined> {
    const req = this.req;
    const body = await readUpTo(req, max);
    if (body !== undefined) {
      req.body = body;
      (req as { _body?: boolean })._body = true;
    }
    return body?.length;
  }
}

/**
 * The refusal in one writeHead given the headers as a flat list: Node
 * checks and writes them once, without storing each first as setHeader
 * does (a header an earlier middleware set stays, unless the refusal sets
 * it too: Node merges them as setHeader would).
 */
function send(res: ServerResponse, refusal: Refusal): void {
  const headers = refusal.headers;
  const list: string[] = [];
  for (const name in headers) list.push(name, headers[name] as string);
  list.push("Content-Type", refusal.contentType, "Content-Length", String(Buffer.byteLength(refusal.body)));
  res.writeHead(refusal.status, list);
  res.end(refusal.body);
}

/**
 * The middleware for the configuration's `routes` (mount it with
 * `app.use()` before the routes); `.policies(...)` gives per-route ones.
 * Bad configuration throws here, naming the field.
 */
export function rateLimit(options: ExpressRateLimitOptions): ExpressRateLimit {
  const core = new HttpLimiter(options);
  const user = options.user ?? ((req: ExpressRequest) => defaultUser(req.user));
  if (typeof user !== "function") throw new TypeError("librl: the `user` option must be a function (req) => string | undefined");

  const run = (req: ExpressRequest, res: ServerResponse, next: NextFunction, policies: Selection | undefined) => {
    // The whole path, whatever router the middleware is mounted on.
    const path = pathOf(req.originalUrl ?? req.url);
    const method = req.method ?? "GET";
    const chosen = policies ?? core.select(method, path);
    if (chosen.policies.length === 0) return next();
    const facts = new ExpressFacts(req, method, path, user, res, next);
    core.checkInto(facts, chosen, facts);
  };

  const middleware = ((req, res, next) => run(req, res, next, undefined)) as ExpressRateLimit;
  Object.defineProperty(middleware, "core", { value: core });
  middleware.policies = (...names: string[]): Middleware => {
    // Resolved now (a missing name throws here) and again after each reload.
    const owner = {};
    core.selection(owner, names, "policies");
    return (req, res, next) => run(req, res, next, core.selection(owner, names, "policies"));
  };
  return middleware;
}

