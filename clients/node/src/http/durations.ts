/**
 * Durations and rates (docs/http.md, Durations; the `rate` field of
 * Policies): the module's duration grammar exactly, and the `limits`
 * library's rate shorthand. Pure functions of text; the bounds of each
 * field are the caller's.
 */

/** The module's longest window, 3650 days, in ms. */
export const MAX_WINDOW_MS = 3650 * 86_400_000;

/** 2^50: the largest limit, rate, burst and cost the module accepts. */
export const MAX_UNITS = 2 ** 50;

const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** The module's grammar (core/src/units.rs): an integer without leading zeros, then `ms`, `s`, `m`, `h` or `d` in any case. */
const DURATION = /^(0|[1-9][0-9]*)(ms|s|m|h|d)?$/i;

/**
 * A duration in ms, unbounded: a JSON integer is seconds; a string is the
 * module's grammar (no unit: seconds; no spaces, sign or fraction).
 * Undefined when the value is not a duration at all. Numbers past 2^53 are
 * approximate, which is harmless: every bound is far below them.
 */
export function durationMs(value: unknown): number | undefined {
  if (typeof value === "number") return Number.isInteger(value) ? value * 1000 : undefined;
  if (typeof value !== "string") return undefined;
  const m = DURATION.exec(value);
  if (m === null) return undefined;
  return Number(m[1]) * (UNIT_MS[(m[2] ?? "s").toLowerCase()] as number);
}

const WORD_UNIT_MS: Readonly<Record<string, number>> = {
  s: 1000,
  second: 1000,
  seconds: 1000,
  m: 60_000,
  minute: 60_000,
  minutes: 60_000,
  h: 3_600_000,
  hour: 3_600_000,
  hours: 3_600_000,
  d: 86_400_000,
  day: 86_400_000,
  days: 86_400_000,
};

/** `OWS count OWS ("/" | "per") OWS period OWS`, OWS being spaces and tabs. */
const RATE = /^[ \t]*([0-9]+)[ \t]*(?:\/|per(?![A-Za-z]))[ \t]*(.*?)[ \t]*$/i;
/** A period of units: `[n OWS] unit`, `n` at least 1. */
const UNIT_PERIOD = /^(?:([0-9]+)[ \t]*)?([A-Za-z]+)$/;

/**
 * A rate as [count, window ms], or undefined when the text is not one:
 * `5/minute`, `5 per 2 minutes`, `5/10s`, `3/1500ms`, `5/60` (the `limits`
 * library's notation without months and years, ASCII case-insensitive).
 * `per` needs spaces where letters would touch (`5 per minute`). The
 * count's and the window's bounds are the caller's to check.
 */
export function rateOf(value: unknown): [count: number, windowMs: number] | undefined {
  if (typeof value !== "string") return undefined;
  const m = RATE.exec(value);
  if (m === null) return undefined;
  const count = Number(m[1]);
  const period = m[2] as string;
  const duration = DURATION.test(period) ? durationMs(period) : undefined;
  if (duration !== undefined) return [count, duration];
  const units = UNIT_PERIOD.exec(period);
  const unitMs = units === null ? undefined : WORD_UNIT_MS[(units[2] as string).toLowerCase()];
  if (units === null || unitMs === undefined) return undefined;
  const n = units[1] === undefined ? 1 : Number(units[1]);
  return n >= 1 ? [count, n * unitMs] : undefined;
}
