"""The smoke program: one question about one synthetic video must get a non-empty answer. Runs in
the cluster's smoke Job and, unchanged, as a local process against the lab.

    python -m stages.incluster.smoke_pod /config/smoke-config.json

The config (built by `stages.core.pod_plans.smoke_pod_config`) names the frontend, the model, the
FFmpeg arguments, where to serve the video and the exact request body. Steps:

1. wait (bounded) until the frontend's `/v1/models` lists the model;
2. make the 30 s, 2 FPS H.264 video with FFmpeg and serve it over HTTP;
3. fetch it once through its URL (in the cluster: the media Service), as the workers will;
4. send the request; the last line printed is `Smoke test passed: <answer>` and the exit status 0.

Any failure prints `Smoke test FAILED: <reason>` and exits 1; a frontend that never lists the
model prints `Frontend not ready: <reason>` and exits 3, so the stage can say which it was.
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from stages.incluster import pod_common
from stages.incluster.pod_common import PodFailure, say

PASSED = "Smoke test passed:"
FAILED = "Smoke test FAILED:"


def ask(chat_url: str, body: dict[str, Any], timeout_seconds: float) -> str:
    """POST the chat request; the answer as one line, or PodFailure with the server's reason."""
    request = urllib.request.Request(
        chat_url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_seconds) as response:
            reply = json.loads(response.read())
    except urllib.error.HTTPError as error:
        detail = error.read().decode(errors="replace")[:500]
        raise PodFailure(f"{chat_url} answered HTTP {error.code}: {detail}") from error
    except (OSError, ValueError) as error:
        raise PodFailure(f"the request to {chat_url} failed: {error}") from error
    return answer_of(reply)


def answer_of(reply: dict[str, Any]) -> str:
    """The assistant's answer on one line; PodFailure when it is missing or empty."""
    try:
        content = reply["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError) as error:
        raise PodFailure(f"the response has no answer: {json.dumps(reply)[:300]}") from error
    answer = " ".join(str(content or "").split())
    if not answer:
        raise PodFailure("the model returned an empty answer")
    return answer


def run(config: dict[str, Any]) -> str:
    """The smoke test's steps; returns the answer."""
    pod_common.wait_for_model(
        config["models_url"], config["served_model"], float(config["model_wait_seconds"])
    )
    ffmpeg = pod_common.ffmpeg_executable(config.get("ffmpeg"))
    video = Path(config["media_dir"]) / config["video_name"]
    pod_common.make_video(ffmpeg, config["ffmpeg_args"], video)
    say(f"made {video.name} ({video.stat().st_size} bytes)")
    with pod_common.serving(config, config["video_url"]):
        say(f"asking {config['served_model']} about {config['video_url']}")
        return ask(
            f"{config['frontend_url']}/v1/chat/completions",
            config["request_body"],
            float(config["request_timeout_seconds"]),
        )


def main(argv: list[str] | None = None) -> int:
    return pod_common.run_pod_program(
        sys.argv[1:] if argv is None else argv,
        usage="python -m stages.incluster.smoke_pod CONFIG_JSON",
        program=lambda config: f"{PASSED} {run(config)}",
        failed=FAILED,
    )


if __name__ == "__main__":
    sys.exit(main())
