"""AIPerf arguments (pure): the session header only with affinity, exact output length."""

from __future__ import annotations

from pathlib import Path

from components.contract import StackOutputs
from components.routing import SESSION_HEADER, RoutingProfile
from lab.stage_tools import LAB_WORKLOAD
from stages.core.pod_plans import aiperf_environment, aiperf_profile_args
from stages.core.workload import PerfWorkload
from tests.stages.support import lab_outputs_for

WORKLOAD = LAB_WORKLOAD.model_copy(update={"videos": 5, "questions": 4, "output_tokens": 128})


def args_for(
    outputs: StackOutputs, workload: PerfWorkload = WORKLOAD, concurrency: int = 4
) -> list[str]:
    return aiperf_profile_args(
        outputs, workload, concurrency, Path("/data/c4.jsonl"), Path("/out/c4"), "/models/tok"
    )


def option(args: list[str], name: str) -> list[str]:
    """Every value given to a repeatable option."""
    return [args[i + 1] for i, arg in enumerate(args) if arg == name]


def test_affinity_sends_one_session_header_per_video() -> None:
    args = args_for(lab_outputs_for(RoutingProfile.SESSION_AFFINITY))

    assert option(args, "--session-header") == [SESSION_HEADER]
    # Sessions are the dataset's session_ids, one per video (see test_workload.py).
    assert option(args, "--custom-dataset-type") == ["single_turn"]


def test_round_robin_sends_no_session_header() -> None:
    args = args_for(lab_outputs_for(RoutingProfile.ROUND_ROBIN))

    assert "--session-header" not in args
    assert not any("session" in arg.lower() for arg in args)


def test_aiperf_adds_no_session_header_of_its_own() -> None:
    env = aiperf_environment()

    assert env["AIPERF_HTTP_X_SESSION_AFFINITY_FROM_CORRELATION_ID"] == "false"
    assert env["AIPERF_HTTP_X_DYNAMO_SESSION_ID_FROM_CORRELATION_ID"] == "false"


def test_every_request_returns_exactly_the_output_tokens(any_outputs: StackOutputs) -> None:
    args = args_for(any_outputs)

    assert option(args, "--extra-inputs") == ["ignore_eos:true", "min_tokens:128"]


def test_one_level_sends_every_question_about_every_video_once(any_outputs: StackOutputs) -> None:
    args = args_for(any_outputs, concurrency=8)

    assert option(args, "--request-count") == ["20"]
    assert option(args, "--concurrency") == ["8"]
    assert option(args, "--input-file") == ["/data/c4.jsonl"]
    assert option(args, "--output-artifact-dir") == ["/out/c4"]


def test_the_target_comes_from_the_stack_outputs() -> None:
    outputs = lab_outputs_for(RoutingProfile.ROUND_ROBIN, port=18123)
    args = args_for(outputs)

    assert args[0] == "profile"
    assert option(args, "--url") == ["http://127.0.0.1:18123"]
    assert option(args, "--model") == [outputs.served_model]
    assert option(args, "--endpoint-type") == ["chat"]
    assert "--streaming" in args  # TTFT needs a streamed response


def test_the_lab_opens_a_new_connection_per_request() -> None:
    # Reused keep-alive connections add a TCP stall to loopback TTFTs (see stages/aiperf.py).
    args = args_for(lab_outputs_for(RoutingProfile.ROUND_ROBIN))

    assert option(args, "--connection-reuse-strategy") == ["never"]
