/**
 * The HTTP integrations' own Redis connection (docs/http/node.md, Redis
 * clients), made from a `redis://` or `rediss://` URL: one socket to a
 * standalone server, RESP2, every command of an event-loop turn written
 * in one write in the loop's check phase, replies read by a parser of the
 * few RESP2 types the module and the server's own commands answer. A
 * general client's path (argument objects, a generic reply decoder, one
 * write per command) costs an integration more CPU per request than the
 * rest of its check; this one does what the integration needs and no
 * more. A cluster, Sentinel, or anything else takes a client of the
 * application's (ioredis or node-redis).
 *
 * Connection life: commands sent while it connects are queued and written
 * once it is up (after AUTH and SELECT when the URL names them); a
 * connect that fails or times out rejects them. A connection that drops
 * rejects the commands in flight (never resent: a rate-limit call may
 * have been counted) and is made again after a pause growing by 50 ms a
 * try up to 1 s; meanwhile commands reject at once, so the caller's fail
 * mode applies without waiting.
 */
import { connect as netConnect, isIP, type Socket } from "node:net";
import { connect as tlsConnect } from "node:tls";
import { performance } from "node:perf_hooks";

/** An error reply from the server (`-ERR ...`): its message is the server's. */
export class ReplyError extends Error {
  override readonly name = "ReplyError";
}

/** Where and how to connect, read from the URL. */
export interface RespAddress {
  readonly host: string;
  readonly port: number;
  readonly tls: boolean;
  readonly username: string | undefined;
  readonly password: string | undefined;
  readonly db: number;
}

/**
 * `redis://[[user]:password@]host[:port][/db]` (`rediss://` for TLS), as
 * redis-cli and both client libraries read it. A URL that is not one
 * throws a TypeError naming `what`.
 */
export function parseRedisUrl(url: string, what = "url"): RespAddress {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new TypeError(`librl: ${what}: ${JSON.stringify(url)} is not a URL (redis://host:port/db or rediss://...)`);
  }
  if (u.protocol !== "redis:" && u.protocol !== "rediss:") {
    throw new TypeError(`librl: ${what}: ${JSON.stringify(url)}: the scheme must be redis:// or rediss://`);
  }
  const path = u.pathname.replace(/^\//, "");
  if (path !== "" && !/^[0-9]{1,5}$/.test(path)) throw new TypeError(`librl: ${what}: ${JSON.stringify(url)}: the path must be a database number`);
  const host = u.hostname.startsWith("[") ? u.hostname.slice(1, -1) : u.hostname;
  return {
    host: host === "" ? "127.0.0.1" : host,
    port: u.port === "" ? 6379 : Number(u.port),
    tls: u.protocol === "rediss:",
    username: u.username === "" ? undefined : decodeURIComponent(u.username),
    password: u.password === "" ? undefined : decodeURIComponent(u.password),
    db: path === "" ? 0 : Number(path),
  };
}

/** No reply within a command's time limit (sendEncodedWithin). */
export class NoAnswer extends Error {
  override readonly name = "RedisTimeout";
}

/**
 * What waits on one command's reply: resolve() with the reply, or reject()
 * with the error (an error reply, no answer in time, the connection lost),
 * once. sendEncodedTo() takes the caller's own object of this kind, so a
 * request's check makes no promise or closure to hear its reply; the
 * connection sets the fields.
 */
export abstract class ReplyWaiter {
  /** Settled already: it timed out (its reply, when it comes, is dropped). */
  done = false;
  /** performance.now() past which the command rejects with NoAnswer; Infinity: never. */
  deadline = Infinity;
  timeoutMs = Infinity;
  abstract resolve(value: unknown): void;
  abstract reject(err: Error): void;
}

/** A promise's continuation (send, sendEncodedWithin, the handshake's own commands). */
class Pending extends ReplyWaiter {
  constructor(
    readonly onValue: (value: unknown) => void,
    readonly onError: (err: Error) => void,
  ) {
    super();
  }

  resolve(value: unknown): void {
    this.onValue(value);
  }

  reject(err: Error): void {
    this.onError(err);
  }
}

/** A reply not yet whole in the buffer. */
const INCOMPLETE = Symbol("incomplete");

const CR = 13;

