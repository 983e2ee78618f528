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
    python -m testenv.engine path        # where the built engine is
    python -m testenv.engine crds        # the pinned CRD files (pins.CRD_SOURCES), downloaded
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from testenv.engine.go import EngineError, go_version
from testenv.engine.pins import KWOK_STAGES, PROVIDER_BINARY, PULUMI_VERSION, engine_key

__all__ = ["PULUMI_VERSION", "Engine", "EngineError", "cache_home", "located"]


def cache_home(environ: Mapping[str, str] = os.environ) -> Path:
    """Where builds and caches live: outside the work tree, shared by every clone."""
    if explicit := environ.get("COSMOS3_ENGINE_HOME"):
        return Path(explicit)
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cosmos3-engine"


@dataclass(frozen=True)
class Engine:
    """A built engine: where each tool is, and the environment that uses them."""

    root: Path

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def provider(self) -> Path:
        return self.root / "provider" / PROVIDER_BINARY

    @property
    def kwok_stages(self) -> list[Path]:
        return [self.root / "kwok-stages" / Path(stage).name for stage in KWOK_STAGES]

    def tool(self, name: str) -> Path:
        return self.bin / name

    def environment(self) -> dict[str, str]:
        """What a shell or a subprocess needs to use these tools and nothing else."""
        return {
            "PULUMI_HOME": str(self.root / "pulumi-home"),
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            # Each command stats every log of PULUMI_HOME/logs first, 0.3 CPU-seconds at 40,000
            # (500 MB by default): 1 MB keeps the last ~150 commands' logs (docs/engine.md).
            "PULUMI_LOG_ROTATION_MAX_TOTAL_MB": "1",
        }

    def exports(self, environment: Mapping[str, str] | None = None) -> str:
        """Shell lines that put these tools first on PATH and export `environment` (else theirs)."""
        lines = [f'export PATH="{self.bin}:$PATH"']
        chosen = self.environment() if environment is None else environment
        lines += [f"export {name}={value}" for name, value in chosen.items()]
        return "\n".join(lines) + "\n"

    def is_complete(self) -> bool:
        return (self.root / ".complete").is_file()


def located(home: Path, environ: Mapping[str, str] = os.environ) -> Engine:
    """The engine that `build` made for these pins, or an error saying to run `make engine`."""
    engine = Engine(home / f"engine-{engine_key(go_version(environ))}")
    if not engine.is_complete():
        raise EngineError(
            f"engine: the pinned tools are not built in {home} (run `make engine`: about 25 min "
            "cold on 2 cores, seconds warm)"
        )
    return engine
