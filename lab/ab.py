"""`python -m lab ab`: the A/B orchestrator (`stages.ab`) with the lab as its target.

One target, `LabAbTarget`, whose graphs come from a graph source: deployed with `pulumi up` on a
local cluster and run by the lab controller (`lab.cluster_ab.ClusterGraphs`, the default), or
started directly from the routing settings (`DirectGraphs`, `--direct`). Each profile gets a
fresh graph (Dynamo frontends and N mock workers on loopback), the same smoke and perf programs a
cluster's Jobs run, its results archived in a local directory archive, and the graph stopped;
then the report of both, all under `build/lab/` (docs/lab.md lists its files). A second
`python -m lab ab --run-id <id>` after a failure runs only what the archive lacks.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, Self

from common.confined_paths import write_file
from common.credentials import mask_values
from components.contract import StackOutputs
from components.routing import RECIPE_AFFINITY_TTL_SECONDS, RoutingProfile, routing_for
from lab.environment import LabInstall
from lab.graph import GraphSpec, LabGraph
from lab.mocker_timing import REAL_SPEED
from lab.stage_tools import lab_tools
from lab.time_scale import REAL_TIME, chosen_conditions
from stages.ab.orchestrator import AbResult
from stages.ab.plan import AbRun
from stages.ab.target import Say
from stages.archive import ArchiveLocation
from stages.core.results import ProfileResults, RunConditions
from stages.targets import LocalTarget, StageTarget

DEFAULT_OUT = Path("build/lab")
ARCHIVE_BUCKET = "lab"
MEMORY_SAMPLE_SECONDS = 0.5


def lab_archive(out: Path) -> ArchiveLocation:
    """The lab's archive: a local directory, with the S3 archive's layout and guarantees."""
    return ArchiveLocation(
        bucket=ARCHIVE_BUCKET, endpoint_url=f"file://{(out / 'archive').resolve()}"
    )


class PeakMemory:
    """Samples the lab graph's resident memory in a background thread; keeps the peak."""

    def __init__(self, graph: LabGraph) -> None:
        self.graph = graph
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="lab-memory", daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak_bytes = max(self.peak_bytes, self.graph.rss_bytes())
            self._stop.wait(MEMORY_SAMPLE_SECONDS)


class GraphSource(Protocol):
    """Where a lab A/B's graphs come from: `DirectGraphs`, or `lab.cluster_ab.ClusterGraphs`.
    `prepare` chooses the time scale (`LabAbTarget.choose_conditions`); `start` returns a
    profile's outputs and the graph serving them; `reached`, the outputs a local stage uses;
    `stop` gets None for a graph that never came up."""

    name: str

    def stack(self, profile: RoutingProfile) -> str: ...
    def prepare(self, target: LabAbTarget, say: Say) -> None: ...
    def start(
        self, target: LabAbTarget, profile: RoutingProfile, say: Say
    ) -> tuple[StackOutputs, LabGraph]: ...
    def reached(self, outputs: StackOutputs) -> StackOutputs: ...
    def stop(self, profile: RoutingProfile, graph: LabGraph | None, say: Say) -> None: ...
    def close(self) -> None: ...


@dataclass(frozen=True)
class DirectGraphs:
    """Each graph started from the routing settings (no cluster, no engine), with `frontends`
    frontends behind the lab's pass-through (`lab.graph.GraphSpec.frontend_hashing`)."""

    frontends: int = 1
    frontend_hashing: bool = True
    name = "lab"

    def stack(self, profile: RoutingProfile) -> str:
        return f"lab-{profile.value}"

    def prepare(self, target: LabAbTarget, say: Say) -> None:
        target.choose_conditions(say)

    def start(
        self, target: LabAbTarget, profile: RoutingProfile, say: Say
    ) -> tuple[StackOutputs, LabGraph]:
        scale = target.conditions.time_scale
        spec = GraphSpec(
            routing=routing_for(profile, round(RECIPE_AFFINITY_TTL_SECONDS * scale)),
            workers=target.workers,
            install=target.install,
            mocker_args=REAL_SPEED.mocker_args(scale) + target.mocker_args.get(profile, ()),
            frontends=self.frontends,
            frontend_hashing=self.frontend_hashing,
        )
        say(f"{profile.value}: starting a lab graph with {target.workers} mock workers")
        if self.frontends > 1:
            how = "by the session header's hash" if self.frontend_hashing else "at random"
            say(f"{profile.value}: {self.frontends} frontends, each connection to one {how}")
        graph = LabGraph(spec, target.out / "runs" / profile.value).__enter__()
        return graph.outputs, graph

    def reached(self, outputs: StackOutputs) -> StackOutputs:
        return outputs

    def stop(self, profile: RoutingProfile, graph: LabGraph | None, say: Say) -> None:
        if graph is not None:
            graph.stop()

    def close(self) -> None:
        pass


