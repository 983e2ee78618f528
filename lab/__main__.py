"""`python -m lab`: the local lab (Dynamo frontend + mock-engine workers on loopback).

    bash lab/setup.sh                        install .lab/ (once; quick when already done)
    .venv/bin/python -m lab ab               both profiles: smoke + perf + report -> build/lab/
    .venv/bin/python -m lab up --profile session-affinity
                                             one graph until Ctrl-C, for trying things by hand

Exit status: 0 done, 1 the run failed (reason on stderr), 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from components.routing import RECIPE_AFFINITY_TTL_SECONDS, RoutingProfile, routing_for
from lab.ab import DEFAULT_OUT, run_ab
from lab.environment import LabNotInstalled
from lab.graph import DEFAULT_WORKERS, GraphSpec, LabGraph, LabGraphError
from lab.processes import signals_as_keyboard_interrupt
from stages.cli import add_workload_arguments, workload_from_args
from stages.perf import PerfError
from stages.report import ReportError
from stages.smoke import SmokeError

EXIT_FAILED = 1
EXIT_INTERRUPTED = 130


def _ab(args: argparse.Namespace) -> int:
    markdown = run_ab(workload_from_args(args), args.workers, args.out)
    print(markdown)
    return 0


def _up(args: argparse.Namespace) -> int:
    spec = GraphSpec(
        routing=routing_for(args.profile, RECIPE_AFFINITY_TTL_SECONDS), workers=args.workers
    )
    with LabGraph(spec, args.out / "up" / args.profile) as graph:
        print(
            f"lab graph {spec.graph_name} serving at {graph.outputs.frontend_url}", file=sys.stderr
        )
        print(f"outputs: {graph.outputs_path}  (Ctrl-C stops it)", file=sys.stderr)
        while True:
            time.sleep(3600)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lab", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    ab = commands.add_parser(
        "ab", help="both routing profiles: smoke, perf, report into build/lab/"
    )
    ab.add_argument("--workers", type=int, default=DEFAULT_WORKERS, help="mock workers per graph")
    ab.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT})"
    )
    add_workload_arguments(ab)
    ab.set_defaults(handler=_ab)

    up = commands.add_parser("up", help="run one lab graph until Ctrl-C")
    up.add_argument(
        "--profile",
        choices=[p.value for p in RoutingProfile],
        default=RoutingProfile.ROUND_ROBIN.value,
    )
    up.add_argument("--workers", type=int, default=DEFAULT_WORKERS, help="mock workers")
    up.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT})"
    )
    up.set_defaults(handler=_up)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with signals_as_keyboard_interrupt():
            return int(args.handler(args))
    except KeyboardInterrupt:
        print("lab: interrupted; every lab process was stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (LabNotInstalled, LabGraphError, SmokeError, PerfError, ReportError) as error:
        print(f"lab {args.command} FAILED: {error}", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    raise SystemExit(main())
