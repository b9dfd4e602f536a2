#!/usr/bin/env bash
# `make dist`: what each kind of user installs, under dist/, with SHA256SUMS:
#   librl-<version>-<arch>-linux.so   the module, release build
#   librl-<version>-py3-none-any.whl, librl-<version>.tar.gz
#                                     the Python package (wheel and sdist)
#   librl-<version>.tgz               the Node.js package (npm pack)
#   <crate>-<version>.crate           each library crate of the workspace
#                                     (cargo package)
#   clients-go-<version>.zip          the Go module's source archive, in
#                                     the module zip layout (path@version/)
#   librl-<version>.jar, librl-<version>-sources.jar
#                                     the Java package (mvn package)
#   librl-http-<version>.jar, librl-spring-boot-starter-<version>.jar,
#   librl-spring-cloud-gateway-<version>.jar
#                                     the Java HTTP integrations, each jar
#                                     with its .pom (and librl-integrations'
#                                     parent .pom)
# Each package is built from a copy of its directory in a scratch dir, so
# making the artifacts never writes inside the checkout (no egg-info, no
# clients/node/dist). Every artifact is attempted; the script fails at the
# end if any could not be made, naming it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/dist"
venv="$root/.deps/venv"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failed=()

rm -rf "$out"
mkdir -p "$out"

# A package's files as git sees them (tracked, or new and not ignored), so
# build output and installed dependencies stay behind.
copy_package() { # dir-in-repo dest
  mkdir -p "$2"
  (cd "$root" && git ls-files -z --cached --others --exclude-standard -- "$1") |
    while IFS= read -r -d '' f; do
      [ -e "$root/$f" ] || continue # deleted but still in the index
      mkdir -p "$2/$(dirname "${f#"$1"/}")"
      cp -p "$root/$f" "$2/${f#"$1"/}"
    done
}

step() { echo "librl dist: $*"; }

# The module.
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -1)
step "module librl.so $version"
if (cd "$root" && cargo build --release --locked -p librl); then
  cp "$root/target/release/librl.so" "$out/librl-$version-$(uname -m)-linux.so"
else
  failed+=("module")
fi

# Python: wheel and sdist with pypa/build (pinned in
# scripts/requirements-dev.txt), which builds the wheel from the sdist.
if [ -f "$root/clients/python/pyproject.toml" ]; then
  step "Python package (wheel, sdist)"
  copy_package clients/python "$scratch/python"
  if ! "$venv/bin/python" -m build --outdir "$out" "$scratch/python"; then
    failed+=("Python package")
  fi
fi

# Node.js: npm pack runs the package's prepare script (its TypeScript
# build); the checkout's node_modules lends the copy its dev dependencies.
if [ -f "$root/clients/node/package.json" ]; then
  step "Node.js package (npm pack)"
  copy_package clients/node "$scratch/node"
  [ -d "$root/clients/node/node_modules" ] && ln -s "$root/clients/node/node_modules" "$scratch/node/node_modules"
  if ! (cd "$scratch/node" && npm pack --silent --pack-destination "$out" >/dev/null); then
    failed+=("Node.js package")
  fi
fi

# Crates: every library of the workspace but the module itself (whose
# artifact is the .so above) and the example apps under examples/,
# packaged from a copy of the workspace.
# --no-verify: the workspace's own build and tests have verified them; the
# registry index is used offline when it can be. cargo turns a path
# dependency into a registry one and needs its version for that: where a
# manifest gives only the path, the copy gets the exact version of the
# crate at that path (and a note says so).
metadata=$(cd "$root" && cargo metadata --no-deps --format-version 1 --locked)
crates=$(python3 -c 'import json,sys,os; print(" ".join(p["name"] for p in json.loads(sys.argv[1])["packages"] if p["name"] != "librl" and not os.path.relpath(p["manifest_path"], sys.argv[2]).startswith("examples/")))' "$metadata" "$root")
manifests=$(python3 -c 'import json,sys,os; print(" ".join(os.path.relpath(p["manifest_path"], sys.argv[2]) for p in json.loads(sys.argv[1])["packages"]))' "$metadata" "$root")
if [ -n "$crates" ]; then
  copy_package . "$scratch/workspace"
  # shellcheck disable=SC2086 # one argument per manifest
  python3 - "$scratch/workspace" $manifests <<'PY'
