/**
 * The parts of a Node request both adapters read the same way: header
 * values, the path, the default user (`req.user`), and reading a body
 * without Content-Length to measure it.
 */
import type { IncomingHttpHeaders, IncomingMessage } from "node:http";

/** A header's value by lower-case name; several lines joined with ", ". */
export function headerOf(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  if (value === undefined) return undefined;
  return Array.isArray(value) ? value.join(", ") : value;
}

/** The URL's path, without the query string. */
export function pathOf(url: string | undefined): string {
  if (url === undefined) return "/";
  const q = url.indexOf("?");
  return q < 0 ? url : url.slice(0, q);
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
