GO      ?= go
BIN     := bin/auditrail
ARGS    ?=
FUZZTIME ?= 30s

.PHONY: run test test-e2e build bench fuzz fmt vet docs release clean

## run: build and run every role in one process on embedded defaults, with the
## demo (checkpoints signed every 5 s, so that a new organization verifies soon)
run: build
	$(BIN) dev --demo --checkpoint-interval 5s $(ARGS)

## test: the in-process tests under the race detector (what CI and a
## contributor run first; under 10 minutes on 2 cores). The tests that start
## the binaries are not built here (build tag e2e): make test-e2e. go test
## runs the high-value vet checks itself; the full go vet runs in test-e2e.
test: fmt
	$(GO) test -race -count=1 -timeout 14m $(SLOW_FIRST) ./...

# The packages whose tests take longest under the race detector, named first
# so that go test starts them first (it runs GOMAXPROCS packages at once, in
# the order named): started last, one of them would run alone at the end.
SLOW_FIRST = ./query ./internal/auditstore/clickhouse ./internal/natsx ./evidence/sequencer ./controlplane ./ingest ./deliver

## test-e2e: go vet of every file, then the process-level tests (build tag
## e2e: they run the binaries, built without -race, so the race detector
## adds nothing; those that share nothing run in parallel) and the cluster
## tests (3 NATS servers, ClickHouse 2 shards x 2 replicas with ZooKeeper;
## CLUSTER_EVENTS events, default 50,000, in the failover and ClickHouse
## cluster tests), in two streams at once: the cluster tests, and the rest.
## Only the tests of the e2e files run here: the others ran in make test.
## CI runs both tiers.
test-e2e: vet
	@set -u; \
	( AUDITRAIL_CLUSTER_EVENTS=$(CLUSTER_EVENTS) $(GO) test -tags e2e -count=1 -timeout 30m -run '$(CLUSTER_E2E)' ./cmd/auditrail && \
	  $(GO) test -count=1 -timeout 14m -run '$(CLUSTER_STORE)' ./internal/auditstore/clickhouse ) & cluster=$$!; \
	$(GO) test -tags e2e -count=1 -timeout 30m -run '^($(E2E_TESTS))$$' -skip '$(CLUSTER_E2E)' ./cmd/... ./commands/... ./bench/... & rest=$$!; \
	status=0; wait $$cluster || status=1; wait $$rest || status=1; exit $$status

CLUSTER_EVENTS ?= 50000
# The cluster tests: of the binary (cmd/auditrail) and of the store (files
# built with !race, run without the race detector as the e2e tier).
CLUSTER_E2E = ^(TestEveryRoleTwice|TestClickHouseClusterIngestAndList|TestClickHouseClusterFlag|TestClusterFailover|TestRolesStartInAnyOrderOnACluster|TestNATSReplicasFlag)$$
CLUSTER_STORE = ^(TestClusterConformance|TestClusterOptionsValidate|TestClusterNodeAddedLater)$$
# The tests of the files with build tag e2e (the tier's own; the packages'
# other tests ran under the race detector in make test).
E2E_TESTS = $(shell grep -rl --include='*_test.go' '^//go:build e2e' cmd commands bench | xargs sed -n 's/^func \(Test[A-Za-z0-9_]*\)(t \*testing\.T).*/\1/p' | sort -u | paste -sd'|' -)

## build: bin/auditrail, and bin/auditrail-demo (the demo's servers, which
## dev --demo runs; not part of the product) (the first build compiles every dependency: several
## minutes, about 5 on 2 cores; -v lists each package as it is compiled)
build:
	@test -x $(BIN) || echo "building $(BIN): the first build compiles every dependency, several minutes (about 5 on 2 cores); packages are listed as they compile"
	$(GO) build -v -buildvcs=auto -o bin/ ./cmd/auditrail ./cmd/auditrail-demo

## docs: regenerate docs/configuration.md's flag reference from the binary's
## own -h of every command (TestConfigurationReference fails when it is stale)
docs:
	AUDITRAIL_UPDATE_DOCS=1 $(GO) test -tags e2e -count=1 -run '^TestConfigurationReference$$' ./cmd/auditrail

