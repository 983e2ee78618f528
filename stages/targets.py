"""Where a stage's client runs: the only part of a stage that depends on the target.

Requests, AIPerf arguments, datasets and result parsing are the same for every target. What
differs is the submission: for the lab, the smoke client and AIPerf run on this machine and reach
the graph on loopback; for a cluster they will run as in-cluster Jobs (a later issue), because the
workers must fetch the videos from inside the cluster.
"""

from __future__ import annotations

from pathlib import Path

from components.contract import StackOutputs


class TargetError(RuntimeError):
    """The stage cannot run against this target from here."""


def require_local_target(outputs: StackOutputs, stage: str) -> None:
    if outputs.target != "lab":
        raise TargetError(
            f"the {stage} stage runs its client on this machine, which works for the lab only; "
            f"against a cluster ({outputs.graph_name} in {outputs.namespace}) it runs as an "
            "in-cluster Job, which is not built yet"
        )


def lab_aiperf_executable() -> Path:
    """AIPerf from the lab's own venv (installed by lab/setup.sh)."""
    from lab.environment import LabInstall  # the lab target only; clusters bring their own image

    return LabInstall().require().aiperf_executable


def lab_tokenizer() -> str:
    """The lab model's tokenizer directory, which AIPerf loads to build its dataset."""
    from lab.environment import LabInstall

    return str(LabInstall().require().model_dir)
