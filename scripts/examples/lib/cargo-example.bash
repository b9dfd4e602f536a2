# Sourced by scripts/examples/{axum,hyper,tonic}.sh: builds one binary of
# the examples/axum package and runs it in place of the shell, with
# LIBRL_POLICIES made absolute (a relative path is the caller's, not the
# repository's).
#   LIBRL_EXAMPLE_PROFILE  release (the default: what a user serves) or dev
#                          (target/debug: the binaries `cargo test` builds;
#                          make test's black-box runner uses them, so it
#                          compiles no second, optimised copy)
#   LIBRL_EXAMPLE_PREBUILT 1: run the binary without calling cargo (make test
#                          built it before its suites started; a cargo call
#                          would wait on the lock its Rust suite holds on
#                          target/ while that suite runs)
serve_cargo_example() {
  local name=$1 bin=$2 root profile dir
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
  : "${LIBRL_POLICIES:?set LIBRL_POLICIES to a policy file (YAML or JSON)}"
  case "$LIBRL_POLICIES" in
    /*) ;;
    *) LIBRL_POLICIES="$PWD/$LIBRL_POLICIES" ;;
  esac
  export LIBRL_POLICIES
  profile=${LIBRL_EXAMPLE_PROFILE:-release}
  case "$profile" in
    release) dir=release ;;
    dev) dir=debug ;;
    *) echo "serve-example $name: LIBRL_EXAMPLE_PROFILE must be release or dev, not '$profile'" >&2; exit 2 ;;
  esac
  if [ "${LIBRL_EXAMPLE_PREBUILT:-}" != 1 ]; then
    command -v cargo >/dev/null 2>&1 || { echo "serve-example $name: cargo (Rust) is required" >&2; exit 1; }
    (cd "$root" && cargo build --profile "$profile" --locked -q -p librl-axum-example --bin "$bin" >&2)
  elif [ ! -x "$root/target/$dir/$bin" ]; then
    echo "serve-example $name: LIBRL_EXAMPLE_PREBUILT=1 but target/$dir/$bin is not built" >&2
    exit 1
  fi
  exec "$root/target/$dir/$bin"
}
