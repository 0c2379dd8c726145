# Trainyard's build. `make demo` and `make test` install what they need on a fresh
# Debian machine (apt packages, Go tools into ./bin) and are quick when it is there.

SHELL        := /bin/bash
GO           ?= go
PYTHON       ?= /usr/bin/python3
BIN          := $(CURDIR)/bin
VERSION      ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT       ?= $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
BUILD_DATE   ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS      := -s -w -X github.com/trainyard/trainyard/internal/cli.Version=$(VERSION) \
                -X github.com/trainyard/trainyard/internal/cli.Commit=$(COMMIT) \
                -X github.com/trainyard/trainyard/internal/cli.BuildDate=$(BUILD_DATE)
# What each target needs from Debian. libopenblas0-pthread: Debian's torch falls back to the
# reference BLAS without it (50x slower). python3-torchvision, -tqdm, -filelock: what Ray's own
# examples import (examples/ray-train). chromium: the real browser test/browser drives headless
# (the dashboard); only `make test` installs it.
DEMO_APT     := python3-torch python3-numpy libopenblas0-pthread dataset-fashion-mnist
TEST_APT     := $(DEMO_APT) python3-torchvision python3-tqdm python3-filelock chromium
# apt waits up to 5 minutes for another apt (unattended-upgrades, say) instead of failing.
APT_GET      := DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300
# Where `make install` puts the binary: $(PREFIX)/bin/trainyard.
PREFIX       ?= /usr/local
# The image `make image` writes (an OCI archive in ./bin), tagged with the version.
IMAGE        ?= ghcr.io/trainyard/trainyard:$(VERSION)
SUDO         := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Test modules of their own, kept out of the main module's dependencies (test/helm: the
# Helm chart, with Helm's Go packages); lint and test run them after ./...
TEST_MODULES := test/helm

# Demo knobs: `make demo EPOCHS=2 WORKERS=2`.
EPOCHS       ?= 5
WORKERS      ?= 2
DEMO_ARGS    ?=

.PHONY: demo-ray cluster-apt all deps apt-deps demo-apt go-deps build install image generate check-generated test go-test unit-test lint demo bench clean envtest-assets cluster-assets test-servers

CONTROLLER_GEN_VERSION := v0.23.0
CONTROLLER_GEN         := $(BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)

# The envtest control plane (test/envtest): kube-apiserver and etcd built from the Go modules in
# tools/kube and tools/etcd (each its own module, pinned there), cached in ./bin under versioned
# names and rebuilt only when missing or the version changes. A cold kube-apiserver build takes
# about 5 minutes on 2 cores.
KUBE_VERSION   := v1.37.1
ETCD_VERSION   := v3.7.3
KUBE_APISERVER := $(BIN)/kube-apiserver-$(KUBE_VERSION)
ETCD           := $(BIN)/etcd-$(ETCD_VERSION)
ENVTEST_ASSETS := $(BIN)/k8s-$(patsubst v%,%,$(KUBE_VERSION))
KUBE_MINOR     := $(word 2,$(subst ., ,$(KUBE_VERSION)))
# Version stamps: without them the server reports v0.0.0 and kubectl refuses to parse it.
KUBE_LDFLAGS   := -s -w -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(KUBE_MINOR) \
	-X k8s.io/component-base/version.gitTreeState=clean

all: build

## deps: install everything the build, tests and demo need (Debian packages, Go modules)
deps: apt-deps go-deps

# apt-install installs the Debian packages $(1) that are missing, if any.
define apt-install
	@if ! dpkg -s $(1) >/dev/null 2>&1; then \
		echo "installing Debian packages: $(1)"; \
		$(SUDO) $(APT_GET) update -qq && \
		$(SUDO) $(APT_GET) install -y -qq --no-install-recommends $(1); \
	fi
endef

apt-deps:
	$(call apt-install,$(TEST_APT))

demo-apt:
	$(call apt-install,$(DEMO_APT))

go-deps:
	@$(GO) mod download
	@for m in $(TEST_MODULES); do (cd $$m && $(GO) mod download) || exit 1; done

$(CONTROLLER_GEN):
	GOBIN=$(BIN) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(BIN)/controller-gen $@

$(KUBE_APISERVER):
	cd tools/kube && CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(KUBE_LDFLAGS)' -o $@.tmp . && mv $@.tmp $@

$(ETCD):
	cd tools/etcd && CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $@.tmp . && mv $@.tmp $@

