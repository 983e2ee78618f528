"""The host sampler on this machine's real /proc: the run's own threads and everybody else's."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from stages.core.results import HostLoad, LevelResult, RunConditions
from stages.local.host_load import HostSampler

SPIN = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass"


@contextmanager
def process(code: str) -> Iterator[subprocess.Popen[bytes]]:
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        yield child
    finally:
        child.kill()
        child.wait()


@pytest.mark.slow
def test_a_busy_loop_outside_the_run_is_the_others_demand() -> None:
    # The "run" is a sleeping process; this test's own busy child is not its descendant.
    with process("import time; time.sleep(30)") as run, process(SPIN.format(seconds=30)):
        time.sleep(0.3)
        with HostSampler(root=run.pid, every=0.5) as host:
            time.sleep(2)

    load = host.load()
    # A loop demands a core whether it gets one or waits for it: robust to a busy host.
    assert load.others_cores > 0.7
    assert load.own_cores < 0.1
    assert load.seconds >= 2 and load.cores >= 1


@pytest.mark.slow
def test_the_runs_own_descendants_are_its_own() -> None:
    code = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {SPIN.format(seconds=30)!r}])"
    with process(code) as run:
        time.sleep(0.5)  # its grandchild spinning
        with HostSampler(root=run.pid, every=0.5) as host:
            time.sleep(2)

    load = host.load()
    assert load.own_cores + load.own_wait_cores > 0.7


@pytest.mark.parametrize(("others", "needed"), [(0.0, 1.0), (2.0, 2.0), (6.0, 4.0)])
def test_the_needed_time_scale_is_the_fair_share_that_is_missing(
    others: float, needed: float
) -> None:
    load = HostLoad(seconds=10, cores=2, others_cores=others, own_cores=1, own_wait_cores=0)

    assert load.needed_time_scale(reference_cores=2.0) == pytest.approx(needed)


def test_a_sweep_is_disturbed_only_beyond_its_time_scale() -> None:
    two_loops = HostLoad(seconds=10, cores=2, others_cores=2.0, own_cores=1, own_wait_cores=0.5)
    at = RunConditions(time_scale=2, chosen_by="probe", reference_cores=2.0, sweep=two_loops)

    assert at.disturbed is None
    assert "needed 2.0x dilation and ran at 1x" in (
        at.model_copy(update={"time_scale": 1.0}).disturbed or ""
    )


def test_a_level_in_real_time() -> None:
    measured = LevelResult(
        concurrency=4,
        requests_per_second=2.0,
        ttft_p50_ms=400,
        ttft_p95_ms=800,
        request_latency_p50_ms=1000,
        request_latency_mean_ms=1200,
        output_tokens_per_second=64,
        request_count=40,
        error_count=0,
        output_tokens_mean=32,
        prompt_tokens=100,
        cached_prompt_tokens=50,
    )

    real = measured.rescaled(2.0)

    assert (real.requests_per_second, real.output_tokens_per_second) == (4.0, 128)
    assert (real.ttft_p50_ms, real.ttft_p95_ms, real.request_latency_p50_ms) == (200, 400, 500)
    assert real.request_latency_mean_ms == 600
    assert (real.request_count, real.cached_prompt_tokens) == (40, 50)
