# toolexec — run `make help` for the targets.
GO        ?= go
PKGS      ?= ./...
BIN       ?= bin
TEST_FLAGS ?= -race -timeout 15m

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build the executor and the emitter into ./bin.
	$(GO) build -o $(BIN)/ ./cmd/executor ./cmd/emitter

.PHONY: tools
tools: ## Build helm, the nats CLI, apidiff and cyclonedx-gomod at pinned versions into ~/.cache/toolexec/tools (minutes the first time); prints the line that puts them on PATH (eval it).
	@./scripts/tools.sh

.PHONY: run
run: ## Run the executor with the demo tools and its embedded NATS on 127.0.0.1:4222, data in ./.toolexec (make run ARGS='--nats-port 4333' moves it).
	$(GO) run ./cmd/executor --demo $(ARGS)

.PHONY: demo
demo: ## Start an executor with embedded NATS and show completed, deduplicated and indeterminate (the first run compiles for minutes).
	@./scripts/demo.sh

.PHONY: example
example: ## Run examples/toolidempotency (the same three outcomes, in one Go program).
	$(GO) run ./examples/toolidempotency

.PHONY: example-python
example-python: ## Run examples/tool_idempotency.py (tool bodies served by a Python worker, calls from Python) against an executor with embedded NATS; builds the executor and the venv first.
	@$(MAKE) -s --no-print-directory build $(VENV)/.installed >&2
	@./scripts/example-python.sh $(BIN)/executor $(VENVBIN)/python

.PHONY: test
test: test-python ## Run every test with the race detector, after the Python package's (needs PostgreSQL and Redis; see README).
	$(GO) test $(TEST_FLAGS) $(PKGS)

PYTHON ?= python3
VENV   ?= $(BIN)/venv
VENVBIN = $(abspath $(VENV))/bin

# Python programs outside the package that the checks lint too (mypy's are in
# python/pyproject.toml), relative to python/.
PY_SCRIPTS = ../examples/tool_idempotency.py ../bench/python_row.py

.PHONY: test-python
test-python: $(VENV)/.installed ## Check the Python package (python/), examples/tool_idempotency.py and bench/python_row.py: ruff, mypy --strict and pytest, in a venv under bin/venv (VENV moves it).
	cd python && $(VENVBIN)/ruff check . && $(VENVBIN)/ruff format --check . && $(VENVBIN)/mypy --strict
	cd python && $(VENVBIN)/ruff check --config pyproject.toml $(PY_SCRIPTS) && $(VENVBIN)/ruff format --config pyproject.toml --check $(PY_SCRIPTS)
	cd python && GO=$(GO) $(VENVBIN)/python -m pytest

# The venv, with python/ installed in it editable (its sources are what the
# checks see) and the pinned tools of its dev extra; made again when
# pyproject.toml changes.
$(VENV)/.installed: python/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENVBIN)/python -m pip install --quiet --disable-pip-version-check -e './python[dev]'
	touch $@

.PHONY: api-check
api-check: ## Hold the code to the last release's baseline in api/ (Go API, Python names, wire version, key derivation) and CHANGELOG.md to its format; builds apidiff first (make test runs the same tests).
	@./scripts/tools.sh apidiff >/dev/null
	$(GO) test -count=1 ./tests/api

.PHONY: api-snapshot
api-snapshot: ## Write the baseline in api/ from the code: when a release is cut, and until the first release whenever the API is what it should promise (docs/RELEASES.md).
	@./scripts/tools.sh apidiff >/dev/null
	$(GO) test -count=1 -run '^TestReleaseRules$$' ./tests/api -update

.PHONY: release
release: ## Build the release of the tagged commit into dist/ (executor and emitter for linux and darwin, amd64 and arm64; SBOMs; the Python sdist and wheel; SHA256SUMS) and check it.
	@./scripts/release.sh

.PHONY: release-check
release-check: ## Build the same from the tree as it is (a snapshot: the version may carry -dev) and check it: each binary's version, SHA256SUMS, the SBOMs, the Python distributions (6 minutes the first time on 2 cores, about 1 after).
	@./scripts/release.sh --snapshot

.PHONY: faults
faults: ## Run the long fault suite (SIGKILLed executors, NATS restarts, cluster leader kills, partitions, lost node stores, kill -9 of nats-server, executors before NATS, stores away, skewed clocks); figures on FIGURES lines, log in bin/faults.log.
	@mkdir -p $(BIN) && bash -o pipefail -c "$(GO) test -race -tags faults -count=1 -timeout 60m -v ./tests/faults 2>&1 | tee $(BIN)/faults.log"

.PHONY: lint
lint: ## Check formatting (gofmt) and run go vet.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

BENCH_WORK  ?= $(CURDIR)/bin/bench
BENCH_FLAGS ?=

.PHONY: bench
bench: $(VENV)/.installed ## Go benchmarks, then toolexec against the JetStream ceiling, a hand-rolled loop, raw store cycles, River and Temporal (bench/temporal, built on first use), a three-node cluster with its failover pause (the KV leader stopped, then crashed), its scale-out over 1, 2 and 4 executors, a Python caller and worker, and its memory over 1,000,000 calls; writes docs/BENCHMARKS.md (needs PostgreSQL and Redis).
	@mkdir -p $(BENCH_WORK)
	$(GO) build -o $(BENCH_WORK)/ ./cmd/emitter ./cmd/executor
	bash -o pipefail -c "$(GO) test -run '^$$' -bench . -benchmem -count 3 $(PKGS) | tee $(BENCH_WORK)/go-bench.txt"
	cd bench && $(GO) run . -emitter $(BENCH_WORK)/emitter -executor $(BENCH_WORK)/executor -gobench $(BENCH_WORK)/go-bench.txt -work $(BENCH_WORK) -python $(VENVBIN)/python \
		-out $(CURDIR)/docs/BENCHMARKS.md -chart $(CURDIR)/docs/benchmarks.svg $(BENCH_FLAGS)

.PHONY: bench-go
bench-go: ## Run the Go benchmarks only (key derivation, the wire's CloudEvents and codec, each store's claim cycle).
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

.PHONY: fuzz
fuzz: ## Run each fuzz target briefly (FUZZTIME, default 20s).
	$(GO) test -run '^$$' -fuzz '^FuzzCanonicalize$$' -fuzztime $${FUZZTIME:-20s} ./idemkey/canonical
	$(GO) test -run '^$$' -fuzz '^FuzzDerive$$' -fuzztime $${FUZZTIME:-20s} ./idemkey
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $${FUZZTIME:-20s} ./tool/toolsfile
	$(GO) test -run '^$$' -fuzz '^FuzzParseValue$$' -fuzztime $${FUZZTIME:-20s} ./kvstore/natsstore
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $${FUZZTIME:-20s} ./bus/wire
	$(GO) test -run '^$$' -fuzz '^FuzzMembers$$' -fuzztime $${FUZZTIME:-20s} ./bus/wire
	$(GO) test -run '^$$' -fuzz '^FuzzCallFromEvent$$' -fuzztime $${FUZZTIME:-20s} ./bus/wire
	$(GO) test -run '^$$' -fuzz '^FuzzCallArguments$$' -fuzztime $${FUZZTIME:-20s} ./bus/wire
	$(GO) test -run '^$$' -fuzz '^FuzzReadAnswerData$$' -fuzztime $${FUZZTIME:-20s} ./bus/wire
