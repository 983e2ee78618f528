"""Datasets: one session per video, a fresh set of videos per level, exact output length."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from pydantic import ValidationError

from lab.stage_tools import LAB_WORKLOAD
from lab.standin import VOCABULARY_SIZE, VideoStandIn, video_prefix, vocabulary
from stages.core.workload import RECIPE_WORKLOAD, PerfWorkload, VideoUrl, dataset_rows

SMALL = LAB_WORKLOAD.model_copy(
    update={
        "videos": 3,
        "questions": 4,
        "output_tokens": 16,
        "prefix_tokens": 50,
        "turn_jitter_ms": 80,
    }
)


def test_the_recipe_workload_is_the_recipes() -> None:
    assert RECIPE_WORKLOAD.requests_per_level == 4000
    assert RECIPE_WORKLOAD.output_tokens == 128
    assert RECIPE_WORKLOAD.concurrencies == (1, 2, 4, 8, 16)
    assert RECIPE_WORKLOAD.affinity_hit_limit == pytest.approx(0.95)


def test_the_lab_default_keeps_the_recipes_sweep_shape() -> None:
    assert LAB_WORKLOAD.concurrencies == RECIPE_WORKLOAD.concurrencies
    assert LAB_WORKLOAD.videos >= max(LAB_WORKLOAD.concurrencies)  # every slot has a session
    assert LAB_WORKLOAD.requests_per_level < RECIPE_WORKLOAD.requests_per_level


def test_each_video_is_one_session_of_all_its_questions() -> None:
    rows = dataset_rows(SMALL, 2, VideoStandIn(SMALL.prefix_tokens))

    assert len(rows) == SMALL.requests_per_level
    assert Counter(row["session_id"] for row in rows) == {
        "c2-video-000": 4,
        "c2-video-001": 4,
        "c2-video-002": 4,
    }
    assert {row["output_length"] for row in rows} == {16}


def test_every_concurrency_level_gets_its_own_videos() -> None:
    media = VideoStandIn(SMALL.prefix_tokens)
    level_1 = {row["session_id"] for row in dataset_rows(SMALL, 1, media)}
    level_2 = {row["session_id"] for row in dataset_rows(SMALL, 2, media)}

    assert level_1.isdisjoint(level_2)


def test_only_follow_up_questions_pause_and_within_the_jitter() -> None:
    rows = dataset_rows(SMALL, 4, VideoStandIn(SMALL.prefix_tokens))
    first_questions = rows[:: SMALL.questions]
    follow_ups = [row for i, row in enumerate(rows) if i % SMALL.questions]

    assert all("delay" not in row for row in first_questions)
    assert all(0 <= row["delay"] <= SMALL.turn_jitter_ms for row in follow_ups)
    assert len({row["delay"] for row in follow_ups}) > 1


def test_no_jitter_means_no_pause() -> None:
    workload = SMALL.model_copy(update={"turn_jitter_ms": 0})

    assert all("delay" not in row for row in dataset_rows(workload, 1, VideoStandIn(10)))


def test_a_videos_questions_share_its_prefix_and_differ_after_it() -> None:
    rows = dataset_rows(SMALL, 1, VideoStandIn(SMALL.prefix_tokens))
    prefix = video_prefix("c1-video-000", SMALL.prefix_tokens)
    same_video = [row["text"] for row in rows if row["session_id"] == "c1-video-000"]

    assert all(text.startswith(prefix + "\n\n") for text in same_video)
    assert len(set(same_video)) == SMALL.questions


def test_the_stand_in_has_one_vocabulary_word_per_token() -> None:
    prefix = video_prefix("any", 300)
    words = prefix.split(" ")

    assert len(words) == 300
    assert set(words) <= set(vocabulary())
    assert len(vocabulary()) == len(set(vocabulary())) == VOCABULARY_SIZE


def test_different_videos_differ_from_their_first_words() -> None:
    a, b = video_prefix("c1-video-000", 64), video_prefix("c1-video-001", 64)

    assert a.split()[:4] != b.split()[:4]
    assert video_prefix("c1-video-000", 64) == a  # deterministic


def test_on_a_cluster_each_question_carries_its_videos_url() -> None:
    rows = dataset_rows(SMALL, 8, VideoUrl("http://videos.perf.svc:8090/"))

    assert rows[0]["video"] == "http://videos.perf.svc:8090/c8-video-000.mp4"
    assert rows[0]["text"] == "Question 1: What happens in this video?"


@pytest.mark.parametrize(
    "bad",
    [{"concurrencies": (1, 1)}, {"concurrencies": (0, 2)}, {"output_tokens": 0}, {"questions": 0}],
)
def test_a_nonsense_workload_is_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        PerfWorkload.model_validate(SMALL.model_dump() | bad)
