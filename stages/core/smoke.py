"""The smoke test's request: one question about one synthetic video, video first.

The recipe's smoke test (run by `stages.incluster.smoke_pod` on every target):
1. make a 30 s H.264 video and serve it over HTTP where the workers can fetch it;
2. send one chat request: a `video_url` part pointing at the video, then the question;
3. require a non-empty answer; the last line printed is `Smoke test passed: <answer>`.

Lab vs cluster: the request is the same. On the cluster the worker fetches the video and the model
describes it. In the lab, Dynamo's frontend accepts the `video_url` part (it counts one video) and
its chat template reduces it to a `[video_url]` marker; the mock engine never fetches or decodes the
video and answers with random words from the tiny vocabulary. So the lab proves the request shape,
routing and serving path, not video understanding; to show the video is actually served, the
program fetches it once itself before asking.
"""

from __future__ import annotations

from typing import Any

SMOKE_QUESTION = "Describe what happens in this video."
SMOKE_MAX_TOKENS = 64
VIDEO_NAME = "smoke.mp4"


def smoke_request_body(
    model: str, video_url: str, question: str = SMOKE_QUESTION
) -> dict[str, Any]:
    """The chat request: the video first, then the question (the Reasoner's expected order)."""
    return {
        "model": model,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "video_url", "video_url": {"url": video_url}},
                    {"type": "text", "text": question},
                ],
            }
        ],
        "max_tokens": SMOKE_MAX_TOKENS,
        "media_io_kwargs": {"video": {"fps": 2.0}},
    }
