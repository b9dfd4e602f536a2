/** The client libraries under test, created the way an application would. */
import Redis, { Cluster, ReplyError } from "ioredis";
import { createClient, createCluster, ErrorReply } from "redis";
import type { RedisLikeClient } from "../src/index.js";

export type ClientName = "ioredis" | "node-redis";
export const CLIENT_NAMES: readonly ClientName[] = ["ioredis", "node-redis"];

export interface Connected {
  /** What to hand to new Limiter(). */
  client: RedisLikeClient;
  /** The class of the library's server-error replies. */
  errorClass: new (...args: never[]) => Error;
  /** A plain INCR through the same client, for comparisons. */
  incr(key: string): Promise<number>;
  close(): Promise<void>;
}

export async function connectStandalone(
  name: ClientName,
  port: number,
  options: { keyPrefix?: string; resp3?: boolean } = {},
): Promise<Connected> {
  if (name === "ioredis") {
    const client = new Redis({
      port,
      host: "127.0.0.1",
      lazyConnect: true,
      maxRetriesPerRequest: 1,
      ...(options.keyPrefix !== undefined ? { keyPrefix: options.keyPrefix } : {}),
    });
    await client.connect();
    return {
      client,
      errorClass: ReplyError as unknown as new (...args: never[]) => Error,
      incr: (key) => client.incr(key),
      close: async () => void client.disconnect(),
    };
  }
  const client = createClient({
    url: `redis://127.0.0.1:${port}`,
    ...(options.keyPrefix !== undefined ? { keyPrefix: options.keyPrefix } : {}),
    ...(options.resp3 ? { RESP: 3 as const } : {}),
  });
  client.on("error", () => {});
  await client.connect();
  return {
    client,
    errorClass: ErrorReply,
    incr: (key) => client.incr(key),
    close: async () => void client.destroy(),
  };
}

export async function connectCluster(name: ClientName, ports: readonly number[]): Promise<Connected> {
  if (name === "ioredis") {
    const client = new Cluster(
      ports.map((port) => ({ host: "127.0.0.1", port })),
      { lazyConnect: true, redisOptions: { maxRetriesPerRequest: 3 } },
    );
    await client.connect();
    return {
      client,
      errorClass: ReplyError as unknown as new (...args: never[]) => Error,
      incr: (key) => client.incr(key),
      close: async () => void client.disconnect(),
    };
  }
  const client = createCluster({ rootNodes: ports.map((port) => ({ url: `redis://127.0.0.1:${port}` })) });
  client.on("error", () => {});
  await client.connect();
  return {
    client,
    errorClass: ErrorReply,
    incr: (key) => client.incr(key),
    close: async () => void client.destroy(),
  };
}
