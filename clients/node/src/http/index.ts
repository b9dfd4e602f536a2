/**
 * librl/http: the framework-free HTTP rate limiter the Express and Fastify
 * adapters share (docs/http.md), for adapting another framework.
 */
export {
  HttpLimiter,
  type DecisionEvent,
  type HttpLimiterOptions,
  type Logger,
  type MeasureBody,
  type Outcome,
  type CheckReport,
  type Selection,
  type RequestInfo,
  type Verdict,
} from "./core.js";
export {
  ConfigError,
  loadConfig,
  parseConfig,
  parseDuration,
  parseRate,
  type Config,
  type ConfigSource,
  type CostSpec,
  type KeyKind,
  type LoadOptions,
  type Policy,
  type Route,
  type YamlParser,
} from "./config.js";
export { apiKeyId, type RequestFacts, type Subject } from "./identity.js";
export type { Refusal } from "./response.js";
