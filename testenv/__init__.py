"""The test environment: the pinned engine and a local control plane, apart from the product.

envtest's shape (controller-runtime `pkg/envtest`), for this project: the real `pulumi` CLI and
Kubernetes provider, kube-apiserver, etcd, the controller manager, the scheduler and kwok, built
from the Go module proxy (`testenv.engine`), started on loopback (`testenv.cluster`), with
NVIDIA's DGD CRD as an input (`testenv.crd`):

    cluster = testenv.up(folder)          # a new control plane; cluster.kubeconfig, CONTEXT
    cluster.down()                        # stops what `up` started, by PID
    cluster = testenv.attach(folder)      # one that `up` left running (another process's)
    cluster = testenv.attach_existing(kubeconfig, context, folder)   # one this project did not
                                          # start; its `down` removes only what the tier added

The switch (`session_cluster`): with `$COSMOS3_CLUSTER` naming the folder of a running cluster
(`python -m testenv.cluster up --out DIR`), the real tier attaches to it instead of starting one
and leaves it running: a contributor keeps one up across test runs, and can look into it while a
test runs. With `$COSMOS3_CLUSTER` naming a kubeconfig file instead (and `$COSMOS3_CLUSTER_CONTEXT`
a context in it, else its current one), the tier runs on that cluster once it has checked that
it can without harm (testenv/cluster/existing.py: a control plane with the DGD CRD and no nodes
of its own). `python -m tools.validate --kubeconfig FILE --context NAME` judges the manifests on
any cluster, a user's kind, k3s or GPU cluster with the Dynamo CRD installed.

The product (`components`, `stages`, `policy`) never imports this package; it imports only
`common` (the import contracts, .importlinter). Imports here are lazy, so `python3 -m testenv.crd`
runs before any virtualenv exists.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common.interrupts import end_interrupts_quietly

if TYPE_CHECKING:
    from testenv.cluster import LocalCluster

ENV_CLUSTER = "COSMOS3_CLUSTER"
ENV_CONTEXT = "COSMOS3_CLUSTER_CONTEXT"

end_interrupts_quietly()  # a Ctrl-C while `python -m testenv...` imports: one line, status 130


def up(folder: Path, crd: Path | None = None, **options: Any) -> LocalCluster:
    """A new local control plane in `folder` (see `testenv.cluster.up` for `options`)."""
    from testenv import cluster
    from testenv.engine import cache_home, located

    return cluster.up(folder, located(cache_home()), crd=crd, **options)


def attach(folder: Path) -> LocalCluster:
    """The running cluster `up` left in `folder`; refused, saying so, when it does not answer."""
    from testenv import cluster
    from testenv.engine import cache_home, located

    attached = cluster.attach(folder, located(cache_home()))
    if not attached.answers():
        raise cluster.ClusterError(
            f"the cluster of {folder} does not answer: start one there first "
            f"(`python -m testenv.cluster up --out {folder}`), or unset {ENV_CLUSTER}"
        )
    return attached


def attach_existing(
    kubeconfig: Path,
    context: str | None,
    folder: Path,
    die_with_parent: bool = False,
    graph_stage: bool = True,
) -> LocalCluster:
    """The cluster of `context` in `kubeconfig` (None: its current one), checked, with the tier's
    kwok and GPU nodes added and its working files in `folder` (testenv/cluster/existing.py)."""
    from testenv.cluster import existing
    from testenv.engine import cache_home, located

    engine = located(cache_home())
    return existing.attach_existing(
        kubeconfig, context, folder, engine, die_with_parent, graph_stage
    )


def named_kubeconfig(environ: Mapping[str, str] = os.environ) -> tuple[Path, str | None] | None:
    """The kubeconfig `$COSMOS3_CLUSTER` names and the context `$COSMOS3_CLUSTER_CONTEXT` names
    (None: its current one); None when the switch names no file (a folder, or nothing)."""
    named = Path(environ.get(ENV_CLUSTER) or "")
    if named == Path() or not named.is_file():
        return None
    return named, environ.get(ENV_CONTEXT) or None


def session_cluster(
    new_folder: Path, environ: Mapping[str, str] = os.environ, **options: Any
) -> tuple[LocalCluster, bool]:
    """(the cluster, whether the caller calls its `down`): the cluster of the kubeconfig
    `$COSMOS3_CLUSTER` names, attached in `new_folder` (`down` takes away what the tier added);
    the folder it names, attached and left running; else a new one in `new_folder`."""
    if existing := named_kubeconfig(environ):
        die_with_parent = bool(options.get("die_with_parent"))
        return attach_existing(*existing, new_folder, die_with_parent), True
    if environ.get(ENV_CLUSTER):
        return attach(Path(environ[ENV_CLUSTER])), False
    return up(new_folder, **options), True
