"""The real tier: the real `pulumi` CLI, provider and a local control plane (testenv/cluster).

One cluster per session (`local_cluster`): a new one, or with `$COSMOS3_CLUSTER` naming the
folder of a running one (`python -m testenv.cluster up --out DIR`) that one, left running
afterwards. Each test gets its own copy of the project (`pulumi config set` rewrites stack files),
its own file backend and passphrase (`stacks`, testenv/local_stacks.py), and leaves no namespace
behind. The tier never skips: a tool that is not
built fails every test with what to run (`make engine`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import testenv
from common import REPO_ROOT
from testenv import cluster as local
from testenv.engine import Engine, EngineError, cache_home, located
from testenv.local_stacks import LocalStacks
from tests.real.support import (
    MIN_FREE_VOLUMES,
    await_namespaces_gone,
    delete_namespaces,
    stop_engine_processes,
)
from tests.support import NGC_KEY


@pytest.fixture(scope="session")
def engine() -> Engine:
    try:
        return located(cache_home())
    except EngineError as error:
        pytest.fail(f"the real tier needs the engine's tools: {error}")


@pytest.fixture(scope="session")
def local_cluster(
    engine: Engine, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[local.LocalCluster]:
    for venv in (REPO_ROOT / ".venv", REPO_ROOT / "policy" / "venv"):
        if not (venv / "bin" / "python").exists():
            pytest.fail(f"the real tier needs {venv}: run `make venv policy-venv`")
    folder = tmp_path_factory.mktemp("cluster")
    try:
        running, ours = testenv.session_cluster(folder, die_with_parent=True)
    except local.ClusterError as error:
        pytest.fail(str(error))
    yield running
    if ours:
        running.down()


@pytest.fixture
def stacks(
    local_cluster: local.LocalCluster, engine: Engine, tmp_path: Path
) -> Iterator[LocalStacks]:
    if local_cluster.free_volumes() < MIN_FREE_VOLUMES:
        local_cluster.add_volumes(MIN_FREE_VOLUMES)
    created = LocalStacks.create(tmp_path, local_cluster, {"NGC_API_KEY": NGC_KEY})
    await_namespaces_gone(local_cluster)  # the last test's, deleted while this one set up
    yield created
    stop_engine_processes(engine, created)  # a plugin of a CLI the test killed
    delete_namespaces(local_cluster, wait=False)


@pytest.fixture(autouse=True)
def no_namespace_terminating(request: pytest.FixtureRequest) -> None:
    """A test without `stacks` (which awaits them itself, later) starts with the namespaces the
    last test deleted gone too: it may create one of the same name. Only the terminating ones are
    awaited: test_server_validation's stay until its module ends, on purpose."""
    if "stacks" not in request.fixturenames and "local_cluster" in request.fixturenames:
        await_namespaces_gone(request.getfixturevalue("local_cluster"))