/** One argument's RESP encoding (a string is sent as UTF-8, as both client libraries send it). */
export function bulk(arg: string): string {
  return `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`;
}

/** A command's RESP encoding. */
export function encodeCommand(argv: readonly string[]): string {
  let out = `*${argv.length}\r\n`;
  for (const arg of argv) out += bulk(arg);
  return out;
}

export interface RespConnectionOptions {
  /** How long a connect (and its AUTH and SELECT) may take, in ms. Default 10 s. */
  connectTimeoutMs?: number;
}

export class RespConnection {
  readonly address: RespAddress;
  readonly #connectTimeoutMs: number;
  #socket: Socket | undefined;
  #state: "connecting" | "ready" | "down" | "closed" = "connecting";
  /** Why the connection is down, for the commands refused meanwhile. */
  #lastError: Error | undefined;
  /** Commands written or queued, in order, whose replies have not come (from #head on). */
  #waiting: ReplyWaiter[] = [];
  #head = 0;
  /** Encoded commands not yet written. */
  #out = "";
  #flushScheduled = false;
  /** Unread bytes of a reply not yet whole. */
  #buf: Buffer | undefined;
  #pos = 0;
  #tries = 0;
  #retry: NodeJS.Timeout | undefined;
  /**
   * One timer for every command's time limit (sendEncodedWithin), armed
   * for the earliest deadline: a timer per command costs a request more
   * than its check's own work.
   */
  #deadlineTimer: NodeJS.Timeout | undefined;
  #deadlineAt = Infinity;

  constructor(url: string, options: RespConnectionOptions = {}) {
    this.address = parseRedisUrl(url);
    this.#connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
    this.#connect();
  }

  /** Sends a command; resolves to its reply (an error reply rejects with a ReplyError). */
  send(argv: readonly string[]): Promise<unknown> {
    return this.sendEncoded(encodeCommand(argv));
  }

  /** Sends a command already RESP-encoded (one command). */
  sendEncoded(encoded: string): Promise<unknown> {
    return this.sendEncodedWithin(encoded, Infinity);
  }

  /**
   * Sends a command already RESP-encoded; rejects with NoAnswer when no
   * reply came within `timeoutMs` (the reply, if it comes later, is
   * dropped). As a timer per call would: the limit is checked after the
   * event loop's I/O, so after a stall of the process a reply already in
   * the socket is read first and only a server that did not answer times out.
   */
  sendEncodedWithin(encoded: string, timeoutMs: number): Promise<unknown> {
    const refused = this.#refusal();
    if (refused !== undefined) return Promise.reject(refused);
    return new Promise((resolve, reject) => this.#queue(encoded, timeoutMs, new Pending(resolve, reject)));
  }

  /**
   * sendEncodedWithin() for a caller that hears the reply on an object of
   * its own (`waiter`): no promise. While the connection is down or
   * closed, `waiter` is rejected in a microtask, never before this returns.
   */
  sendEncodedTo(encoded: string, timeoutMs: number, waiter: ReplyWaiter): void {
    const refused = this.#refusal();
    if (refused !== undefined) {
      queueMicrotask(() => waiter.reject(refused));
      return;
    }
    this.#queue(encoded, timeoutMs, waiter);
  }

  /** Why a command cannot be sent now (down or closed), else undefined. */
  #refusal(): Error | undefined {
    const state = this.#state;
    if (state !== "down" && state !== "closed") return undefined;
    const why = state === "closed" ? "the connection was closed" : `the connection is down (${this.#lastError?.message ?? "reconnecting"})`;
    return new Error(`librl: Redis ${this.address.host}:${this.address.port}: ${why}`);
  }

