"""The command line of each control-plane component, every address it listens on set to loopback.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok, with the flags found
necessary on 1.37.2 (each one is said where it matters). Every port is a free one reserved at `up`
(common/ports.py); nothing binds a wildcard address. kwok is given no `--server-address`, so it
serves nothing at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from common.ports import LOOPBACK, free_port
from testenv.cluster.pki import Pki
from testenv.engine import Engine

SERVICE_CIDR = "10.96.0.0/16"
POD_CIDR = "10.244.0.0/16"
KWOK_NODE_SELECTOR = "kwok.x-k8s.io/node=fake"


@dataclass(frozen=True)
class Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int

    @classmethod
    def pick(cls) -> Ports:
        return cls(free_port(), free_port(), free_port(), free_port(), free_port())

    @property
    def server(self) -> str:
        return f"https://{LOOPBACK}:{self.apiserver}"


def etcd(engine: Engine, data: Path, ports: Ports) -> list[str]:
    client = f"http://{LOOPBACK}:{ports.etcd_client}"
    peer = f"http://{LOOPBACK}:{ports.etcd_peer}"
    return [
        str(engine.tool("etcd")),
        "--name=local",
        f"--data-dir={data}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=local={peer}",
        "--listen-metrics-urls=",
        # A throwaway test cluster: no fsync per write (an order of magnitude less I/O wait).
        "--unsafe-no-fsync",
        "--log-level=warn",
    ]


def kube_apiserver(engine: Engine, pki: Pki, ports: Ports) -> list[str]:
    return [
        str(engine.tool("kube-apiserver")),
        f"--etcd-servers=http://{LOOPBACK}:{ports.etcd_client}",
        f"--bind-address={LOOPBACK}",
        f"--secure-port={ports.apiserver}",
        f"--advertise-address={LOOPBACK}",
        # Needed with a loopback advertise address, or it exits: "cannot use public IP 127.0.0.1
        # with endpoint reconciler ... may not be in the loopback range".
        "--endpoint-reconciler-type=none",
        f"--tls-cert-file={pki.serving_cert}",
        f"--tls-private-key-file={pki.serving_key}",
        f"--client-ca-file={pki.ca_cert}",
        "--authorization-mode=Node,RBAC",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={pki.service_account_public}",
        f"--service-account-signing-key-file={pki.service_account_key}",
        "--profiling=false",
    ]


def kube_controller_manager(engine: Engine, pki: Pki, kubeconfig: Path, ports: Ports) -> list[str]:
    return [
        str(engine.tool("kube-controller-manager")),
        f"--kubeconfig={kubeconfig}",
        f"--bind-address={LOOPBACK}",
        f"--secure-port={ports.controller_manager}",
        # Names 1.37 does not know (service-lb-controller, say) make it exit; node IPAM needs a
        # cluster CIDR that kwok's nodes do not use.
        "--controllers=*,-node-ipam-controller",
        "--use-service-account-credentials=false",
        "--leader-elect=false",
        f"--root-ca-file={pki.ca_cert}",
        f"--service-account-private-key-file={pki.service_account_key}",
        "--profiling=false",
    ]


def kube_scheduler(engine: Engine, kubeconfig: Path, ports: Ports) -> list[str]:
    return [
        str(engine.tool("kube-scheduler")),
        f"--kubeconfig={kubeconfig}",
        f"--bind-address={LOOPBACK}",
        f"--secure-port={ports.scheduler}",
        "--leader-elect=false",
        "--profiling=false",
    ]


def kwok(engine: Engine, kubeconfig: Path, stages: Path) -> list[str]:
    return [
        str(engine.tool("kwok")),
        f"--kubeconfig={kubeconfig}",
        f"--manage-nodes-with-annotation-selector={KWOK_NODE_SELECTOR}",
        # A status field of the fake nodes and pods only; nothing listens on it.
        f"--node-ip={LOOPBACK}",
        f"--cidr={POD_CIDR}",
        # The Stages given here replace kwok's defaults (testenv/cluster/objects.py brings them).
        f"--config={stages}",
    ]
