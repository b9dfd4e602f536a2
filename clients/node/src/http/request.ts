/**
 * The parts of a Node request both adapters read the same way: header
 * values, the path, the default user (`req.user`), and reading a body
 * without Content-Length to measure it.
 */
import type { IncomingMessage, ServerResponse } from "node:http";

/**
 * The names whose lines Node's `headers` does not join with ", ": it keeps
 * the first line of these, joins cookie lines with "; " and gives
 * set-cookie as a list.
 */
const NOT_JOINED = new Set([
  "age",
  "authorization",
  "content-length",
  "content-type",
  "cookie",
  "etag",
  "expires",
  "from",
  "host",
  "if-modified-since",
  "if-unmodified-since",
  "last-modified",
  "location",
  "max-forwards",
  "proxy-authorization",
  "referer",
  "retry-after",
  "server",
  "set-cookie",
  "user-agent",
]);

/**
 * A header's value by lower-case name: every line joined with ", ", as
 * the Latin-1 string of its bytes (how Node decodes them).
 */
export function headerOf(req: IncomingMessage, name: string): string | undefined {
  if (!NOT_JOINED.has(name)) return req.headers[name] as string | undefined;
  return req.headersDistinct[name]?.join(", ");
}

/**
 * The path of a request target, as received: a fragment (`#...`) and the
 * query dropped (Express and Fastify route `/a#x` to `/a`), and an
 * absolute-form target's `scheme://authority` too (both route
 * `http://host/a` to `/a`). Percent-escapes and the rest are the
 * canonical path's to read (docs/http.md, Routes).
 */
export function pathOf(url: string | undefined): string {
  if (url === undefined) return "/";
  let end = url.length;
  for (let i = 0; i < url.length; i++) {
    const c = url.charCodeAt(i);
    // `?` or `#`
    if (c === 0x3f || c === 0x23) {
      end = i;
      break;
    }
  }
  const target = end === url.length ? url : url.slice(0, end);
  if (target.charCodeAt(0) === 0x2f) return target;
  const absolute = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/]*/.exec(target);
  if (absolute === null) return target;
  return target.length === absolute[0].length ? "/" : target.slice(absolute[0].length);
}

/**
 * The default user resolver: `req.user` (where Passport, express-jwt's
 * `requestProperty: "user"` and @fastify/jwt put it) as a string or number,
 * or its `id`, else its `username`.
 */
export function defaultUser(user: unknown): string | undefined {
  if (typeof user === "string") return user === "" ? undefined : user;
  if (typeof user === "number" || typeof user === "bigint") return String(user);
  if (typeof user === "object" && user !== null) {
    const record = user as Record<string, unknown>;
    for (const field of ["id", "username"]) {
      const value = record[field];
      if (typeof value === "string" && value !== "") return value;
      if (typeof value === "number" || typeof value === "bigint") return String(value);
    }
  }
  return undefined;
}

/** Reads a stream whole, up to `max` bytes: the bytes, or undefined past max (the rest is not read). */
export function readUpTo(stream: NodeJS.ReadableStream | IncomingMessage, max: number): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let length = 0;
    const done = (result: Buffer | undefined) => {
      stream.removeListener("data", onData);
      stream.removeListener("end", onEnd);
      stream.removeListener("error", onError);
      resolve(result);
    };
    const onData = (chunk: Buffer | string) => {
      const buf = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
      length += buf.length;
      if (length > max) {
        stream.pause();
        done(undefined);
        return;
      }
      chunks.push(buf);
    };
    const onEnd = () => done(Buffer.concat(chunks, length));
    const onError = (err: Error) => {
      stream.removeListener("data", onData);
      stream.removeListener("end", onEnd);
      reject(err);
    };
    stream.on("data", onData);
    stream.on("end", onEnd);
    stream.on("error", onError);
  });
}

/**
 * Calls `done` once the response is over: its last byte handed to the
 * connection (`finish`: a streamed body at its end), or the connection
 * closed first (the client went away, the handler failed). Already over
 * (the client left while the limiter waited for Redis): at once.
 */
export function onResponseDone(res: ServerResponse, done: () => void): void {
  if (res.writableFinished || res.destroyed || res.socket?.destroyed === true) {
    done();
    return;
  }
  res.once("finish", done);
  res.once("close", done);
}
