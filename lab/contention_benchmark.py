"""Does `make lab`'s A/B give the same answer on a busy host? Measured, not asserted.

    .venv-dev/bin/python -m lab.contention_benchmark                 # 2 idle runs, 1 busy
    .venv-dev/bin/python -m lab.contention_benchmark --busy-time-scales auto,1
    .venv-dev/bin/python -m lab.contention_benchmark --idle-runs 0 --busy-loops 4 \
        --idle-from build/lab/contention/idle-* --out build/lab/contention-4

Runs `python -m lab ab` (its default workload and time scale, as `make lab` does) `--idle-runs`
times on the host as it is, then `--busy-runs` times beside one busy loop per core at normal
priority (`--busy-loops` to change), and compares each busy run's throughput gain per level with
the idle runs': the same sign, and within 5 points of the idle mean or within the idle runs'
own spread, whichever is wider. `--busy-time-scales auto,1` adds a busy run forced to real time,
to see the report call it disturbed. Writes `build/lab/contention/benchmark.md` and prints it;
each run keeps its own folder (report, results, summary) beside it. Quiet the host for the idle
runs: they are the reference.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from common.confined_paths import write_file
from common.input_files import MAX_RECORD_BYTES, read_json_object
from common.parsers import CommandParser
from components.routing import RoutingProfile
from lab.benchmark import timed
from stages.core.ab_verdict import ABPair, gain_percent, verdict_line
from stages.core.results import ProfileResults

DEFAULT_OUT = Path("build/lab/contention")
GAIN_TOLERANCE_POINTS = 5.0
BUSY_LOOP = "while True: pass"


@dataclass(frozen=True)
class AbMeasurement:
    name: str
    seconds: float
    pair: ABPair

    @property
    def gains(self) -> dict[int, float]:
        return {
            c: gain_percent(rr.requests_per_second, aff.requests_per_second)
            for c in self.pair.concurrencies
            for rr, aff in [self.pair.levels(c)]
        }

    @property
    def time_scale(self) -> float:
        conditions = self.pair.round_robin.conditions
        return conditions.time_scale if conditions else 1.0

    @property
    def host(self) -> str:
        """Each sweep's other-process demand, and whether the report called it disturbed."""
        parts = []
        for results in (self.pair.round_robin, self.pair.affinity):
            conditions = results.conditions
            if conditions is None or conditions.sweep is None:
                continue
            state = "DISTURBED" if conditions.disturbed else "ok"
            parts.append(f"{conditions.sweep.others_cores:.2f} ({state})")
        return " / ".join(parts) or "not measured"


def measure_ab(name: str, out: Path, extra: Sequence[str]) -> AbMeasurement:
    """One `python -m lab ab` in `out/name`, timed, and the pair of results it wrote."""
    folder = out / name
    command = [sys.executable, "-m", "lab", "ab", "--out", str(folder), *extra]
    seconds = timed(f"{name} (its folder: {folder})", command, Path.cwd(), dict(os.environ))
    return AbMeasurement(name, seconds, load_pair(folder))


def load_pair(folder: Path) -> ABPair:
    """The latest A/B a `lab ab --out folder` wrote."""
    run_id = read_json_object(folder / "latest-run.json", "latest run", MAX_RECORD_BYTES)["runId"]
    loaded = [
        ProfileResults.load(folder / run_id / profile.value / "perf" / "results.json")
        for profile in RoutingProfile
    ]
    return ABPair.of(*loaded)


def earlier_run(folder: Path) -> AbMeasurement:
    """An idle run of an earlier benchmark, as the reference (`--idle-from`)."""
    seconds = read_json_object(folder / "summary.json", "lab summary", MAX_RECORD_BYTES)[
        "total_seconds"
    ]
    return AbMeasurement(folder.name, float(seconds), load_pair(folder))


@contextmanager
def busy_loops(count: int) -> Iterator[None]:
    loops = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(count)]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def compare(idle: list[AbMeasurement], busy: AbMeasurement) -> list[str]:
    """Each level where the busy run's gain is not the idle runs' answer."""
    problems = []
    for c, gain in busy.gains.items():
        references = [m.gains[c] for m in idle if c in m.gains]
        if not references:
            continue
        mean = sum(references) / len(references)
        allowed = max(GAIN_TOLERANCE_POINTS, max(references) - min(references))
        if (gain > 0) != (mean > 0):
            problems.append(f"c{c}: {gain:+.1f}% against the idle {mean:+.1f}% (sign)")
        elif abs(gain - mean) > allowed:
            problems.append(
                f"c{c}: {gain:+.1f}% against the idle {mean:+.1f}% (more than {allowed:.1f} points)"
            )
    return problems


def render(idle: list[AbMeasurement], busy: list[AbMeasurement], loops: int) -> str:
    every = idle + busy
    levels = sorted({c for m in every for c in m.gains})
    header = ["Run", "Wall time", "Time scale", "Others' demand RR / Aff. (cores)"]
    header += [f"Gain c{c}" for c in levels]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for m in every:
        gains = [f"{m.gains[c]:+.1f}%" if c in m.gains else "-" for c in levels]
        row = [m.name, f"{m.seconds:.0f} s", f"{m.time_scale:g}x", m.host, *gains]
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", f"Busy runs: {loops} busy loops at normal priority beside the A/B.", ""]
    for m in every:
        lines.append(f"- {m.name}: {verdict_line(m.pair)}")
    lines.append("")
    for m in busy:
        problems = compare(idle, m)
        answer = "same answer as idle" if not problems else "DIFFERS: " + "; ".join(problems)
        lines.append(f"- {m.name} against the idle runs: {answer}")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = CommandParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle-runs", type=int, default=2)
    parser.add_argument("--busy-runs", type=int, default=1)
    parser.add_argument("--busy-loops", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--busy-time-scales",
        default="auto",
        help="comma-separated --time-scale values, --busy-runs busy runs each",
    )
    parser.add_argument(
        "--idle-from",
        type=Path,
        nargs="*",
        default=[],
        metavar="FOLDER",
        help="idle runs of an earlier benchmark to compare with, instead of new ones",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    idle = [earlier_run(folder) for folder in args.idle_from]
    idle += [measure_ab(f"idle-{n}", args.out, ()) for n in range(1, args.idle_runs + 1)]
    busy = []
    for scale in args.busy_time_scales.split(","):
        for n in range(1, args.busy_runs + 1):
            with busy_loops(args.busy_loops):
                time.sleep(2)  # the loops running before the probe looks
                extra = ("--time-scale", scale)
                busy.append(measure_ab(f"busy-{n}-{scale}", args.out, extra))
    text = render(idle, busy, args.busy_loops)
    args.out.mkdir(parents=True, exist_ok=True)
    write_file(args.out / "benchmark.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
