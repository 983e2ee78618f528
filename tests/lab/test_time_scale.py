"""The lab's time scale: chosen from the host's measured demand, or given on the command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.__main__ import main as lab_main
from lab.ab import LabAbTarget
from lab.time_scale import MAX_TIME_SCALE, probe_host, probed_conditions, time_scale_for
from stages.core.results import HostLoad, ProfileResults, RunConditions
from tests.stages.core.support import ROUND_ROBIN


def load(others: float, cores: int = 2) -> HostLoad:
    return HostLoad(seconds=3, cores=cores, others_cores=others, own_cores=0, own_wait_cores=0)


@pytest.mark.parametrize(
    ("others", "cores", "scale"),
    [(0.05, 2, 1.0), (0.6, 2, 1.5), (2.0, 2, 2.0), (6.0, 2, 4.0), (2.0, 8, 1.0), (99.0, 2, 8.0)],
)
def test_the_time_scale_makes_room_for_what_others_demand(
    others: float, cores: int, scale: float
) -> None:
    assert time_scale_for(load(others, cores)) == scale


def test_the_probes_numbers_are_recorded() -> None:
    conditions = probed_conditions(load(2.0))

    assert conditions.time_scale == 2.0 and conditions.probe == load(2.0)
    assert (
        "demanded 2.00 of 2 cores, leaving the graph a fair share of 1.00" in conditions.chosen_by
    )


@pytest.mark.slow
def test_the_probe_measures_this_host() -> None:
    measured = probe_host(seconds=1.0)

    assert measured.seconds >= 1.0 and measured.own_cores < 0.5


@pytest.mark.parametrize("value", ["0.5", "nan", "9", "fast"])
def test_a_bad_time_scale_names_the_option(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        lab_main(["ab", "--time-scale", value])

    assert exit_.value.code == 2
    assert (
        f"--time-scale must be auto or a number from 1 to {MAX_TIME_SCALE:g}, got '{value}'"
        in capsys.readouterr().err
    )


def archived_at(scale: float) -> ProfileResults:
    conditions = RunConditions(time_scale=scale, chosen_by="the host probe", reference_cores=2.0)
    return ROUND_ROBIN.model_copy(update={"conditions": conditions})


def test_a_resumed_lab_ab_runs_at_the_time_scale_of_its_archived_profile(tmp_path: Path) -> None:
    target, said = LabAbTarget(tmp_path, workers=2), list[str]()

    target.continue_from(archived_at(2.5), said.append)
    target.choose_conditions(said.append)  # no probe: the archived profile's scale is given

    assert target.conditions.time_scale == 2.5
    assert "round-robin" in target.conditions.chosen_by
    assert not any("probing" in line for line in said)


def test_a_resume_given_another_time_scale_keeps_it_and_warns(tmp_path: Path) -> None:
    target, said = LabAbTarget(tmp_path, workers=2, time_scale=1.0), list[str]()

    target.continue_from(archived_at(2.5), said.append)
    target.choose_conditions(said.append)

    assert target.conditions.time_scale == 1.0 and target.conditions.chosen_by == "--time-scale"
    assert "inconclusive" in said[0]
