# xdsbridge. `make test` is what CI runs (.ci/run) and what the README says.
SHELL   := bash
GO      ?= go
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X main.version=$(VERSION) -X main.revision=$(REVISION)

.PHONY: build test lint vet fmt-check golangci-lint staticcheck deadcode fuzz deploy-check

# Shell snippets shared by test and the single-purpose targets (test runs
# them inline rather than through $(MAKE), so that `make -n test` runs nothing).
FMT_CHECK = files=$$(find . -name '*.go' -not -path './.git/*' -print0 | xargs -0 gofmt -l); \
	if [ -n "$$files" ]; then echo "gofmt needed:"; echo "$$files"; exit 1; fi
# Every parser of untrusted input, FUZZTIME each (one at a time: -fuzz
# takes a single target). Compiling a fuzz binary costs more than the run.
# A count of inputs, not a duration: with a duration, Go's fuzzing
# coordinator can fail a target at the deadline with "context deadline
# exceeded" and no failing input when its workers are starved of CPU.
FUZZTIME ?= 20000x
FUZZ_TARGETS = FuzzConvert:./sources/dns/ FuzzParse:./config/ FuzzParse:./sources/file/ \
	FuzzMapping:./sources/consul/ FuzzCodecRequest:./xds/wire/ FuzzService:./translate/ \
	FuzzNewRule:./translate/ FuzzService:./translate/istio/ \
	FuzzCurator:./sources/zookeeper/ FuzzServerset:./sources/zookeeper/ FuzzNerve:./sources/zookeeper/ \
	FuzzDubbo:./sources/zookeeper/ \
	FuzzGRPCNaming:./sources/etcd/ FuzzSkyDNS:./sources/etcd/ FuzzJSON:./sources/etcd/
FUZZ = for t in $(FUZZ_TARGETS); do \
	$(GO) test -run='^$$' -fuzz="^$${t%%:*}\$$" -fuzztime=$(FUZZTIME) "$${t\#*:}" || exit 1; done
# The deployment manifests (deploy/) checked by their own module,
# tools/deploycheck, so that Kubernetes' and Nomad's API types stay out of
# the product's go.mod: vet, then its tests, which decode every manifest
# strictly, run `bridge validate` on the configuration each carries, and
# run promtool on the alert rules, their unit tests and the scrape
# configuration.
# -count=1: the tests build the bridge from the product's sources, which
# go test's result cache does not see, so a cached pass could hide a change
# there. No -race: the checks start no goroutines, and instrumenting
# k8s.io/api would only lengthen a cold build.
DEPLOY_CHECK = { $(GO) vet -C tools/deploycheck ./... && $(GO) test -C tools/deploycheck -count=1 ./...; } || exit 1
# The linters at the versions the tools/lint module pins, so that their
# dependency graphs stay out of the product's go.mod: go tool builds each
# from that module's go.sum (its modules come from the module proxy the
# first time) and keeps the build in the build cache. golangci-lint runs
# the set in .golangci.yml, staticcheck among them, and keeps its results
# in its own cache; a finding that is wrong gets `//nolint:NAME // reason`
# on its line. staticcheck alone reads `//lint:ignore CHECK reason`.
GOLANGCI_LINT = $(GO) tool -modfile=tools/lint/go.mod golangci-lint run ./...
STATICCHECK = $(GO) tool -modfile=tools/lint/go.mod staticcheck ./...
# deadcode from the same module: functions that neither a command nor a test
# reaches. Its answer must be empty: code kept for later is code nobody
# checks.
DEADCODE = out=$$($(GO) tool -modfile=tools/lint/go.mod deadcode -test ./...) && { [ -z "$$out" ] || { echo "unreachable code:"; echo "$$out"; exit 1; }; }

## build: the bridge binary, into bin/bridge
build:
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/bridge ./cmd/bridge

## test: vet, gofmt, golangci-lint (staticcheck and the rest of
## .golangci.yml, the import rules between the layers among them), deadcode,
## every test with -race (integration tests against real Consul, CoreDNS,
## ZooKeeper and etcd servers and istio's discovery server are required,
## not skipped), the deployment manifests' checks (tools/deploycheck, which
## runs promtool on deploy/prometheus) and a short fuzz run.
## scripts/tools.sh builds those binaries once and caches them.
test:
	set -euo pipefail; \
	vars=$$(scripts/tools.sh); eval "$$vars"; \
	export XDSBRIDGE_CONSUL XDSBRIDGE_COREDNS XDSBRIDGE_ZOOKEEPER XDSBRIDGE_ETCD XDSBRIDGE_PROMTOOL XDSBRIDGE_ISTIOD XDSBRIDGE_INTEGRATION=required; \
	$(GO) vet ./...; \
	$(FMT_CHECK); \
	$(GOLANGCI_LINT); \
	$(DEADCODE); \
	$(GO) test -race -timeout 25m ./...; \
	$(DEPLOY_CHECK); \
	$(FUZZ)

## lint: go vet, gofmt, golangci-lint and deadcode, as make test runs them
lint: vet fmt-check golangci-lint deadcode

vet:
	$(GO) vet ./...

fmt-check:
	@$(FMT_CHECK)

golangci-lint:
	$(GOLANGCI_LINT)

## staticcheck: staticcheck alone (make test runs it inside golangci-lint)
staticcheck:
	$(STATICCHECK)

deadcode:
	@$(DEADCODE)

## deploy-check: the deployment manifests' checks alone
deploy-check:
	$(DEPLOY_CHECK)

## fuzz: a short fuzz run (FUZZTIME, default 20000x inputs) of every parser of untrusted input
fuzz:
	@$(FUZZ)

# The benchmark targets (bench, bench-full) live in bench.mk when present.
-include bench.mk
