"""Shared fixtures: the real Pulumi program run in-process under mocks (see tools/offline.py), and
the real local lab graph. Tests marked `lab` (marker declared in pyproject.toml) start Dynamo
processes from `.lab/`; they skip, saying why, when `bash lab/setup.sh` has not run. Tests marked
`real` (tests/real/, and every test on the S3 server of tests/s3.py) run the real engine's
tools, and never skip. Tests marked `slow` (each where it is) are left out of `make check` and run
by `make test`. The generated cases are the same on every run (Hypothesis's `ci` profile, below)."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pulumi
import pytest
from hypothesis import settings
from hypothesis import strategies as st

from components.routing import RECIPE_AFFINITY_TTL_SECONDS, RoutingProfile, routing_for
from lab.environment import LabInstall
from lab.graph import GraphSpec, LabGraph
from tests.support import NGC_KEY, quiet_about_aborted_programs
from tools.offline import ProgramRun, run_program, shared_layer_outputs
from tools.stack_files import example_site_for, owns_layer

pytest_plugins = ["tests.s3"]

# The generated cases are the same on every run (Hypothesis's own `ci` profile: derandomized, no
# example database, a failure's reproduction blob printed), so a change fails CI only for what it
# changed, never for a case a new draw happened to find. `--hypothesis-profile=explore` draws new
# cases and keeps the failing ones in .hypothesis/ (docs/contributing.md, "Generated cases").
settings.register_profile("explore", print_blob=True)
settings.load_profile("ci")

# A tier `make test` starts beside another (`command &`, in a shell without job control) begins
# with SIGINT ignored, and so would every process its tests start: a test that stops one with
# SIGINT (Ctrl-C) would see it ignored. Ctrl-C stops the tier and what its tests start again.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def fresh_pulumi_runtime() -> Iterator[None]:
    """A new event loop per test and no Pulumi runtime state carried from one test to the next."""
    loop = asyncio.new_event_loop()
    loop.set_exception_handler(quiet_about_aborted_programs)
    asyncio.set_event_loop(loop)
    yield
    pulumi.runtime.reset_options()
    loop.close()
    asyncio.set_event_loop(None)


@pytest.fixture
def run_stack() -> Callable[..., ProgramRun]:
    """Run a shipped stack as a user would after the Quick start's `pulumi config set` lines."""

    def run(stack: str, overrides: dict[str, Any] | None = None, **kwargs: Any) -> ProgramRun:
        kwargs.setdefault("secrets", {"ngcApiKey": NGC_KEY} if owns_layer(stack) else {})
        kwargs.setdefault("stack_outputs", shared_layer_outputs())
        return run_program(stack, example_site_for(stack) | (overrides or {}), **kwargs)

    return run


@pytest.fixture
def lab_install() -> LabInstall:
    install = LabInstall()
    missing = install.missing()
    if missing:
        pytest.skip("lab not installed (run bash lab/setup.sh): missing " + ", ".join(missing))
    return install


@pytest.fixture
def start_graph(lab_install: LabInstall, tmp_path: Path) -> Iterator[Callable[..., LabGraph]]:
    """Start lab graphs inside a test; every graph is stopped when the test ends, pass or fail."""
    graphs: list[LabGraph] = []

    def start(profile: RoutingProfile, workers: int = 2, **spec_fields: Any) -> LabGraph:
        routing = routing_for(profile, RECIPE_AFFINITY_TTL_SECONDS)
        spec = GraphSpec(routing=routing, workers=workers, install=lab_install, **spec_fields)
        graph = LabGraph(spec, tmp_path / f"graph-{len(graphs)}-{profile.value}")
        graphs.append(graph)
        return graph.__enter__()

    yield start
    for graph in graphs:
        graph.stop()


REAL_TIER = Path(__file__).resolve().parent / "real"
TIER_TIMEOUTS = {"lab": 1200, "real": 1800}
"""pytest-timeout's limit per test of a tier, in seconds, where pyproject.toml's default (120 s,
the unit tiers) is too short: a lab test runs whole A/Bs (up to about 10 min on a busy host,
docs/lab.md), a real test `pulumi up`s and destroys stacks against a local cluster (minutes,
docs/engine.md). A test's own `@pytest.mark.timeout` still wins."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that needs the lab is marked `lab`, every test of tests/real/ or on the S3
    server `real`, so `make check` (`-m "not lab and not real and not slow"`) runs neither and
    `make test` runs each tier once; a lab or real test gets its tier's time limit. First, before `-m` deselects."""
    for item in items:
        if "lab_install" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.lab)
        if REAL_TIER in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.real)
        if "seaweed" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.real)  # the S3 server (tests/s3.py), `make s3-server`
        tier = next((name for name in TIER_TIMEOUTS if item.get_closest_marker(name)), None)
        if tier and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(TIER_TIMEOUTS[tier]))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Hypothesis builds its tables of Unicode (the categories, and what UTF-8 encodes) the first
    time a strategy of text is checked, and keeps them in .hypothesis/unicode_data/: 1.9 s in a
    fresh clone, more than 5 s beside mypy, which the first property test of each worker paid
    inside `make check`'s time limit (CI failed on it). Built here, before any test's clock."""
    if any(hasattr(getattr(item, "obj", None), "hypothesis") for item in session.items):
        st.text().validate()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """pytest's exit status 5 (no test collected, or all deselected) fails the run with 1: a
    `make check` or `make test` that tests nothing must not pass (tests/test_dependencies.py)."""
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        import sys

        print("no test ran: exit status 5 becomes 1 (tests/conftest.py)", file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
