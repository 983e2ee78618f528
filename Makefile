# One-word entry points. `make lab` is the main job on this machine; `make test` is what CI runs.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STACK ?= dev

.PHONY: venv test render policy-venv clean

# The Pulumi program's environment: every package pinned in requirements.txt.
$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

venv: $(VENV)/.installed

test: venv
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
