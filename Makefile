# sandboxer — build, test and CI entry points. `make help` lists them.

SHELL := /bin/bash
GO ?= go

# No build tags are needed: runtime/podman uses only the bindings' connection
# package, which builds without gpgme/btrfs headers and with or without cgo.

# Runtimes whose absence FAILS the tests under `make ci` (instead of skipping).
SANDBOXER_REQUIRE ?= docker,podman,podman-rootless,containerd,kubernetes
TEST_TIMEOUT ?= 80m
# staticcheck, run by `make lint` at a pinned version (`go run` fetches it
# through the module proxy once, then from the module cache).
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: help build demo env env-down images guest-image guest-test test test-unit ci lint fmt bench bench-adopt release clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | column -t -s "$$(printf '\t')"

build: ## build the CLI into bin/sandboxer
	@if [ -d cmd/sandboxer ]; then $(GO) build -o bin/sandboxer ./cmd/sandboxer && echo bin/sandboxer; \
	else echo "cmd/sandboxer does not exist yet: nothing to build"; $(GO) build ./...; fi

demo: ## offline demo on Docker only: Docker and the stand-in images, every engine with its real client, env masked, teardown; one line per step with its duration
	@# Only what the demo uses: Docker (SANDBOXER_RUNTIMES=docker; no Podman,
	@# containerd or Kubernetes to build or start) and the stand-in images.
	@# Each step's output goes to build/demo-<step>.log; the demo's own
	@# output (the env, masked, and one login line per service) is shown.
	@mkdir -p build; t0=$$(date +%s%N); \
	took() { awk -v s="$$1" -v e="$$(date +%s%N)" 'BEGIN { printf "%.1f s", (e - s) / 1e9 }'; }; \
	step() { local key=$$1 label=$$2 s; shift 2; s=$$(date +%s%N); \
		if "$$@" >"build/demo-$$key.log" 2>&1; then printf 'demo: %-40s %9s\n' "$$label" "$$(took "$$s")"; \
		else echo "demo: $$label FAILED (build/demo-$$key.log):"; tail -n 20 "build/demo-$$key.log"; exit 1; fi; }; \
	step env "env: Docker and the stand-in images" env SANDBOXER_RUNTIMES=docker hack/env.sh up; \
	step build "build bin/sandboxer" $(GO) build -o bin/sandboxer ./cmd/sandboxer; \
	step democlient "build bin/democlient" $(GO) build -o bin/democlient ./cmd/sandboxer/democlient; \
	set -a; . build/images.env; set +a; export SANDBOXER_RUNTIME=docker; \
	step doctor "doctor (Docker)" bin/sandboxer doctor; \
	services=$$(bin/sandboxer engines | awk 'NR > 1 { print $$1 }' | paste -sd, -); \
	s=$$(date +%s%N); bin/sandboxer run --services "$$services" -- bin/democlient || exit 1; \
	printf 'demo: %-40s %9s\n' "run $$services, log in, tear down" "$$(took "$$s")"; \
	printf 'demo: %-40s %9s\n' "total" "$$(took "$$t0")"

env: ## install packages, start runtimes (rootless Podman as an unprivileged user too, a single-node Kubernetes cluster), build+serve stand-in images, write build/images.env
	hack/env.sh up

env-down: ## stop only what `make env` started, undo what it changed (the rootless user, its tun ACL, its files)
	hack/env.sh down

images: ## build (cached) and serve the stand-in images
	hack/images.sh

# The cgroup v2 guest (hack/guest/): not part of `make ci` yet (issue 29).
# GUEST_ROW: docker, podman, podman-rootless or containerd; GUEST_PKGS: the
# packages whose tests run in it; GUEST_RUN: -test.run for them.
GUEST_ROW ?= docker
GUEST_PKGS ?= ./runtime/docker/
GUEST_RUN ?=

guest-image: ## build (cached) the cgroup v2 guest image: Debian trixie, Docker, Podman, containerd (hack/guest/image.sh)
	hack/guest/image.sh

guest-test: ## run GUEST_PKGS's tests in the cgroup v2 guest under qemu (row GUEST_ROW, filter GUEST_RUN); needs `make images`
	hack/guest/run.sh --row "$(GUEST_ROW)" $(if $(GUEST_RUN),--run '$(GUEST_RUN)') $(GUEST_PKGS)

test-unit: ## unit tests only (no runtime needed)
	$(GO) test -count=1 -short ./...

test: ## unit tests + conformance/integration for each runtime that answers
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

ci: ## the CI run: env, every test verbose with SANDBOXER_REQUIRE runtimes required, lint, env-down
	SANDBOXER_REQUIRE="$(SANDBOXER_REQUIRE)" TEST_TIMEOUT="$(TEST_TIMEOUT)" hack/ci.sh

lint: ## gofmt, go vet, staticcheck (pinned, from the module proxy) and shellcheck (hack/env.sh up installs it)
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	@# Every shell script git tracks: *.sh, and the files without an extension
	@# under hack/ and .ci/ whose #! line names sh or bash (.ci/run, mongosh).
	@command -v shellcheck >/dev/null || { echo "shellcheck not found: apt-get install shellcheck"; exit 1; }; \
	scripts=$$({ git ls-files '*.sh'; git ls-files hack .ci | grep -v '\.[^/]*$$' | while read -r f; do \
		if head -n 1 "$$f" | grep -qE '^#!.*[/ ](ba)?sh( |$$)'; then echo "$$f"; fi; done; } | LC_ALL=C sort -u); \
	echo shellcheck -x $$scripts; shellcheck -x $$scripts

fmt: ## gofmt -w
	gofmt -w $$(git ls-files '*.go')

bench: ## benchmarks (see bench/): a row per runtime that answers; kubernetes when KUBECONFIG is set (make env writes it)
	@# SANDBOXER_BENCH_RUNTIMES (default all: docker, podman, containerd, and kubernetes when KUBECONFIG is set,
	@# in the environment or build/images.env); SANDBOXER_BENCH_N rounds (default 10).
	set -o pipefail; mkdir -p bench/results; \
	$(GO) test -run '^$$' -bench . -benchmem ./provision/ ./engines/ ./janitor/ | tee bench/results/go-bench.txt
	$(GO) run ./bench/cmd/sandboxer-bench -runtime "$${SANDBOXER_BENCH_RUNTIMES:-all}" -n "$${SANDBOXER_BENCH_N:-10}"
	@# sandboxtest's per-test databases on real runtimes: one round each (-benchtime 1x), figures as metrics.
	set -o pipefail; $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 60m ./sandboxtest/ | tee bench/results/sandboxtest.txt
	bench/adopt/adopt.sh "$${SANDBOXER_ADOPT_ROUNDS:-1}"

bench-adopt: ## a sandboxtest consumer's cold test build vs testcontainers-go's, side by side (bench/results/adopt.md)
	bench/adopt/adopt.sh "$${SANDBOXER_ADOPT_ROUNDS:-1}"

release: ## static linux/amd64 and linux/arm64 CLI binaries (CGO_ENABLED=0) and SHA256SUMS in dist/, checked (file, sha256sum -c, version)
	deploy/release.sh dist

clean: ## remove build outputs (not the caches under ~/.cache/sandboxer)
	rm -rf bin dist build/*.log
