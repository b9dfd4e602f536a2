/**
 * The shared vectors (conformance/vectors/README.md): every pure rule of
 * docs/http.md as input and expected output, run against the functions
 * the Express and Fastify adapters call on requests, without Redis. Each
 * function the vectors name gets a thin adapter here (bytes in the
 * adapters' Latin-1 form, configuration read by the configuration
 * reader), never a second implementation.
 */
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { describe, it } from "node:test";
import { parseDecision, type Decision } from "../src/reply.js";
import { ConfigError, parseConfig, type Config, type Policy, type Source } from "../src/http/configuration.js";
import { policyKeys } from "../src/http/core.js";
import { outcomeOf } from "../src/http/hook.js";
import { substitute } from "../src/http/substitute.js";
import { rateLimitHeaders, mostRestrictive, type Checked } from "../src/http/headers.js";
import { Exemptions, Identity, TrustedProxies, clientAddress, type RequestFacts } from "../src/http/identity.js";
import { LocalLimiter } from "../src/http/local.js";
import { costHeader, plan } from "../src/http/plan.js";
import { badCodeCost, badCost, denied, tooLarge, unavailable, type Refusal } from "../src/http/refusals.js";
import { CONFORMANCE_RESOLVERS } from "../examples/app.js";
import { Routes, canonicalPath } from "../src/http/routes.js";
import { WalkError, walkField, type RateValue } from "../src/http/walker.js";

const VECTORS_DIR = process.env["LIBRL_CONFORMANCE_VECTORS"] ?? path.resolve(__dirname, "..", "..", "..", "..", "conformance", "vectors");

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Input = { readonly [key: string]: Json };

/** A member the vector must give. */
function given(input: Input, name: string): Json {
  const value = input[name];
  if (value === undefined) throw new Error(`the vector's input has no ${name}`);
  return value;
}

/** Bytes as the vectors write them: a string is its UTF-8 bytes, `{"hex": ...}` those bytes. */
function bytes(value: Json): Buffer {
  if (typeof value === "string") return Buffer.from(value, "utf8");
  if (typeof value === "object" && value !== null && !Array.isArray(value) && typeof value["hex"] === "string") {
    return Buffer.from(value["hex"], "hex");
  }
  throw new Error(`not bytes: ${JSON.stringify(value)}`);
}

/** Bytes as Node hands a header value or a request target over: Latin-1 text. */
function latin1(value: Json): string {
  return bytes(value).toString("latin1");
}

/**
 * The request facts of `[[name, value], ...]` header lines: each name's
 * lines joined with ", ", as Node's headers are (Cookie's with "; ", as
 * Node joins them), and the raw query string as Node hands a target over.
 */
function facts(peer: Json, lines: Json, user: string | undefined, query?: Json, attributes?: Json): RequestFacts {
  const headers = new Map<string, string[]>();
  for (const [name, value] of lines as [string, Json][]) {
    const key = name.toLowerCase();
    headers.set(key, [...(headers.get(key) ?? []), latin1(value)]);
  }
  return {
    peer: peer === null ? undefined : (peer as string),
    header: (name) => headers.get(name)?.join(", "),
    user,
    query: query === undefined || query === null ? undefined : latin1(query),
    cookie: headers.get("cookie")?.join("; "),
    // A vector's request attributes: what the application's code set, by name.
    attribute: (name) => (attributes as Record<string, Json> | undefined | null)?.[name],
  };
}

/** A vector's user: a string, bytes (`{"hex"}`: their UTF-8 text), or null. */
function userOf(value: Json): string | undefined {
  return value === null ? undefined : bytes(value).toString("utf8");
}

/** A configuration document with these policies (a whole policy is a policy of the document). */
function config(top: Input, policies: Json[]): Config {
  return parseConfig({ ...top, policies });
}

function policiesOf(policies: Json[]): Policy[] {
  return [...config({}, policies).policies.values()];
}

function decisions(replies: Json): Checked["decision"][] {
  return (replies as Json[]).map((r) => parseDecision(r, "a vector's reply"));
}

/** A walked value, or `{"error": true}` for what the walker refuses. */
function walked<T>(read: () => T, shape: (value: T) => Json): Json {
  try {
    return shape(read());
  } catch (err) {
    if (err instanceof WalkError) return { error: true };
    throw err;
  }
}

