// `npm install ./clients/node` (and npm ci here) runs this as the package's
// prepare script: it builds dist/ with the pinned TypeScript. A linked
// install does not install the package's own dev dependencies, so when the
// compiler is missing they are installed first from the lockfile.
"use strict";
const { execFileSync } = require("node:child_process");
const { existsSync } = require("node:fs");
const path = require("node:path");

const dir = __dirname;
const tsc = path.join(dir, "node_modules", "typescript", "bin", "tsc");
const run = (args) => execFileSync(process.execPath, args, { cwd: dir, stdio: "inherit" });

if (!existsSync(tsc)) {
  const npm = process.env.npm_execpath;
  const args = ["ci", "--ignore-scripts", "--no-audit", "--no-fund"];
  if (npm && /\.c?js$/.test(npm)) run([npm, ...args]);
  else execFileSync("npm", args, { cwd: dir, stdio: "inherit" });
}
run([tsc, "-p", "tsconfig.build.json"]);
