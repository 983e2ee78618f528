"""The smoke stage's routing probe as a checked record, and what the A/B makes of it.

The smoke program (`stages.incluster.smoke_pod.probe_routing`) sends a few videos' questions, each
video one session, and records the worker that answered each (Dynamo's frontend names it in
`nvext.worker_id` when asked). `RoutingProbe` is that record, bounded and checked when read (it
travels in the pod's log and in `results.json`). Session affinity must keep at least 99% of the
videos on one worker, or its run did not test affinity (`affinity_failure`); the report's routing
section (`routing_section`) shows each profile's probe.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, Field, model_validator

from stages.core.markdown import markdown_text
from stages.core.typed_files import CHECKED, write_model

MAX_PROBE_VIDEOS = 1000
MAX_PROBE_QUESTIONS = 100
AFFINITY_KEPT_SHARE = 0.99
"""Session affinity works when at least this share of the probe's videos stayed on one worker."""
WorkerId = (
    Annotated[str, Field(min_length=1, max_length=64, strict=True)]
    | Annotated[int, Field(ge=0, le=2**64, strict=True)]
)
"""A worker's id as the frontend names it (Dynamo: a 64-bit number; the probe writes it as text)."""


class RoutingProbe(BaseModel):
    """Where the smoke stage's routing probe went: for each of its videos (one session each), the
    worker that answered each question; `observable: false` when the responses named no worker."""

    model_config = CHECKED

    videos: int = Field(gt=0, le=MAX_PROBE_VIDEOS, strict=True)
    questions: int = Field(gt=0, le=MAX_PROBE_QUESTIONS, strict=True)
    session_header: str | None = Field(max_length=256)
    observable: bool = Field(strict=True)
    workers: list[Annotated[list[WorkerId], Field(max_length=MAX_PROBE_QUESTIONS)]] = Field(
        default=[], max_length=MAX_PROBE_VIDEOS
    )
    """`workers[v][q]`: who answered video v's question q (empty when not observable)."""

    @model_validator(mode="after")
    def _consistent(self) -> RoutingProbe:
        if not self.observable:
            if self.workers:
                raise ValueError("workers: an unobservable probe (observable: false) has none")
            return self
        if len(self.workers) != self.videos:
            raise ValueError(f"workers: {len(self.workers)} videos, {self.videos} expected")
        for index, asked in enumerate(self.workers):
            if len(asked) != self.questions:
                raise ValueError(
                    f"workers[{index}]: {len(asked)} answers, {self.questions} expected "
                    "(one per question)"
                )
        return self

    def workers_per_video(self) -> list[int]:
        return [len({str(worker) for worker in asked}) for asked in self.workers]

    @property
    def spread_videos(self) -> int:
        """Videos whose questions reached more than one worker."""
        return sum(1 for count in self.workers_per_video() if count > 1)

    @property
    def kept_share(self) -> float:
        """The share of videos whose questions all reached one worker."""
        return 1 - self.spread_videos / self.videos if self.observable else 0.0

    def summary(self) -> str:
        """The probe in one line of plain text (ids are not in it)."""
        if not self.observable:
            return (
                f"routing probe: {self.videos} videos x {self.questions} questions, not "
                "observable (the responses name no worker: the frontend drops `nvext`)"
            )
        counts = self.workers_per_video()
        return (
            f"routing probe: {self.videos - self.spread_videos} of {self.videos} videos on one "
            f"worker, {sum(counts) / len(counts):.2f} workers per video on average, "
            f"{len(self.requests_per_worker())} workers served its "
            f"{self.videos * self.questions} requests"
        )

    def requests_per_worker(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for worker in (str(worker) for asked in self.workers for worker in asked):
            counts[worker] = counts.get(worker, 0) + 1
        return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))

    def save(self, path: Path) -> Path:
        return write_model(self, path)


def _named(
    round_robin: RoutingProbe | None, affinity: RoutingProbe | None
) -> dict[str, RoutingProbe | None]:
    return {"round robin": round_robin, "session affinity": affinity}


def observed_probes(
    round_robin: RoutingProbe | None, affinity: RoutingProbe | None
) -> dict[str, RoutingProbe]:
    """The probes that saw their workers, by profile name."""
    probes = _named(round_robin, affinity).items()
    return {name: probe for name, probe in probes if probe is not None and probe.observable}


def affinity_failure(affinity: RoutingProbe | None) -> str | None:
    """Why session affinity's run did not test affinity, or None: its probe saw fewer than 99% of
    the videos stay on one worker (an unobservable probe, or none, checks nothing)."""
    if affinity is None or not affinity.observable or affinity.kept_share >= AFFINITY_KEPT_SHARE:
        return None
    return (
        "session affinity's run did not keep videos on one worker "
        f"({affinity.spread_videos} of {affinity.videos} videos reached several workers): the "
        "session header did not reach the router"
    )


def routing_section(
    round_robin: RoutingProbe | None, affinity: RoutingProbe | None, chart_name: str | None
) -> list[str]:
    """The report's lines on where each profile's probe went (none when neither ran one); every
    worker id is input, written through `markdown_text`."""
    probes = _named(round_robin, affinity)
    if all(probe is None for probe in probes.values()):
        return []
    lines = [
        "Routing (the smoke stage's probe: each video one session, its questions in turn):",
        "",
    ]
    for name, probe in probes.items():
        if probe is None:
            lines.append(f"- {name}: no routing probe in its results")
            continue
        asked = f"{probe.videos} videos x {probe.questions} questions"
        if not probe.observable:
            lines.append(
                f"- {name} ({asked}): not observable, the responses name no worker (a frontend "
                "that drops `nvext`)"
            )
            continue
        counts = probe.workers_per_video()
        spread = ", ".join(
            f"{markdown_text(worker)}: {n}" for worker, n in probe.requests_per_worker().items()
        )
        lines.append(
            f"- {name} ({asked}): videos on one worker {probe.kept_share:.0%}, "
            f"{sum(counts) / len(counts):.2f} workers per video on average; requests per worker: "
            f"{spread}"
        )
    rr = probes["round robin"]
    if rr is not None and rr.observable and rr.spread_videos == 0:
        lines.append(
            "- Note: round robin kept every video on one worker too; the probe sends one "
            "request at a time, so its counter may line up with the videos."
        )
    if chart_name and observed_probes(round_robin, affinity):
        lines += ["", f"![Workers per video]({chart_name})"]
    return lines
