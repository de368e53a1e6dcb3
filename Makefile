# Developer entry points. CI runs .ci/run (scripts/test.sh); these targets wrap the same tools.
#
#   make test          every test (unit, chart, end-to-end against a local control plane)
#   make lint          ruff, mypy, helm lint
#   make chart-test    the Helm chart's tests only (render checks + the real-API-server ones)
#   make image         docker build -t $(IMAGE) .  (DOCKER=podman for Podman)
#   make image-buildah the same image with buildah, as root, no daemon (hack/build-image.sh)
#   make e2e-kind      a kind cluster whose kube-scheduler calls berth, berth installed with
#                      Helm, `helm test`, then the end-to-end suite against it (needs Docker
#                      and kind; cannot run where there is no Docker engine)
#   make kind-down     delete that cluster

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PYTHON      ?= .venv/bin/python
PYTEST_ARGS ?=
IMAGE       ?= berth:dev
DOCKER      ?= docker
KIND        ?= kind
KUBECTL     ?= kubectl
KIND_CLUSTER ?= berth
# The Kubernetes version the local control plane is built at (hack/k8s-build/go.mod): kind runs
# the same one unless told otherwise.
K8S_VERSION := $(shell sed -n 's|^[[:space:]]*k8s.io/kubernetes \(v[0-9][0-9.]*\).*|\1|p' hack/k8s-build/go.mod | head -n 1)
KIND_NODE_IMAGE ?= kindest/node:$(K8S_VERSION)
KIND_STATE  ?= build/kind
KIND_KUBECONFIG := $(KIND_STATE)/kubeconfig
RELEASE     ?= berth
NAMESPACE   ?= berth-system

# helm: $(BERTH_HELM), else the one hack/build-k8s.sh builds (and caches) from its Go module.
HELM ?= $(or $(BERTH_HELM),$(shell bash hack/build-k8s.sh 2>/dev/null | tail -n 1)/helm)

.PHONY: help setup test lint chart-test image image-buildah e2e-kind kind-up kind-load kind-install kind-down

help:
	@sed -n 's/^#   make /make /p' $(MAKEFILE_LIST)

setup:
	scripts/setup.sh --test

test:
	scripts/test.sh $(PYTEST_ARGS)

lint: setup
	.venv/bin/ruff check .
	scripts/typecheck.sh
	$(HELM) lint charts/berth --strict
	$(HELM) lint charts/berth --strict --set scheduler.enabled=true --set extender.serviceMonitor.enabled=true

chart-test: setup
	BERTH_HELM=$(HELM) $(PYTHON) -m pytest tests/chart tests/e2e/test_chart_e2e.py $(PYTEST_ARGS)

image:
	$(DOCKER) build -t $(IMAGE) .

image-buildah:
	bash hack/build-image.sh localhost/$(IMAGE)

# ---------------------------------------------------------------------------- kind
e2e-kind: kind-up image kind-load kind-install
	$(HELM) --kubeconfig $(KIND_KUBECONFIG) test $(RELEASE) -n $(NAMESPACE) --logs
	BERTH_E2E_USE_EXISTING=1 KUBECONFIG=$(abspath $(KIND_KUBECONFIG)) BERTH_HELM=$(HELM) \
	  $(PYTHON) -m pytest -m e2e tests/e2e $(PYTEST_ARGS)

kind-up: setup
	@command -v $(KIND) >/dev/null || { echo "kind is not installed (https://kind.sigs.k8s.io)"; exit 1; }
	@$(DOCKER) info >/dev/null 2>&1 || { echo "no Docker engine: make e2e-kind needs one"; exit 1; }
	mkdir -p $(KIND_STATE)/scheduler
	$(PYTHON) deploy/kind/pki.py $(KIND_STATE)
	cp deploy/kind/scheduler-config.yaml $(KIND_STATE)/scheduler/scheduler-config.yaml
	sed 's|@KIND_STATE@|$(abspath $(KIND_STATE))|g' deploy/kind/cluster.yaml > $(KIND_STATE)/cluster.yaml
	if $(KIND) get clusters | grep -qx '$(KIND_CLUSTER)'; then \
	  echo "kind cluster $(KIND_CLUSTER) exists"; \
	  $(KIND) get kubeconfig --name $(KIND_CLUSTER) > $(KIND_KUBECONFIG); \
	else \
	  $(KIND) create cluster --name $(KIND_CLUSTER) --image $(KIND_NODE_IMAGE) \
	    --config $(KIND_STATE)/cluster.yaml --kubeconfig $(KIND_KUBECONFIG) --wait 120s; \
	fi

kind-load:
	$(KIND) load docker-image $(IMAGE) --name $(KIND_CLUSTER)

kind-install:
	$(KUBECTL) --kubeconfig $(KIND_KUBECONFIG) create namespace $(NAMESPACE) --dry-run=client -o yaml \
	  | $(KUBECTL) --kubeconfig $(KIND_KUBECONFIG) apply -f -
	$(KUBECTL) --kubeconfig $(KIND_KUBECONFIG) -n $(NAMESPACE) create secret tls berth-kind-ca \
	  --cert $(KIND_STATE)/ca/tls.crt --key $(KIND_STATE)/ca/tls.key --dry-run=client -o yaml \
	  | $(KUBECTL) --kubeconfig $(KIND_KUBECONFIG) apply -f -
	# The control-plane kube-scheduler runs on the host network: allow the nodes' network.
	subnet=$$($(DOCKER) network inspect kind -f '{{range .IPAM.Config}}{{if .Subnet}}{{.Subnet}} {{end}}{{end}}' | tr ' ' '\n' | grep -v : | head -n 1); \
	$(HELM) --kubeconfig $(KIND_KUBECONFIG) upgrade --install $(RELEASE) charts/berth -n $(NAMESPACE) \
	  -f deploy/kind/values-kind.yaml --set image.repository=$(word 1,$(subst :, ,$(IMAGE))) \
	  --set image.tag=$(word 2,$(subst :, ,$(IMAGE))) \
	  --set-json "extender.networkPolicy.schedulerFrom=[{\"ipBlock\":{\"cidr\":\"$$subnet\"}}]" \
	  --wait --timeout 5m
	# Helm installs crds/ on the first install only: keep them current on upgrades too.
	$(KUBECTL) --kubeconfig $(KIND_KUBECONFIG) apply --server-side --force-conflicts -f crds/

kind-down:
	$(KIND) delete cluster --name $(KIND_CLUSTER)
