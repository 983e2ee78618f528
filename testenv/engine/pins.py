"""The pins of the real tier's tools, and the cache keys made of them.

Each tool is built from a wrapper module under `engine/` (its `go.mod` holds the same versions:
tests/testenv/test_engine.py checks); a tool's key hashes its pins, its wrapper module's files, the
build recipe and the Go version, so a changed pin rebuilds that tool alone.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from common import REPO_ROOT
from common.input_files import read_bytes

WRAPPERS = REPO_ROOT / "engine"

# Bump when a build step changes in a way the pins and wrapper files do not show (rebuilds every
# tool), or when the assembly of an engine from the built tools changes (cheap: no rebuild).
BUILD_REVISION = "1"
ASSEMBLY_REVISION = "2"

PULUMI_VERSION = "3.274.1"
LANGUAGE_HOST_VERSION = "3.68.0"
PROVIDER_VERSION = "4.25.0"
# The proxy serves the provider module only at the pseudo-version of tag v4.25.0's commit; its
# local replace of sdk/v4 is pinned to the published sdk/v4 release that tag was cut against.
PROVIDER_MODULE = "github.com/pulumi/pulumi-kubernetes/provider/v4"
PROVIDER_MODULE_VERSION = "v4.0.0-20260115033456-f47bc2d6f199"
PROVIDER_SDK_MODULE = "github.com/pulumi/pulumi-kubernetes/sdk/v4"
PROVIDER_SDK_VERSION = "v4.24.0"
KUBERNETES_VERSION = "1.37.2"
ETCD_VERSION = "3.6.16"
KWOK_VERSION = "0.8.0"
# SeaweedFS, the real S3 server of the archive's real-tier test: the proxy serves its module only
# at this pseudo-version (commit 7506e5f91cd6), whose weed/util/version says 4.53.
SEAWEEDFS_VERSION = "4.53"
SEAWEEDFS_MODULE_VERSION = "v0.0.0-20261109003541-7506e5f91cd6"


@dataclass(frozen=True)
class CrdSource:
    """CRD files of one Go module, downloaded (nothing built) into the module cache and installed
    by the real tier's tests that create objects of those kinds."""

    name: str
    """What the CRDs are for, in messages."""
    module: str
    version: str
    files: tuple[str, ...]
    """Paths inside the module."""


MONITORING_CRDS = CrdSource(
    # For the monitoring objects the program creates when `monitoring` is on. The proxy serves the
    # root module at v0.85.0 only (v0.95.x: "not available"; at v0.95.2 it serves
    # `pkg/apis/monitoring` alone, the Go types without the generated YAML); the three kinds are
    # `monitoring.coreos.com/v1` in both.
    "prometheus-operator",
    "github.com/prometheus-operator/prometheus-operator",
    "v0.85.0",
    tuple(
        f"example/prometheus-operator-crd/monitoring.coreos.com_{plural}.yaml"
        for plural in ("podmonitors", "servicemonitors", "prometheusrules")
    ),
)
GATEWAY_API_CRDS = CrdSource(
    # For the HTTPRoute the program creates when `frontendExposure` is httproute: the standard
    # channel's CRDs. v1.6.3 is the newest the proxy serves that this Go builds (v1.7.0 needs a
    # newer Go).
    "Gateway API",
    "sigs.k8s.io/gateway-api",
    "v1.6.3",
    tuple(
        f"config/crd/standard/gateway.networking.k8s.io_{plural}.yaml"
        for plural in ("gatewayclasses", "gateways", "httproutes", "referencegrants")
    ),
)
_ENVOY_POLICY_CRD = "gateway.envoyproxy.io_backendtrafficpolicies.yaml"
ENVOY_GATEWAY_CRDS = CrdSource(
    # For the BackendTrafficPolicy the program creates with `frontendSessionHashing` envoy-gateway:
    # the one CRD of Envoy Gateway's chart it needs (the module is the project's whole repository,
    # 41 MB; nothing of it is built).
    "Envoy Gateway",
    "github.com/envoyproxy/gateway",
    "v1.9.1",
    ("charts/gateway-helm/charts/crds/crds/generated/" + _ENVOY_POLICY_CRD,),
)
CRD_SOURCES = (MONITORING_CRDS, GATEWAY_API_CRDS, ENVOY_GATEWAY_CRDS)
"""Every pinned CRD source: `make pinned-crds` downloads them all."""

