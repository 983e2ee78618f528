"""What a re-run decides from the live cluster and the layer stack's outputs, without Pulumi: the
download Job run again only when it failed, the notes a preview shows, the error of a failed
download, the handshake's order (a warning in preview, a refusal in `up`), the provider's options,
the credentials' digest and the live view's reads."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from components import names
from components.credentials_digest import credentials_digest
from components.live import UNKNOWN, KubernetesView, Live, LiveReadError, ObjectRef
from components.model_download import download_failure, live_job_notes, past_deadline, rerun_of
from components.outputs import SharedLayerError, shared_layer_from_outputs
from components.provider import provider_options
from components.readiness import Outcome, Verdict, WaitFailed
from tests.components.support import parse
from tools.offline import shared_layer_outputs
from tools.stack_files import SHARED_STACK

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
REF = ObjectRef("batch/v1", "Job", names.MODEL_DOWNLOAD_JOB, "team-ns")


def live_job(
    condition: str | None = None, mark: str | None = None, uid: str = "u-2"
) -> dict[str, Any]:
    template: dict[str, Any] = {
        "metadata": {"annotations": {names.RERUN_ANNOTATION: mark}} if mark else {}
    }
    conditions = (
        [{"type": condition, "status": "True", "reason": "DeadlineExceeded"}] if condition else []
    )
    status = {"conditions": conditions, "startTime": "2026-12-04T11:00:00Z"}
    return {
        "metadata": {"name": REF.name, "uid": uid},
        "spec": {"template": template},
        "status": status,
    }


def test_a_failed_job_is_run_again_and_a_running_or_complete_one_is_left_alone() -> None:
    assert rerun_of((live_job("FailureTarget"), [])) == "u-2"
    assert rerun_of((live_job("Failed", mark="u-1"), [])) == "u-2", "it failed again: again"
    assert rerun_of((live_job(None, mark="u-1"), [])) == "u-1", "running again: its mark stays"
    assert rerun_of((live_job("Complete", mark="u-1"), [])) == "u-1"
    assert rerun_of((live_job(None), [])) is None
    assert rerun_of(None) is None and rerun_of(UNKNOWN) is None


def test_the_preview_says_what_this_update_does_with_the_live_job() -> None:
    [(warning, failed)] = live_job_notes((live_job("FailureTarget"), []), REF, NOW)
    assert warning and "failed (DeadlineExceeded)" in failed and "runs it again" in failed
    [(warning, running)] = live_job_notes((live_job(None), []), REF, NOW)
    assert not warning and "still running (running for 1 h 00 min)" in running
    assert "waits for it and does not restart it" in running
    assert live_job_notes((live_job("Complete"), []), REF, NOW) == []


def test_a_pod_stuck_terminating_is_named_with_the_command_that_frees_it() -> None:
    stuck = {
        "metadata": {
            "name": "dl-x",
            "deletionTimestamp": (NOW - timedelta(minutes=20)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
        "status": {"phase": "Running"},
    }
    notes = [text for _, text in live_job_notes((live_job("FailureTarget"), [stuck]), REF, NOW)]
    assert any(
        "kubectl delete pod dl-x -n team-ns --force --grace-period=0" in note for note in notes
    )


def test_a_running_job_past_its_deadline_and_the_margin_has_failed() -> None:
    old = live_job(None) | {"status": {"startTime": "2020-01-01T00:00:00Z"}}
    verdict = past_deadline(old, [], deadline=60)
    assert verdict is not None and verdict.outcome is Outcome.FAILED
    assert "Kubernetes has not ended it" in verdict.summary
    assert past_deadline(live_job("FailureTarget"), [], deadline=60) is None


def test_a_failed_download_says_why_its_deadline_what_to_check_and_what_next() -> None:
    verdict = Verdict(
        Outcome.FAILED,
        "DeadlineExceeded: Job was active longer than specified deadline",
        ("pod dl-x: Pending, Unschedulable: 0/2 nodes are available",),
    )
    text = download_failure(WaitFailed(verdict, timed_out=False), REF, deadline=15)
    assert text.startswith(f"the model download Job team-ns/{REF.name} failed: DeadlineExceeded")
    assert "its deadline: 15 s from its start" in text
    assert "modelDownloadTimeoutSeconds" in text and "workerNodeSelector" in text
    assert "the next `pulumi up` runs the download again" in text


def outputs(**replaced: Any) -> dict[str, Any]:
    return shared_layer_outputs(**replaced)[SHARED_STACK]


@pytest.mark.parametrize(
    ("replaced", "words"),
    [
        ({"workerImage": "nvcr.io/nim/nvidia/cosmos3:9.9.9"}, "filled the model cache with"),
        ({"workerMemory": "64Gi"}, "workerMemory is '96Gi', but org/p/shared downloaded the model"),
        ({"nimModelProfile": "abc123"}, "set the same nimModelProfile on both stacks"),
        (
            {"nimSelectionEnv": ["NIM_PRECISION=bf16"]},
            "the NIM selection entries of cosmos3-nano-reasoner:workerExtraEnv are",
        ),
        ({"modelCacheReady": False}, "has not completed"),
        ({"credentialsDigest": None}, "deployed by an earlier version"),
    ],
)
def test_what_the_order_of_updates_settles_is_a_warning_in_preview_and_a_refusal_in_up(
    replaced: dict[str, Any], words: str
) -> None:
    settings = parse("round-robin", secrets={})
    layer, notes = shared_layer_from_outputs(
        outputs(**replaced), settings, "org/p/shared", preview=True
    )
    assert layer.namespace == "cosmos3-nano-reasoner"
    assert len(notes) == 1 and words in notes[0] and "`pulumi up` refuses this" in notes[0]
    with pytest.raises(SharedLayerError, match=words):
        shared_layer_from_outputs(outputs(**replaced), settings, "org/p/shared", preview=False)


def test_a_stack_that_deploys_a_graph_is_refused_as_a_layer_stack() -> None:
    """`sharedStack: dev` on round-robin: both stacks would own dev's graph (decision 0011)."""
    settings = parse("round-robin", secrets={})
    graph = "cosmos3-nano-reasoner-agg-h200-round-robin"
    for preview in (True, False):
        with pytest.raises(
            SharedLayerError, match=f"org/p/dev deploys a graph of its own \\({graph}"
        ):
            shared_layer_from_outputs(outputs(graphName=graph), settings, "org/p/dev", preview)


