#!/usr/bin/env bash
# scripts/serve-example hyper: the axum example's policy-file app on
# a bare hyper server (examples/axum/src/bin/librl-hyper-example.rs),
# librl-tower's layer over it, serving every path and method with `200 ok`
# behind the configuration file LIBRL_POLICIES, against REDIS_URL or
# REDIS_CLUSTER_NODES, on 127.0.0.1:PORT, until killed (docs/http.md,
# Conformance and examples). Builds the example first (cargo, in the
# workspace's target/; the first build takes a few minutes;
# scripts/examples/lib/cargo-example.bash has the variables that choose the
# profile or skip the build).
set -euo pipefail
. "$(dirname "$0")/lib/cargo-example.bash"
serve_cargo_example hyper librl-hyper-example
