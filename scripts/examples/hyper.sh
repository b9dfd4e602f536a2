#!/usr/bin/env bash
# scripts/serve-example hyper: the axum example's policy-file app on
# a bare hyper server (examples/axum/src/bin/librl-hyper-example.rs),
# librl-tower's layer over it, serving every path and method with `200 ok`
# behind the configuration file LIBRL_POLICIES, against REDIS_URL or
# REDIS_CLUSTER_NODES, on 127.0.0.1:PORT, until killed (docs/http.md,
# Conformance and examples). Builds the example first (cargo, in the
# workspace's target/; the first build takes a few minutes).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
command -v cargo >/dev/null 2>&1 || { echo "serve-example hyper: cargo (Rust) is required" >&2; exit 1; }
: "${LIBRL_POLICIES:?set LIBRL_POLICIES to a policy file (YAML or JSON)}"
# A relative policy path is the caller's, not the repository's.
case "$LIBRL_POLICIES" in
  /*) ;;
  *) LIBRL_POLICIES="$PWD/$LIBRL_POLICIES" ;;
esac
export LIBRL_POLICIES
(cd "$root" && cargo build --release --locked -q -p librl-axum-example --bin librl-hyper-example >&2)
exec "$root/target/release/librl-hyper-example"
