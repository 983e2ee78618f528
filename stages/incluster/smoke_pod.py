"""The smoke program: one question about one synthetic video must get a non-empty answer. Runs in
the cluster's smoke Job and, unchanged, as a local process against the lab.

    python -m stages.incluster.smoke_pod /config/smoke-config.json

The config (built by `stages.core.pod_plans.smoke_pod_config`) names the frontend, the model, the
FFmpeg arguments, where to serve the video and the exact request body. Steps:

1. wait (bounded) until the frontend's `/v1/models` lists the model;
2. make the 30 s, 2 FPS H.264 video with FFmpeg and serve it over HTTP;
3. fetch it once through its URL (in the cluster: the media Service), as the workers will;
4. send the request;
5. the routing probe (`probe_routing`, when the config has `routing_probe`): V videos x Q short
   questions, each video one session (the profile's session header, if it has one), each request
   asking for the serving worker (`nvext.extra_fields: ["worker_id"]`, which Dynamo's frontend
   answers with `nvext.worker_id.decode_worker_id`); printed as one `Routing probe: <json>` line.
   A response without a worker id makes the probe `observable: false` (a frontend that drops
   `nvext`), never a failure;
6. the last line printed is `Smoke test passed: <answer>` and the exit status 0.

Any failure prints `Smoke test FAILED: <reason>` and exits 1; a frontend that never lists the
model prints `Frontend not ready: <reason>` and exits 3, so the stage can say which it was.
"""

from __future__ import annotations

import json
import secrets
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from stages.incluster import pod_common
from stages.incluster.pod_common import PodFailure, say

PASSED = "Smoke test passed:"
FAILED = "Smoke test FAILED:"
ROUTING_PROBE = "Routing probe:"
"""Prefix of the line that carries the probe's result as JSON (`stages.core.verdicts` reads it)."""
WORKER_ID_FIELDS = {"extra_fields": ["worker_id"]}


def post_chat(
    chat_url: str,
    body: dict[str, Any],
    timeout_seconds: float,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """POST a chat request; the decoded response, or PodFailure with the server's reason."""
    request = urllib.request.Request(
        chat_url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **(headers or {})},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_seconds) as response:
            reply = json.loads(response.read())
    except urllib.error.HTTPError as error:
        detail = error.read().decode(errors="replace")[:500]
        raise PodFailure(f"{chat_url} answered HTTP {error.code}: {detail}") from error
    except pod_common.REQUEST_ERRORS as error:
        raise PodFailure(f"the request to {chat_url} failed: {error}") from error
    if not isinstance(reply, dict):
        raise PodFailure(f"the response is not a JSON object: {json.dumps(reply)[:300]}")
    return reply


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


def worker_of(reply: dict[str, Any]) -> str | None:
    """The worker that served a response (`nvext.worker_id.decode_worker_id`), as text; None when
    the response does not say."""
    nvext = reply.get("nvext")
    worker = nvext.get("worker_id") if isinstance(nvext, dict) else None
    decode = worker.get("decode_worker_id") if isinstance(worker, dict) else None
    if isinstance(decode, bool) or not isinstance(decode, (int, str)) or decode == "":
        return None
    return str(decode)[:64]


def probe_routing(chat_url: str, probe: dict[str, Any], timeout_seconds: float) -> dict[str, Any]:
    """Send the probe's videos x questions one after another, each video one session under
    `probe["session_header"]` (None: no header, as round robin sends); the worker of each answer.

    `workers[v][q]` is the worker that answered video v's question q; `observable` is false (and
    `workers` empty) when any response named no worker."""
    header = probe.get("session_header")
    run_token = secrets.token_hex(4)  # a fresh session per video, whatever an earlier run pinned
    workers: list[list[str]] = []
    observable = True
    for video in range(int(probe["videos"])):
        session = {header: f"routing-probe-{run_token}-{video}"} if header else {}
        seen = []
        for question in range(int(probe["questions"])):
            body = {
                "model": probe["model"],
                "messages": [
                    {"role": "user", "content": f"Video {video}, question {question}: say hi."}
                ],
                "max_tokens": int(probe["max_tokens"]),
                "nvext": WORKER_ID_FIELDS,
            }
            worker = worker_of(post_chat(chat_url, body, timeout_seconds, session))
            observable = observable and worker is not None
            seen.append(worker or "")
        workers.append(seen)
    result = {
        "videos": int(probe["videos"]),
        "questions": int(probe["questions"]),
        "session_header": header,
        "observable": observable,
        "workers": workers if observable else [],
    }
    say(f"{ROUTING_PROBE} {json.dumps(result, separators=(',', ':'))}")
    return result


def run(config: dict[str, Any]) -> str:
    """The smoke test's steps; returns the answer."""
    pod_common.wait_for_model(config)
    ffmpeg = pod_common.ffmpeg_executable(config.get("ffmpeg"))
    video = Path(config["media_dir"]) / config["video_name"]
    pod_common.make_video(ffmpeg, config["ffmpeg_args"], video)
    say(f"made {video.name} ({video.stat().st_size} bytes)")
    with pod_common.serving(config, config["video_url"]):
        say(f"asking {config['served_model']} about {config['video_url']}")
        chat_url = f"{config['frontend_url']}/v1/chat/completions"
        timeout = float(config["request_timeout_seconds"])
        answer = answer_of(post_chat(chat_url, config["request_body"], timeout))
    probe = config.get("routing_probe")
    if probe:
        say(f"routing probe: {probe['videos']} videos x {probe['questions']} questions")
        probe_routing(chat_url, probe, timeout)
    return answer


if __name__ == "__main__":
    sys.exit(
        pod_common.run_pod_program(
            sys.argv[1:],
            usage="python -m stages.incluster.smoke_pod CONFIG_JSON",
            program=lambda config: f"{PASSED} {run(config)}",
            failed=FAILED,
        )
    )
