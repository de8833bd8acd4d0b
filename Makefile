# pgoutbox — run `make help` for the targets.
GO        ?= go
BIN       ?= bin
PKGS      ?= ./...
TESTFLAGS ?=
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: dev
dev: ## Run the whole pipeline locally (throwaway Postgres, embedded Kafka, relay, demo producer and consumer); Ctrl-C stops.
	$(GO) run ./cmd/relay dev $(DEVFLAGS)

.PHONY: build
build: ## Build the commands into ./bin.
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./cmd/...

.PHONY: vet
vet: ## gofmt check and go vet.
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

.PHONY: lint
lint: ## staticcheck (default checks).
	$(STATICCHECK) $(PKGS)

.PHONY: check-deploy
check-deploy: ## Validate the alert rules (promtool) with their unit tests, and docker-compose.yml.
	promtool check rules deploy/prometheus/alerts.yml
	promtool test rules deploy/prometheus/alerts_test.yml
	docker-compose config -q

.PHONY: test
test: vet lint check-deploy ## Vet, check deploy files, run every test with -race (needs Postgres server binaries, kcat, promtool, docker-compose).
	$(GO) test -race -count=1 -timeout 20m $(TESTFLAGS) $(PKGS)

.PHONY: bench
bench: ## Drain a 1M-row outbox backlog through the relay into kfake; print events/s, peak RSS, raw ceiling (BENCHFLAGS="-n 100000").
	$(GO) run ./test/bench/relaybench $(BENCHFLAGS)

.PHONY: bench-latency
bench-latency: ## Commit single-row transactions at 500..10000/s through the relay; print commit-to-receive p50/p90/p99/max and backlog (BENCHFLAGS="-duration 30s").
	$(GO) run ./test/bench/relaybench -latency 500,1000,5000,10000 -conns 32 $(BENCHFLAGS)

.PHONY: bench-inbox
bench-inbox: ## Print inbox consumer-loop throughput against a plain consumer (N=messages per run, BENCHFLAGS="-rounds 5 -pk").
	$(GO) run ./test/bench/inboxbench -n $(or $(N),50000) $(BENCHFLAGS)

.PHONY: clean
clean: ## Remove build output.
	rm -rf $(BIN)
