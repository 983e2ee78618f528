"""The test environment: the pinned engine and a local control plane, apart from the product.

envtest's shape (controller-runtime `pkg/envtest`), for this project: the real `pulumi` CLI and
Kubernetes provider, kube-apiserver, etcd, the controller manager, the scheduler and kwok, built
from the Go module proxy (`testenv.engine`), started on loopback (`testenv.cluster`), with
NVIDIA's DGD CRD as an input (`testenv.crd`):

    cluster = testenv.up(folder)          # a new control plane; cluster.kubeconfig, CONTEXT
    cluster.down()                        # stops what `up` started, by PID
    cluster = testenv.attach(folder)      # one that `up` left running (another process's)

The switch: with `$COSMOS3_CLUSTER` naming the folder of a running cluster
(`python -m testenv.cluster up --out DIR`), the real tier attaches to it instead of starting one
and leaves it running (`session_cluster`): a contributor keeps one up across test runs, and can
look into it while a test runs. `python -m tools.validate --kubeconfig FILE --context NAME` judges
the manifests on any cluster instead, a user's own with the Dynamo CRD installed.

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


def session_cluster(
    new_folder: Path, environ: Mapping[str, str] = os.environ, **options: Any
) -> tuple[LocalCluster, bool]:
    """The cluster `$COSMOS3_CLUSTER` names, attached (not ours to stop), else a new one in
    `new_folder` (ours): (the cluster, whether the caller stops it)."""
    if environ.get(ENV_CLUSTER):
        return attach(Path(environ[ENV_CLUSTER])), False
    return up(new_folder, **options), True
