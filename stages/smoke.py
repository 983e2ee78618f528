"""Smoke stage: one question about one synthetic video must get a non-empty answer.

The recipe's smoke test, in three parts:
1. make a 30 s H.264 video and serve it over HTTP where the workers can fetch it;
2. send one chat request: a `video_url` part pointing at the video, then the question
   (`smoke_request_body`, a pure function a future in-cluster Job reuses);
3. require a non-empty answer; the last line printed is `Smoke test passed: <answer>`.

Lab vs cluster: the request is the same. On the cluster the worker fetches the video and the model
describes it. In the lab, Dynamo's frontend accepts the `video_url` part (it counts one video) and
its chat template reduces it to a `[video_url]` marker; the mock engine never fetches or decodes the
video and answers with random words from the tiny vocabulary. So the lab proves the request shape,
routing and serving path, not video understanding; to show the video is actually served, the stage
fetches it once itself before asking.
"""

from __future__ import annotations

import functools
import http.server
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import requests

from components.contract import StackOutputs
from stages.targets import require_local_target
from stages.video import make_video

SMOKE_QUESTION = "Describe what happens in this video."
SMOKE_MAX_TOKENS = 64
VIDEO_NAME = "smoke.mp4"
REQUEST_TIMEOUT_SECONDS = 120.0
MODEL_WAIT_SECONDS = 60.0


class SmokeError(RuntimeError):
    """The smoke test failed; the message says why."""


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


def answer_text(response: dict[str, Any]) -> str:
    """The assistant's answer from a chat completion, stripped; raises SmokeError if absent."""
    try:
        content = response["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError) as error:
        raise SmokeError(f"the response has no answer: {str(response)[:300]}") from error
    answer = (content or "").strip()
    if not answer:
        raise SmokeError("the model returned an empty answer")
    return answer


def wait_for_model(
    models_url: str, model: str, timeout_seconds: float = MODEL_WAIT_SECONDS
) -> None:
    """Poll /v1/models until it lists the model, as the recipe's readiness gate does."""
    deadline = time.monotonic() + timeout_seconds
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            listed = {
                m.get("id") for m in requests.get(models_url, timeout=5).json().get("data", [])
            }
            if model in listed:
                return
            last = f"models listed: {sorted(map(str, listed))}"
        except (requests.RequestException, ValueError) as error:
            last = f"{type(error).__name__}: {error}"
        time.sleep(1)
    raise SmokeError(f"{models_url} did not list {model} within {timeout_seconds:.0f} s ({last})")


@contextmanager
def serve_directory(directory: Path) -> Iterator[str]:
    """Serve a directory over HTTP on loopback for the duration of the block; yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="smoke-video-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def check_video_served(url: str) -> int:
    """Fetch the video once; returns its size. Proves the URL the workers get really serves it."""
    response = requests.get(url, timeout=30)
    if response.status_code != 200 or not response.content:
        raise SmokeError(f"the video at {url} is not served (HTTP {response.status_code})")
    return len(response.content)


def ask(frontend_url: str, body: dict[str, Any]) -> str:
    url = f"{frontend_url}/v1/chat/completions"
    try:
        response = requests.post(url, json=body, timeout=REQUEST_TIMEOUT_SECONDS)
    except requests.RequestException as error:
        raise SmokeError(f"request to {url} failed: {error}") from error
    if response.status_code != 200:
        raise SmokeError(f"{url} answered HTTP {response.status_code}: {response.text[:300]}")
    return answer_text(response.json())


def run_smoke(
    outputs: StackOutputs, work_dir: Path, wait_seconds: float = MODEL_WAIT_SECONDS
) -> str:
    """Run the smoke test against a deployment; returns the answer or raises SmokeError."""
    require_local_target(outputs, stage="smoke")
    wait_for_model(outputs.models_url, outputs.served_model, wait_seconds)
    video = make_video(work_dir / VIDEO_NAME)
    with serve_directory(video.parent) as base_url:
        video_url = f"{base_url}/{video.name}"
        check_video_served(video_url)
        return ask(outputs.frontend_url, smoke_request_body(outputs.served_model, video_url))
