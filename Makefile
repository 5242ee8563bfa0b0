# Switchyard. `make help` lists the targets.

GO ?= go
CONTROLLER_GEN ?= $(GO) tool controller-gen
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# The commit `switchyard version` prints (empty outside a clone: then the build info's, if any).
COMMIT ?= $(shell c=$$(git rev-parse HEAD 2>/dev/null) && { git diff --quiet HEAD 2>/dev/null && echo $$c || echo $$c-dirty; })
LDFLAGS := -X github.com/switchyard-io/switchyard/internal/version.Version=$(VERSION) -X github.com/switchyard-io/switchyard/internal/version.Commit=$(COMMIT)
# Tests that need a real API server find kube-apiserver, etcd and kubectl here (hack/envtest.sh builds them).
ENVTEST_ASSETS = $(shell hack/envtest.sh)

.DEFAULT_GOAL := help

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: ## Generate the CRDs from the API types and their kubebuilder markers.
	$(CONTROLLER_GEN) crd paths="./api/..." output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=switchyard-controller paths="./internal/controller/..." output:rbac:artifacts:config=config/rbac
	@# The Helm chart carries byte-identical copies (test/helm fails when they drift).
	rm -f charts/switchyard/files/crds/*.yaml
	cp config/crd/bases/*.yaml charts/switchyard/files/crds/
	cp config/rbac/role.yaml charts/switchyard/files/rbac/role.yaml
	cp config/rbac/personas.yaml config/rbac/oncall_policy.yaml charts/switchyard/files/rbac/
	cp config/monitoring/prometheusrule.yaml charts/switchyard/files/monitoring/prometheusrule.yaml
	cp config/monitoring/grafana/switchyard.json charts/switchyard/files/dashboards/switchyard.json

.PHONY: generate
generate: ## Generate DeepCopy methods.
	$(CONTROLLER_GEN) object paths="./api/..."

.PHONY: fmt
fmt: ## Run gofmt on the code.
	gofmt -l -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet.
	$(GO) vet ./...

.PHONY: lint
lint: vet ## Run the linters (go vet and a gofmt check).
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: envtest
envtest: ## Build (once, cached in ~/.cache/switchyard) kube-apiserver, etcd and kubectl for envtest.
	@hack/envtest.sh

.PHONY: redis
redis: ## Install Debian's redis-server when missing (the fleet store's tests run it on random loopback ports).
	@hack/redis.sh >/dev/null

.PHONY: tools
tools: ## Build (once, cached in ~/.cache/switchyard) the pinned helm and promtool.
	@hack/tools.sh >/dev/null

.PHONY: test
test: envtest tools redis ## Run all unit and envtest suites (a real kube-apiserver and etcd, a real redis-server).
	@# SWITCHYARD_REQUIRE_REDIS: the fleet tests fail, instead of skipping, without a redis-server.
	SWITCHYARD_REQUIRE_REDIS=1 SWITCHYARD_REDIS_SERVER="$$(hack/redis.sh)" KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" $(GO) test ./... -count=1
	@# The request path and the health engine are shared by many goroutines: run them under the race detector too.
	$(GO) test -race -count=1 ./internal/health/ ./internal/proxy/
	@# The planner is shared by every request too; -short plays 100 of the differential test's sequences.
	$(GO) test -race -short -count=1 ./internal/failover/

.PHONY: test-chart
test-chart: envtest tools ## Lint, render and dry-run the Helm chart; check metric names, flags and alerts.
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" $(GO) test ./test/helm/ ./test/names/ -count=1 -v

.PHONY: test-e2e
test-e2e: envtest ## Run the end-to-end suite on a local control plane.
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" $(GO) test ./test/e2e/... -count=1 -tags=e2e -v -timeout 20m

.PHONY: test-install
test-install: envtest image ## As root: install the chart and config/default on a real single-node Kubernetes (hack/node.sh) and play the on-call story on real pods.
	@hack/tools.sh helm >/dev/null
	SWITCHYARD_INSTALL_IMAGE=$(IMG) hack/node.sh run $(GO) test -tags=install ./test/install/ -count=1 -v -timeout 30m

# The suites that touch time or the network (real sockets, timers, child processes, an API server).
FLAKE_PKGS ?= ./internal/controller/ ./internal/demo/ ./internal/failover/ ./internal/mockprovider/ ./internal/proxy/... ./cmd/switchyard/ ./hack/bench/ ./test/crdvalidation/ ./test/kustomize/
FLAKE_COUNT ?= 10
FLAKE_E2E_COUNT ?= 0

.PHONY: test-flakes
test-flakes: envtest ## Repeat the suites that touch time or the network FLAKE_COUNT times (default 10, ~12 min), the request path under -race too; FLAKE_E2E_COUNT=N adds N e2e runs.
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" $(GO) test -count=$(FLAKE_COUNT) -timeout 60m $(FLAKE_PKGS)
	$(GO) test -race -count=$(FLAKE_COUNT) -timeout 60m ./internal/health/ ./internal/proxy/
	$(GO) test -race -short -count=$(FLAKE_COUNT) -timeout 60m ./internal/failover/
	@for i in $$(seq 1 $(FLAKE_E2E_COUNT)); do \
		echo "e2e run $$i of $(FLAKE_E2E_COUNT)"; \
		KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" $(GO) test ./test/e2e/... -count=1 -tags=e2e -timeout 20m || exit 1; \
	done

.PHONY: bench
bench: ## Measure the gateway's overhead, failover cost and ejection time against a mock upstream, and PII masking off vs on (~2.5 min; BENCH_FLAGS=--quick for ~1 min).
	$(GO) run ./hack/bench $(BENCH_FLAGS)
	@echo "PII masking, off and on side by side (per KB of prompt, per stream event):"
	$(GO) test -run '^$$' -bench 'HotPathPII|StreamEventPII|MaskRequest' -benchmem ./internal/proxy/
	@echo "Stream recovery: the client-visible gap at a seam, and the tap's cost (streamRecovery Error vs Continue):"
	$(GO) test -run '^$$' -bench 'StreamSeamGap|StreamRecoveryTap' -benchtime 500x -benchmem ./internal/proxy/

.PHONY: bench-go
bench-go: ## Run the package micro-benchmarks (health engine, proxy hot path, replay).
	$(GO) test -run '^$$' -bench . -benchmem ./internal/...

.PHONY: verify
verify: ## Fail when generated files are stale or code is not gofmt'ed.
	$(MAKE) manifests generate
	@git diff --exit-code -- api config charts || { echo "generated files are stale: run 'make manifests generate' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- api config charts)" || { git status --porcelain -- api config charts; echo "untracked generated files: run 'make manifests generate' and commit"; exit 1; }
	$(MAKE) lint

##@ Build

.PHONY: build
build: ## Build bin/switchyard.
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/switchyard ./cmd/switchyard

IMG ?= switchyard:latest

.PHONY: image
image: ## Build the image without a Docker engine (static binary on scratch, non-root) into bin/switchyard-image.tar, and verify it.
	$(GO) run ./hack/image --out bin/switchyard-image.tar --tag $(IMG) --version $(VERSION) --commit "$(COMMIT)"

.PHONY: docker-build
docker-build: ## Build the container image $(IMG) (needs a Docker engine; none runs on the dev machines).
	docker build --build-arg VERSION=$(VERSION) -t $(IMG) .

.PHONY: demo
demo: ## Play an outage and a recovery on a local gateway with two mock providers (about 2 minutes, plus the first build).
	$(GO) run ./cmd/switchyard demo

.PHONY: dev-cluster
dev-cluster: envtest ## Run kube-apiserver, etcd, the controller, 2 proxies and 2 mock providers locally (Ctrl-C stops and cleans up).
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" $(GO) run ./hack/devcluster

.PHONY: run
run: build ## Run the standalone gateway on config/samples/standalone with its two local mock providers.
	hack/run-local.sh
