"""What the stages need from the lab to run against its graph: `stages.local.run.LocalTools`."""

from __future__ import annotations

from lab.environment import LabInstall
from lab.standin import VideoStandIn
from lab.workload import LAB_RECIPE_WORKLOAD, LAB_WORKLOAD
from stages.core.workload import PerfWorkload, VideoMedia
from stages.local.run import LocalTools


def _stand_in(workload: PerfWorkload) -> VideoMedia:
    return VideoStandIn(workload.prefix_tokens)


def lab_tools(install: LabInstall | None = None) -> LocalTools:
    """The lab's AIPerf and tokenizer (from `lab/setup.sh`), its text stand-in for a video, and
    its workloads; raises LabNotInstalled when the lab is not installed."""
    ready = (install or LabInstall()).require()
    return LocalTools(
        aiperf=ready.aiperf_executable,
        tokenizer=str(ready.model_dir),
        media_for=_stand_in,
        default_workload=LAB_WORKLOAD,
        recipe_workload=LAB_RECIPE_WORKLOAD,
    )
