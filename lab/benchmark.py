"""Measure the lab end to end: install time, main command time, lab graph memory.

    .venv-dev/bin/python -m lab.benchmark                  # in place: make engine, setup.sh, lab ab
    .venv-dev/bin/python -m lab.benchmark --reinstall-lab  # in place, after deleting .lab/
    .venv-dev/bin/python -m lab.benchmark --fresh-copy     # as from a fresh clone, every install

`--fresh-copy` copies the project's files (tracked and untracked, not ignored: what a clone would
have once committed) into a temporary directory and there runs, timed, what `make lab` runs: `make
dev-venv venv` (the lab's venv and the program's), `make engine` (the real `pulumi` and control
plane, from a cache outside the work tree), `bash lab/setup.sh`, and `.venv-dev/bin/python -m lab
ab` (the A/B through `pulumi up` on a local cluster, `lab/cluster_ab.py`). `--cold-pip-cache`
also disables pip's download cache. Memory is the
lab graph's peak resident set (frontend + workers), sampled by `lab ab` every 0.5 s
(`summary.json`). Results go to `build/lab/benchmark.json` and stdout. Targets: under 10 minutes
including installs, the lab graph under 2 GiB.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from common import REPO_ROOT
from common.confined_paths import write_file
from common.input_files import MAX_RECORD_BYTES, read_json_object, read_text
from common.parsers import CommandParser
from testenv.project_copy import copy_project

TARGET_TOTAL_SECONDS = 600
TARGET_PEAK_BYTES = 2 * 2**30


def timed(label: str, command: Sequence[str], cwd: Path, env: dict[str, str]) -> float:
    print(f"[benchmark] {label}: {' '.join(command)}", file=sys.stderr, flush=True)
    started = time.monotonic()
    result = subprocess.run(list(command), cwd=cwd, env=env, check=False)
    elapsed = time.monotonic() - started
    if result.returncode != 0:
        raise SystemExit(f"[benchmark] {label} failed with status {result.returncode}")
    print(f"[benchmark] {label}: {elapsed:.0f} s", file=sys.stderr, flush=True)
    return elapsed


@dataclass
class Measurement:
    steps_seconds: dict[str, float]
    peak_rss_bytes: int
    report: str
    fresh_copy: bool
    cold_pip_cache: bool

    @property
    def total_seconds(self) -> float:
        return sum(self.steps_seconds.values())

    @property
    def within_targets(self) -> bool:
        return self.total_seconds < TARGET_TOTAL_SECONDS and self.peak_rss_bytes < TARGET_PEAK_BYTES

    def as_json(self) -> dict[str, object]:
        return {
            "fresh_copy": self.fresh_copy,
            "cold_pip_cache": self.cold_pip_cache,
            "steps_seconds": {name: round(s, 1) for name, s in self.steps_seconds.items()},
            "total_seconds": round(self.total_seconds, 1),
            "peak_rss_bytes": self.peak_rss_bytes,
            "within_targets": self.within_targets,
        }


def measure(root: Path, env: dict[str, str], install_project_venv: bool) -> Measurement:
    steps: dict[str, float] = {}
    if install_project_venv:
        venvs = ["make", "dev-venv", "venv"]
        steps["project venvs"] = timed("project venvs", venvs, root, env)
    # The engine's cache is outside the work tree ($COSMOS3_ENGINE_HOME): cold the first time on a
    # machine (about 25 min on 2 cores, 40-50 beside other work), seconds after.
    steps["engine"] = timed("engine", ["make", "engine"], root, env)
    steps["lab setup"] = timed("lab setup", ["bash", "lab/setup.sh"], root, env)
    main_command = [str(root / ".venv-dev/bin/python"), "-m", "lab", "ab"]
    steps["lab ab"] = timed("lab ab", main_command, root, env)
    summary = read_json_object(root / "build/lab/summary.json", "lab summary", MAX_RECORD_BYTES)
    return Measurement(
        steps_seconds=steps,
        peak_rss_bytes=int(summary["peak_rss_bytes"]),
        report=read_text(root / "build/lab/report.md", "A/B report", MAX_RECORD_BYTES),
        fresh_copy=install_project_venv,
        cold_pip_cache="PIP_NO_CACHE_DIR" in env,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = CommandParser(prog="python -m lab.benchmark", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--fresh-copy", action="store_true", help="run in a copy, installing everything"
    )
    parser.add_argument("--reinstall-lab", action="store_true", help="in place: delete .lab/ first")
    parser.add_argument(
        "--cold-pip-cache", action="store_true", help="disable pip's download cache"
    )
    args = parser.parse_args(argv)
    env = dict(os.environ) | ({"PIP_NO_CACHE_DIR": "1"} if args.cold_pip_cache else {})
    if args.fresh_copy:
        with tempfile.TemporaryDirectory(prefix="lab-benchmark-") as scratch:
            root = Path(scratch) / "clone"
            copy_project(root)
            measurement = measure(root, env, install_project_venv=True)
    else:
        if args.reinstall_lab:
            shutil.rmtree(REPO_ROOT / ".lab", ignore_errors=True)
        measurement = measure(REPO_ROOT, env, install_project_venv=False)
    out = REPO_ROOT / "build/lab/benchmark.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_file(out, json.dumps(measurement.as_json(), indent=2) + "\n")
    print(measurement.report)
    for name, seconds in measurement.steps_seconds.items():
        print(f"{name:>14}: {seconds:7.1f} s")
    print(f"{'total':>14}: {measurement.total_seconds:7.1f} s (target < {TARGET_TOTAL_SECONDS} s)")
    print(f"{'graph peak':>14}: {measurement.peak_rss_bytes / 2**30:7.2f} GiB (target < 2 GiB)")
    return 0 if measurement.within_targets else 1


if __name__ == "__main__":
    raise SystemExit(main())