def test_a_layer_without_a_download_or_from_before_the_keys_is_not_compared() -> None:
    settings = parse("round-robin", secrets={})
    earlier = outputs(workerMemory=None, nimModelProfile=None, nimSelectionEnv=None)
    assert shared_layer_from_outputs(earlier, settings, "org/p/shared")[1] == []


def test_only_the_extra_env_the_nim_selects_by_is_compared() -> None:
    settings = parse("round-robin", secrets={}, workerExtraEnv=["NIM_LOG_LEVEL=DEBUG"])
    assert shared_layer_from_outputs(outputs(), settings, "org/p/shared")[1] == []
    pinned = parse("round-robin", secrets={}, workerExtraEnv=["NIM_PRECISION=bf16"])
    layer = outputs(nimSelectionEnv=["NIM_PRECISION=bf16"])
    assert shared_layer_from_outputs(layer, pinned, "org/p/shared")[1] == []
    with pytest.raises(SharedLayerError, match="NIM selection entries of workerExtraEnv on both"):
        shared_layer_from_outputs(outputs(), pinned, "org/p/shared", preview=False)
    recipes = parse("round-robin", secrets={}, workerExtraEnv=["NIM_PRECISION=fp8"])
    assert shared_layer_from_outputs(outputs(), recipes, "org/p/shared")[1] == []


def test_a_layer_that_was_never_deployed_is_refused_even_in_preview() -> None:
    settings = parse("round-robin", secrets={})
    with pytest.raises(SharedLayerError, match="has no output namespace"):
        shared_layer_from_outputs(outputs(namespace=None), settings, "org/p/shared", preview=True)


def test_the_layer_carries_the_digest_that_marks_the_workers() -> None:
    settings = parse("round-robin", secrets={})
    layer, notes = shared_layer_from_outputs(outputs(credentialsDigest="abc"), settings, "s")
    assert layer.credentials_digest == "abc" and notes == []


def test_the_provider_updates_secrets_in_place_and_takes_over_existing_objects_when_it_can() -> (
    None
):
    assert provider_options({"context"}) == {
        "enable_secret_mutable": True,
        "enable_config_map_mutable": True,
    }
    newer = provider_options({"context", "upsert_existing_objects"})
    assert newer["upsert_existing_objects"] is True and newer["enable_secret_mutable"] is True


def test_the_digest_changes_with_any_credential_and_shows_none() -> None:
    digest = credentials_digest("nvapi-key-1", None)
    assert len(digest) == 16 and int(digest, 16) >= 0
    assert digest == credentials_digest("nvapi-key-1", None)
    assert digest != credentials_digest("nvapi-key-2", None)
    assert digest != credentials_digest("nvapi-key-1", '{"auths": {}}')
    assert "nvapi" not in digest


def test_the_live_view_reads_through_one_get_and_says_what_the_server_refused() -> None:
    asked: list[tuple[str, dict[str, str], str]] = []
    answers = {
        f"/apis/batch/v1/namespaces/team-ns/jobs/{REF.name}": (
            200,
            json.dumps({"kind": "Job"}).encode(),
        ),
        "/api/v1/namespaces/team-ns/pods": (200, b'{"items": [{"metadata": {"name": "p"}}]}'),
        "/api/v1/namespaces/gone": (404, b"{}"),
        "/api/v1/namespaces/secret-ns/secrets/s": (
            403,
            b'{"message": "secrets \\"s\\" is forbidden"}',
        ),
    }

    def request(path: str, query: Any, accept: str) -> tuple[int, bytes]:
        asked.append((path, dict(query), accept))
        return answers[path]

    view = KubernetesView("ctx", request=request)
    assert view.get(REF) == {"kind": "Job"}
    assert view.list(ObjectRef("v1", "Pod", "", "team-ns"), {"labelSelector": "a=b"}) == [
        {"metadata": {"name": "p"}}
    ]
    assert view.get(ObjectRef("v1", "Namespace", "gone")) is None
    with pytest.raises(LiveReadError, match='HTTP 403: secrets "s" is forbidden'):
        view.metadata(ObjectRef("v1", "Secret", "s", "secret-ns"))
    assert asked[-1][2].startswith("application/json;as=PartialObjectMetadata"), (
        "never a Secret's data"
    )
    assert asked[1][1] == {"labelSelector": "a=b"}


def test_an_unreadable_cluster_is_said_once_and_reads_as_unknown() -> None:
    said: list[str] = []

    def refuse(path: str, query: Any, accept: str) -> tuple[int, bytes]:
        raise ConnectionRefusedError("connection refused")

    live = Live(KubernetesView("ctx", request=refuse), said.append)
    assert live.attempt(lambda view: view.get(REF)) is UNKNOWN
    assert live.attempt(lambda view: view.get(REF)) is UNKNOWN
    assert len(said) == 1 and "ConnectionRefusedError: connection refused" in said[0]
