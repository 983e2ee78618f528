"""`python -m lab ab`: the whole A/B on this machine, from a fresh clone after `lab/setup.sh`.

For each routing profile (round robin, then session affinity): start a fresh lab graph, run the
smoke stage and the perf stage against its outputs file, stop the graph. Then the report stage
puts both side by side. Everything lands under `build/lab/`:

    report.md, ab-chart.png             the A/B report
    outputs-<profile>.json              the stack-output contract each graph wrote
    results-<profile>.json              parsed perf results
    aiperf/<profile>/c<N>/              datasets and raw AIPerf exports per concurrency
    runs/<profile>/logs/                frontend and worker logs
    summary.json                        timings, smoke answers, lab graph peak memory
"""

from __future__ import annotations

import json
import shutil
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Self

from components.routing import RECIPE_AFFINITY_TTL_SECONDS, RoutingProfile, routing_for
from lab.graph import GraphSpec, LabGraph
from stages.perf import run_perf
from stages.report import write_report
from stages.results import ProfileResults
from stages.smoke import run_smoke
from stages.workload import PerfWorkload

DEFAULT_OUT = Path("build/lab")
MEMORY_SAMPLE_SECONDS = 0.5
PROFILES = (RoutingProfile.ROUND_ROBIN, RoutingProfile.SESSION_AFFINITY)
_OWN_ENTRIES = ("runs", "aiperf", "smoke", "report.md", "ab-chart.png", "summary.json")


@dataclass
class ProfileRun:
    profile: str
    graph_start_seconds: float
    smoke_answer: str
    perf_seconds: float
    peak_rss_bytes: int


class PeakMemory:
    """Samples the lab graph's resident memory in a background thread; keeps the peak."""

    def __init__(self, graph: LabGraph) -> None:
        self.graph = graph
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="lab-memory", daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak_bytes = max(self.peak_bytes, self.graph.rss_bytes())
            self._stop.wait(MEMORY_SAMPLE_SECONDS)


def say(message: str) -> None:
    print(f"[lab ab] {message}", file=sys.stderr, flush=True)


def run_profile(
    profile: RoutingProfile, workload: PerfWorkload, workers: int, out: Path
) -> tuple[ProfileRun, ProfileResults]:
    """Fresh graph for one profile: smoke, then the perf sweep; the graph stops on any exit."""
    spec = GraphSpec(routing=routing_for(profile, RECIPE_AFFINITY_TTL_SECONDS), workers=workers)
    say(f"{profile.value}: starting a lab graph with {workers} mock workers")
    started = time.monotonic()
    with LabGraph(spec, out / "runs" / profile.value) as graph, PeakMemory(graph) as memory:
        graph_start = time.monotonic() - started
        outputs_file = out / f"outputs-{profile.value}.json"
        shutil.copyfile(graph.outputs_path, outputs_file)
        say(f"{profile.value}: graph ready in {graph_start:.1f} s, outputs in {outputs_file}")
        answer = run_smoke(graph.outputs, out / "smoke" / profile.value)
        print(f"[{profile.value}] Smoke test passed: {answer}", flush=True)
        perf_started = time.monotonic()
        results = run_perf(graph.outputs, workload, out / "aiperf" / profile.value)
        perf_seconds = time.monotonic() - perf_started
    results.save(out / f"results-{profile.value}.json")
    run = ProfileRun(
        profile.value, round(graph_start, 2), answer, round(perf_seconds, 1), memory.peak_bytes
    )
    say(f"{profile.value}: done; lab graph peak memory {memory.peak_bytes / 2**20:.0f} MiB")
    return run, results


def clear_previous_run(out: Path) -> None:
    """Remove what an earlier `lab ab` wrote into `out`, and nothing else."""
    for name in _OWN_ENTRIES:
        path = out / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    for path in out.glob("outputs-*.json"):
        path.unlink()
    for path in out.glob("results-*.json"):
        path.unlink()


def run_ab(workload: PerfWorkload, workers: int, out: Path = DEFAULT_OUT) -> str:
    """Run both profiles and the report; returns the report's Markdown."""
    started = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    clear_previous_run(out)
    runs, results = [], []
    for profile in PROFILES:
        run, result = run_profile(profile, workload, workers, out)
        runs.append(run)
        results.append(result)
    markdown = write_report(results[0], results[1], out)
    total_seconds = time.monotonic() - started
    peak_bytes = max(run.peak_rss_bytes for run in runs)
    summary = {
        "total_seconds": round(total_seconds, 1),
        "workers": workers,
        "workload": workload.model_dump(mode="json"),
        "profiles": [asdict(run) for run in runs],
        "peak_rss_bytes": peak_bytes,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    say(
        f"finished in {total_seconds:.0f} s; lab graph peak memory {peak_bytes / 2**20:.0f} MiB; "
        f"report: {out / 'report.md'}"
    )
    return markdown
