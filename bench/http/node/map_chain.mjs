// Why the HTTP integrations' per-request caches are fixed tables, not Maps
// emptied when full (docs/http/node.md, Caches and the garbage collector):
// 1.2 million fresh keys, each with a request's worth of short-lived
// garbage, kept one of three ways, and what V8's young-generation
// collections promoted meanwhile.
//   node --max-semi-space-size=1 --trace-gc-nvp map_chain.mjs map|table|none | \
//     node map_chain.mjs --sum
// `map`: a Map cleared every 64 keys (each cleared or grown table points
// to its successor, so once one is promoted each next one is kept alive
// and promoted in turn); `table`: 64 fixed slots by hash; `none`: nothing
// kept. A 1 MB semi-space is the new space V8's memory reducer leaves
// after an idle spell; with the default (16 MB) none of them promotes.
import { createInterface } from "node:readline";

const mode = process.argv[2];
if (mode === "--sum") {
  // Sums a --trace-gc-nvp log read from stdin.
  let promoted = 0;
  let scavenges = 0;
  let markCompacts = 0;
  for await (const line of createInterface({ input: process.stdin })) {
    const kind = / gc=(\w+)/.exec(line)?.[1];
    if (kind === undefined) continue;
    if (kind === "s") {
      scavenges++;
      promoted += Number(/ promoted=(\d+)/.exec(line)?.[1] ?? 0);
    } else markCompacts++;
  }
  console.log(JSON.stringify({ scavenges, promoted_mb: Math.round(promoted / 2 ** 20), mark_compacts: markCompacts }));
  process.exit(0);
}
if (!["map", "table", "none"].includes(mode)) {
  console.error("usage: node --max-semi-space-size=1 --trace-gc-nvp map_chain.mjs map|table|none | node map_chain.mjs --sum");
  process.exit(2);
}

const KEPT = 64;
const map = new Map();
const keys = new Array(KEPT).fill(undefined);
const values = new Array(KEPT).fill(undefined);
function hash(s) {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}
let sink = 0;
for (let i = 0; i < 1_200_000; i++) {
  const tag = `header:x-client:c-nonce-1-${i}`;
  const value = { tag, key: `rl:{${tag}}:half`, encoded: `*3\r\n$6\r\nRL.ALL\r\n$${tag.length}\r\n${tag}\r\n` };
  if (mode === "map") {
    if (map.size >= KEPT) map.clear();
    map.set(tag, value);
  } else if (mode === "table") {
    const slot = hash(tag) & (KEPT - 1);
    keys[slot] = tag;
    values[slot] = value;
  }
  // The rest of a request: garbage that dies young.
  for (let j = 0; j < 20; j++) sink += [j, { j }, `x${j}`].length;
}
if (sink === 0) console.log(sink);
