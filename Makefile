# One-word entry points. `make lab` runs the recipe's A/B on this machine; `make test` is what CI runs;
# `make check` is the fast subset (static checks and every test not marked lab, real or slow);
# `make engine` builds the real tier's tools (docs/engine.md).
#
# Virtualenvs (the groups are declared in pyproject.toml, the locks are made by `make lock`):
#   .venv         requirements.txt          deploy only: what `pulumi up` runs in (Pulumi.yaml)
#   .venv-dev     requirements-dev.lock     deploy + stages + dev: lab, stages, tools, tests, checks
#   .venv-stages  requirements-stages.lock  deploy + stages, for a machine that only runs the test
#                                           stages against a cluster (`make stages-venv`)
# Each is rebuilt from scratch when its lock changes, so it never holds a package its lock dropped.
SHELL := /bin/bash
# The project's Python: 3.11 (pyproject.toml). `python3.11` where there is one, else `python3`;
# `make PYTHON=/path/to/python3.11` for another. Every target that makes a project venv checks it
# first (`lab/setup.sh` checks its own interpreter, $$PYTHON or python3: 3.10 or newer).
PYTHON ?= $(or $(shell command -v python3.11 2>/dev/null),python3)
STACK ?= dev
# pytest workers for `make check` (pytest-xdist): one per core; 0 runs the tests in this process.
PYTEST_WORKERS ?= auto
# `make check`'s time limit per test: its tests are unit tests. On 2 cores (2026-12-06) the slowest
# took 1.7 s in `make check`, 2.1 s with two CPU-bound processes beside it. In a fresh clone beside
# mypy or a Go build, the first property test of each worker had gone past 5 s: it built
# Hypothesis's Unicode tables (1.9 s alone), now built before the tests (tests/conftest.py).
CHECK_TEST_SECONDS ?= 5
# pytest workers of the real tier (`make real`); 0 runs its tests in this process, one by one.
REAL_WORKERS ?= 4
# pytest workers of the `slow` tests in `make test`: one, so that beside the real tier they take
# one process's share of the cores, not one per core (see `test`).
SLOW_WORKERS ?= 1

VENV := .venv
DEV_VENV := .venv-dev
DEV_PY := $(DEV_VENV)/bin/python
STAGES_VENV := .venv-stages
POLICY_VENV := policy/venv

# What `make check` type-checks with mypy --strict, in one run: every module, the tests included
# (tests/real has no __init__.py; mypy still names its modules tests.real.*, as pytest does).
MYPY_PATHS := common components testenv tools policy/rules lab stages __main__.py tests

.PHONY: venv dev-venv stages-venv lock check test lab lab-setup lab-benchmark lab-contention render policy-venv \
	engine s3-server pinned-crds real clean python crd

# Python 3.11, or a failure that says which Python was found and how to point at another.
python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null || { \
		echo "make: this project needs Python 3.11; PYTHON=$(PYTHON) is $$($(PYTHON) --version 2>/dev/null || echo missing)." \
		"Install python3.11, or run make PYTHON=/path/to/python3.11" >&2; exit 2; }

# The DynamoGraphDeployment CRD, NVIDIA's file: --crd-less commands find it through
# $$COSMOS3_DGD_CRD or ../shared/reference/ (testenv/crd.py); missing, this says how to get it,
# in seconds, before anything is built. Standard library only.
crd: python
	@$(PYTHON) -m testenv.crd >/dev/null

# Each venv holds exactly its lock and is built once per lock outside the work tree
# (scripts/venv.sh: $$COSMOS3_VENV_HOME, default ~/.cache/cosmos3-venvs, keyed by the lock's hash
# and the interpreter); the work tree's .venv, .venv-dev, .venv-stages and policy/venv are links to
# it. A fresh clone links what is built (seconds); a changed lock builds a new venv from scratch,
# so none ever holds a package its lock dropped. The dev lock's pip is installed first (faster).
NEW_VENV := PYTHON=$(PYTHON) bash scripts/venv.sh

