"""Run a workload on a lab graph tuned to imitate a deployment, slower than real time, and give
the results back in the deployment's time.

A calibration (`lab.planner.calibration`) sets `LabKnobs`: the mock engine's speed, the length of a
video's stand-in prefix, and a pre-engine delay. Two cores cannot serve the recipe's load in real
time, so the lab runs everything `slowdown` times slower (the engine, the pre-engine delay, the
affinity TTL, the pauses between questions) and divides every time it measures by `slowdown`
(and multiplies every rate). What does not slow down is the lab's own overhead (HTTP, the
frontend's tokenizer, AIPerf); its share shrinks as `slowdown` grows, and `lab predict
--check-slowdown` shows whether it matters.

Each level runs as its own perf stage in the same graph, with its own videos
(`videos = max(MIN_VIDEOS, waves x concurrency)`): enough sessions for `waves` rounds of full
concurrency, not the recipe's 200.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from components.config_rules import AffinityTtl
from components.routing import (
    MAX_AFFINITY_TTL_SECONDS,
    RECIPE_AFFINITY_TTL_SECONDS,
    RoutingProfile,
    routing_for,
)
from lab.graph import GraphSpec, LabGraph
from lab.mocker_timing import EngineSpeed
from lab.stage_tools import lab_tools
from lab.time_scale import LAB_REFERENCE_CORES
from stages.core.results import LevelResult, RunConditions
from stages.core.workload import PerfWorkload
from stages.errors import StageError
from stages.targets import stage_target

MIN_VIDEOS = 2
MODEL_WAIT_SECONDS = 60.0


class LabKnobs(BaseModel):
    """What a calibration sets, in the simulated deployment's time (not the wall clock)."""

    model_config = ConfigDict(frozen=True)

    speed: EngineSpeed
    prefix_tokens: int = Field(gt=0)
    """A video's stand-in: its prefill is what processing the video costs a cold request."""
    pre_engine_delay_ms: float = Field(ge=0)
    """Each request's time before the engine that does not hold up other requests."""


class LabSweep(BaseModel):
    """A workload and fleet to run, in the simulated deployment's time."""

    model_config = ConfigDict(frozen=True)

    workers: int = Field(gt=0)
    questions: int = Field(gt=0)
    output_tokens: int = Field(gt=0)
    concurrencies: tuple[int, ...] = Field(min_length=1)
    waves: float = Field(default=2.0, gt=0)
    affinity_ttl_seconds: AffinityTtl = RECIPE_AFFINITY_TTL_SECONDS
    turn_jitter_ms: float = Field(default=0.0, ge=0)
    seed: int = 42

    def videos(self, concurrency: int) -> int:
        return max(MIN_VIDEOS, round(self.waves * concurrency))

    def check_scaled_ttl(self, *slowdowns: float | None) -> None:
        """`LabRunner` keeps a session `slowdown` times longer: past the router's range, the
        command's option is refused (a ValueError, exit 2) before any graph starts."""
        longest = round(self.affinity_ttl_seconds * max(s or 0 for s in slowdowns))
        if longest > MAX_AFFINITY_TTL_SECONDS:
            raise ValueError(
                f"--affinity-ttl {self.affinity_ttl_seconds}: the lab runs it as {longest} s, "
                f"past the router's {MAX_AFFINITY_TTL_SECONDS} s; give a shorter TTL or a "
                "smaller --slowdown"
            )

    def level(self, concurrency: int) -> LabSweep:
        """This sweep's run of one level as a sweep of its own (the same videos): two sweeps
        whose `level(c)` are equal run level `c` the same way."""
        waves = self.videos(concurrency) / concurrency
        return self.model_copy(update={"concurrencies": (concurrency,), "waves": waves})

    def without(self, concurrency: int) -> LabSweep | None:
        """The sweep without one level; None when that was its only one."""
        rest = tuple(c for c in self.concurrencies if c != concurrency)
        return self.model_copy(update={"concurrencies": rest}) if rest else None


Runner = Callable[[RoutingProfile, LabKnobs, LabSweep, float], list[LevelResult]]
"""(profile, knobs, sweep, slowdown) -> each level's result, in the deployment's time."""


class LabRunner:
    """The real runner: a lab graph per call, one perf stage per level, under `out`."""

    def __init__(self, out: Path, say: Callable[[str], None] = print) -> None:
        self.out = out
        self.say = say
        self.runs = 0

    def __call__(
        self, profile: RoutingProfile, knobs: LabKnobs, sweep: LabSweep, slowdown: float
    ) -> list[LevelResult]:
        self.runs += 1
        run_dir = self.out / f"{self.runs:02d}-{profile.value}"
        ttl = round(sweep.affinity_ttl_seconds * slowdown)
        spec = GraphSpec(
            routing=routing_for(profile, ttl),
            workers=sweep.workers,
            mocker_args=knobs.speed.mocker_args(slowdown),
            pre_engine_delay_ms=knobs.pre_engine_delay_ms * slowdown,
        )
        # The perf stage stretches the pauses by `slowdown` and gives the levels back rescaled.
        timing = RunConditions(
            time_scale=slowdown,
            chosen_by="the prediction's slowdown",
            reference_cores=LAB_REFERENCE_CORES,
        )
        tools = lab_tools(spec.install, timing)
        results = []
        with LabGraph(spec, run_dir / "graph") as graph:
            target = stage_target(graph.outputs, local=tools)
            for concurrency in sweep.concurrencies:
                self.say(
                    f"{profile.value}: concurrency {concurrency}, "
                    f"{sweep.videos(concurrency)} videos x {sweep.questions} questions, "
                    f"running {slowdown:g}x slower than the deployment"
                )
                workload = _level_workload(knobs, sweep, concurrency)
                try:
                    swept = target.run_perf(
                        workload, run_dir / f"c{concurrency}", MODEL_WAIT_SECONDS
                    )
                except StageError as error:
                    # The graph's own story of the failure, before its processes are stopped.
                    raise type(error)(f"{error}\n{graph.log_tails()}") from error
                results.append(swept.levels[0])
        return results


def _level_workload(knobs: LabKnobs, sweep: LabSweep, concurrency: int) -> PerfWorkload:
    return PerfWorkload(
        videos=sweep.videos(concurrency),
        questions=sweep.questions,
        output_tokens=sweep.output_tokens,
        concurrencies=(concurrency,),
        prefix_tokens=knobs.prefix_tokens,
        turn_jitter_ms=round(sweep.turn_jitter_ms),
        seed=sweep.seed,
    )
