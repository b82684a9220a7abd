# per-node: the per-node.liken.sh CSI driver and the scenario suite that proves it.
# Run `make help` for the targets.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMAGE   ?= per-node.liken.sh/driver:$(VERSION)
# Runtime base of the driver image (see Dockerfile).
BASE_IMAGE ?= scratch
REVISION   ?= $(shell git rev-parse --verify --quiet HEAD 2>/dev/null || echo unknown)
GO_LDFLAGS := -s -w -X main.version=$(VERSION)
# grpcnotrace leaves out grpc's request tracing (golang.org/x/net/trace): its
# html/template makes the linker keep every method of every type, which
# doubles the binary and adds ~8 MiB to the driver's resident memory. The
# image holds what make build makes (driver/build_test.go checks both).
DRIVER_TAGS := grpcnotrace
BENCHTIME  ?= 5000x
# Every go command builds with -trimpath, so that the tests, the binaries
# the images hold and the e2e suite share one compilation of each package
# (a build cache key includes the flag).
export GOFLAGS := -trimpath $(GOFLAGS)
# and without cgo: the driver, the fixtures and the node's own binaries are
# static, and a package compiled with cgo for the tests and without it for
# the binaries is compiled twice (on a cold 2-core machine, minutes).
export CGO_ENABLED := 0
# The Kubernetes minor of the kind cluster (e2e/nodeimage/versions/K8S.env);
# the default is the newest minor that passed the whole matrix.
K8S ?= $(shell cat e2e/nodeimage/versions/default)
export K8S
# The tools go.mod does not need to build the driver (Helm, golangci-lint),
# pinned in tools.mod so that the driver's module graph stays its own.
# Helm is built once into _out/bin (make helm) and run from there: `go tool`
# checks its build on every call (seconds each), and e2e lanes that each ran
# `go tool helm` on a cold machine compiled Helm once per lane, at once.
HELM := _out/bin/helm
GOLANGCI_LINT := go tool -modfile=tools.mod golangci-lint

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-z0-9-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build the driver to bin/per-node.
	CGO_ENABLED=0 go build -tags '$(DRIVER_TAGS)' -ldflags '$(GO_LDFLAGS)' -o bin/per-node ./driver

.PHONY: build-fixtures
build-fixtures: ## Build the e2e suite's pod tool and the guide's store to bin/probe and bin/store (their images hold these).
	@# No VCS stamp: the same source gives the same binaries, so the same
	@# images, which a kept cluster does not load again.
	CGO_ENABLED=0 go build -buildvcs=false -ldflags '-s -w' -o bin/ ./fixtures/probe ./fixtures/store

.PHONY: build-nats
build-nats: ## Build NATS (nats-server, from fixtures/nats/go.mod) and natscheck to bin/: the image of docs/examples/nats.
	cd fixtures/nats && CGO_ENABLED=0 go build -buildvcs=false -trimpath -ldflags '-s -w' -o ../../bin/ github.com/nats-io/nats-server/v2 ./natscheck

.PHONY: test
test: helm ## gofmt, vet, go.mod tidy, helm lint, unit tests (the driver's under -race), chart golden files, csi-sanity, fuzz seeds, the alerts' rule tests, the release's image checks (real bind mounts: run as root).
	@unformatted="$$(gofmt -l driver e2e fixtures)"; if [[ -n "$$unformatted" ]]; then echo "gofmt -w these files: $$unformatted" >&2; exit 1; fi
	go vet ./...
	go mod tidy -diff || { echo "go.mod is not tidy: run go mod tidy" >&2; exit 1; }
	go mod tidy -modfile=tools.mod -diff || { echo "tools.mod is not tidy: run go mod tidy -modfile=tools.mod" >&2; exit 1; }
	$(HELM) lint --strict charts/per-node
	$(HELM) lint --strict charts/per-node --values e2e/internal/harness/testdata/chart-values.yaml
	@# The driver's packages under the race detector (it needs cgo): a
	@# publish and the reclaim controller share caches across goroutines.
	go test -count=1 $$(go list ./... | grep -v '^liken.sh/per-node/driver')
	CGO_ENABLED=1 go test -race -count=1 ./driver/...
	@# Modules of their own: the alerts' tests (Prometheus' packages) and
	@# make release's OCI image writer (go-containerregistry), the NATS example's natscheck.
	for m in e2e/alerts e2e/release fixtures/nats; do (cd $$m && go mod tidy -diff && go vet ./... && go test -count=1 ./...) || exit 1; done

