"""A fake `ClusterApi` and clock for the cluster stages' tests: no cluster, no client.

The fake keeps objects by (kind, name), lets a deleted object linger for a few checks (as a
foreground deletion does while its pods go), and plays a scripted Job life: every `read_job`
moves to the next `Frame` (staying on the last), and `pods`/`pod_log` answer from that frame.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

from common import REPO_ROOT
from components.contract import StackOutputs
from components.routing import RoutingProfile
from stages.cluster.api import Condition, JobState, Manifest, PodState
from stages.errors import ClusterUnreachable


def cluster_outputs(profile: RoutingProfile) -> StackOutputs:
    """The outputs the real program exports for a shipped profile stack (golden manifests)."""
    return StackOutputs.load(REPO_ROOT / "manifests" / profile.value / "outputs.json")


@dataclass(frozen=True)
class Frame:
    """What the cluster shows at one poll."""

    pod: PodState | None = None
    log: str = ""
    complete: bool = False
    failed: Condition | None = None


def pending(reason: str = "ContainerCreating", message: str = "") -> Frame:
    return Frame(PodState("pod-1", "Pending", 1.0, waiting_reason=reason, waiting_message=message))


def running(log: str) -> Frame:
    return Frame(PodState("pod-1", "Running", 1.0, ready=True), log)


def succeeded(log: str) -> Frame:
    return Frame(PodState("pod-1", "Succeeded", 1.0, exit_code=0), log, complete=True)


def failed(log: str, exit_code: int = 1, reason: str = "BackoffLimitExceeded") -> Frame:
    condition = Condition("Failed", "True", reason, "Job has reached the specified backoff limit")
    return Frame(PodState("pod-1", "Failed", 1.0, exit_code=exit_code), log, failed=condition)


@dataclass
class FakeClock:
    now: float = 1000.0
    slept: list[float] = field(default_factory=list)

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


class FakeCluster:
    """`ClusterApi` in memory; `calls` records every create and delete in order."""

    def __init__(
        self,
        frames: list[Frame],
        namespace: str = "cosmos3-nano-reasoner",
        existing: tuple[tuple[str, str], ...] = (),
        linger: int = 2,
        workers: list[PodState] | ClusterUnreachable = [],  # noqa: B006 (never changed)
    ) -> None:
        self.namespace = namespace
        self.workers = workers
        """The graph's worker pods (a listing with `...component-type=worker`), or its refusal."""
        self.frames = frames
        self.objects: dict[tuple[str, str], Manifest] = {key: {} for key in existing}
        self.deleting: dict[tuple[str, str], int] = {}
        self.linger = linger
        self.calls: list[tuple[str, str, str]] = []
        self.selectors: list[str] = []
        self.tick = -1

    @property
    def frame(self) -> Frame:
        return self.frames[min(max(self.tick, 0), len(self.frames) - 1)]

    def created(self, kind: str) -> Manifest:
        return next(m for (k, _), m in self.objects.items() if k == kind)

    def create(self, manifest: Manifest) -> None:
        key = (manifest["kind"], manifest["metadata"]["name"])
        if key in self.objects:
            raise ClusterUnreachable(f"create {key}: HTTP 409 Conflict (it exists)")
        self.calls.append(("create", *key))
        self.objects[key] = manifest

    def delete(self, kind: str, name: str) -> None:
        self.calls.append(("delete", kind, name))
        if (kind, name) in self.objects:
            self.deleting.setdefault((kind, name), self.linger)

    def exists(self, kind: str, name: str) -> bool:
        key = (kind, name)
        if key in self.deleting:
            if self.deleting[key] == 0:
                del self.deleting[key], self.objects[key]
                return False
            self.deleting[key] -= 1
        return key in self.objects

    def read_job(self, name: str) -> JobState | None:
        if ("Job", name) not in self.objects or ("Job", name) in self.deleting:
            return None
        self.tick += 1
        frame = self.frame
        conditions = [Condition("Complete", "True")] if frame.complete else []
        conditions += [frame.failed] if frame.failed else []
        return JobState(uid="uid-1", active=0 if conditions else 1, conditions=tuple(conditions))

    def pods(self, label_selector: str) -> list[PodState]:
        if label_selector.endswith("dynamo-component-type=worker"):
            if isinstance(self.workers, ClusterUnreachable):
                raise self.workers
            return self.workers
        self.selectors.append(label_selector)
        return [self.frame.pod] if self.frame.pod else []

    def pod_log(self, name: str) -> str:
        return self.frame.log


def pod_files(config_map: Manifest) -> dict[str, bytes]:
    """The files the pod sees under /config, by relative path (as the volume's items lay out)."""
    contents = {key: value.encode() for key, value in config_map.get("data", {}).items()}
    for key, value in config_map.get("binaryData", {}).items():
        contents[key] = base64.b64decode(value)
    return {_mount_path(key): data for key, data in contents.items()}


def _mount_path(key: str) -> str:
    return f"stages/incluster/{key}" if key.endswith(".py") else key