  #queue(encoded: string, timeoutMs: number, waiter: ReplyWaiter): void {
    const deadline = timeoutMs === Infinity ? Infinity : performance.now() + timeoutMs;
    waiter.deadline = deadline;
    waiter.timeoutMs = timeoutMs;
    this.#waiting.push(waiter);
    if (deadline < this.#deadlineAt) this.#armDeadline(deadline);
    this.#out += encoded;
    if (this.#state === "ready" && !this.#flushScheduled) {
      this.#flushScheduled = true;
      setImmediate(this.#flush);
    }
  }

  #armDeadline(at: number): void {
    clearTimeout(this.#deadlineTimer);
    this.#deadlineAt = at;
    this.#deadlineTimer = setTimeout(this.#onDeadline, Math.max(1, Math.ceil(at - performance.now())));
    // The socket keeps the process up while commands wait; the timer alone does not.
    this.#deadlineTimer.unref();
  }

  /** Timers run before I/O in a loop turn: the sweep waits for the I/O phase (setImmediate), so replies already in the socket are read first. */
  readonly #onDeadline = (): void => {
    setImmediate(this.#sweep);
  };

  /** Rejects the commands past their deadline; the timer is armed again for the earliest one left. */
  readonly #sweep = (): void => {
    clearTimeout(this.#deadlineTimer);
    this.#deadlineTimer = undefined;
    this.#deadlineAt = Infinity;
    const now = performance.now();
    const waiting = this.#waiting;
    let next = Infinity;
    for (let i = this.#head; i < waiting.length; i++) {
      const p = waiting[i] as ReplyWaiter;
      if (p.done || p.deadline === Infinity) continue;
      if (p.deadline <= now) {
        p.done = true;
        p.reject(new NoAnswer(`no answer within ${p.timeoutMs} ms`));
      } else if (p.deadline < next) next = p.deadline;
    }
    if (next !== Infinity) this.#armDeadline(next);
  };

  /** Whether the connection is up. */
  get ready(): boolean {
    return this.#state === "ready";
  }

  /** Closes the connection for good: commands in flight and later ones reject. */
  close(): void {
    if (this.#state === "closed") return;
    this.#state = "closed";
    clearTimeout(this.#retry);
    clearTimeout(this.#deadlineTimer);
    this.#socket?.destroy();
    this.#failAll(new Error("librl: the connection was closed"));
  }

  readonly #flush = (): void => {
    this.#flushScheduled = false;
    if (this.#out === "" || this.#state !== "ready") return;
    const out = this.#out;
    this.#out = "";
    (this.#socket as Socket).write(out);
  };

  #connect(): void {
    const { host, port, tls } = this.address;
    // SNI names a host, never an address (Node refuses an IP as servername).
    const socket = tls ? tlsConnect({ host, port, ...(isIP(host) === 0 ? { servername: host } : {}) }) : netConnect({ host, port });
    this.#socket = socket;
    this.#state = "connecting";
    socket.setNoDelay(true);
    socket.setKeepAlive(true);
    const timer = setTimeout(() => socket.destroy(new Error(`no connection within ${this.#connectTimeoutMs} ms`)), this.#connectTimeoutMs);
    let failure: Error | undefined;
    socket.once(tls ? "secureConnect" : "connect", () => this.#handshake(socket, timer));
    socket.on("data", (chunk: Buffer) => this.#read(chunk));
    socket.on("error", (err: Error) => (failure = err));
    socket.once("close", () => {
      clearTimeout(timer);
      if (this.#socket !== socket) return;
      this.#socket = undefined;
      this.#buf = undefined;
      this.#pos = 0;
      if (this.#state === "closed") return;
      this.#lastError = failure ?? new Error("the connection closed");
      this.#state = "down";
      this.#failAll(new Error(`librl: Redis ${host}:${port}: ${this.#lastError.message}`));
      this.#tries++;
      this.#retry = setTimeout(() => this.#connect(), Math.min(50 * this.#tries, 1000));
      this.#retry.unref();
    });
  }

  /** AUTH and SELECT when the URL names them, ahead of what was queued meanwhile; then ready. */
  #handshake(socket: Socket, timer: NodeJS.Timeout): void {
    const { username, password, db } = this.address;
    const first: string[][] = [];
    if (password !== undefined) first.push(username === undefined ? ["AUTH", password] : ["AUTH", username, password]);
    if (db !== 0) first.push(["SELECT", String(db)]);
    const up = () => {
      clearTimeout(timer);
      if (this.#socket !== socket || this.#state !== "connecting") return;
      this.#state = "ready";
      this.#tries = 0;
      this.#lastError = undefined;
      this.#flush();
    };
    if (first.length === 0) return up();
    const own: ReplyWaiter[] = first.map(
      (argv, i) =>
        new Pending(
          () => (i === first.length - 1 ? up() : undefined),
          (err: Error) => socket.destroy(new Error(`${argv[0] as string} failed: ${err.message}`)),
        ),
    );
    this.#waiting.splice(this.#head, 0, ...own);
    socket.write(first.map(encodeCommand).join(""));
  }

  #failAll(err: Error): void {
    const waiting = this.#waiting;
    const head = this.#head;
    this.#waiting = [];
    this.#head = 0;
    this.#out = "";
    for (let i = head; i < waiting.length; i++) {
      const p = waiting[i] as ReplyWaiter;
      if (!p.done) p.reject(err);
    }
  }

  #read(chunk: Buffer): void {
    if (this.#buf === undefined) {
      this.#buf = chunk;
      this.#pos = 0;
    } else {
      this.#buf = Buffer.concat([this.#buf.subarray(this.#pos), chunk]);
      this.#pos = 0;
    }
    const buf = this.#buf;
    for (;;) {
      const start = this.#pos;
      if (start >= buf.length) {
        this.#buf = undefined;
        break;
      }
      const value = this.#value(buf);
      if (value === INCOMPLETE) {
        this.#pos = start;
        break;
      }
      const pending = this.#waiting[this.#head];
      if (pending === undefined) {
        // A reply nobody asked for: the stream is out of step; start afresh.
        this.#socket?.destroy(new Error("a reply came that no command asked for"));
        return;
      }
      this.#waiting[this.#head++] = undefined as unknown as ReplyWaiter;
      if (this.#head === this.#waiting.length) {
        this.#waiting = [];
        this.#head = 0;
      } else if (this.#head >= 1024 && this.#head * 2 >= this.#waiting.length) {
        this.#waiting = this.#waiting.slice(this.#head);
        this.#head = 0;
      }
      if (pending.done) continue;
      try {
        if (value instanceof ReplyError) pending.reject(value);
        else pending.resolve(value);
      } catch (err) {
        // A waiter of sendEncodedTo that throws: the replies after this one
        // still go to theirs, and the error is thrown as the caller's own.
        queueMicrotask(() => {
          throw err;
        });
      }
    }
  }

  /** The integer on the line from #pos (after the type byte), or INCOMPLETE; #pos moves past the line. */
  #line(buf: Buffer): number | typeof INCOMPLETE {
    let i = this.#pos;
    const end = buf.length;
    let negative = false;
    if (i < end && buf[i] === 45) {
      negative = true;
      i++;
    }
    let n = 0;
    for (; i < end; i++) {
      const c = buf[i] as number;
      if (c === CR) break;
      n = n * 10 + (c - 48);
    }
    if (i + 1 >= end) return INCOMPLETE;
    this.#pos = i + 2;
    return negative ? -n : n;
  }

  /** One reply from #pos (RESP2: + - : $ *), or INCOMPLETE. Nested error replies stay ReplyErrors in their array. */
  #value(buf: Buffer): unknown {
    const type = buf[this.#pos++];
    switch (type) {
      case 0x3a: // ':'
        return this.#line(buf);
      case 0x2a: {
        // '*'
        const n = this.#line(buf);
        if (n === INCOMPLETE) return INCOMPLETE;
        if (n < 0) return null;
        const items = new Array<unknown>(n);
        for (let i = 0; i < n; i++) {
          if (this.#pos >= buf.length) return INCOMPLETE;
          const item = this.#value(buf);
          if (item === INCOMPLETE) return INCOMPLETE;
          items[i] = item;
        }
        return items;
      }
      case 0x24: {
        // '$'
        const n = this.#line(buf);
        if (n === INCOMPLETE) return INCOMPLETE;
        if (n < 0) return null;
        const start = this.#pos;
        if (start + n + 2 > buf.length) return INCOMPLETE;
        this.#pos = start + n + 2;
        return buf.toString("utf8", start, start + n);
      }
      case 0x2b: // '+'
      case 0x2d: {
        // '-'
        const start = this.#pos;
        const cr = buf.indexOf(CR, start);
        if (cr < 0 || cr + 1 >= buf.length) return INCOMPLETE;
        this.#pos = cr + 2;
        const text = buf.toString("utf8", start, cr);
        return type === 0x2b ? text : new ReplyError(text);
      }
      default:
        // Not RESP2: the stream cannot be read on.
        this.#socket?.destroy(new Error(`a reply of unknown type ${String(type)}`));
        return INCOMPLETE;
    }
  }
}
