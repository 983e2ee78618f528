"""`lab.mocker_timing` against the engine it describes: Dynamo 1.6.1's own mock engine, run on
its virtual clock (`dynamo._core.run_mocker_synthetic_trace_replay`, the same engine the lab's
workers run, without sleeping) in the lab's Dynamo venv."""

from __future__ import annotations

import json
import subprocess

import pytest

from lab.environment import LabInstall
from lab.mocker_timing import EngineSpeed, decode_ms, prefill_ms

REPLAY = """
import json, sys
from dynamo._core import run_mocker_synthetic_trace_replay as replay
out = []
for isl, engine in json.loads(sys.argv[1]):
    request = replay(isl, 3, 1, extra_engine_args={"engine": engine}, capture_per_request=True,
                     replay_concurrency=1).per_request[0]
    out.append([request["ttft_ms"], request["itl_ms"]])
print(json.dumps(out))
"""


def test_the_prefill_polynomial_is_paid_once_per_chunk() -> None:
    assert prefill_ms(8192) == pytest.approx(169.137, abs=1e-3)
    assert prefill_ms(8193) == pytest.approx(prefill_ms(8192) + prefill_ms(1))
    assert prefill_ms(0) == 0


def test_decode_grows_with_what_the_cache_holds() -> None:
    assert decode_ms(0) == pytest.approx(5.74)
    assert decode_ms(2002) == pytest.approx(5.843, abs=1e-3)
    assert decode_ms(10**9) == pytest.approx(5.74 + 54.01 - 25.74)


def test_slowing_down_divides_the_speed_and_leaves_the_decode_share() -> None:
    speed = EngineSpeed(speedup=1.0, decode_speedup=2.5)

    assert speed.mocker_args(4) == ("--speedup-ratio", "0.25", "--decode-speedup-ratio", "2.5")


@pytest.mark.lab
def test_the_formulas_match_the_real_mock_engine() -> None:
    install = LabInstall().require()
    cases = [
        (1000, {}),
        (8192, {}),
        (20000, {}),
        (1000, {"speedup_ratio": 0.25, "decode_speedup_ratio": 3.0}),
    ]
    replayed = json.loads(
        subprocess.run(
            [str(install.dynamo_python), "-c", REPLAY, json.dumps(cases)],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout
    )

    for (isl, engine), (ttft, itl) in zip(cases, replayed, strict=True):
        speed = EngineSpeed(
            speedup=engine.get("speedup_ratio", 1.0),
            decode_speedup=engine.get("decode_speedup_ratio", 1.0),
        )
        assert ttft == pytest.approx(speed.prefill_ms(isl), rel=1e-3), (isl, engine)
        assert itl == pytest.approx(speed.decode_ms(isl + 1), rel=1e-2), (isl, engine)
