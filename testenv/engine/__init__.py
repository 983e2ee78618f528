"""Build the real tier's tools from the Go module proxy into a cache outside the work tree.

The pinned tools: the `pulumi` CLI, its Python language host, the Kubernetes provider, etcd,
kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok and SeaweedFS's `weed` (the
archive's real S3 server). Each is built with the ordinary `go` client from a wrapper module the
project owns (`engine/<module>/go.mod` and `go.sum`, committed), never from a downloaded binary or
a checkout. The provider is the one exception to the wrapper pattern, because its `main` embeds
files it generates: its module is copied out of the module cache into the build cache, its local
replace dropped, its embed files generated there, and built (docs/engine.md). Nothing of upstream's source is committed.

Every tool is cached under a key made of its pins, its wrapper module's files, the build recipe
and the Go version, so a warm run only hashes files, and a changed pin rebuilds that tool alone.
Stdlib only: `make engine` runs this before any virtualenv exists.

    python -m testenv.engine build       # build what is missing, print where the tools are
    python -m testenv.engine build weed  # only the named tools, into their slots; no engine assembled
    python -m testenv.engine env         # the shell exports of a built engine (PATH, PULUMI_HOME, ...)
"""

from testenv.engine.go import EngineError
from testenv.engine.layout import Engine, cache_home, located
from testenv.engine.pins import (
    KUBERNETES_VERSION,
    PROVIDER_VERSION,
    PULUMI_VERSION,
)

__all__ = [
    "KUBERNETES_VERSION",
    "PROVIDER_VERSION",
    "PULUMI_VERSION",
    "Engine",
    "EngineError",
    "cache_home",
    "located",
]
