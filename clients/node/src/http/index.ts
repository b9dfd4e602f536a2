/**
 * librl/http: the framework-free HTTP rate limiter the Express and Fastify
 * adapters share (docs/http.md), for adapting another framework.
 */
export {
  HttpLimiter,
  policyKeys,
  type HttpLimiterOptions,
  type LimitGiven,
  type RequestInfo,
  type RequestMode,
  type Resolvers,
  type SubjectOf,
  type Verdict,
  type VerdictTarget,
} from "./core.js";
export type { CheckReport, DecisionEvent, DecisionHook, Logger, Outcome } from "./hook.js";
export type { MeasureBody } from "./plan.js";
export { canonicalPath, type Selection } from "./routes.js";
export {
  ConfigError,
  loadConfig,
  parseConfig,
  parseDuration,
  parseRate,
  type Config,
  type ConfigSource,
  type CostSpec,
  type Deny,
  type KeyKind,
  type LoadOptions,
  type Policy,
  type Route,
  type Source,
  type TrustedNetwork,
  type YamlParser,
} from "./configuration.js";
export { type RequestFacts, type Subject, type SubjectValues } from "./identity.js";
export { apiKeyId } from "./keys.js";
export type { Refusal } from "./refusals.js";
export { LocalLimiter } from "./local.js";
