// The package's prepare script (npm ci and npm pack here, and a linked
// `npm install ./clients/node`). It builds dist/ only when dist/ is missing
// or older than a source file, so installing from a checkout whose dist/
// is current changes nothing in it. When a build is needed and the pinned
// TypeScript is missing (a linked install does not install the package's
// dev dependencies), they are installed from the lockfile first.
// The install that never builds anywhere is the packed tarball (README,
// Install): `npm pack` here, then `npm install librl-<version>.tgz`.
"use strict";
const { execFileSync } = require("node:child_process");
const { existsSync, readdirSync, statSync } = require("node:fs");
const path = require("node:path");

const dir = __dirname;
const tsc = path.join(dir, "node_modules", "typescript", "bin", "tsc");
const run = (args) => execFileSync(process.execPath, args, { cwd: dir, stdio: "inherit" });

/** The newest mtime of the files under `root` (0 when none). */
function newest(root) {
  let latest = 0;
  for (const entry of readdirSync(root, { withFileTypes: true })) {
    const file = path.join(root, entry.name);
    latest = Math.max(latest, entry.isDirectory() ? newest(file) : statSync(file).mtimeMs);
  }
  return latest;
}

function upToDate() {
  const outputs = ["index.js", "express.js", "fastify.js", "http/index.js"].map((f) => path.join(dir, "dist", f));
  if (!outputs.every((f) => existsSync(f))) return false;
  const built = Math.min(...outputs.map((f) => statSync(f).mtimeMs));
  const inputs = ["tsconfig.json", "tsconfig.build.json"].map((f) => statSync(path.join(dir, f)).mtimeMs);
  return built >= Math.max(newest(path.join(dir, "src")), ...inputs);
}

if (!upToDate()) {
  if (!existsSync(tsc)) {
    const npm = process.env.npm_execpath;
    const args = ["ci", "--ignore-scripts", "--no-audit", "--no-fund"];
    if (npm && /\.c?js$/.test(npm)) run([npm, ...args]);
    else execFileSync("npm", args, { cwd: dir, stdio: "inherit" });
  }
  run([tsc, "-p", "tsconfig.build.json"]);
}