# The Pulumi program's environment: the deploy lock, and pip at the dev lock's version. `pulumi`
# runs `python -m pip list -v --format json` in it on every preview, update, refresh and destroy
# (the language host looks for the plugins the program needs): pip 26.3 takes 0.24 CPU-seconds
# for it where the interpreter's bundled 23.2.1 takes 0.50 (2026-12-06).
$(VENV)/.installed: requirements.txt requirements-dev.lock | python
	$(NEW_VENV) $(VENV) requirements.txt requirements-dev.lock

venv: $(VENV)/.installed

# Lab, stages, tools and tests.
$(DEV_VENV)/.installed: requirements-dev.lock | python
	$(NEW_VENV) $(DEV_VENV) requirements-dev.lock requirements-dev.lock

dev-venv: $(DEV_VENV)/.installed

# The test stages alone (the pipeline's smoke, perf and report jobs after `pulumi up`).
$(STAGES_VENV)/.installed: requirements-stages.lock | python
	$(NEW_VENV) $(STAGES_VENV) requirements-stages.lock requirements-dev.lock

stages-venv: $(STAGES_VENV)/.installed

# The three locks from pyproject.toml's groups ([tool.pip-tools] holds pip-compile's settings). The
# dev lock is resolved first (its old pins are kept unless UPGRADE=1, or UPGRADE_PACKAGE=name); the
# stages and deploy locks are then held to its versions, so a package has one version in all three.
# The constraint is left out of their `# via` notes (perl). policy/requirements.txt, the policy
# pack's own lock, must keep the versions it shares with these (tests/test_dependencies.py).
LOCK := CUSTOM_COMPILE_COMMAND="make lock" $(DEV_VENV)/bin/pip-compile --quiet
lock: $(DEV_VENV)/.installed
	$(LOCK) $(if $(UPGRADE),--upgrade) $(if $(UPGRADE_PACKAGE),--upgrade-package $(UPGRADE_PACKAGE)) \
		--extra stages --extra dev --output-file requirements-dev.lock pyproject.toml
	$(LOCK) --extra stages --constraint requirements-dev.lock \
		--output-file requirements-stages.lock pyproject.toml
	$(LOCK) --constraint requirements-dev.lock --output-file requirements.txt pyproject.toml
	perl -0pi -e 's/# via\n    #   -c requirements-dev\.lock\n    #   (\S[^\n]*)\n(?!    #   )/# via $$1\n/g; s/\n    #   -c requirements-dev\.lock(?=\n)//g' \
		requirements-stages.lock requirements.txt

# Fast feedback (about a minute on 2 cores, a fresh clone too), no lab and no engine needed: lint,
# format, types, import layers, and every test marked neither `lab` nor `real` nor `slow`
# (tests/conftest.py marks the first two, a test on the S3 server among the `real`; `slow`: a
# whole command line in a subprocess, hundreds of hypothesis examples), each within
# CHECK_TEST_SECONDS. ruff and
# import-linter keep their caches in the work tree (.ruff_cache, .import_linter_cache; both take
# under a second even cold). mypy, one process, runs beside the tests (its output after theirs)
# and keeps its cache in the dev venv (MYPY_CACHE), outside the work tree and keyed as the venv is
# by the dev lock (mypy's version) and the interpreter: every clone and worktree shares it, and
# mypy takes a module's cached result where its content is unchanged, whatever its mtime. Measured
# on 2 cores (2026-12-06): mypy alone took 36 s with no cache and 1 s in a fresh clone with the
# shared one; `make check` in a fresh clone 62-68 s with a cache of its own, 51 s with the
# shared one, and 45-50 s in a warm tree; later that day 51-63 s in a fresh clone and up to 65 s
# in a warm tree, as this machine's speed varied from hour to hour.
MYPY_CACHE := $(DEV_VENV)/mypy-cache
check: $(DEV_VENV)/.installed
	$(DEV_VENV)/bin/ruff check --no-fix .
	$(DEV_VENV)/bin/ruff format --check --diff .
	if [ -f .importlinter ]; then $(DEV_VENV)/bin/lint-imports; fi
	@mkdir -p build
	$(DEV_VENV)/bin/mypy --strict --cache-dir $(MYPY_CACHE) $(MYPY_PATHS) >build/mypy.log 2>&1 & mypy=$$!; \
	$(DEV_PY) -m pytest -m "not lab and not real and not slow" -n $(PYTEST_WORKERS) \
		--timeout=$(CHECK_TEST_SECONDS); tests=$$?; \
	wait $$mypy; mypy=$$?; cat build/mypy.log; [ $$tests -eq 0 ] && [ $$mypy -eq 0 ]

