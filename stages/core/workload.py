"""The benchmark workload: videos x questions, exact output length, a concurrency sweep.

The recipe sends 20 questions about each of 200 synthetic videos at every concurrency 1, 2, 4, 8,
16, always 128 output tokens. One video's questions form one session: they go one after another
(each request self-contained: the video plus one question, no chat history), and sessions run
side by side up to the concurrency.

The dataset is an AIPerf `single_turn` JSONL file: one line per request, grouped into sessions by
`session_id`. What a line carries for "the video" is the only thing that differs by target: a
video URL on the cluster (`VideoUrl`), whatever the caller passes elsewhere (the lab passes a
per-video text prefix, `lab.standin.VideoStandIn`).

Each concurrency level gets its own set of videos (ids carry the level), so every level starts
with nothing cached, as if the graph had been reset between levels, whatever the target.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator

QUESTIONS = (
    "What happens in this video?",
    "Describe the scene in one sentence.",
    "Which objects are visible?",
    "How many objects move?",
    "What color is the largest shape?",
    "Where is the moving object at the end?",
    "Does anything change between the start and the end?",
    "What is in the top left corner?",
    "Is there any text in the video?",
    "How fast does the scene change?",
    "Which object appears first?",
    "What is in the center of the frame?",
    "Is the camera moving?",
    "How many distinct colors are there?",
    "What happens halfway through?",
    "Summarize the video in five words.",
    "Is anything repeated?",
    "What is in the background?",
    "Which direction do things move?",
    "What would you call this video?",
)


class PerfWorkload(BaseModel):
    """How much load the perf stage sends, and of which shape."""

    model_config = ConfigDict(frozen=True)

    videos: int = Field(gt=0, description="sessions per concurrency level, one per video")
    questions: int = Field(gt=0, description="requests per video")
    output_tokens: int = Field(gt=0, description="exact output length of every request")
    concurrencies: tuple[int, ...] = Field(min_length=1)
    prefix_tokens: int = Field(gt=0, description="lab only: length of a video's text stand-in")
    turn_jitter_ms: int = Field(
        ge=0,
        description="random pause of 0..N ms before each follow-up question; interleaves the "
        "sessions so that a deterministic mock engine does not lock round robin into a pattern",
    )
    seed: int = 42

    @field_validator("concurrencies")
    @classmethod
    def _positive_and_distinct(cls, levels: tuple[int, ...]) -> tuple[int, ...]:
        if any(c < 1 for c in levels) or len(set(levels)) != len(levels):
            raise ValueError(f"concurrencies must be distinct positive integers, got {levels}")
        return levels

    @property
    def requests_per_level(self) -> int:
        return self.videos * self.questions

    @property
    def affinity_hit_limit(self) -> float:
        """Best possible share of requests that find their video cached: all but the first."""
        return (self.questions - 1) / self.questions


RECIPE_WORKLOAD = PerfWorkload(
    videos=200,
    questions=20,
    output_tokens=128,
    concurrencies=(1, 2, 4, 8, 16),
    prefix_tokens=3000,
    turn_jitter_ms=0,
)
"""The recipe's sweep as written (4,000 requests per level, no pause between questions)."""


class VideoMedia(Protocol):
    """What a request carries for its video: the only target-specific part of a dataset line."""

    def request_fields(self, video_id: str, question: str) -> dict[str, object]: ...

    @property
    def video_files(self) -> bool:
        """True when the videos are files the client must make and serve (the cluster)."""
        ...


class VideoUrl:
    """Cluster: the video is fetched by the worker from `<base_url>/<video id>.mp4`."""

    video_files = True

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")

    def request_fields(self, video_id: str, question: str) -> dict[str, object]:
        return {"video": f"{self.base_url}/{video_id}.mp4", "text": question}


def video_ids(workload: PerfWorkload, concurrency: int) -> list[str]:
    return [f"c{concurrency}-video-{index:03d}" for index in range(workload.videos)]


def dataset_rows(
    workload: PerfWorkload, concurrency: int, media: VideoMedia
) -> list[dict[str, Any]]:
    """One AIPerf single_turn line per request; a video's questions share its session_id."""
    jitter = random.Random(f"{workload.seed}:{concurrency}")
    rows: list[dict[str, Any]] = []
    for video_id in video_ids(workload, concurrency):
        for index in range(workload.questions):
            question = f"Question {index + 1}: {QUESTIONS[index % len(QUESTIONS)]}"
            row: dict[str, Any] = {"session_id": video_id}
            row |= media.request_fields(video_id, question)
            row["output_length"] = workload.output_tokens
            if index > 0 and workload.turn_jitter_ms > 0:
                row["delay"] = jitter.randint(0, workload.turn_jitter_ms)
            rows.append(row)
    return rows


def write_dataset(rows: list[dict[str, Any]], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path
