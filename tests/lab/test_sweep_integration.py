"""The real runner (`lab.sweep.LabRunner`): a lab graph with the calibrated knobs, the perf stage
per level, and the results back in the deployment's time; the pre-engine delay really delays."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.routing import RoutingProfile
from lab.mocker_timing import EngineSpeed
from lab.sweep import LabKnobs, LabRunner, LabSweep

pytestmark = pytest.mark.lab

SWEEP = LabSweep(workers=2, questions=3, output_tokens=8, concurrencies=(1,), waves=1)


def knobs(delay_ms: float) -> LabKnobs:
    return LabKnobs(
        speed=EngineSpeed(speedup=1.0, decode_speedup=1.0),
        prefix_tokens=200,
        pre_engine_delay_ms=delay_ms,
    )


def test_the_delay_reaches_the_first_token_in_the_deployments_time(tmp_path: Path) -> None:
    runner = LabRunner(tmp_path, say=lambda _: None)
    profile = RoutingProfile.SESSION_AFFINITY

    plain = runner(profile, knobs(0.0), SWEEP, 2.0)[0]
    delayed = runner(profile, knobs(150.0), SWEEP, 2.0)[0]

    assert plain.request_count == delayed.request_count == 2 * 3
    # Run 2x slower, the proxy held each request 300 ms on the wall clock: 150 ms rescaled.
    assert delayed.ttft_p50_ms - plain.ttft_p50_ms == pytest.approx(150, abs=40)
    assert plain.request_latency_mean_ms is not None
    assert plain.request_latency_mean_ms < 1000  # 8 tokens at ~6 ms each, rescaled
    assert (tmp_path / "02-session-affinity" / "graph" / "logs" / "delay-proxy.log").exists()