# The test cluster (test/cluster, internal/testcluster): kubelet, kube-controller-manager and
# kube-scheduler from the same tools module as kube-apiserver, CoreDNS from the Go module proxy,
# and Debian's containerd, runc and CNI plugins; mmdebstrap and busybox-static build its images
# (internal/testcluster/images.go, cached in ./bin/images). Cold: kubelet about 5 minutes,
# kube-controller-manager 2.5, CoreDNS 2.5, the worker image 2 (see the README's Building).
CLUSTER_APT     := containerd runc containernetworking-plugins mmdebstrap busybox-static
COREDNS_VERSION := v1.15.0
KUBE_NODE_BINS  := $(foreach c,kubelet kube-controller-manager kube-scheduler,$(BIN)/$(c)-$(KUBE_VERSION))
COREDNS         := $(BIN)/coredns-$(COREDNS_VERSION)

$(BIN)/kubelet-$(KUBE_VERSION) $(BIN)/kube-controller-manager-$(KUBE_VERSION) $(BIN)/kube-scheduler-$(KUBE_VERSION):
	cd tools/kube && CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(KUBE_LDFLAGS)' -o $@.tmp ./$(patsubst %-$(KUBE_VERSION),%,$(notdir $@)) && mv $@.tmp $@

$(COREDNS):
	d=$$(mktemp -d) && GOBIN=$$d CGO_ENABLED=0 $(GO) install -trimpath -ldflags '-s -w' github.com/coredns/coredns@$(COREDNS_VERSION) && mv $$d/coredns $@ && rmdir $$d

cluster-apt:
	$(call apt-install,$(CLUSTER_APT))

# Kueue (tools/kueue pins it): its manager, CRDs and webhook configurations, for the test
# cluster's real Kueue (internal/testcluster/kueue.go). About 3 minutes cold.
KUEUE_VERSION := v0.15.2
KUEUE_DIR     := $(BIN)/kueue-$(KUEUE_VERSION)

