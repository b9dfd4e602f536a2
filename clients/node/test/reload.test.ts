/**
 * Reload and `${VAR}` substitution (docs/http/node.md, Reload): a running
 * Express or Fastify app swaps its configuration; a configuration that
 * does not validate is refused with the start-up error and the old one
 * stays; a file's `${VAR}` references are replaced before it is parsed.
 */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import Redis from "ioredis";
import { FRAMEWORKS, startApp } from "../examples/app.js";
import { ConfigError, HttpLimiter, loadConfig, parseConfig } from "../src/http/index.js";
import { substitute } from "../src/http/substitute.js";
import { REDIS_SERVER, startServer, type Server } from "./helpers.js";

const policy = (limit: number) => ({ exempt_loopback: false, policies: [{ name: "p", algorithm: "fixed", limit, window: "60s" }] });

describe("${VAR} substitution", () => {
  const env = { LIMIT: "50", EMPTY: "", W: "1m" };
  const cases: Array<[string, string]> = [
    ["limit: ${LIMIT}", "limit: 50"],
    ["limit: ${MISSING:-10}, window: ${W:-1s}", "limit: 10, window: 1m"],
    ["limit: ${EMPTY:-7}", "limit: 7"],
    ["message: ${EMPTY}", "message: "],
    ["message: cost $5, $${LIMIT} $LIMIT", "message: cost $5, ${LIMIT} $LIMIT"],
    ["default: ${MISSING:-a:-b}", "default: a:-b"],
    ["no references at all", "no references at all"],
  ];
  for (const [text, out] of cases) it(`${text} -> ${out}`, () => assert.equal(substitute(text, env), out));

  const errors: Array<[string, string]> = [
    ["limit: ${MISSING}", "librl: configuration: ${MISSING}: not set"],
    ["limit: ${LIMIT", "librl: configuration: ${: is not closed by }"],
    ["limit: ${1X}", 'librl: configuration: ${1X}: "1X" is not a variable name (letters, digits and _, not starting with a digit)'],
  ];
  for (const [text, message] of errors) {
    it(`${text} fails: ${message}`, () => assert.throws(() => substitute(text, env), (err: Error) => err instanceof ConfigError && err.message === message));
  }

  it("a file's references are replaced before it is parsed", () => {
    const dir = mkdtempSync(path.join(tmpdir(), "librl-subst-"));
    const file = path.join(dir, "policies.json");
    writeFileSync(file, '{"policies": [{"name": "p", "algorithm": "fixed", "limit": ${LIBRL_TEST_LIMIT:-7}, "window": "60s"}]}');
    assert.equal(loadConfig(file).policies.get("p")?.limit, 7);
    process.env["LIBRL_TEST_LIMIT"] = "9";
    try {
      assert.equal(loadConfig(file).policies.get("p")?.limit, 9);
    } finally {
      delete process.env["LIBRL_TEST_LIMIT"];
    }
  });
});

describe("reload", () => {
  let server: Server;
  let client: Redis;
  before(async () => {
    server = await startServer(REDIS_SERVER, "reload");
    client = new Redis(server.port, "127.0.0.1");
  });
  after(async () => {
    client.disconnect();
    await server.stop();
  });

  for (const framework of FRAMEWORKS) {
    it(`${framework}: reload swaps the limits; a bad configuration is refused and the old one stays`, async () => {
      await client.flushall();
      const app = await startApp(framework, { client, config: policy(1) });
      try {
        const url = `http://127.0.0.1:${app.port}/`;
        const status = async () => (await fetch(url)).status;
        assert.equal(await status(), 200);
        assert.equal(await status(), 429);
        assert.throws(() => app.core.reload({ policies: [{ name: "p", algorithm: "fixed", limit: 0, window: "60s" }] }), ConfigError);
        assert.equal(app.core.config.policies.get("p")?.limit, 1);
        assert.equal(await status(), 429);
        app.core.reload(policy(3));
        assert.equal(app.core.config.policies.get("p")?.limit, 3);
        assert.deepEqual([await status(), await status(), await status()], [200, 200, 429]);
      } finally {
        await app.close();
      }
    });
  }
});

describe("keys from code", () => {
  const client = new Redis({ lazyConnect: true });
  const core = new HttpLimiter({
    client,
    config: {
      policies: [
        { name: "p-ip", algorithm: "fixed", limit: 1, window: "1m" },
        { name: "p-user", algorithm: "fixed", limit: 1, window: "1m", key: "user", overridable: true },
        { name: "p-key", algorithm: "fixed", limit: 1, window: "1m", key: "api-key" },
        { name: "p-h", algorithm: "fixed", limit: 1, window: "1m", key: "header:X-Client" },
      ],
    },
  });
  after(() => client.disconnect());

  it("gives the keys the middleware uses, hashing and IPv6 networks included", () => {
    assert.equal(core.key("p-ip", { ip: "2001:db8:1:2::5" }), "rl:{ip:2001:db8:1::/56}:p-ip");
    assert.equal(core.key("p-ip", { ip: "::ffff:203.0.113.7" }), "rl:{ip:203.0.113.7}:p-ip");
    assert.equal(core.overrideKey("p-user", { user: "alice" }), "rl:{user:alice}:override:p-user");
    assert.equal(core.key("p-user", { ip: "203.0.113.7" }), "rl:{ip:203.0.113.7}:p-user");
    assert.equal(core.key("p-key", { apiKey: "secret" }), "rl:{api-key:2bb80d537b1da3e38bd30361aa855686}:p-key");
    assert.equal(core.key("p-h", { header: "c1" }), "rl:{header:x-client:c1}:p-h");
  });

  it("names what is missing", () => {
    assert.throws(() => core.key("nope", { ip: "203.0.113.7" }), ConfigError);
    assert.throws(() => core.key("p-ip", {}), /give the subject's ip/);
    assert.throws(() => core.key("p-ip", { ip: "example.com" }), /not "example.com"/);
  });
});

describe("resolver values", () => {
  // A code:<name> value names a function the application registers: a name it did not register is refused at start-up, naming the field.
  const fixed = { name: "p", algorithm: "fixed", limit: 5, window: "60s" };
  const cases: Array<[unknown, string]> = [
    [{ policies: [{ name: "p", algorithm: "fixed", limit: "code:plan" }] }, 'policies[0].limit: no limit resolver is registered as "plan"'],
    [{ policies: [{ ...fixed, cost: "code:rows" }] }, 'policies[0].cost: no cost resolver is registered as "rows"'],
    [{ mode: "code:switch", policies: [fixed] }, 'mode: no mode resolver is registered as "switch"'],
  ];
  for (const [doc, message] of cases) {
    it(`${message.slice(0, message.indexOf(":"))}: an unregistered code:<name> is refused naming the field`, () => {
      assert.throws(() => parseConfig(doc), (err: unknown) => err instanceof ConfigError && err.message === `librl: configuration: ${message}`);
      // Registered under another field's name is not registered.
      assert.throws(() => parseConfig(doc, { cost: { plan: () => 1 }, limit: { rows: () => undefined, switch: () => undefined } }), ConfigError);
    });
  }
});
