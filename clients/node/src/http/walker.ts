/**
 * The configuration's walker (docs/http.md, Start-up validation): reads a
 * document with the schema's tree (schema.ts, generated from
 * conformance/schema/config.schema.json) and checks every field's name,
 * kind, enum, bounds, pattern and duration, filling in the defaults. Its
 * messages are conformance/README.md's templates. The rules that span
 * fields are configuration.ts's.
 */
import { durationMs, rateOf } from "./durations.js";
import { OBJECTS, ROOT, type Field } from "./schema.js";

/** A field's value read: a duration in ms, a rate as its count and window, anything else as the document has it. */
export type Walked = Readonly<Record<string, unknown>>;

/** A rate field, read. */
export interface RateValue {
  readonly count: number;
  readonly windowMs: number;
}

/** What the walker refuses: the field's path and what is wrong with it. */
export class WalkError extends Error {
  constructor(
    readonly path: string,
    readonly problem: string,
  ) {
    super(`${path}: ${problem}`);
  }
}

const PATTERNS = new Map<string, RegExp>();

function pattern(source: string): RegExp {
  let re = PATTERNS.get(source);
  if (re === undefined) {
    re = new RegExp(source);
    PATTERNS.set(source, re);
  }
  return re;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function fieldsOf(object: string): readonly Field[] {
  const fields = OBJECTS[object];
  if (fields === undefined) throw new Error(`librl: the generated schema has no object ${object}`);
  return fields;
}

/** Reads the whole document: its fields with their defaults filled in. */
export function walkDocument(document: unknown): Walked {
  return walkObject("(document)", "", document, ROOT);
}

function walkObject(where: string, prefix: string, value: unknown, object: string): Walked {
  if (!isObject(value)) throw new WalkError(where, "must be an object");
  const fields = fieldsOf(object);
  for (const name of Object.keys(value)) {
    if (!fields.some((f) => f.name === name)) throw new WalkError(`${prefix}${name}`, "unknown field");
  }
  const out: Record<string, unknown> = {};
  for (const field of fields) {
    const path = `${prefix}${field.name}`;
    const given = value[field.name];
    if (given !== undefined) out[field.name] = walk(path, given, field);
    else if (field.required) throw new WalkError(path, "missing");
    else if (field.default !== undefined) out[field.name] = walk(path, JSON.parse(field.default) as unknown, field);
  }
  return out;
}

/** One field of one of the schema's objects, read as the walker reads it in a document. */
export function walkField(path: string, value: unknown, object: string, name: string): unknown {
  const field = fieldsOf(object).find((f) => f.name === name);
  if (field === undefined) throw new Error(`librl: the generated schema's ${object} has no field ${name}`);
  return walk(path, value, field);
}

function walk(path: string, value: unknown, field: Field): unknown {
  switch (field.kind) {
    case "string":
      return walkString(path, value, field);
    case "integer":
      if (isInteger(value, field)) return value;
      throw new WalkError(path, `must be an integer from ${field.minimum} to ${field.maximum}`);
    case "boolean":
      if (typeof value === "boolean") return value;
      throw new WalkError(path, "must be true or false");
    case "duration": {
      const ms = durationMs(value);
      if (ms !== undefined && ms >= (field.durationMinMs as number) && ms <= (field.durationMaxMs as number)) return ms;
      throw new WalkError(
        path,
        `must be a duration from ${field.durationMinMs} ms to ${field.durationMaxMs} ms (an integer and ms, s, m, h or d; seconds without a unit)`,
      );
    }
    case "rate": {
      const rate = typeof value === "string" && matches(value, field) ? rateOf(value) : undefined;
      if (rate !== undefined) {
        const [count, windowMs] = rate;
        const countOk = count >= (field.minimum as number) && count <= (field.maximum as number);
        if (countOk && windowMs >= (field.durationMinMs as number) && windowMs <= (field.durationMaxMs as number)) {
          return { count, windowMs } satisfies RateValue;
        }
      }
      throw new WalkError(
        path,
        `must be a rate: a count from ${field.minimum} to ${field.maximum} per a period from ${field.durationMinMs} ms to ${field.durationMaxMs} ms (100/minute, 5 per 10s, 3/1500ms)`,
      );
    }
    case "int-or-string":
      if (isInteger(value, field) || (typeof value === "string" && matches(value, field))) return value;
      throw new WalkError(path, `must be ${field.expected ?? "an integer or a string"}`);
    case "list": {
      if (!Array.isArray(value)) throw new WalkError(path, "must be a list");
      if (field.minItems !== undefined && value.length < field.minItems) throw new WalkError(path, "must not be empty");
      const items = field.items as Field;
      return value.map((item: unknown, i) => walk(`${path}[${i}]`, item, items));
    }
    case "object":
      return walkObject(path, `${path}.`, value, field.object as string);
    case "map": {
      // An object whose names the document chooses (identities, a refusal's headers).
      if (typeof value !== "object" || value === null || Array.isArray(value)) throw new WalkError(path, "must be an object");
      const out: Record<string, unknown> = {};
      for (const [name, item] of Object.entries(value)) {
        const at = `${path}.${name}`;
        if (!pattern(field.keyPattern as string).test(name)) throw new WalkError(at, `must be ${field.keyExpected ?? "another name"}`);
        out[name] = walk(at, item, field.items as Field);
      }
      return out;
    }
    case "json":
      if (value === null || value === undefined) throw new WalkError(path, `must be ${field.expected ?? "a JSON value other than null"}`);
      return value;
  }
}

function isInteger(value: unknown, field: Field): value is number {
  return (
    typeof value === "number" &&
    Number.isInteger(value) &&
    (field.minimum === undefined || value >= field.minimum) &&
    (field.maximum === undefined || value <= field.maximum)
  );
}

/** The field's pattern (searched for, as the schema's are anchored) and its lengths in UTF-8 bytes. */
function matches(value: string, field: Field): boolean {
  if (field.pattern !== undefined && !pattern(field.pattern).test(value)) return false;
  if (field.minLength === undefined && field.maxLength === undefined) return true;
  const bytes = Buffer.byteLength(value, "utf8");
  return (field.minLength === undefined || bytes >= field.minLength) && (field.maxLength === undefined || bytes <= field.maxLength);
}

function walkString(path: string, value: unknown, field: Field): string {
  if (field.choices.length > 0) {
    if (typeof value === "string" && field.choices.includes(value)) return value;
    throw new WalkError(path, `must be one of ${field.choices.join(", ")}`);
  }
  if (typeof value === "string" && matches(value, field)) return value;
  throw new WalkError(path, `must be ${field.expected ?? "a string"}`);
}
