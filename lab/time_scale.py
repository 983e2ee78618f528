"""How much slower than real time the lab's A/B runs its graphs: chosen from the host, measured.

On a busy host another program's CPU time shows up as the graphs' latency, and the A/B would
measure the host, not the routing. So before the graphs start, `probe_host` measures what every
other process demands (`stages.local.host_load`), and `time_scale_for` picks the dilation K that
gives the graph, in its fair share of the cores left, the room it has on an idle 2-core host. At K
the engine, the pauses and the affinity TTL run K times slower, and every level is given back in
real time (`LevelResult.rescaled`); the report says whether the host stayed within what K
corrects for (`RunConditions.disturbed`). docs/lab.md, "A busy host", has the numbers.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from stages.core.results import HostLoad, RunConditions
from stages.local.host_load import HostSampler

LAB_REFERENCE_CORES = 2.0
"""What the lab graph needs at real time: the idle 2-core host its A/B was checked on."""
PROBE_SECONDS = 3.0
MAX_TIME_SCALE = 8.0
"""Beyond 8x the default A/B takes over half an hour; such a host is reported as disturbed."""
REAL_TIME = RunConditions(
    chosen_by="the default for a graph not started by `lab ab`", reference_cores=LAB_REFERENCE_CORES
)
"""A lab graph's sweep that is not dilated (`lab stage perf` against `lab up`'s graph): its host
is still measured."""


def probe_host(seconds: float = PROBE_SECONDS) -> HostLoad:
    """The host over `seconds`, while this process and its children sit idle."""
    with HostSampler(every=seconds / 3) as host:
        time.sleep(seconds)
    return host.load()


def time_scale_for(load: HostLoad) -> float:
    """The dilation the host needs, to the nearest half (within `TIME_SCALE_TOLERANCE` of it),
    from 1 (real time) to MAX_TIME_SCALE."""
    needed = load.needed_time_scale(LAB_REFERENCE_CORES)
    return min(MAX_TIME_SCALE, max(1.0, round(needed * 2) / 2))


def probed_conditions(load: HostLoad) -> RunConditions:
    scale = time_scale_for(load)
    return RunConditions(
        time_scale=scale,
        chosen_by=(
            f"the host probe: other processes demanded {load.others_cores:.2f} of {load.cores} "
            f"cores, leaving the graph a fair share of {load.fair_share_cores:.2f}"
        ),
        reference_cores=LAB_REFERENCE_CORES,
        probe=load,
    )


def chosen_conditions(
    time_scale: float | None, say: Callable[[str], None], chosen_by: str = "--time-scale"
) -> RunConditions:
    """The one time scale both graphs of a `lab ab` run at (so both pay the same overheads):
    `time_scale` (given by `chosen_by`), or the host probe's when None; said either way."""
    if time_scale is None:
        say(f"probing the host for {PROBE_SECONDS:g} s to choose the graphs' time scale")
        conditions = probed_conditions(probe_host())
    else:
        conditions = RunConditions(
            time_scale=time_scale, chosen_by=chosen_by, reference_cores=LAB_REFERENCE_CORES
        )
    scale, chosen_by = conditions.time_scale, conditions.chosen_by
    pace = "real time" if scale == 1 else f"{scale:g}x slower than real time"
    say(f"the graphs run at {pace} (chosen by {chosen_by}); results are in real time")
    return conditions
