/**
 * librl: the Node.js client of the librl Redis module (RL.FIXED,
 * RL.SLIDING, RL.TOKEN, RL.CONCURRENT, RL.ALL, RL.OVERRIDE) for ioredis and
 * node-redis.
 */
export {
  Limiter,
  CrossSlotError,
  DurabilityError,
  type DurableOptions,
  type LimiterOptions,
  type RedisLikeClient,
  type WithLeaseOptions,
} from "./limiter.js";
export { Lease, LeaseLostError, LeaseRefusedError, type KeepAliveOptions } from "./lease.js";
export { HeldCallTimeoutError } from "./held.js";
export {
  Concurrent,
  Fixed,
  Sliding,
  Token,
  type AcquireOptions,
  type Algorithm,
  type AllOptions,
  type Clause,
  type CommonOptions,
  type ConcurrentClauseOptions,
  type ConcurrentOptions,
  type Duration,
  type FixedClauseOptions,
  type FixedOptions,
  type OverrideListOptions,
  type OverrideSetOptions,
  type PeekOption,
  type SlidingClauseOptions,
  type SlidingOptions,
  type TokenClauseOptions,
  type TokenOptions,
} from "./args.js";
export type { AllDecision, Decision, OverrideEntry, OverrideInfo, OverrideListPage } from "./reply.js";
export type { DenialCacheOptions } from "./cache.js";
export type { ClientKind } from "./transport.js";
export { keySlot } from "./slot.js";