_PULUMI_VERSION_VAR = "github.com/pulumi/pulumi/sdk/v3/go/common/version.Version"
_KUBE_VERSION_VARS = (
    f"k8s.io/component-base/version.gitVersion=v{KUBERNETES_VERSION}",
    "k8s.io/component-base/version.gitMajor=1",
    "k8s.io/component-base/version.gitMinor=37",
    "k8s.io/component-base/version.gitTreeState=clean",
)


@dataclass(frozen=True)
class GoTool:
    """One binary built from a wrapper module under engine/."""

    name: str
    version: str
    wrapper: str
    package: str
    version_vars: tuple[str, ...] = ()

    def key(self, go_version: str) -> str:
        files = (WRAPPERS / self.wrapper).iterdir()
        module = sorted(p for p in files if p.is_file() and p.suffix in {".mod", ".sum", ".go"})
        return _digest(
            [BUILD_REVISION, go_version, self.name, self.version, self.package, *self.version_vars],
            module,
        )


TOOLS: tuple[GoTool, ...] = (
    GoTool(
        "pulumi",
        PULUMI_VERSION,
        "pulumi",
        "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi",
        (f"{_PULUMI_VERSION_VAR}=v{PULUMI_VERSION}",),
    ),
    GoTool(
        "pulumi-language-python",
        LANGUAGE_HOST_VERSION,
        "language-python",
        "github.com/pulumi/pulumi/sdk/v3/python/cmd/pulumi-language-python",
        (f"{_PULUMI_VERSION_VAR}=v{LANGUAGE_HOST_VERSION}",),
    ),
    GoTool("etcd", ETCD_VERSION, "etcd", "cosmos3.local/engine/etcd"),
    *(
        GoTool(
            name,
            KUBERNETES_VERSION,
            "kubernetes",
            f"k8s.io/kubernetes/cmd/{name}",
            _KUBE_VERSION_VARS,
        )
        for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
    ),
    GoTool("kwok", KWOK_VERSION, "kwok", "sigs.k8s.io/kwok/cmd/kwok"),
)
"""The engine: what `make lab` and the real tier's `pulumi` and cluster need, assembled in one
folder."""

S3_SERVER = GoTool(
    "weed",
    SEAWEEDFS_VERSION,
    "seaweedfs",
    "github.com/seaweedfs/seaweedfs/weed",
    ("github.com/seaweedfs/seaweedfs/weed/util/version.COMMIT=7506e5f91cd6",),
)
"""SeaweedFS, the archive's real S3 server: the real tier's alone, so built apart from the
engine (`make real` builds it, `make lab` never does; it alone takes 5 to 14 minutes cold)."""
ALL_TOOLS = (*TOOLS, S3_SERVER)

PROVIDER_BINARY = "pulumi-resource-kubernetes"
# The script the language host runs (it ships in the CLI's own SDK module, not as Go code).
LANGUAGE_EXEC = "pulumi-language-python-exec"
# kwok's own Stages that the local cluster uses (a `--config` file replaces kwok's defaults, so the
# cluster must bring these back): from the kwok module itself, copied into the engine.
KWOK_STAGES = (
    "node/fast/node-initialize.yaml",
    "node/heartbeat/node-heartbeat.yaml",
    "pod/fast/pod-ready.yaml",
    "pod/fast/pod-complete.yaml",
    "pod/fast/pod-delete.yaml",
)


def _digest(words: Sequence[str], files: Sequence[Path]) -> str:
    sha = hashlib.sha256()
    for word in words:
        sha.update(word.encode() + b"\0")
    for path in files:
        sha.update(path.name.encode() + b"\0" + read_bytes(path, "engine module file") + b"\0")
    return sha.hexdigest()[:16]


def provider_key(go_version: str) -> str:
    pins = [PROVIDER_MODULE_VERSION, PROVIDER_SDK_VERSION, PROVIDER_VERSION]
    return _digest([BUILD_REVISION, go_version, *pins], [])


def engine_key(go_version: str) -> str:
    keys = [tool.key(go_version) for tool in TOOLS] + [provider_key(go_version)]
    return _digest([ASSEMBLY_REVISION, *keys], [])
