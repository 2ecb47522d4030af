# Northwind Ops. `make run` serves the app with demo data on the embedded
# store; `make test` runs every test. Both install what is missing first.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
export PATH := $(HOME)/.cargo/bin:$(CURDIR)/end2end/node_modules/.bin:$(PATH)

# Where cargo puts binaries: CARGO_TARGET_DIR when set, as cargo does.
BIN := $(or $(CARGO_TARGET_DIR),target)/debug/northwind-ops
# cargo-leptos builds the server with this cfg and env; cargo test gets the
# same, so tests reuse the build instead of recompiling every crate.
TEST_ENV := RUSTFLAGS="--cfg erase_components" LEPTOS_OUTPUT_NAME=northwind-ops

.PHONY: setup build run docs screenshots test test-rust test-e2e test-deploy image bench bench-dashboard rehearse rehearse-counters rehearse-day clean

setup:
	scripts/setup.sh

# --split: each page's code is a wasm chunk of its own, loaded when the page
# is opened (src/app/lazy.rs). Tests run against this build.
build: setup
	@echo "== building the server and the browser bundle (first time on a fresh machine: about 13 minutes on 2 cores; afterwards seconds to a minute)"
	@SECONDS=0; cargo leptos build --split; echo "   built in $$((SECONDS / 60))m$$((SECONDS % 60))s"

run: build
	@echo "== seeding the demo data and accounts (under a minute)"
	$(BIN) seed --demo-accounts
	@echo "== serving (Ctrl-C stops it)"
	$(BIN) serve

# The generated reference pages: docs/configuration.md from the command
# line's definitions, docs/openapi.json from the JSON API's handlers and
# types (tests/it/docs.rs fails until they match the program).
docs:
	$(TEST_ENV) cargo run --quiet --features ssr --bin northwind-ops -- docs --write docs

# The docs' screenshots (docs/dashboard.png, docs/capacity.png: every
# picture README.md and docs/ show), taken by the Playwright suite's
# `screenshots` project (end2end/tests/docs.shots.ts) from the dev build and
# the suite's demo data. Commit the pictures it rewrites.
screenshots: build
	cd end2end && NORTHWIND_SCREENSHOTS=1 npx playwright test --project screenshots

# Each part timed, and the whole suite (docs/testing.md, "How do I run the
# tests?", quotes it; the figures are in BENCHMARKS.md).
test: build
	@status=0; suite=$$SECONDS; \
	for part in test-rust test-e2e test-deploy; do \
	  started=$$SECONDS; \
	  $(MAKE) --no-print-directory $$part || status=$$?; \
	  took=$$((SECONDS - started)); echo "== $$part: $$((took / 60))m$$((took % 60))s"; \
	  [ $$status -eq 0 ] || { echo "== $$part failed"; break; }; \
	done; \
	took=$$((SECONDS - suite)); echo "== the suite (after the build): $$((took / 60))m$$((took % 60))s"; \
	exit $$status

# Unit tests, then the integration tests against Dynoxide and DynamoDB Local.
test-rust:
	$(TEST_ENV) scripts/with-dynamodb-local.sh cargo test --features ssr --no-fail-fast

# The test OpenID provider's own check first (3 s, no browser), then the
# browser suite that signs in through it.
test-e2e:
	cd end2end && node oidc/smoke.mjs && npx playwright test

# The Prometheus alert rules in deploy/: promtool checks them and runs their
# unit tests. (The CloudFormation template is linted by tests/it/deploy.rs.)
test-deploy:
	scripts/check-deploy.sh

# The container image, FROM scratch, of the release build (docs/aws.md,
# "Running on AWS"). IMAGE names its tag. The dev site is restored after, for the tests.
IMAGE ?= northwind-ops:latest
image: setup
	cargo leptos build --release --split --precompress
	scripts/build-image.sh release $(IMAGE)
	cargo leptos build --split --frontend-only

# Every speed goal, measured side by side; writes BENCHMARKS.md. The server
# is measured as built both ways and the site as shipped (release, wasm-opt,
# split, every static file precompressed with brotli and gzip); then the dev
# site is restored for the tests.
bench: build
	cargo leptos build --release --split --precompress
	$(TEST_ENV) cargo bench --profile dev --features ssr,testing --bench northwind
	cargo leptos build --split --frontend-only
	scripts/bench-dashboard.sh $(BASE)

# The dashboard and customer history side by side with an older commit
# (BASE, a commit the dashboard was once measured at): release servers of
# both, each on a fresh seeded store, wrk at 50 and 200 viewers, builds
# alternating, the ratios printed (scripts/bench-dashboard.sh says how).
BASE ?= 742aeca
bench-dashboard: setup
	scripts/bench-dashboard.sh $(BASE)

# The hot-partition rehearsal: one flash sale through the throttle proxy
# against one GSI2 partition and against ten, run by the benchmark harness,
# which writes its table into BENCHMARKS.md (`northwind-ops rehearse` prints
# the same table). REHEARSE_FLAGS are rehearse's flags.
rehearse: build
	$(TEST_ENV) NORTHWIND_BENCH_ONLY=rehearse NORTHWIND_REHEARSE_ARGS="$(REHEARSE_FLAGS)" \
	  cargo bench --profile dev --features ssr,testing --bench northwind

# The counters at the seed's scale: a flash sale at 1, 8 and 32 stream shards
# (simulated), consumed by two serve instances and by the Lambda form (the
# local event source mapping), at the start and at the end of a day, through
# the throttle proxy at the real limits. REHEARSE_FLAGS for the sale, e.g.
# REHEARSE_FLAGS="--rate 100 --peak 1000 --endpoint-url http://127.0.0.1:8000"
# (DynamoDB Local instead of a fresh embedded store: --endpoint-url URL).
rehearse-counters: build
	$(TEST_ENV) NORTHWIND_BENCH_ONLY=counters NORTHWIND_REHEARSE_ARGS="$(REHEARSE_FLAGS)" \
	  cargo bench --profile dev --features ssr,testing --bench northwind

# A day on AWS at speed (sim::day_rehearsal): 32 stream shards rolled over
# and split until 250 are listed, a flash sale as the order service writes
# it, the consumer mode switched serve → lambda → serve during it, the
# metrics table refused for 10 s, reconciliation every minute, every range
# the local Lambda mapping gave up replayed; and the embedded store's file
# over simulated days. About 6 minutes. DynamoDB Local instead of a fresh
# embedded store: REHEARSE_FLAGS="--endpoint-url http://127.0.0.1:8000".
rehearse-day: build
	$(TEST_ENV) NORTHWIND_BENCH_ONLY=day NORTHWIND_REHEARSE_ARGS="$(REHEARSE_FLAGS)" \
	  cargo bench --profile dev --features ssr,testing --bench northwind

clean:
	cargo clean
	rm -rf data end2end/.run end2end/test-results end2end/playwright-report