# Everything, each test once: `make check` first (a minute, and the quickest to fail), then three
# tiers at once: the real tier (the engine's tools, one local cluster per worker) and beside it
# the tests that run the lab graph (one at a time: each starts a graph of processes) and the
# `slow` tests. Measured on 2 cores (2026-12-05): the real tier alone took 17 min 29 s and kept
# the cores three quarters busy (most of a real test waits on `pulumi` and the API server); the
# other two need about 3.3 and 3.7 core-minutes. One after the other the whole took 25 min 35 s,
# beside each other 21 min 31 s (docs/engine.md, "Where the real tier's CPU goes"). Every process
# the tiers start stays in make's session (each child leads a process group, never a session:
# stages/incluster/processes.py), so the kernel shares the cores among them process by process.
# With a session each (until 2026-12-06), each cluster component, `pulumi` command and graph
# process weighed as much as all the tests' own processes together (autogroup): a slow test
# took 7 to 14 times as long as alone, and a one-second subprocess missed its 60 s limit in CI.
# No `nice` either: in one session it would hold the lab's graphs and the slow tests behind
# every real-tier process, where their time limits run. Instead the slow tests run on one worker
# (SLOW_WORKERS), so the real tier, the longest of the three, keeps more of the cores: from a
# fresh clone (2026-12-06) two workers took 23 min 36 s (the real tier 22 min 32 s, the slowest
# slow test 76 s of its 120), one 21 min 37 s and 23 min 49 s (20 min 31 s and 22 min 46 s; 44
# and 48 s). Tried: the lab's tests, then the slow tests, one after the other beside the real
# tier, so that the slow tests fill the cores in the real tier's last minutes (alone, its waits
# left a quarter of them idle): the cores stayed busy to the end, yet the whole took 22 min 54 s
# and 43.5 CPU-minutes, against 21 min 19 s and 39.5 for the run before it (2026-12-06; one run
# each, and runs of one commit here differ by minutes: no gain shown). Their output, with their
# ten slowest tests, goes to build/lab-tests.log and build/slow-tests.log and is printed once all
# are done; any tier failing fails the run.
# pytest's exit status 5 (no test collected) is a failure (tests/conftest.py); so is a test past
# its time limit (pytest-timeout: pyproject.toml, and tests/conftest.py for the lab and real
# tiers).
test: check lab-setup
	@mkdir -p build
	$(DEV_PY) -m pytest -m lab --durations=10 >build/lab-tests.log 2>&1 & lab=$$!; \
	$(DEV_PY) -m pytest -m "slow and not lab and not real" -n $(SLOW_WORKERS) \
		--durations=10 >build/slow-tests.log 2>&1 & slow=$$!; \
	$(MAKE) real; real=$$?; \
	wait $$lab; lab=$$?; wait $$slow; slow=$$?; \
	for tier in lab slow; do \
		echo "---- the $$tier tests, run beside the real tier (build/$$tier-tests.log) ----"; \
		cat build/$$tier-tests.log; \
	done; \
	echo "make test: real tier exit status $$real, lab tier $$lab, slow tests $$slow"; \
	[ $$real -eq 0 ] && [ $$lab -eq 0 ] && [ $$slow -eq 0 ]