import re, sys
from pathlib import Path
root = Path(sys.argv[1])
members = [root / m for m in sys.argv[2:]]
dep = re.compile(r'^(\s*[\w-]+\s*=\s*\{)([^}\n]*\bpath\s*=\s*"([^"]+)"[^}\n]*)\}', re.M)
for manifest in members:
    text = manifest.read_text()
    def pin(m: re.Match[str]) -> str:
        if re.search(r"\bversion\s*=", m.group(2)):
            return m.group(0)
        target = (manifest.parent / m.group(3) / "Cargo.toml").resolve()
        found = re.search(r'^version\s*=\s*"([^"]+)"', target.read_text(), re.M) if target.exists() else None
        if not found:
            return m.group(0)
        print(f"librl dist: note: {manifest.relative_to(root)}: {m.group(1).split('=')[0].strip()} has a path and no version; packaged as ={found.group(1)}")
        return f'{m.group(1)} version = "={found.group(1)}",{m.group(2)}}}'
    new = dep.sub(pin, text)
    if new != text:
        manifest.write_text(new)
PY
fi
# All in one call: cargo then resolves each crate's dependencies on the
# others from the packages it has just made, none of them being on crates.io.
if [ -n "$crates" ]; then
  step "crates $crates (cargo package)"
  package_args=()
  for crate in $crates; do package_args+=(-p "$crate"); done
  if (cd "$scratch/workspace" && export CARGO_TARGET_DIR="$scratch/target" &&
    { cargo package --no-verify --allow-dirty --exclude-lockfile --offline "${package_args[@]}" ||
      cargo package --no-verify --allow-dirty --exclude-lockfile "${package_args[@]}"; }); then
    cp "$scratch/target/package/"*.crate "$out/"
  else
    failed+=("crates")
  fi
fi

# Go: the module's source zip in the layout the Go module proxy serves
# (every file under <module path>@<version>/), from the files git sees.
if [ -f "$root/clients/go/go.mod" ]; then
  step "Go module (source zip)"
  copy_package clients/go "$scratch/go"
  if ! python3 - "$scratch/go" "v$version" "$out/clients-go-v$version.zip" <<'PY'; then
import re, sys, zipfile
from pathlib import Path
src, version, dest = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
module = re.search(r"^module\s+(\S+)", (src / "go.mod").read_text(), re.M).group(1)
with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as z:
    for f in sorted(p for p in src.rglob("*") if p.is_file()):
        z.write(f, f"{module}@{version}/{f.relative_to(src).as_posix()}")
PY
    failed+=("Go module")
  fi
fi

# Java: the package's jar and sources jar, and the HTTP integrations' jars
# (librl-http, the Spring Boot starter, the Spring Cloud Gateway rate
# limiter), each with its pom (the integrations' with their parent's), so
# that `mvn install:install-file -Dfile=X.jar -DpomFile=X.pom` installs one
# with its dependencies. One Maven build of the integrations' reactor (which
# holds the package) from the copy, without the example app, offline from
# .deps/m2 when scripts/install-deps.sh fetched it for these poms. The tests
# are make test's: compiled (the integrations share a test jar), not run.
if [ -f "$root/clients/java/pom.xml" ]; then
  step "Java package and HTTP integrations (jars, poms)"
  copy_package clients/java "$scratch/java"
  offline=()
  if cmp -s "$root/clients/java/pom.xml" "$root/.deps/m2/.librl-pom" &&
    cat "$root/clients/java/integrations/pom.xml" "$root/clients/java/integrations/"*/pom.xml |
    cmp -s - "$root/.deps/m2/.librl-integrations-poms"; then
    offline=(-o)
  fi
  jversion=$(sed -n 's:^  <version>\(.*\)</version>:\1:p' "$root/clients/java/pom.xml" | head -1)
  if (cd "$scratch/java" && mvn -B -q --no-transfer-progress -Dstyle.color=never "${offline[@]}" \
    -Dmaven.repo.local="$root/.deps/m2" \
    -f integrations/pom.xml -pl '!example' -DskipTests package); then
    j="$scratch/java"
    cp "$j/target/librl-$jversion.jar" "$j/target/librl-$jversion-sources.jar" "$out/"
    cp "$j/pom.xml" "$out/librl-$jversion.pom"
    cp "$j/integrations/pom.xml" "$out/librl-integrations-$jversion.pom"
    for m in http:librl-http spring-boot:librl-spring-boot-starter gateway:librl-spring-cloud-gateway; do
      cp "$j/integrations/${m%%:*}/target/${m#*:}-$jversion.jar" "$out/"
      cp "$j/integrations/${m%%:*}/pom.xml" "$out/${m#*:}-$jversion.pom"
    done
  else
    failed+=("Java package and HTTP integrations")
  fi
fi

(cd "$out" && sha256sum -- * > SHA256SUMS)
echo "librl dist: $out"
(cd "$out" && ls -l --time-style=+ -- * | awk '{print "  " $NF " (" $5 " bytes)"}')
if [ ${#failed[@]} -gt 0 ]; then
  printf 'librl dist: FAILED: %s\n' "${failed[@]}" >&2
  exit 1
fi
