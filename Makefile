# pgoutbox — run `make help` for the targets.
GO        ?= go
BIN       ?= bin
PKGS      ?= ./...
TESTFLAGS ?=

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: dev
dev: dev-build ## Run the whole pipeline locally (throwaway Postgres, embedded Kafka, relay, demo producer and consumer); Ctrl-C stops.
	@# exec: the relay itself gets Ctrl-C, drains and exits 0 (go run would exit 1);
	@# make still reports Interrupt (130): it dies by the terminal's SIGINT too.
	exec $(BIN)/relay dev $(DEVFLAGS)

# dev-build builds bin/relay for make dev and talks while it does: the first
# build on a cold cache compiles every dependency for minutes. It says so
# first, then every DEV_TICK seconds prints the time so far, the packages
# go build -v has compiled and the last one; errors in full, and go build's
# exit status. TestMakeDevBuildTalks (test/e2e) runs it.
DEV_TICK ?= 5

.PHONY: dev-build
dev-build:
	@mkdir -p $(BIN)
	@echo "make dev: building $(BIN)/relay (a first build compiles every dependency: minutes on a cold cache)"
	@log=$(BIN)/.dev-build.log; start=$$(date +%s); \
	$(GO) build -v -o $(BIN)/relay ./cmd/relay >$$log 2>&1 & build=$$!; \
	( while sleep $(DEV_TICK); do \
		printf '  building %ss: %s packages compiled, last %s\n' $$(( $$(date +%s) - start )) \
			"$$(grep -c '^[^ :]*$$' $$log)" "$$(tail -n 1 $$log)"; \
	done ) & tick=$$!; \
	wait $$build; status=$$?; kill $$tick 2>/dev/null; wait $$tick 2>/dev/null; \
	if [ $$status -ne 0 ]; then grep -v '^[^ :]*$$' $$log >&2; rm -f $$log; exit $$status; fi; \
	rm -f $$log; echo "make dev: built $(BIN)/relay in $$(( $$(date +%s) - start ))s"

.PHONY: install
install: ## go install relay and inbox from this checkout into $(go env GOBIN) or $(go env GOPATH)/bin.
	$(GO) install ./cmd/relay ./cmd/inbox

.PHONY: build
build: ## Build the commands into ./bin.
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./cmd/...

# Tools, pinned and built once per machine (go install through the Go
# module proxy) into TOOLS, outside the clone: the file name carries the
# version, so a bump builds the new one, and a fresh clone, another
# worktree or a CI run with that directory cached builds none. Each build
# goes to a directory of its own and is renamed into place, so two makes
# at once never see half a binary.
TOOLS               ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/pgoutbox/tools
STATICCHECK_VERSION ?= v0.8.2
HELM_VERSION        ?= v3.22.0
ACTIONLINT_VERSION  ?= v1.7.12
STATICCHECK ?= $(TOOLS)/staticcheck-$(STATICCHECK_VERSION)
HELM        ?= $(TOOLS)/helm-$(HELM_VERSION)
ACTIONLINT  ?= $(TOOLS)/actionlint-$(ACTIONLINT_VERSION)
CHART       := deploy/helm/pgoutbox-relay