/** A refusal as the vectors write it; `text`: the body is `deny.message` (whatever its Content-Type), compared as text. */
function refusalJson(r: Refusal, text = false): Json {
  const out: { [key: string]: Json } = { status: r.status, content_type: r.contentType };
  if (!text) out["body"] = JSON.parse(r.body) as Json;
  else out["body_text"] = r.body;
  if (Object.keys(r.headers).length > 0) out["headers"] = { ...r.headers };
  return out;
}

/** Each function the vectors name, as the adapters call it. */
const FUNCTIONS: Readonly<Record<string, (input: Input) => Json>> = {
  algorithm: (input) => {
    // One limiter; each call as the clause decide.ts builds, at its own now.
    const local = new LocalLimiter(10);
    const head = [String(given(input, "limit")), `${String(given(input, "window_ms"))}ms`];
    if (input["aligned"] === true) head.push("ALIGNED");
    if (input["algorithm"] === "approx") head.push("APPROX");
    if (typeof input["burst"] === "number") head.push("BURST", String(input["burst"]));
    const algorithm = ({ fixed: "FIXED", sliding: "SLIDING", approx: "SLIDING", token: "TOKEN" } as const)[given(input, "algorithm") as "fixed"];
    return (given(input, "calls") as [number, number][]).map(([nowMs, cost]) => {
      const clause = { algorithm, key: "k", args: [...head, "COST", String(cost)], override: undefined, refund: false };
      const d = local.check([clause], { nowMs }).decisions[0] as Decision;
      return [Number(d.allowed), d.count, d.retryAfterMs, d.limit, d.remaining, d.resetAfterMs];
    });
  },
  duration: (input) => {
    const [object, name] = given(input, "field") === "timeout" ? ["config", "timeout"] : ["policy", "window"];
    return walked(() => walkField(name, given(input, "value"), object, name) as number, (ms) => ({ ms }));
  },

  rate: (input) =>
    walked(
      () => walkField("rate", given(input, "value"), "policy", "rate") as RateValue,
      (r) => ({ limit: r.count, window_ms: r.windowMs }),
    ),

  cost_header: (input) => {
    const lines = (given(input, "lines") as Json[]).map(latin1);
    const cost = costHeader(lines.length === 0 ? undefined : lines.join(", "));
    const out: Json = cost === null ? { error: "bad-cost" } : { cost };
    return out;
  },

  canonical_path: (input) => ({ hex: Buffer.from(canonicalPath(latin1(given(input, "path"))), "latin1").toString("hex") }),

  route: (input) => {
    const names = given(input, "policies") as string[];
    const c = parseConfig({
      policies: names.map((name) => ({ name, algorithm: "fixed", limit: 1, window: "1s" })),
      routes: given(input, "routes"),
    });
    const selection = new Routes(c.routes, [...c.policies.values()]).select(given(input, "method") as string, latin1(given(input, "path")));
    const index = c.routes?.findIndex((r) => r.policies === selection.policies) ?? -1;
    if (c.routes !== undefined && index < 0) return null;
    return { route: c.routes === undefined ? null : index, policies: selection.policies.map((p) => p.name) };
  },

  client_ip: (input) => {
    const c = config({ trusted_proxies: given(input, "trusted_proxies") }, []);
    return clientAddress(facts(given(input, "peer"), given(input, "headers"), undefined), new TrustedProxies(c.trustedProxies))?.text ?? null;
  },

  key: (input) => {
    const c = config(given(input, "config") as Input, [given(input, "policy")]);
    const request = given(input, "request") as Input;
    const identity = new Identity(
      facts(given(request, "peer"), given(request, "headers"), userOf(given(request, "user")), request["query"], request["attributes"]),
      c,
      new TrustedProxies(c.trustedProxies),
    );
    const policy = [...c.policies.values()];
    const [planned] = plan(policy, identity, c.prefix);
    assert.ok(planned !== undefined);
    return {
      subject: planned.subject.tag,
      key: planned.key,
      override_key: planned.okey ?? null,
      exempt: new Exemptions(c.exempt).has(identity),
    };
  },

  response_headers: (input) => {
    const policies = policiesOf(given(input, "policies") as Json[]);
    const replies = decisions(given(input, "replies"));
    const checked: Checked[] = policies.map((policy, i) => ({ policy, decision: replies[i] as Checked["decision"] }));
    const refused = given(input, "denied") === true && given(input, "mode") === "enforce";
    const legacyReset = (input["legacy_reset"] ?? "seconds") as Config["legacyReset"];
    const nowMs = (input["now_ms"] ?? 0) as number;
    const headers = rateLimitHeaders(given(input, "headers") as Config["headers"], checked, refused, legacyReset, nowMs);
    const six = ["RateLimit-Policy", "RateLimit", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After"];
    return lowerCaseNames({
      most_restrictive: mostRestrictive(checked, refused) ?? null,
      headers,
      absent: six.filter((name) => headers[name] === undefined),
    });
  },

  refusal: (input) => {
    // The matched route's deny, read as the configuration reads it (merged over `deny`).
    const routeDeny = input["route_deny"];
    const c = parseConfig({
      deny: given(input, "deny"),
      ...(input["fail_deny"] === undefined ? {} : { fail_deny: input["fail_deny"] }),
      policies: [],
      ...(routeDeny === undefined ? {} : { routes: [{ path: "/", policies: [], deny: routeDeny }] }),
    });
    const deny = c.routes?.[0]?.deny ?? c.deny;
    switch (given(input, "kind")) {
      case "denied": {
        const [policy] = policiesOf([given(input, "policy")]);
        const [decision] = decisions([given(input, "reply")]);
        return refusalJson(denied(deny, { policy: policy as Policy, decision: decision as Checked["decision"] }, given(input, "cost") as number, {}), deny.body === "text");
      }
      case "bad-cost": {
        const resolver = input["resolver"];
        if (resolver === undefined) return refusalJson(badCost(given(input, "header") as string, (policiesOf([given(input, "policy")])[0] as Policy).name));
        const registered = { cost: { [resolver as string]: () => 1 } };
        const [policy] = parseConfig({ policies: [given(input, "policy")] }, registered).policies.values() as Iterable<Policy>;
        assert.ok(policy !== undefined && policy.cost.kind === "code");
        return refusalJson(badCodeCost(policy.cost.name, policy.name));
      }
      case "too-large":
        return refusalJson(tooLarge(given(input, "max_body_bytes") as number));
      case "unavailable":
        return refusalJson(unavailable(c.failDeny), c.failDeny.body === "text");
      default:
        throw new Error(`unknown refusal kind ${JSON.stringify(given(input, "kind"))}`);
    }
  },

  source: (input) => {
    const request = given(input, "request") as Input;
    const c = parseConfig({ identities: { s: [given(input, "source")] }, policies: [{ name: "p", algorithm: "fixed", limit: 1, window: "1s", key: "s" }] });
    const key = (c.policies.get("p") as Policy).key;
    assert.ok(key.kind === "identity");
    const identity = new Identity(
      facts("203.0.113.7", given(request, "headers"), userOf(given(request, "user")), given(request, "query"), request["attributes"]),
      c,
      new TrustedProxies([]),
    );
    const value = identity.read(key.sources[0] as Source);
    return value === undefined ? null : { hex: Buffer.from(value, "latin1").toString("hex") };
  },

  override_key: (input): Json => {
    const c = parseConfig(given(input, "config"));
    const value = given(input, "value");
    try {
      const keys = policyKeys(c, given(input, "policy") as string, value === null ? null : bytes(value));
      return { key: keys.key, override_key: keys.overrideKey };
    } catch (err) {
      if (err instanceof ConfigError) return { error: true };
      throw err;
    }
  },

  substitute: (input): Json => {
    try {
      return { text: substitute(given(input, "text") as string, given(input, "env") as Record<string, string>) };
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      // Only an unset variable's message is pinned.
      return err.problem === "not set" ? { error: err.message } : { error: true };
    }
  },

  outcome: (input) => {
    const policies = policiesOf(given(input, "policies") as Json[]);
    const replies = decisions(given(input, "replies"));
    const checked: Checked[] = policies.map((policy, i) => ({ policy, decision: replies[i] as Checked["decision"] }));
    return { outcome: outcomeOf(given(input, "mode") === "shadow", checked) };
  },

  config_error: (input) => {
    try {
      parseConfig(given(input, "config"), CONFORMANCE_RESOLVERS);
    } catch (err) {
      if (err instanceof ConfigError) return err.message;
      throw err;
    }
    return "(accepted)";
  },
};

/** The files this runner runs: the directory must hold exactly these. */
const FILES = [
  "algorithms.json",
  "client-ip.json",
  "config-errors.json",
  "cost-headers.json",
  "durations.json",
  "headers.json",
  "keys.json",
  "outcomes.json",
  "override-keys.json",
  "paths.json",
  "rates.json",
  "refusals.json",
  "routes.json",
  "sources.json",
  "substitution.json",
];

interface VectorFile {
  rule: string;
  function: string;
  vectors: { name: string; input: Input; expect: Json }[];
}

/** Header names compare without regard to case. */
function lowerCaseNames(v: { most_restrictive: Json; headers: Json; absent: Json }): Json {
  const headers = Object.fromEntries(Object.entries(v.headers as Record<string, Json>).map(([k, x]) => [k.toLowerCase(), x]));
  return { ...v, headers, absent: (v.absent as string[]).map((n) => n.toLowerCase()).sort() };
}

/** Expected bytes compare as bytes, header names without case; everything else exactly. */
function expected(file: VectorFile, expect: Json): Json {
  if (file.function === "canonical_path") return { hex: bytes(expect).toString("hex") };
  if (file.function === "source") return expect === null ? null : { hex: bytes(expect).toString("hex") };
  if (file.function === "response_headers") return lowerCaseNames(expect as { most_restrictive: Json; headers: Json; absent: Json });
  return expect;
}

/** Per file, the vectors Node.js does not pass yet (conformance/README.md, Pending). */
const PENDING =
  (JSON.parse(readFileSync(path.resolve(VECTORS_DIR, "..", "pending.json"), "utf8")) as { vectors: Record<string, Record<string, string[]>> })
    .vectors["node"] ?? {};

describe("conformance vectors", () => {
  it("the directory holds exactly the files this runner runs", () => {
    // A file of a function not implemented yet has every vector pending.
    const whollyPending = (f: string): boolean =>
      (JSON.parse(readFileSync(path.join(VECTORS_DIR, f), "utf8")) as VectorFile).vectors.every((v) => (PENDING[f] ?? []).includes(v.name));
    const onDisk = readdirSync(VECTORS_DIR).filter((f) => f.endsWith(".json") && (FILES.includes(f) || !whollyPending(f)));
    assert.deepEqual(onDisk.sort(), FILES);
  });

  for (const name of FILES) {
    const file = JSON.parse(readFileSync(path.join(VECTORS_DIR, name), "utf8")) as VectorFile;
    describe(`${name} (${file.function}, ${file.rule})`, () => {
      const run = FUNCTIONS[file.function];
      it("names a function this runner knows, and each vector once", () => {
        assert.ok(run !== undefined, `unknown function ${JSON.stringify(file.function)}`);
        const names = file.vectors.map((v) => v.name);
        assert.equal(new Set(names).size, names.length, "vector names are not unique");
      });
      if (run === undefined) return;
      for (const v of file.vectors) {
        if ((PENDING[name] ?? []).includes(v.name)) {
          // Reported as PENDING; once it passes, it must leave the list.
          it(`${v.name} (PENDING: conformance/pending.json)`, () => {
            let passes = false;
            try {
              assert.deepStrictEqual(run(v.input), expected(file, v.expect));
              passes = true;
            } catch {
              // still pending
            }
            assert.ok(!passes, `${name} ${v.name} passes: remove it from conformance/pending.json`);
          });
          continue;
        }
        it(v.name, () => {
          const got = run(v.input);
          assert.deepStrictEqual(got, expected(file, v.expect), `${name} ${v.name}: got ${JSON.stringify(got)}, expected ${JSON.stringify(v.expect)}`);
        });
      }
    });
  }
});

describe("the canonical path beyond the vectors", () => {
  // Decoding the whole path again per level of nesting was quadratic: a 16 KB target cost 130 ms.
  it("decodes a path escaped 200,000 levels deep in linear time", { timeout: 10_000 }, () => {
    assert.equal(canonicalPath(`/%${"25".repeat(200_000)}41/b`), "/A/b");
  });
});
