# One-word entry points. `make lab` is the main job on this machine; `make test` is what CI runs.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STACK ?= dev

.PHONY: venv lab lab-setup lab-benchmark test render policy-venv clean

# The Pulumi program's environment: every package pinned in requirements.txt.
$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

venv: $(VENV)/.installed

# The local lab's own environments (Dynamo 1.6.1 and AIPerf 0.13.0 venvs, tiny model) in .lab/.
lab-setup:
	bash lab/setup.sh

# The main job: the lab graph for both profiles, smoke + AIPerf on each, the A/B report in build/lab/.
lab: venv lab-setup
	$(PY) -m lab ab

# Wall time of `make lab` from a fresh copy of the project, and the lab graph's memory.
lab-benchmark: venv
	$(PY) -m lab.benchmark --fresh-copy

# The whole suite, lab integration tests included (they need lab-setup).
test: venv lab-setup
	bash scripts/test.sh

# Offline render of one stack: the exact objects `pulumi up` would create, secrets masked.
render: venv
	$(PY) -m tools.render --stack $(STACK) --example-site --out build/render/$(STACK)

# The policy pack's own virtualenv, which `pulumi preview --policy-pack policy` runs it in.
policy-venv:
	$(PYTHON) -m venv policy/venv
	policy/venv/bin/pip install --quiet --disable-pip-version-check -r policy/requirements.txt

clean:
	rm -rf build .pytest_cache .mypy_cache .ruff_cache