.PHONY: warm
warm: ## Download and compile what make e2e, make test and make lint need, running no test (CI runs it, niced, beside make e2e).
	go mod download
	go mod download -modfile=tools.mod
	@# What make test and make lint compile first: make e2e compiles its
	@# own (the e2e test binary, the images' binaries, Helm) beside the node
	@# image, and warm compiling them at the same moment would do it twice.
	go vet ./...
	go test -count=1 -run '^$$' ./... >/dev/null
	for m in e2e/alerts e2e/release fixtures/nats; do (cd $$m && go mod download && go test -count=1 -run '^$$' ./... >/dev/null) || exit 1; done
	@# Only fills golangci-lint's cache: make lint is the check.
	$(GOLANGCI_LINT) run ./... >/dev/null 2>&1 || true
	$(MAKE) --no-print-directory helm build build-fixtures
	go test -tags e2e -c -o /dev/null ./e2e

.PHONY: helm
helm: ## Build the Helm that tools.mod pins to _out/bin/helm (make test, make e2e and make release run it).
	go build -modfile=tools.mod -o $(HELM) helm.sh/helm/v4/cmd/helm

.PHONY: lint
lint: ## golangci-lint (.golangci.yml: the standard set, dupl for repeated code, errorlint, misspell, ...); actionlint on .github/workflows (which cannot run here).
	$(GOLANGCI_LINT) run ./...
	cd e2e/release && go tool actionlint -shellcheck= ../../.github/workflows/*.yaml

.PHONY: fuzz
fuzz: ## Fuzz the handle validation, the target path check, the names and labels of Copies, mount options, the store's reading of a peer's cursor, FUZZTIME each (default 60s).
	go test -run '^$$' -fuzz FuzzCopyDir -fuzztime $${FUZZTIME:-60s} ./driver/internal/layout
	go test -run '^$$' -fuzz FuzzCheckTarget -fuzztime $${FUZZTIME:-60s} ./driver/internal/node
	go test -run '^$$' -fuzz FuzzNew -fuzztime $${FUZZTIME:-60s} ./driver/internal/copyapi
	go test -run '^$$' -fuzz FuzzCheckOptions -fuzztime $${FUZZTIME:-60s} ./driver/internal/mounts
	go test -run '^$$' -fuzz FuzzHonoured -fuzztime $${FUZZTIME:-60s} ./fixtures/store

.PHONY: mutants-unit
mutants-unit: ## Every deliberate break of e2e/mutants/ against the unit tests it names; prints caught or SURVIVED and the score (MUTANTS=regexp some).
	go run ./e2e/cmd/mutants unit $(if $(MUTANTS),-run '$(MUTANTS)')

.PHONY: mutants
mutants: ## The breaks of e2e/mutants/ against the scenarios they name, one make e2e each on kept clusters (MUTANTS=regexp, SCENARIO=03,04 some).
	go run ./e2e/cmd/mutants scenario $(if $(MUTANTS),-run '$(MUTANTS)') $(if $(SCENARIO),-scenario '$(SCENARIO)')

.PHONY: bench
bench: ## Publish+unpublish vs a raw bind mount+unmount, timed in turn, with 0/100/1,000/10,000 other mounts; prints the ratios and the goal (<= 1.5) met or not.
	go test -run '^$$' -bench 'PublishVsBindMount' -benchtime $(BENCHTIME) -timeout 60m ./driver/internal/node \
	  | tee /dev/stderr | awk '/^BenchmarkPublishVsBindMount/ { k = $$1; sub(/-[0-9]+$$/, "", k); sub(/.*others=/, "", k); \
	    for (i = 3; i < NF; i += 2) v[k, $$(i + 1)] = $$i } END { \
	    for (i = 1; i <= 2; i++) { n = (i == 1 ? 1000 : 10000); p = v[n, "ratio-p50"]; m = v[n, "ratio-mean"]; \
	      if (p == "" || m == "") { print "bench: missing results" > "/dev/stderr"; exit 1 } \
	      printf "ratio at %d other mounts: median %.2f (driver %.0f us, bind %.0f us), mean %.2f; goal <= 1.5 for both: %s\n", \
	        n, p, v[n, "driver-p50-ns"] / 1000, v[n, "bind-p50-ns"] / 1000, m, (p <= 1.5 && m <= 1.5 ? "met" : "NOT met") } }'

.PHONY: bench-memory
bench-memory: ## Peak RSS of measuring and removing a copy of 1,000,000 files in one directory (target <= 64 MiB).
	go test -run '^$$' -bench 'TreeMillionFiles' -benchtime 1x ./driver/internal/node | grep -E '^(tree-|Benchmark)'

.PHONY: image
image: build ## Build the driver image $(IMAGE) from bin/per-node (no registry needed: the base is scratch).
	e2e/host/docker.sh
	docker build --build-arg BASE_IMAGE=$(BASE_IMAGE) \
	  --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t $(IMAGE) .

.PHONY: release
release: ## For VERSION: the image for linux/amd64 and linux/arm64 (OCI archive), the host's image tarball, SBOM, install YAML, packaged chart, SHA256SUMS in _out/release/VERSION (no registry).
	e2e/host/release.sh $(VERSION)

.PHONY: node-image
node-image: ## Build the offline kind node image for K8S (no registry needed; cached by its inputs).
	e2e/nodeimage/build.sh

.PHONY: e2e
e2e: ## Kind cluster (1+4 nodes) on Kubernetes K8S=1.3x, driver installed, e2e tests run; SCENARIO=07,26 runs those; SUITE=quick the guide's core.
	SUITE='$(SUITE)' e2e/run.sh test $(SCENARIO)

.PHONY: e2e-matrix
e2e-matrix: ## make e2e on every supported minor (e2e/nodeimage/versions/; MINORS="1.36 1.37" some), one after another; a table of version, result, suite time.
	SUITE='$(SUITE)' MINORS='$(MINORS)' e2e/host/matrix.sh

.PHONY: bench-delete
bench-delete: ## On the e2e cluster: time from deleting a PV to its disappearance (3 nodes x 10,000 files).
	e2e/run.sh bench

.PHONY: bench-e2e
bench-e2e: ## On the e2e cluster: pod start and 200 volumes x every worker vs a local PV, hostPath and emptyDir, deletion, the driver's RSS/CPU/API cost, a 500 MiB store's rollout with and without the copy preference; a table and a line per goal (BENCH_PARTS=idle,podstart,many,rollout: some).
	BENCH_PARTS='$(BENCH_PARTS)' BENCH_ROLLOUTS='$(BENCH_ROLLOUTS)' e2e/run.sh bench-e2e

.PHONY: bench-scale
bench-scale: ## On the e2e cluster's API server: N Nodes (SCALE_NODES=100,1000,5000), 20,000 other PVs, 10 driver processes on this host; RSS, record admission, watch events, PV deletion, each beside its goal.
	SCALE_NODES='$(SCALE_NODES)' SCALE_DRIVERS='$(SCALE_DRIVERS)' SCALE_OTHER_PVS='$(SCALE_OTHER_PVS)' e2e/run.sh bench-scale

.PHONY: bench-api
bench-api: ## On the e2e cluster: the drivers' API requests per minute per node at rest, 50 PVs x 4 nodes (API_IDLE=10m).
	e2e/run.sh bench-api

.PHONY: up
up: ## The e2e cluster with the driver installed, left running; prints KUBECONFIG.
	e2e/run.sh up

.PHONY: down
down: ## Delete the e2e cluster.
	e2e/run.sh down
