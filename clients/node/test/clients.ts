/**
 * The client libraries under test, created the way an application would:
 * the pinned current majors (ioredis 6, node-redis 6) and the older majors
 * whose APIs a Limiter also supports (ioredis 5, node-redis 5 and 4),
 * installed side by side under npm aliases.
 */
import Redis, { Cluster, ReplyError } from "ioredis";
import Redis5, { Cluster as Cluster5, ReplyError as ReplyError5 } from "ioredis5";
import { createClient, createCluster, ErrorReply } from "redis";
import type { RedisLikeClient } from "../src/index.js";

/**
 * The older node-redis majors, loaded without their type declarations:
 * three copies of node-redis's declarations would triple the type-check
 * time. Only what the tests call is typed here.
 */
interface OldNodeRedisClient extends RedisLikeClient {
  connect(): Promise<unknown>;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  incr(key: string): Promise<number>;
  destroy?(): void;
  disconnect(): Promise<void>;
  v4: { incr(key: string): Promise<number> };
}
export interface OldNodeRedis {
  createClient(options?: object): OldNodeRedisClient;
  createCluster(options: object): OldNodeRedisClient;
  ErrorReply: new (...args: never[]) => Error;
}
export const redis4 = require("redis4") as OldNodeRedis;
export const redis5 = require("redis5") as OldNodeRedis;

export type ClientName = "ioredis" | "node-redis";
export const CLIENT_NAMES: readonly ClientName[] = ["ioredis", "node-redis"];

export type VariantName = ClientName | "ioredis5" | "node-redis5" | "node-redis4" | "node-redis4-legacy";
export const OLDER_VARIANTS: readonly VariantName[] = ["ioredis5", "node-redis5", "node-redis4", "node-redis4-legacy"];
export const ALL_VARIANTS: readonly VariantName[] = [...CLIENT_NAMES, ...OLDER_VARIANTS];

/** The Limiter's clientKind for each variant. */
export function kindOf(variant: VariantName): string {
  return variant.startsWith("ioredis") ? "ioredis" : "node-redis";
}

type ErrorClass = new (...args: never[]) => Error;

export interface Connected {
  /** What to hand to new Limiter(). */
  client: RedisLikeClient;
  /** The class of the library's server-error replies. */
  errorClass: ErrorClass;
  /** A plain INCR through the same client, for comparisons. */
  incr(key: string): Promise<unknown>;
  close(): Promise<void>;
}

/**
 * What wrapping a connected client needs of it: every library's standalone
 * and cluster client has these (typed loosely for the older majors).
 */
interface LibraryClient extends RedisLikeClient {
  connect(): Promise<unknown>;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  incr(key: string): Promise<unknown>;
  disconnect(): unknown;
  destroy?(): void;
}

/** The class of each variant's server-error replies. */
const ERROR_CLASSES: Readonly<Record<VariantName, ErrorClass>> = {
  ioredis: ReplyError as unknown as ErrorClass,
  ioredis5: ReplyError5 as unknown as ErrorClass,
  "node-redis": ErrorReply,
  "node-redis5": redis5.ErrorReply,
  "node-redis4": redis4.ErrorReply,
  "node-redis4-legacy": redis4.ErrorReply,
};

/**
 * Connects a variant's client, standalone or cluster, and wraps it: the
 * same for both. node-redis emits connection errors as events, which the
 * tests read from the calls instead; node-redis 5 and 6 close by destroy,
 * node-redis 4 and ioredis by disconnect.
 */
async function connected(
  variant: VariantName,
  client: LibraryClient,
  incr: (key: string) => Promise<unknown> = (key) => client.incr(key),
): Promise<Connected> {
  if (!variant.startsWith("ioredis")) client.on("error", () => {});
  await client.connect();
  const destroys = variant === "node-redis" || variant === "node-redis5";
  return {
    client,
    errorClass: ERROR_CLASSES[variant],
    incr,
    close: async () => void (destroys ? client.destroy?.() : await client.disconnect()),
  };
}

export interface StandaloneOptions {
  keyPrefix?: string;
  /** node-redis: RESP3 (its default is RESP2). */
  resp3?: boolean;
  /** ioredis 6: the protocol (its default is RESP3). */
  protocol?: 2 | 3;
  /** ioredis: integers as strings. */
  stringNumbers?: boolean;
}

export async function connectStandalone(
  variant: VariantName,
  port: number,
  options: StandaloneOptions = {},
): Promise<Connected> {
  const prefix = options.keyPrefix !== undefined ? { keyPrefix: options.keyPrefix } : {};
  const url = `redis://127.0.0.1:${port}`;
  switch (variant) {
    case "ioredis":
    case "ioredis5": {
      const opts = {
        port,
        host: "127.0.0.1",
        lazyConnect: true,
        maxRetriesPerRequest: 1,
        ...prefix,
        ...(options.stringNumbers ? { stringNumbers: true } : {}),
      };
      return connected(
        variant,
        variant === "ioredis" ? new Redis({ ...opts, ...(options.protocol ? { protocol: options.protocol } : {}) }) : new Redis5(opts),
      );
    }
    case "node-redis":
      return connected(variant, createClient({ url, ...prefix, ...(options.resp3 ? { RESP: 3 as const } : {}) }));
    case "node-redis5":
      return connected(variant, redis5.createClient({ url, ...(options.resp3 ? { RESP: 3 } : {}) }));
    case "node-redis4":
      return connected(variant, redis4.createClient({ url }));
    case "node-redis4-legacy": {
      // Legacy mode's commands take callbacks; the promise API is under v4.
      const client = redis4.createClient({ url, legacyMode: true });
      return connected(variant, client, (key) => client.v4.incr(key));
    }
  }
}

export async function connectCluster(
  variant: VariantName,
  ports: readonly number[],
  options: { keyPrefix?: string } = {},
): Promise<Connected> {
  const rootNodes = ports.map((port) => ({ url: `redis://127.0.0.1:${port}` }));
  const prefix = options.keyPrefix !== undefined ? { keyPrefix: options.keyPrefix } : {};
  switch (variant) {
    case "ioredis":
    case "ioredis5": {
      const nodes = ports.map((port) => ({ host: "127.0.0.1", port }));
      const opts = { lazyConnect: true, redisOptions: { maxRetriesPerRequest: 3 }, ...prefix };
      return connected(variant, variant === "ioredis" ? new Cluster(nodes, opts) : new Cluster5(nodes, opts));
    }
    case "node-redis":
      return connected(variant, createCluster({ rootNodes, ...prefix }));
    case "node-redis5":
      return connected(variant, redis5.createCluster({ rootNodes }));
    case "node-redis4":
    case "node-redis4-legacy":
      return connected(variant, redis4.createCluster({ rootNodes }));
  }
}