# The real tier alone: the pinned `pulumi`, provider and control plane (built by `make engine`),
# SeaweedFS (the archive's S3 server), the program's and the policy pack's venvs, the lab (its
# controller runs deployed graphs), then every test marked `real`, in a network namespace of its
# own (testenv/netns.py: only loopback, so nothing it starts is reachable and it can reach nothing
# beyond this machine), the slowest tests listed at the end. It never skips. REAL_WORKERS pytest
# workers share it out test by test (a module whose fixtures span its tests stays on one worker:
# `xdist_group`), each with a local cluster and an S3 server of its own: most of a real test is
# waiting on `pulumi` and the API server, so on 2 cores one worker took 35 min 25 s (195 tests,
# 2026-12-04); shared by file, two 19 min 15 s, three 14 min 1 s, four 12 min 7 s (251 tests,
# 2026-12-05), where the file of day-two tests alone kept one worker busy to the end; test by
# test, 302 tests, four 19 min 16 s and five 19 min 39 s (2026-12-05): the cores are the limit.
real: crd engine s3-server pinned-crds $(VENV)/.installed $(POLICY_VENV)/.installed $(DEV_VENV)/.installed lab-setup
	$(DEV_PY) -m testenv.netns -- $(DEV_PY) -m pytest -m real --durations=15 \
		-n $(REAL_WORKERS) --dist loadgroup

# The engine from the Go module proxy, into a cache outside the work tree keyed by the versions
# ($$COSMOS3_ENGINE_HOME, default ~/.cache/cosmos3-engine): about 25 min cold on 2 cores, seconds
# warm (it says so before it starts). Standard library only, so it runs before any venv exists.
engine: python
	$(PYTHON) -m testenv.engine build

# SeaweedFS, the real tier's S3 server, into the same cache: 5-14 min cold, the real tier's alone.
s3-server: python
	$(PYTHON) -m testenv.engine build weed

# The CRDs of other projects the real tier installs to create the program's optional objects
# (testenv/engine/pins.py CRD_SOURCES: prometheus-operator's for monitoring, the Gateway API's and
# Envoy Gateway's for the frontend's HTTPRoute and its hashing policy): YAML files of their Go
# modules, nothing built; seconds to a minute, into the module cache.
pinned-crds: python
	$(PYTHON) -m testenv.engine crds >/dev/null

# The local lab's own environments (Dynamo 1.6.1 and AIPerf 0.13.0 venvs, tiny model) in .lab/.
lab-setup:
	bash lab/setup.sh

# The A/B on this machine, through the program: a local cluster, `pulumi up` of each
# profile stack, the lab controller running each deployed graph (Dynamo frontend + mock workers),
# smoke + AIPerf on each, the report in build/lab/ (lab/cluster_ab.py). `python -m lab ab --direct`
# runs the graphs without the cluster and the engine.
lab: crd engine $(VENV)/.installed $(DEV_VENV)/.installed lab-setup
	$(DEV_PY) -m lab ab

# Wall time of `make lab` from a fresh copy of the project, and the lab graph's memory.
lab-benchmark: $(DEV_VENV)/.installed
	$(DEV_PY) -m lab.benchmark --fresh-copy

# The A/B's answer on a busy host: two idle runs, then one beside a busy loop per core, compared
# level by level (build/lab/contention/benchmark.md; docs/lab.md). Quiet the host first.
lab-contention: crd engine $(VENV)/.installed $(DEV_VENV)/.installed lab-setup
	$(DEV_PY) -m lab.contention_benchmark

# Offline render of one stack: the exact objects `pulumi up` would create, secrets masked.
render: $(DEV_VENV)/.installed
	$(DEV_PY) -m tools.render --stack $(STACK) --example-site --out build/render/$(STACK)

# The policy pack's own virtualenv, which `pulumi preview --policy-pack policy/analyzer` runs it in.
$(POLICY_VENV)/.installed: policy/requirements.txt | python
	$(NEW_VENV) $(POLICY_VENV) policy/requirements.txt

policy-venv: $(POLICY_VENV)/.installed

clean:
	rm -rf build .pytest_cache .mypy_cache .ruff_cache