$(KUEUE_DIR)/kueue:
	mkdir -p $(KUEUE_DIR)/crds
	cd tools/kueue && CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $@.tmp sigs.k8s.io/kueue/cmd/kueue && \
		src=$$($(GO) list -m -f '{{.Dir}}' sigs.k8s.io/kueue) && \
		cp $$src/config/components/crd/bases/*.yaml $(KUEUE_DIR)/crds/ && \
		cp $$src/config/components/webhook/manifests.yaml $(KUEUE_DIR)/webhooks.yaml && \
		chmod -R u+w $(KUEUE_DIR) && mv $@.tmp $@

# MinIO, the real S3 server the tests of runs kept in a bucket start (internal/testminio):
# from the Go module proxy, about 5 minutes cold. It is under the AGPL: a test server only,
# never linked into trainyard.
MINIO_VERSION := v0.0.0-20260212201848-7aac2a2c5b7c
MINIO         := $(BIN)/minio-$(MINIO_VERSION)

$(MINIO):
	d=$$(mktemp -d) && GOBIN=$$d CGO_ENABLED=0 $(GO) install -trimpath -ldflags '-s -w' github.com/minio/minio@$(MINIO_VERSION) && mv $$d/minio $@ && rmdir $$d

## test-servers: the servers the tests start besides the cluster's (MinIO), in ./bin
test-servers: $(MINIO)

## cluster-assets: the binaries and packages of the test cluster (test/cluster), in ./bin
cluster-assets: cluster-apt envtest-assets $(KUBE_NODE_BINS) $(COREDNS) $(KUEUE_DIR)/kueue

## envtest-assets: kube-apiserver and etcd for test/envtest in $(ENVTEST_ASSETS) (KUBEBUILDER_ASSETS)
envtest-assets: $(KUBE_APISERVER) $(ETCD)
	@mkdir -p $(ENVTEST_ASSETS)
	ln -sfn ../$(notdir $(KUBE_APISERVER)) $(ENVTEST_ASSETS)/kube-apiserver
	ln -sfn ../$(notdir $(ETCD)) $(ENVTEST_ASSETS)/etcd

# What `make generate` writes; check-generated fails if any of it changes.
GENERATED := api/ config/crd/ config/rbac/ charts/trainyard/crds/ charts/trainyard/files/

## generate: deepcopy code and the CRD from the kubebuilder markers in api/, the operator's
## ClusterRole from those in internal/operator, and the Helm chart's copies of both
generate: $(CONTROLLER_GEN)
	$(CONTROLLER_GEN) object paths=./api/...
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=trainyard-operator paths=./internal/operator/... output:rbac:artifacts:config=config/rbac
	rm -f charts/trainyard/crds/*.yaml && cp config/crd/bases/*.yaml charts/trainyard/crds/
	cp config/rbac/role.yaml charts/trainyard/files/role.yaml

## check-generated: fail if regenerating leaves a diff
check-generated: generate
	@if [ -n "$$(git status --porcelain -- $(GENERATED))" ]; then \
		git status --short -- $(GENERATED); echo "generated files are stale: run 'make generate' and commit"; exit 1; fi

# What the binary is made of: relinked only when one of these changed (or the commit did).
SOURCES      := go.mod go.sum $(shell find api client cmd config internal python -type f \
                  -not -path '*/testdata/*' -not -name '*_test.go' -not -path 'python/tests/*' 2>/dev/null)
STAMP        := $(BIN)/.commit-$(shell git rev-parse --short HEAD 2>/dev/null || echo none)

## build: the static trainyard binary in ./bin (relinked only when its sources changed)
build: $(BIN)/trainyard

$(BIN)/trainyard: $(SOURCES) $(STAMP)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./cmd/trainyard

$(STAMP):
	@mkdir -p $(BIN) && rm -f $(BIN)/.commit-* && touch $@

## install: the binary into $(PREFIX)/bin (make install PREFIX=~/.local for your own)
install: build
	install -D -m 0755 $(BIN)/trainyard $(DESTDIR)$(PREFIX)/bin/trainyard
	@echo "installed $(DESTDIR)$(PREFIX)/bin/trainyard: $$($(DESTDIR)$(PREFIX)/bin/trainyard version)"

## image: the trainyard image (the static binary alone, as the Dockerfile builds it) as an
## OCI archive, bin/trainyard-image.tar, tagged $(IMAGE); no Docker needed
image: build
	$(GO) run ./internal/ociimage/mkimage -bin $(BIN)/trainyard -name $(IMAGE) -out $(BIN)/trainyard-image.tar
	@echo "$(IMAGE) is in $(BIN)/trainyard-image.tar: ctr images import, podman load -i or docker load -i it, then push it"

## lint: gofmt and go vet
lint:
	@fmt=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$fmt" ]; then echo "gofmt needed: $$fmt"; exit 1; fi
	$(GO) vet ./...
	@for m in $(TEST_MODULES); do echo "cd $$m && $(GO) vet ./..."; (cd $$m && $(GO) vet ./...) || exit 1; done

## test: every test, including end-to-end training with real PyTorch; each part's time at the end
TEST_PARTS := deps build lint check-generated envtest-assets cluster-assets test-servers go-test
test:
	@rm -f $(BIN)/.test-times; mkdir -p $(BIN); \
	for part in $(TEST_PARTS); do \
		start=$$(date +%s); $(MAKE) --no-print-directory $$part || exit 1; \
		echo "$$part $$(( $$(date +%s) - start ))" >> $(BIN)/.test-times; \
	done; \
	echo; echo "make test: each part's time (seconds; the go test lines above give each package's)"; \
	awk '{ printf "  %-16s %6d\n", $$1, $$2; total += $$2 } END { printf "  %-16s %6d\n", "total", total }' $(BIN)/.test-times

# go-test: the tests themselves (make test builds what they need first)
go-test:
	TRAINYARD_BIN=$(BIN)/trainyard TRAINYARD_PYTHON=$(PYTHON) KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) \
		TRAINYARD_CLUSTER_ASSETS=$(BIN) TRAINYARD_MINIO=$(MINIO) $(GO) test -count=1 -timeout 50m ./...
	@for m in $(TEST_MODULES); do echo "cd $$m && $(GO) test ./..."; \
		(cd $$m && KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) $(GO) test -count=1 -timeout 10m ./...) || exit 1; done

## unit-test: the fast tests only
unit-test:
	$(GO) test -short -count=1 ./...

## demo: train the Fashion-MNIST MLP with 2 distributed workers
demo: demo-apt go-deps build
	$(BIN)/trainyard run --workers $(WORKERS) -- $(PYTHON) examples/fashion-mnist/train.py --epochs $(EPOCHS) $(DEMO_ARGS)

## demo-ray: KubeRay's Ray Train Fashion-MNIST sample, unmodified, without Ray (4 workers, 10 epochs);
## the data goes where the script looks, ~/data (RAY_DATA_ARGS: prepare_data.py's flags)
RAY_DATA_ARGS ?= --train 6000 --test 1000
demo-ray: apt-deps go-deps build
	$(PYTHON) examples/ray-train/prepare_data.py $(RAY_DATA_ARGS)
	$(BIN)/trainyard run -- $(PYTHON) examples/ray-train/ray_train_pytorch_mnist.py

## bench: trainyard run against torchrun (see BENCHMARKS.md)
bench: apt-deps go-deps build
	$(GO) run ./bench/launch -trainyard $(BIN)/trainyard -python $(PYTHON)

clean:
	rm -rf $(BIN)