## release: static binaries (CGO off, -trimpath) of the version CHANGELOG.md
## dates, for RELEASE_PLATFORMS, and their SHA256SUMS, in DIST (default dist/)
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64
DIST ?= dist
release:
	DIST=$(DIST) GO=$(GO) scripts/release.sh $(RELEASE_PLATFORMS)

## bench: the benchmarks, each beside its reference measured in the same run
## (bin/auditrail-bench, a harness apart from the product, runs the roles of
## bin/auditrail beside it, and bin/benthos, Benthos v4.27 built from the module
## apart bench/benthos, beside ingest); each figure also goes into docs/benchmarks.md's results table
bench: build
	$(GO) build -buildvcs=auto -o bin/auditrail-bench ./cmd/auditrail-bench
	$(GO) -C bench/benthos build -o ../../bin/benthos .
	bin/auditrail-bench --results docs/benchmarks.md $(ARGS)

## fuzz: run every fuzz target for FUZZTIME
fuzz:
	$(GO) test ./schemas -run '^$$' -fuzz FuzzUnmarshalAuditEvent -fuzztime $(FUZZTIME)
	$(GO) test ./schemas -run '^$$' -fuzz FuzzUnmarshalExecutionEvent -fuzztime $(FUZZTIME)
	$(GO) test ./query -run '^$$' -fuzz FuzzCursorDecode -fuzztime $(FUZZTIME)
	$(GO) test ./query -run '^$$' -fuzz FuzzParseList -fuzztime $(FUZZTIME)
	$(GO) test ./query -run '^$$' -fuzz FuzzCSVRow -fuzztime $(FUZZTIME)
	$(GO) test ./internal/auditstore/search -run '^$$' -fuzz FuzzParseQuery -fuzztime $(FUZZTIME)
	$(GO) test ./internal/auditstore/sqlite -run '^$$' -fuzz FuzzMatchAuditAgreesWithSQL -fuzztime $(FUZZTIME)
	$(GO) test ./hookproxy -run '^$$' -fuzz FuzzDecodeResponses -fuzztime $(FUZZTIME)
	$(GO) test ./internal/arcadehook -run '^$$' -fuzz FuzzServer -fuzztime $(FUZZTIME)
	$(GO) test ./toolrunner/toolkits/documentdb -run '^$$' -fuzz FuzzDecodeJSONParam -fuzztime $(FUZZTIME)
	$(GO) test ./toolrunner/toolkits/documentdb -run '^$$' -fuzz FuzzDepth -fuzztime $(FUZZTIME)
	$(GO) test ./producers -run '^$$' -fuzz FuzzDecodeRecords -fuzztime $(FUZZTIME)
	$(GO) test ./internal/auth -run '^$$' -fuzz FuzzJWTVerify -fuzztime $(FUZZTIME)
	$(GO) test ./internal/redact -run '^$$' -fuzz FuzzURL -fuzztime $(FUZZTIME)
	$(GO) test ./internal/httpx -run '^$$' -fuzz FuzzClientIP -fuzztime $(FUZZTIME)
	$(GO) test ./internal/egress -run '^$$' -fuzz FuzzClassify -fuzztime $(FUZZTIME)
	$(GO) test ./internal/emulators/oauth -run '^$$' -fuzz FuzzTokenForm -fuzztime $(FUZZTIME)
	$(GO) test ./internal/emulators/oauth -run '^$$' -fuzz FuzzAuthorizeQuery -fuzztime $(FUZZTIME)
	$(GO) test ./internal/oauthflow -run '^$$' -fuzz FuzzOpenState -fuzztime $(FUZZTIME)
	$(GO) test ./internal/oauthflow -run '^$$' -fuzz FuzzOpenTicket -fuzztime $(FUZZTIME)
	$(GO) test ./controlplane -run '^$$' -fuzz FuzzOpenSession -fuzztime $(FUZZTIME)
	$(GO) test ./toolrunner/toolkits/docs/docmd -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME)
	$(GO) test ./toolrunner/toolkits/docs -run '^$$' -fuzz FuzzValidateRequests -fuzztime $(FUZZTIME)
	$(GO) test ./toolrunner/toolkits/docs -run '^$$' -fuzz FuzzPageToken -fuzztime $(FUZZTIME)
	$(GO) test ./toolrunner/toolkits/docs/docmd -run '^$$' -fuzz FuzzRenderDocMD -fuzztime $(FUZZTIME)
	$(GO) test ./toolrunner/toolkits/docs/docexport -run '^$$' -fuzz FuzzExportMarkdown -fuzztime $(FUZZTIME)
	$(GO) test ./toolrunner/toolkits/docs/docexport -run '^$$' -fuzz FuzzExportHTML -fuzztime $(FUZZTIME)
	$(GO) test ./internal/pagetoken -run '^$$' -fuzz FuzzOpen -fuzztime $(FUZZTIME)
	$(GO) test ./toolrunner/toolkits/mail -run '^$$' -fuzz FuzzPageToken -fuzztime $(FUZZTIME)
	$(GO) test ./toolrunner/toolkits/mail -run '^$$' -fuzz FuzzHTMLToText -fuzztime $(FUZZTIME)
	$(GO) test ./toolrunner/toolkits/mail/graphapi -run '^$$' -fuzz FuzzRelative -fuzztime $(FUZZTIME)
	$(GO) test ./internal/emulators/google -run '^$$' -fuzz FuzzDriveQuery -fuzztime $(FUZZTIME)
	$(GO) test ./internal/emulators/google -run '^$$' -fuzz FuzzFieldMask -fuzztime $(FUZZTIME)
	$(GO) test ./controlplane -run '^$$' -fuzz FuzzPickerState -fuzztime $(FUZZTIME)
	$(GO) test ./deliver -run '^$$' -fuzz FuzzVerify -fuzztime $(FUZZTIME)
	$(GO) test ./deliver -run '^$$' -fuzz FuzzEventIDs -fuzztime $(FUZZTIME)
	$(GO) test ./internal/emulators/google -run '^$$' -fuzz FuzzApplyBatch -fuzztime $(FUZZTIME)
	$(GO) test ./internal/emulators/graph/odata -run '^$$' -fuzz FuzzParseFilter -fuzztime $(FUZZTIME)
	$(GO) test ./internal/emulators/graph/odata -run '^$$' -fuzz FuzzParseSearch -fuzztime $(FUZZTIME)
	$(GO) test ./internal/emulators/graph -run '^$$' -fuzz FuzzHTMLToText -fuzztime $(FUZZTIME)
	$(GO) test ./schemas/apiitem -run '^$$' -fuzz '^FuzzSaltedLeaf$$' -fuzztime $(FUZZTIME)
	$(GO) test ./toolrunner/mcpserver -run '^$$' -fuzz '^FuzzArguments$$' -fuzztime $(FUZZTIME)
	$(GO) test ./toolrunner/mcpserver -run '^$$' -fuzz '^FuzzClip$$' -fuzztime $(FUZZTIME)
	$(GO) test ./query -run '^$$' -fuzz '^FuzzParseTilePath$$' -fuzztime $(FUZZTIME)
	$(GO) test ./deliver -run '^$$' -fuzz '^FuzzBatchVerifier$$' -fuzztime $(FUZZTIME)
	$(GO) test ./evidence/checkpointer -run '^$$' -fuzz '^FuzzDecodeKey$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/tlog -run '^$$' -fuzz '^FuzzParseKeySet$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/tlog -run '^$$' -fuzz '^FuzzCosignatures$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/tlog -run '^$$' -fuzz '^FuzzCanonical$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/tlog/verify -run '^$$' -fuzz '^FuzzExport$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/tlog -run '^$$' -fuzz '^FuzzRootOfNodes$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/tlog -run '^$$' -fuzz '^FuzzErasedFields$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/natsx -run '^$$' -fuzz '^FuzzSanitizeStreamCreate$$' -fuzztime $(FUZZTIME)

fmt:
	@test -z "$$(gofmt -l .)" || { echo "gofmt would change:"; gofmt -l .; exit 1; }

## vet: gofmt and go vet of every file, those of the e2e tier included
vet: fmt
	$(GO) vet -tags e2e ./...

clean:
	rm -rf bin
