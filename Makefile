# herd — the two commands a newcomer needs: `make run` and `make test`.

GO       ?= go
DATA_DIR ?= ./data
# Build tags, comma-separated: the one place they are set. scripts/build.sh
# passes them as -tags (make build, make run, the Dockerfile), and GOFLAGS
# carries them to every other go command here, the tests' own builds of the
# binary included. .goreleaser.yaml repeats them (TestBuildFlagsAgree).
# sqlite_fts5 compiles SQLite's full-text search, which search needs; a
# herd built without it refuses to start (models.ErrNoFTS5).
GOTAGS   ?= sqlite_fts5
export GO GOTAGS
# (GOFLAGS set in the environment hides `go env -w GOFLAGS`, hence the
# merge.)
ifneq ($(GOTAGS),)
export GOFLAGS := $(strip $(shell $(GO) env GOFLAGS) -tags=$(GOTAGS))
endif
# cgo is needed by the SQLite driver; C without debug information, as
# scripts/build.sh explains.
export CGO_ENABLED = 1
export CGO_CFLAGS ?= -O2

.PHONY: run build test bench load load-cluster load-idle soak generate lint fmt fuzz clean mcp-test-server

# Fuzz targets: package:target. `make fuzz` runs each for FUZZTIME; their
# seed corpora already run with `make test`.
FUZZTIME ?= 60s
FUZZ = ./agent:FuzzNormalizeUsage ./agent:FuzzReadMetadata ./agent:FuzzValidateEvent \
	./server/hub:FuzzClientFrame ./internal/config:FuzzLoad

run: build ## start herd on http://127.0.0.1:8080 with the embedded defaults
	./herd --data-dir $(DATA_DIR)

build: ## build the single binary ./herd (scripts/build.sh)
	@scripts/build.sh herd

# `make test` is the whole set-up on a fresh Debian machine: as root it
# installs what the tests need, then starts a throwaway PostgreSQL when
# HERD_TEST_POSTGRES_DSN is not set, installs the npm packages and runs
# `$(GO) test $(TESTFLAGS) $(PKGS)` (scripts/test.sh). PKGS=./models checks
# the set-up on one package.
TESTFLAGS ?= -race -count=1 -timeout 14m -parallel 4
PKGS      ?= ./...
export TESTFLAGS PKGS
test: ## every test with -race: unit, HTTP, WebSocket, browser
	@scripts/test.sh

# The real third-party MCP server the end-to-end test drives over stdio
# (internal/e2e/mcp_process_test.go), installed once from the npm registry.
MCP_EVERYTHING = @modelcontextprotocol/server-everything@2026.8.31
MCP_CACHE      = .cache/mcp
mcp-test-server: $(MCP_CACHE)/node_modules/.bin/mcp-server-everything
$(MCP_CACHE)/node_modules/.bin/mcp-server-everything:
	mkdir -p $(MCP_CACHE)
	npm install --prefix $(MCP_CACHE) --no-audit --no-fund --no-save $(MCP_EVERYTHING)

# axe-core, which the accessibility browser test (server/browser_a11y_test.go)
# injects into every page, installed once from the npm registry.
AXE_CORE  = axe-core@4.14.1
AXE_CACHE = .cache/axe
.PHONY: axe-core
axe-core: $(AXE_CACHE)/node_modules/axe-core/axe.min.js
$(AXE_CACHE)/node_modules/axe-core/axe.min.js:
	mkdir -p $(AXE_CACHE)
	npm install --prefix $(AXE_CACHE) --no-audit --no-fund --no-save $(AXE_CORE)

# BENCH picks benchmarks (a -bench regexp); each runs BENCH_COUNT times and
# benchstat prints the medians (with a 95% interval from 6 runs up). The
# raw output stays in BENCH_OUT to compare runs: benchstat old.txt new.txt.
BENCH       ?= .
BENCH_COUNT ?= 6
BENCH_OUT   ?= test-output/bench.txt
BENCHSTAT   ?= $(GO) run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da

bench: ## benchmarks reported in docs/PERFORMANCE.md, then their medians
	@mkdir -p $(dir $(BENCH_OUT))
	$(GO) test -tags $(GOTAGS) -run '^$$' -bench '$(BENCH)' -benchmem -count $(BENCH_COUNT) -timeout 30m ./... 2>&1 | tee $(BENCH_OUT)
	@! grep -Eq '^(FAIL|--- FAIL|panic:)' $(BENCH_OUT) || { echo "bench: a benchmark failed, see $(BENCH_OUT)"; exit 1; }
	$(BENCHSTAT) $(BENCH_OUT)

fuzz: ## run every fuzz target for FUZZTIME (default 60s each)
	@for t in $(FUZZ); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "== $$name ($$pkg, $(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	done

load: build ## drive a real herd on loopback: 50 threads, 200 clients, 500 subagents
	@echo "== workspaces on /dev/shm (the bars)"
	$(GO) run ./internal/loadtest -bin ./herd -shm-workspaces $(LOAD_FLAGS)
	@echo "== workspaces on disk (reported, not gated: see docs/PERFORMANCE.md)"
	$(GO) run ./internal/loadtest -bin ./herd -p99 0 $(LOAD_FLAGS)

load-cluster: build ## 3 herds on one throwaway PostgreSQL: 50 threads, 400 clients (a quarter move instance mid-run), 1,000 subagents
	$(GO) run ./internal/loadtest -bin ./herd -instances 3 -threads 50 -clients 8 -items 20 -shm-workspaces $(LOAD_FLAGS)

load-idle: build ## 10,000 idle WebSocket clients on one herd: RSS must stay ≤ 256 MB
	$(GO) run ./internal/loadtest -bin ./herd -idle 10000 $(LOAD_FLAGS)

# SOAK_FLAGS: e.g. -soak 2m for a shorter check.
SOAK_FLAGS ?= -soak 10m
soak: build ## 10 minutes of load rounds on loopback; RSS, goroutines, fds and WAL must stay flat
	$(GO) run ./internal/loadtest -bin ./herd -shm-workspaces -threads 10 -clients 2 -items 5 -latency 100 -p99 0 $(SOAK_FLAGS)

generate: ## regenerate the templ components (commit the *_templ.go files)
	$(GO) tool templ generate

lint: ## go vet + staticcheck
	$(GO) vet ./...
	$(GO) tool staticcheck ./...

fmt:
	gofmt -w $$(git ls-files '*.go' | grep -v '_templ.go$$')
	$(GO) tool templ fmt views

clean:
	rm -rf herd $(DATA_DIR)
