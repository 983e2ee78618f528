"""AIPerf 0.13.0 command lines for one concurrency level: a pure function of the inputs.

The same arguments serve every target (the perf pod program runs AIPerf on the cluster and in the
lab alike): only the dataset path, the tokenizer and the connection strategy differ.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from components.contract import StackOutputs
from stages.core.workload import PerfWorkload

AIPERF_VERSION = "0.13.0"
ConnectionReuse = Literal["pooled", "never", "sticky-user-sessions"]

NEW_CONNECTIONS: ConnectionReuse = "never"
"""A new connection per request, on every target. On loopback, a reused keep-alive connection adds
a ~20-40 ms TCP stall to the first token of a streamed response (measured: TTFT p50 44 ms pooled
vs 26 ms with a new connection per request, same graph, same prompts)."""


def aiperf_profile_args(
    outputs: StackOutputs,
    workload: PerfWorkload,
    concurrency: int,
    dataset: Path,
    artifact_dir: Path,
    tokenizer: str,
    connection_reuse: ConnectionReuse = NEW_CONNECTIONS,
) -> list[str]:
    """`aiperf profile ...` arguments (without the executable) for one concurrency level.

    Every request returns exactly `workload.output_tokens` tokens: the dataset sets each line's
    output length (sent as the maximum) and the extra inputs forbid stopping earlier. One session
    per video carries the profile's session header only when the outputs name one (affinity on);
    without it AIPerf sends its own X-Correlation-ID only, which the Dynamo router ignores.
    """
    # Laid out by hand (formatter skipped): a command line, each option beside its value.
    args = [
        "profile",
        "--model", outputs.served_model,
        "--url", outputs.frontend_url,
        "--endpoint-type", "chat",
        "--streaming",
        "--tokenizer", tokenizer,
        "--use-server-token-count",
        "--input-file", str(dataset),
        "--custom-dataset-type", "single_turn",
        "--request-count", str(workload.requests_per_level),
        "--concurrency", str(concurrency),
        "--extra-inputs", "ignore_eos:true",
        "--extra-inputs", f"min_tokens:{workload.output_tokens}",
        "--connection-reuse-strategy", connection_reuse,
        "--random-seed", str(workload.seed),
        "--ui-type", "none",
        "--no-gpu-telemetry",
        "--no-server-metrics",
        "--output-artifact-dir", str(artifact_dir),
    ]  # fmt: skip
    if outputs.session_header is not None:
        args += ["--session-header", outputs.session_header]
    return args


def aiperf_environment() -> dict[str, str]:
    """Environment for AIPerf: no session header of its own beyond what `--session-header` names.

    AIPerf 0.13.0 adds `X-Session-Affinity` to every request by default, and can add
    `X-Dynamo-Session-ID`; both are switched off so that the only session header on the wire is the
    one the stack outputs ask for. Hub-offline switches are cleared: with them set, AIPerf 0.13.0
    mistakes a local tokenizer directory for a hub id.
    """
    return {
        "AIPERF_HTTP_X_SESSION_AFFINITY_FROM_CORRELATION_ID": "false",
        "AIPERF_HTTP_X_DYNAMO_SESSION_ID_FROM_CORRELATION_ID": "false",
        "HF_HUB_OFFLINE": "",
        "TRANSFORMERS_OFFLINE": "",
    }