# go-tool builds the binary of package@version $(1) as the target.
define go-tool
@mkdir -p $(TOOLS)
@tmp=$$(mktemp -d "$(TOOLS)/.build-XXXXXX") && \
	echo "go install $(1) -> $@" && \
	GOBIN="$$tmp" $(GO) install $(1) && mv "$$tmp"/* $@; \
	status=$$?; rm -rf "$$tmp"; exit $$status
endef

.PHONY: vet
vet: ## gofmt check and go vet.
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

.PHONY: lint
lint: $(STATICCHECK) ## staticcheck (default checks).
	$(STATICCHECK) $(PKGS)

$(STATICCHECK):
	$(call go-tool,honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION))

$(HELM):
	$(call go-tool,helm.sh/helm/v3/cmd/helm@$(HELM_VERSION))

$(ACTIONLINT):
	$(call go-tool,github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION))

.PHONY: check-deploy
check-deploy: $(HELM) $(ACTIONLINT) ## Validate deploy files: alert rules (promtool), the Helm chart (helm lint, helm template), the CI workflows (actionlint), and go test ./test/deploy.
	promtool check rules deploy/prometheus/alerts.yml
	promtool test rules deploy/prometheus/alerts_test.yml
	$(HELM) lint --strict $(CHART) -f $(CHART)/ci/full-values.yaml
	$(HELM) template check $(CHART) -f $(CHART)/ci/full-values.yaml >/dev/null
	$(ACTIONLINT) .github/workflows/*.yml
	PGOUTBOX_TEST_HELM=$(abspath $(HELM)) $(GO) test -count=1 ./test/deploy

# make test runs every pass of TEST_PASSES, each whatever the one before it
# did, then prints one line per pass (ok or FAIL, and its seconds) and fails
# if any failed: a red kfake pass does not hide the Kafka pass. A pass is
# checks (test-checks), kfake (test-kfake), kafka (test-kafka) or pgN
# (test-pg PG=N). .ci/run runs make test; TEST_PASSES="kfake" for one.
TEST_PASSES ?= checks kfake kafka pg17

.PHONY: test
test: ## Every pass, each reported (TEST_PASSES): checks (gofmt, vet, staticcheck, deploy files), every test with -race on PG 15 and kfake, the Kafka-facing suites on Apache Kafka, the Postgres-facing suites on PG 17. Needs Postgres server binaries, kcat, promtool, java and xz (and mvn the first time).
	@summary=""; failed=""; \
	for pass in $(TEST_PASSES); do \
		case $$pass in \
			pg*) target="test-pg PG=$${pass#pg}" ;; \
			*) target="test-$$pass" ;; \
		esac; \
		echo "=== make test: pass $$pass (make $$target)"; \
		start=$$(date +%s); \
		if $(MAKE) --no-print-directory $$target; then result=ok; else result=FAIL; failed="$$failed $$pass"; fi; \
		summary="$$summary$$(printf '\n  %-8s %-4s %5ss  make %s' $$pass $$result $$(( $$(date +%s) - start )) "$$target")"; \
	done; \
	echo "=== make test: passes$$summary"; \
	if [ -n "$$failed" ]; then echo "=== make test: FAILED:$$failed"; exit 1; fi; \
	echo "=== make test: all passes ok"

.PHONY: test-checks
test-checks: vet lint check-deploy ## gofmt, go vet, staticcheck and the deploy-file checks (the first pass of make test).

# The test passes run TEST_P test binaries at once (go test -p; its
# default is the number of CPUs). Most of a test binary's time is waiting
# on Postgres, a broker or a timer: at 2 on 2 cores the CPU idled a third
# of a run, with every slot held (docs/ci.md, "Where the time goes").
# go test starts the binaries in the order of its package list, so the
# longest go first (LONG_PKGS, in make test-kfake when PKGS is ./...);
# last, they ended the pass alone.
TEST_P    ?= 4
LONG_PKGS ?= ./test/e2e ./pkg/relay ./internal/relaycli ./pkg/inbox/inboxkafka ./pkg/inbox/inboxrabbitmq ./examples/payment-consumer ./pkg/inbox/inboxnats ./pkg/inbox

.PHONY: test-kfake
test-kfake: $(HELM) ## Every test with -race on Postgres 15 and kfake (the second pass of make test).
	PGOUTBOX_TEST_HELM=$(abspath $(HELM)) $(GO) test -race -count=1 -p $(TEST_P) -timeout 20m $(TESTFLAGS) $(if $(filter ./...,$(PKGS)),$(LONG_PKGS)) $(PKGS)

# The Kafka-facing suites that run on a real Apache Kafka too (docs/kafka.md):
# the relay end to end, exactly-once (restart, outage, SIGKILL, SIGSTOP
# fencing, takeover), dead letters, relay verify, relay -> inbox, the README
# Quick start, the inbox consumer loop (crash, rebalance, read_committed,
# dead letters), inbox tail, the payment-consumer example. One broker per test binary; tests that need kfake's hooks
# stay on kfake. The pins are in test/kafka/pom.xml.
KAFKA_PKGS ?= ./test/e2e ./pkg/relay ./pkg/inbox/inboxkafka ./examples/payment-consumer ./pkg/inbox ./internal/inboxcli ./internal/relaycli ./internal/testenv
KAFKA_RUN  ?= ^(TestApacheKafka|TestMigrateFromRealDebezium|TestEndToEnd|TestEndToEndByteaPayload|TestExactlyOnce.*|TestFenceWrites.*|TestVerifyCountsOnlyCommittedRecords|TestRecoverKeepsOrderWithRandomIDs|TestOTLPTraceFromWriterThroughRelayToInbox|TestHooksFireOnARelayRun|TestVerify|TestVerifyOrderBreak|TestVerifyExitCodes|TestHostileRowsDeadLettered|TestInvalidBusinessKeyDeadLettered|TestTableChangedWhileStreaming|TestCrashRestartLosesNothing|TestStandbyTakesOver|TestPausedLeaderPublishesNothingAfterTakeover|TestRelayToInboxEffectsOnce|TestTraceFromProducerToInbox|TestCloudEventsHeadersByteForByte|TestFailoverGapAndRecover|TestRecoverPublishesOnlyWhatKafkaLacks|TestHalfOpenReplicationConnection|TestDebeziumOutboxThroughRelayAndInbox|TestMigrateFromDebeziumDocs|TestReadmeQuickStart|TestConsumer(BatchesBacklog|DeadLetters.*|Loop|PurgesOnSchedule|QueueBoundedByBytes|ReachesADistantBroker|SkipsAbortedTransactions|StopsOnConflict|TakesCloudEvents|JoinsBeforeItsTopicExists)|TestCrash(BetweenDBCommitAndOffsetCommit|LoopEndsInDeadLetter|MidStreamEffectsOnce)|TestExternalTakeoverReconcilesWithoutSecondCharge|TestKeysAndErrorsRedacted|TestProcessRefusesRepeatedContractHeader|TestDeliver(SettlesConcurrentRedeliveries|DeadLetters|Stops)|TestRebalanceWithSlowHandler|TestSQLConsumerExternal|TestStuckPartitionPausedAlone|TestTail|TestTailReadsCommitted|TestChargedOncePerBusinessKey|TestKilledAfterChargeChargesOnce|TestReadme|TestFleetReplicaKilledLosesNothing|TestFleetTwentySourcesThreeReplicas|TestFleetVerify|TestBenchmarkDocDebezium|TestBenchmarkDocSinks|TestBenchmarkDocDebeziumServer|TestRecoverRepublishesRowsOnlyOnAnOldTopic)$$

.PHONY: test-kafka
test-kafka: ## Run the Kafka-facing suites on a real Apache Kafka 4 node (PGOUTBOX_TEST_KAFKA=kafka; needs java, and mvn to fetch the broker once).
	PGOUTBOX_TEST_KAFKA=kafka $(GO) test -race -count=1 -p $(TEST_P) -timeout 20m -run '$(KAFKA_RUN)' $(TESTFLAGS) $(KAFKA_PKGS)

# The suites that start Postgres and exercise what differs between
# versions: replication, slots, the state row and gap detection, failover
# slots, the outbox writer and the inbox's SQL; and of test/e2e the
# failover, crash and takeover tests (PG_E2E_RUN; the rest of test/e2e
# checks the CLI and the docs, which no server version changes). On kfake.
# The two go test runs run side by side (test/e2e's output is printed
# when the other is done; pkg/relay, the longest, goes first); the target
# fails if either failed. The versions and what each was tested for:
# docs/requirements.md.
PG         ?= 17
PG_PKGS    ?= ./pkg/relay ./pkg/inbox ./internal/pgserver ./internal/testenv ./internal/verify ./pkg/outbox ./internal/slotstate ./internal/admin ./internal/wal
PG_E2E_RUN ?= ^(TestFailoverSlotSurvivesPromotion|TestFailoverGapAndRecover|TestExactlyOnceFailoverGapAndRecover|TestCrashRestartLosesNothing|TestHalfOpenReplicationConnection|TestStandbyTakesOver|TestRelayToInboxEffectsOnce)$$

.PHONY: test-pg
test-pg: ## Run the Postgres-facing suites with -race on another Postgres (PG=16|17|18, fetched with Maven once; kfake).
	@status=0; e2e=$$(mktemp); set -x; \
	{ PGOUTBOX_TEST_PG=$(PG) $(GO) test -race -count=1 -timeout 20m -run '$(PG_E2E_RUN)' $(TESTFLAGS) ./test/e2e >$$e2e 2>&1; } & pid=$$!; \
	PGOUTBOX_TEST_PG=$(PG) $(GO) test -race -count=1 -p $(TEST_P) -timeout 20m $(TESTFLAGS) $(PG_PKGS) || status=1; \
	wait $$pid || status=1; \
	{ set +x; } 2>/dev/null; cat $$e2e; rm -f $$e2e; \
	exit $$status

.PHONY: bench
bench: ## Drain a 1M-row outbox backlog through the relay into kfake; print events/s, peak RSS, raw ceiling (BENCHFLAGS="-n 100000").
	$(GO) run ./test/bench/relaybench $(BENCHFLAGS)

.PHONY: bench-latency
bench-latency: ## Commit single-row transactions at 500..10000/s through the relay; print commit-to-receive p50/p90/p99/max and backlog (BENCHFLAGS="-duration 30s").
	$(GO) run ./test/bench/relaybench -latency 500,1000,5000,10000 -conns 32 $(BENCHFLAGS)

.PHONY: bench-debezium
bench-debezium: ## Drain one backlog of Debezium-layout rows through Debezium's embedded engine and through the relay on Apache Kafka, ABBA; print rows/s, CPU per row, peak RSS (N=rows, BENCHFLAGS="-rounds 3 -debezium-batch 20480").
	$(GO) run ./test/bench/relaybench -debezium -n $(or $(N),200000) -rounds 2 $(BENCHFLAGS)

.PHONY: bench-inbox
bench-inbox: ## Print inbox consumer-loop throughput against a hand-rolled dedup baseline and a plain consumer (N=messages per run, BENCHFLAGS="-rounds 5 -pk -sql").
	$(GO) run ./test/bench/inboxbench -n $(or $(N),50000) $(BENCHFLAGS)

.PHONY: soak
soak: ## Soak the relay: steady writes, leader + standby, inbox consumer, a fault every few minutes, relay verify at the end (DURATION=1h, SOAKFLAGS="-rate 200 -seed 1").
	$(GO) run ./test/soak -duration $(or $(DURATION),1h) $(SOAKFLAGS)

# Release binaries: `relay --version` and `inbox --version` print VERSION
# (default: git describe when a tag is reachable, else the VERSION file,
# which names the last release), stamped with -ldflags -X, then the VCS
# revision when git stamping works and the Go version.
# TestReleaseStampsVersion (test/e2e) runs this target. It builds; it does
# not tag.
VERSION   ?= $(shell git describe --tags --dirty 2>/dev/null || cat VERSION)
PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
DIST      ?= dist

.PHONY: version
version: ## Print the version make release stamps (git describe, else the VERSION file).
	@echo $(VERSION)

.PHONY: release
release: ## Cross-compile relay and inbox for linux/darwin x amd64/arm64 into dist/ with SHA256SUMS (PLATFORMS="linux/amd64" for one).
	@rm -rf $(DIST) && mkdir -p $(DIST)
	@set -e; for p in $(PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; \
		for cmd in relay inbox; do \
			out=$(DIST)/$$cmd-$(VERSION)-$$os-$$arch; \
			echo "build $$out"; \
			CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -buildvcs=auto -trimpath \
				-ldflags="-s -w -X github.com/pgoutbox/pgoutbox/internal/cliutil.releaseVersion=$(VERSION)" -o $$out ./cmd/$$cmd; \
		done; \
	done
	@cd $(DIST) && files=$$(ls) && { command -v sha256sum >/dev/null && sha256sum $$files || shasum -a 256 $$files; } > SHA256SUMS
	@echo "$(DIST)/SHA256SUMS:" && cat $(DIST)/SHA256SUMS

.PHONY: clean
clean: ## Remove build output.
	rm -rf $(BIN) $(DIST)

# The fault suite of exactly-once mode on Apache Kafka (test/faults,
# docs/semantics.md#fault-suite): every fault kind under
# transaction.version 1 and 2, FAULT_RUNS runs of each; the results table
# goes to FAULT_TABLE. FAULT_RUN picks kinds (a -run pattern).
FAULT_RUNS  ?= 2
FAULT_TABLE ?= $(abspath $(BIN))/faults.md
FAULT_RUN   ?= ^TestFaults$$

.PHONY: test-faults
test-faults: ## Run the exactly-once fault suite on a real Apache Kafka 4 node (SIGKILL, SIGSTOP, EndTxn cut, broker kill, Postgres restart, lost slot, CPU starvation; TV 1 and 2); table in FAULT_TABLE.
	@mkdir -p $(BIN)
	PGOUTBOX_TEST_FAULTS=1 PGOUTBOX_FAULTS_RUNS=$(FAULT_RUNS) PGOUTBOX_FAULTS_TABLE=$(FAULT_TABLE) \
		$(GO) test -count=1 -timeout 180m -v -run '$(FAULT_RUN)' $(TESTFLAGS) ./test/faults