@dataclass
class LabAbTarget:
    """The lab as an A/B target: a graph per profile on this machine, no GPUs to count; a
    context manager: on exit what its source runs is stopped."""

    out: Path
    workers: int
    install: LabInstall = field(default_factory=LabInstall)
    time_scale: float | None = None
    """How much slower than real time both graphs run; None: chosen by the host probe when the
    run starts (`lab.time_scale`)."""
    time_scale_by: str = "--time-scale"
    """Where a given `time_scale` came from, for `results.json`'s `conditions.chosen_by`."""
    mocker_args: dict[RoutingProfile, tuple[str, ...]] = field(default_factory=dict)
    """Extra `dynamo.mocker` arguments per profile, direct graphs only (tests break one graph)."""
    source: GraphSource = field(default_factory=DirectGraphs)
    conditions: RunConditions = REAL_TIME
    running: dict[RoutingProfile, tuple[LabGraph, PeakMemory, float]] = field(default_factory=dict)
    timings: dict[str, dict[str, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Absolute: the stacks' file backend is a URL that `pulumi` resolves in the project copy.
        self.out = self.out.resolve()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """The memory samplers, then what the source runs (the controller's graphs, the
        cluster); safe to call twice."""
        try:
            for _, memory, _ in self.running.values():
                memory.__exit__()
            self.running.clear()
        finally:
            self.source.close()

    @property
    def name(self) -> str:
        return self.source.name

    def stage_target(self, outputs: StackOutputs) -> StageTarget:
        """The stages as local processes against the graph's frontend, with the lab's tools (at
        the time scale `prepare` chose) and the /metrics pages of the profile's running workers."""
        running = self.running.get(outputs.profile)
        pages = tuple(running[0].worker_metrics_urls) if running else ()
        tools = lab_tools(self.install, self.conditions)
        local = dataclasses.replace(tools, worker_metrics_pages=pages)
        return LocalTarget(self.source.reached(outputs), local)

    def stack(self, profile: RoutingProfile) -> str:
        return self.source.stack(profile)

    def available_gpus(self, say: Say) -> int | None:
        return None  # one graph at a time: the lab's graphs share this machine's cores

    def graph_gpus(self, profile: RoutingProfile, say: Say) -> int:
        return 0

    def prepare(self, say: Say) -> None:
        """The lab installed, then the source's preparations and the one time scale both
        profiles run at (so both pay the same overheads)."""
        self.install.require()
        self.source.prepare(self, say)

    def continue_from(self, archived: ProfileResults, say: Say) -> None:
        """The archived profile's time scale, unless --time-scale gives one: the two profiles'
        graphs ran at the same pace, or the verdict is inconclusive."""
        then = archived.conditions.time_scale if archived.conditions else REAL_TIME.time_scale
        if self.time_scale is None:
            self.time_scale = then
            self.time_scale_by = f"the time scale {archived.profile.value} ran at in this run"
            say(f"{archived.profile.value} ran at time scale {then:g}: the graphs run at it again")
        elif self.time_scale != then:
            say(
                f"warning: {archived.profile.value} ran at time scale {then:g} and --time-scale "
                f"is {self.time_scale:g}: the verdict will be inconclusive"
            )

    def choose_conditions(self, say: Say) -> None:
        self.conditions = chosen_conditions(self.time_scale, say, self.time_scale_by)

    def deploy(self, profile: RoutingProfile, say: Say) -> StackOutputs:
        started = time.monotonic()
        outputs, graph = self.source.start(self, profile, say)
        self.running[profile] = (graph, PeakMemory(graph).__enter__(), started)
        self.timings[profile.value] = {"graph_start_seconds": round(time.monotonic() - started, 2)}
        written = json.dumps(outputs.to_json_dict(), indent=2) + "\n"
        write_file(self.out / f"outputs-{profile.value}.json", written)
        return outputs

    def teardown(self, profile: RoutingProfile, say: Say) -> None:
        entry = self.running.pop(profile, None)
        if entry is None:  # its graph never came up (its start cleaned up)
            self.source.stop(profile, None, say)
            return
        graph, memory, started = entry
        memory.__exit__()
        self.source.stop(profile, graph, say)
        self.timings[profile.value] |= {
            "graph_seconds": round(time.monotonic() - started, 1),
            "peak_rss_bytes": memory.peak_bytes,
        }
        say(f"{profile.value}: lab graph stopped; peak memory {memory.peak_bytes / 2**20:.0f} MiB")


def write_summary(target: LabAbTarget, run: AbRun, result: AbResult, seconds: float) -> Path:
    """`summary.json`: what a benchmark of the lab reads (timings, peak memory, outcomes)."""
    peaks = [t.get("peak_rss_bytes", 0) for t in target.timings.values()]
    summary = {
        "run_id": run.run_id,
        "total_seconds": round(seconds, 1),
        "workers": target.workers,
        "workload": run.workload.model_dump(mode="json"),
        "profiles": target.timings,
        "outcomes": result.lines(),
        "peak_rss_bytes": max(peaks, default=0),
    }
    return write_file(
        run.out_dir / "summary.json", json.dumps(mask_values(summary), indent=2) + "\n"
    )


def copy_latest_report(result: AbResult, out: Path) -> None:
    """The latest report beside the runs, where the README points (`build/lab/report.md`)."""
    if result.report is None:
        return
    for name in ("report.md", "ab-chart.png", "routing-chart.png"):
        source = result.report.parent / name
        if source.is_file():
            write_file(out / name, source.read_bytes())
