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

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from common.confined_paths import write_file

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


# The bounds of a workload: what AIPerf, the graph and the machine that runs the sweep can take.
# The recipe's sweep is 200 videos x 20 questions x 128 tokens at concurrency 1..16.
MAX_VIDEOS = 10_000
MAX_QUESTIONS = 1_000
MAX_REQUESTS_PER_LEVEL = 100_000
"""Each level's dataset is built in memory and written whole (the lab's lines carry a video's
whole text stand-in): 25 times the recipe's 4,000 requests."""
MAX_TOKENS = 32_768
"""The longest context the graphs serve (the lab's tiny model's, `lab/tiny_model.py`): no
request can ask for more output, nor carry a longer stand-in."""
MAX_CONCURRENCY = 1_000
"""AIPerf opens a connection per in-flight request: at most this many stay under the usual
1,024 open files of a process (a pod's default too)."""
MAX_LEVELS = 32
MAX_TURN_JITTER_MS = 60_000
MAX_SEED = 2**32 - 1
"""NumPy's seed range, which AIPerf's --random-seed ends up in."""


class PerfWorkload(BaseModel):
    """How much load the perf stage sends, and of which shape."""

    model_config = ConfigDict(frozen=True)

    videos: int = Field(
        gt=0, le=MAX_VIDEOS, description="sessions per concurrency level, one per video"
    )
    questions: int = Field(gt=0, le=MAX_QUESTIONS, description="requests per video")
    output_tokens: int = Field(
        gt=0, le=MAX_TOKENS, description="exact output length of every request"
    )
    concurrencies: tuple[int, ...] = Field(min_length=1, max_length=MAX_LEVELS)
    prefix_tokens: int = Field(
        gt=0, le=MAX_TOKENS, description="lab only: length of a video's text stand-in"
    )
    turn_jitter_ms: int = Field(
        ge=0,
        le=MAX_TURN_JITTER_MS,
        description="random pause of 0..N ms before each follow-up question; interleaves the "
        "sessions so that a deterministic mock engine does not lock round robin into a pattern",
    )
    seed: int = Field(default=42, ge=0, le=MAX_SEED)

    @field_validator("concurrencies")
    @classmethod
    def _positive_and_distinct(cls, levels: tuple[int, ...]) -> tuple[int, ...]:
        if any(c < 1 for c in levels) or len(set(levels)) != len(levels):
            raise ValueError(f"concurrencies must be distinct positive integers, got {levels}")
        if max(levels) > MAX_CONCURRENCY:
            raise ValueError(
                f"each level at most {MAX_CONCURRENCY}: AIPerf holds a connection per request"
            )
        return levels

    @model_validator(mode="after")
    def _a_level_fits_in_memory(self) -> PerfWorkload:
        if self.requests_per_level > MAX_REQUESTS_PER_LEVEL:
            raise ValueError(
                f"videos x questions is {self.requests_per_level:,} requests a level, at most "
                f"{MAX_REQUESTS_PER_LEVEL:,}: each level's dataset is built whole"
            )
        return self

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
    return write_file(path, "".join(json.dumps(row) + "\n" for row in rows))
