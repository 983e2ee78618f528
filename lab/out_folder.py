"""The lab's `--out`: one folder for every lab command, claimed for one run at a time.

`python -m lab ab`, `up`, `calibrate`, `predict`, `report` and `capacity` write under their `--out`
(`build/lab`, `build/lab/predict`); each claims it first (`common.output_folders`): a new or
empty folder, one the lab wrote before (its `.written-files.json` says so) or one holding only
such folders, never one holding files of anyone else, and never while another lab command runs on
it (so a second `lab up` on the same folder refuses to start). The committed `docs/lab-prediction/`
carries the lab's marker. Every file a lab command writes there is written whole, never through a
link (`common.confined_paths`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from common.output_folders import OwnedFolder, claimed_folder

WRITER = "python -m lab"


@contextmanager
def lab_out(out: Path, command: str) -> Iterator[OwnedFolder]:
    """`out` claimed by `python -m lab <command>` for the block."""
    with claimed_folder(out, WRITER, command=f"{WRITER} {command}") as owned:
        yield owned
