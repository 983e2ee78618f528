"""What the stages need from the lab to run against its graph: `stages.local.run.LocalTools`."""

from __future__ import annotations

from lab.environment import LabInstall
from lab.standin import VideoStandIn
from lab.time_scale import REAL_TIME
from lab.workload import LAB_RECIPE_WORKLOAD, LAB_WORKLOAD
from stages.core.results import RunConditions
from stages.local.run import LocalTools


def lab_tools(
    install: LabInstall | None = None, conditions: RunConditions = REAL_TIME
) -> LocalTools:
    """The lab's AIPerf and tokenizer (from `lab/setup.sh`), its text stand-in for a video, its
    workloads, and how its graph is timed (real time unless a time scale was chosen); raises
    LabNotInstalled when the lab is not installed."""
    ready = (install or LabInstall()).require()
    return LocalTools(
        aiperf=ready.aiperf_executable,
        tokenizer=str(ready.model_dir),
        media_for=lambda workload: VideoStandIn(workload.prefix_tokens),
        default_workload=LAB_WORKLOAD,
        recipe_workload=LAB_RECIPE_WORKLOAD,
        conditions=conditions,
    )
