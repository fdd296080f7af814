# herd — the two commands a newcomer needs: `make run` and `make test`.

GO       ?= go
DATA_DIR ?= ./data
# cgo is needed by the SQLite driver.
export CGO_ENABLED = 1

.PHONY: run build test bench generate lint fmt fuzz clean

# Fuzz targets: package:target. `make fuzz` runs each for FUZZTIME; their
# seed corpora already run with `make test`.
FUZZTIME ?= 60s
FUZZ = ./agent:FuzzNormalizeUsage ./agent:FuzzReadMetadata ./agent:FuzzValidateEvent \
	./server:FuzzClientFrame ./server/config:FuzzLoad

run: ## start herd on http://127.0.0.1:8080 with the embedded defaults
	$(GO) run . --data-dir $(DATA_DIR)

build: ## build the single binary ./herd
	$(GO) build -o herd .

test: ## every test with -race: unit, HTTP, WebSocket, browser
	$(GO) test -race -count=1 -timeout 9m ./...

bench: ## benchmarks reported in docs/PERFORMANCE.md
	$(GO) test -run '^$$' -bench . -benchmem -count 5 -timeout 30m ./...

fuzz: ## run every fuzz target for FUZZTIME (default 60s each)
	@for t in $(FUZZ); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "== $$name ($$pkg, $(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	done

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
