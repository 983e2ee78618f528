"""The tier's copy of a user's kubeconfig (testenv/cluster/existing.py `own_kubeconfig`): the one
context, renamed as the tests name it, its files by absolute paths; refusals that name the way out.
Attaching itself is proven against a real API server (tests/real/test_existing_cluster.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from testenv.cluster import ClusterError, LocalCluster, objects
from testenv.cluster.existing import check_cluster, own_kubeconfig
from testenv.engine import Engine
from testenv.netns import INSIDE_ENV


def users_file(tmp_path: Path, **changes: Any) -> Path:
    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "lab", "cluster": {"server": "https://127.0.0.1:6443",
                                        "certificate-authority": "certs/ca.crt"}},
            {"name": "prod", "cluster": {"server": "https://10.0.0.1"}},
        ],
        "users": [
            {"name": "me", "user": {"client-certificate": "certs/me.crt",
                                    "client-key": "/abs/me.key", "tokenFile": "token"}},
        ],
        "contexts": [
            {"name": "test-plane", "context": {"cluster": "lab", "user": "me", "namespace": "x"}},
            {"name": "prod", "context": {"cluster": "prod", "user": "me"}},
        ],
        "current-context": "prod",
    } | changes  # fmt: skip
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(config))
    return path


def test_the_copy_holds_the_one_context_renamed_with_absolute_paths(tmp_path: Path) -> None:
    name, server, copy = own_kubeconfig(users_file(tmp_path), "test-plane")

    assert (name, server) == ("test-plane", "https://127.0.0.1:6443")
    assert copy["current-context"] == objects.CONTEXT
    assert copy["contexts"] == [
        {"name": objects.CONTEXT, "context": {"cluster": objects.CONTEXT, "user": objects.CONTEXT}}
    ]
    assert copy["clusters"][0]["cluster"] == {
        "server": "https://127.0.0.1:6443",
        "certificate-authority": str(tmp_path / "certs" / "ca.crt"),
    }
    assert copy["users"][0]["user"] == {
        "client-certificate": str(tmp_path / "certs" / "me.crt"),
        "client-key": "/abs/me.key",
        "tokenFile": str(tmp_path / "token"),
    }
    assert "prod" not in yaml.safe_dump(copy), "no other context, cluster or server"


def test_without_a_context_the_current_one_is_taken(tmp_path: Path) -> None:
    name, server, _ = own_kubeconfig(users_file(tmp_path), None)
    assert (name, server) == ("prod", "https://10.0.0.1")


@pytest.mark.parametrize(
    ("changes", "context", "says"),
    [
        ({}, "kind-kind", "has no context 'kind-kind' (it has ['prod', 'test-plane']): name one"),
        ({"current-context": ""}, None, "has no current context (it has ['prod', 'test-plane'])"),
        ({"contexts": []}, None, "(it has none)"),
        ({"clusters": []}, "test-plane", "context 'test-plane' of"),
    ],
)  # fmt: skip
def test_a_context_that_cannot_be_used_is_refused_saying_why(
    tmp_path: Path, changes: dict[str, Any], context: str | None, says: str
) -> None:
    with pytest.raises(ClusterError) as refused:
        own_kubeconfig(users_file(tmp_path, **changes), context)
    assert says in str(refused.value)


def test_a_kubeconfig_that_is_not_a_file_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ClusterError) as refused:
        own_kubeconfig(tmp_path, "test-plane")
    assert str(tmp_path) in str(refused.value)


def test_a_cluster_that_does_not_answer_is_refused_without_the_servers_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Silent(LocalCluster):
        def answers(self) -> bool:
            return False

    monkeypatch.delenv(INSIDE_ENV, raising=False)
    silent = Silent(tmp_path, Engine(tmp_path), "https://user:s3cret@127.0.0.1:1")
    with pytest.raises(ClusterError) as refused:
        check_cluster(silent, "context test-plane of config")
    assert str(refused.value).endswith("does not answer at https://<secret>@127.0.0.1:1")
    assert "s3cret" not in str(refused.value)

    monkeypatch.setenv(INSIDE_ENV, "inside")  # under `make real`
    with pytest.raises(ClusterError) as refused:
        check_cluster(silent, "context test-plane of config")
    assert "`make real` runs the tier where it cannot reach it: run `pytest -m real`" in str(
        refused.value
    )
