"""The smoke request body (pure) and how the smoke program reads the answer."""

from __future__ import annotations

from typing import Any

import pytest

from stages.core.pod_plans import SMOKE_QUESTION, smoke_request_body
from stages.incluster.pod_common import PodFailure
from stages.incluster.smoke_pod import answer_of


def test_the_video_comes_before_the_question() -> None:
    body = smoke_request_body("nvidia/cosmos3-nano-reasoner", "http://videos.ns.svc:8090/smoke.mp4")

    (message,) = body["messages"]
    assert message["role"] == "user"
    video, text = message["content"]
    assert video == {
        "type": "video_url",
        "video_url": {"url": "http://videos.ns.svc:8090/smoke.mp4"},
    }
    assert text == {"type": "text", "text": SMOKE_QUESTION}


def test_the_request_names_the_served_model_and_bounds_the_answer() -> None:
    body = smoke_request_body("tiny-llama", "http://127.0.0.1:1/v.mp4", question="What moves?")

    assert body["model"] == "tiny-llama"
    assert 0 < body["max_tokens"] <= 512
    assert body["messages"][0]["content"][1]["text"] == "What moves?"
    assert body["media_io_kwargs"] == {"video": {"fps": 2.0}}  # the synthetic video's frame rate


def test_the_answer_is_the_assistant_message_on_one_line() -> None:
    response = {"choices": [{"message": {"role": "assistant", "content": "  a clock\nticks \n"}}]}

    assert answer_of(response) == "a clock ticks"


@pytest.mark.parametrize(
    "response",
    [
        {"choices": [{"message": {"content": "   "}}]},
        {"choices": [{"message": {"content": None}}]},
        {"choices": []},
        {"error": {"message": "model not found"}},
    ],
)
def test_an_empty_or_missing_answer_fails(response: dict[str, Any]) -> None:
    with pytest.raises(PodFailure):
        answer_of(response)
