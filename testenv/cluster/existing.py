"""A cluster that was already running, attached by kubeconfig and context: envtest's
`USE_EXISTING_CLUSTER`, for an API server this project did not start.

`attach_existing` checks, before it writes anything there, that the cluster can take the real
tier without harm; each refusal is a `ClusterError` that names what is wrong and what to do:

- it answers through the context (given, else the kubeconfig's current context);
- the DGD CRD is established: its owner installs it (`testenv.crd` says how to get it); the tier
  never installs, replaces or removes it there;
- it has no node the tier did not make: the tier's pods must land on kwok's GPU nodes, where
  nothing runs, never on a kubelet that would pull and run their images (so a kind or k3s
  cluster, whose nodes are real, is refused: judge manifests there with `python -m
  tools.validate --kubeconfig FILE --context NAME`);
- it holds no DynamoGraphDeployment: kwok's Stage would write the status of every graph;
- the names the tier makes are free: none of its nodes is there yet (another run is attached, or
  a killed one left them), and no `local-rwx` class but its own.

Then it adds what `up` adds after the control plane (`add_gpu_nodes`): the tier's own kwok, a
process here, and the GPU nodes, class and volumes, each labelled `objects.MADE_BY`. The tests
delete only namespaces made after the attach (`kept_namespaces`). `down` deletes every namespace
made since the attach (the tests', and any other made meanwhile: make none there while the tier
runs) and what carries the label, and stops that kwok. The user's kubeconfig is read, never
written: the tier works through a copy of the one context in its own folder (mode 0600, the
context renamed `cosmos3-local`, as the tests name it), which `down` removes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from common.confined_paths import remove_tree_inside, write_inside
from common.credentials import mask
from common.input_files import MAX_KUBECONFIG_BYTES, InputFileError
from common.yaml_input import read_yaml_file
from testenv.cluster import MADE_BY_SELECTOR, LocalCluster, add_gpu_nodes, established, objects
from testenv.cluster.folder import ClusterError, claim_folder
from testenv.crd import CRD_NAME, HOW_TO_GET
from testenv.engine import Engine
from testenv.netns import INSIDE_ENV

_PATH_FIELDS = {
    "cluster": ("certificate-authority",),
    "user": ("client-certificate", "client-key", "tokenFile"),
}
"""The fields kubectl reads as files, relative to the kubeconfig's folder (client-go's
`ResolvePaths`): the copy makes them absolute."""


def attach_existing(
    kubeconfig: Path,
    context: str | None,
    folder: Path,
    engine: Engine,
    die_with_parent: bool,
    graph_stage: bool = True,
) -> LocalCluster:
    """The cluster of `context` in `kubeconfig` (None: its current context), checked and given
    the tier's kwok and GPU nodes (see the module docstring), its working files in `folder`;
    `graph_stage` False leaves the graphs' status to another controller (the lab's)."""
    folder = folder.resolve()
    claim_folder(folder)
    name, server, config = own_kubeconfig(kubeconfig, context)
    write_inside(folder, "kubeconfig", yaml.safe_dump(config), mode=0o600)
    cluster = ExistingCluster(folder, engine, server)
    try:
        check_cluster(cluster, f"context {name} of {kubeconfig}")
    except BaseException:
        remove_tree_inside(folder, "kubeconfig")  # nothing was made there
        raise
    cluster.kept_namespaces = frozenset(_names(cluster, "namespaces"))
    try:
        add_gpu_nodes(cluster, die_with_parent, graph_stage)
    except BaseException:
        cluster.down()
        raise
    return cluster


class ExistingCluster(LocalCluster):
    """A cluster the tier attached to: its `down` takes away what the tier added, nothing else."""

    STATE_PARTS = ("cluster.json", "kubeconfig", "kube-cache")
    """The kubeconfig here is the tier's copy of the user's credentials."""

    def down(self) -> list[str]:
        """The namespaces made since the attach (while kwok runs, which lets their pods go), the
        nodes, volumes and classes the tier labelled, its kwok, its copy of the kubeconfig;
        returns what needed SIGKILL."""
        try:
            made = [name for name in _names(self, "namespaces") if name not in self.kept_namespaces]
            if made:
                self.kubectl("delete", "namespaces", "--timeout=90s", *made)
            made_kinds = "nodes,persistentvolumes,storageclasses"
            self.kubectl("delete", made_kinds, "-l", MADE_BY_SELECTOR, "--wait=false")
        finally:
            killed = super().down()
        return killed


def own_kubeconfig(kubeconfig: Path, context: str | None) -> tuple[str, str, dict[str, Any]]:
    """(the context's name, its server, a kubeconfig of that context alone, as `objects.CONTEXT`)
    from the user's file; a context that is not there is refused naming the ones that are."""
    try:
        documents = read_yaml_file(kubeconfig, "kubeconfig", MAX_KUBECONFIG_BYTES)
    except InputFileError as error:
        raise ClusterError(str(error)) from None
    config = documents[0] if len(documents) == 1 and isinstance(documents[0], dict) else {}
    name = context or config.get("current-context")
    contexts = _by_name(config, "contexts")
    if not name or name not in contexts:
        wanted = f"no context {name!r}" if name else "no current context"
        raise ClusterError(
            f"{kubeconfig} has {wanted} (it has {sorted(contexts) or 'none'}): name one with "
            "$COSMOS3_CLUSTER_CONTEXT"
        )
    chosen = contexts[name].get("context") or {}
    parts = {
        kind: _resolved(_by_name(config, f"{kind}s").get(str(chosen.get(kind))), kind, kubeconfig)
        for kind in ("cluster", "user")
    }
    server = str(parts["cluster"].get("server") or "")
    if not server:
        raise ClusterError(f"context {name!r} of {kubeconfig} names no cluster with a server")
    return name, server, objects.kubeconfig(parts["cluster"], parts["user"])


def _by_name(config: Mapping[str, Any], key: str) -> dict[str, dict[str, Any]]:
    entries = config.get(key) or []
    return {
        str(entry.get("name")): entry
        for entry in entries
        if isinstance(entry, dict) and isinstance(entry.get("name"), str)
    }


def _resolved(entry: Mapping[str, Any] | None, kind: str, kubeconfig: Path) -> dict[str, Any]:
    """The `cluster` or `user` of a named entry, its file paths absolute."""
    body = dict((entry or {}).get(kind) or {})
    for field in _PATH_FIELDS[kind]:
        if isinstance(body.get(field), str) and body[field]:
            body[field] = str((kubeconfig.parent / body[field]).resolve())
    return body


def check_cluster(cluster: LocalCluster, where: str) -> None:
    """Refuses (`ClusterError`) a cluster the tier cannot use without harm (the module docstring)."""
    if not cluster.answers():
        hint = ""
        if os.environ.get(INSIDE_ENV) == "inside":  # `make real`'s namespace: its own loopback only
            hint = "; `make real` runs the tier where it cannot reach it: run `pytest -m real`"
        raise ClusterError(
            f"the cluster of {where} does not answer at {mask(cluster.server)}{hint}"
        )
    if not established(cluster):
        raise ClusterError(
            f"the cluster of {where} has no {CRD_NAME} CRD established: the real tier needs it "
            f"and never installs it on a cluster it did not start; {HOW_TO_GET}, then "
            "`kubectl apply --server-side -f dgd-crd.yaml` there"
        )
    left = _names(cluster, "nodes", "-l", MADE_BY_SELECTOR)
    if left:
        raise ClusterError(
            f"the cluster of {where} has the tier's GPU nodes already ({', '.join(left)}): another "
            "run of the real tier is attached to it (run one at a time, without pytest's -n), or "
            "one was killed before it could leave; delete what it left with `kubectl delete "
            f"nodes,persistentvolumes,storageclasses -l {MADE_BY_SELECTOR}`"
        )
    selector = ",".join(f"{key}!={value}" for key, value in objects.MADE_BY.items())
    foreign = _names(cluster, "nodes", "-l", selector)
    if foreign:
        raise ClusterError(
            f"the cluster of {where} has nodes the real tier did not make ({', '.join(foreign)}): "
            "its pods would run there for real. Attach to a control plane without nodes (the "
            "tier brings kwok's); judge manifests on this one with `python -m tools.validate "
            "--kubeconfig FILE --context NAME`"
        )
    classes = _names(cluster, "storageclasses", "-l", selector)
    if objects.RWX_CLASS in classes:
        raise ClusterError(
            f"the cluster of {where} has a StorageClass {objects.RWX_CLASS} the real tier did not "
            "make: the tier makes its own of that name; attach to a cluster without one"
        )
    graphs = _names(cluster, "dynamographdeployments", "-A")
    if graphs:
        raise ClusterError(
            f"the cluster of {where} holds DynamoGraphDeployments ({', '.join(graphs[:3])}): the "
            "tier's kwok would write their status; attach to one without any"
        )


def _names(cluster: LocalCluster, kind: str, *selection: str) -> list[str]:
    path = "jsonpath={range .items[*]}{.metadata.name}{'\\n'}{end}"
    return cluster.kubectl("get", kind, *selection, "-o", path).split()
