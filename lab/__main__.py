"""`python -m lab`: the local lab (Dynamo frontend + mock-engine workers on loopback).

    bash lab/setup.sh                        install .lab/ (once; quick when already done)
    python -m lab ab                         both profiles deployed with `pulumi up` on a local
                                             cluster, whose graphs the lab controller runs;
                                             smoke + perf + report -> build/lab/ (lab/cluster_ab.py)
    python -m lab ab --direct                the same A/B, each graph started from the routing
                                             settings (no cluster, no engine)
    python -m lab up --profile session-affinity
                                             one graph until Ctrl-C, for trying things by hand
    python -m lab stage perf --outputs build/lab/up/session-affinity/outputs.json
                                             any `python -m stages` command against a lab graph
    python -m lab calibrate | predict | capacity | report
                                             the lab tuned to a measured level, predicting the
                                             rest (`lab/planner/predict_cli.py`, docs/lab-prediction.md)

Exit status: 0 done, 1 the run failed (reason on stderr), 2 bad usage or input (nothing was
run), 130 interrupted; `stage` exits with the stage's own status. What it prints is masked.

Each command's `--out` is the lab's own folder, claimed for one command at a time
(`common.output_folders`; docs/lab.md says which folders are the lab's).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from common.credentials import masked_output
from common.input_files import MAX_RECORD_BYTES, read_text
from common.output_folders import OutputFolderError, claimed_folder, os_error_reason
from common.parsers import CommandParser, add_subcommands
from components.routing import RECIPE_AFFINITY_TTL_SECONDS, RoutingProfile, routing_for
from lab.ab import (
    DEFAULT_OUT,
    DirectGraphs,
    LabAbTarget,
    copy_latest_report,
    lab_archive,
    write_summary,
)
from lab.cluster_ab import ClusterGraphs
from lab.environment import LabInstall, LabNotInstalled
from lab.graph import (
    DEFAULT_WORKERS,
    MAX_FRONTENDS,
    MAX_WORKERS,
    GraphSpec,
    LabGraph,
    LabGraphError,
)
from lab.isolation import ZMQ_WARNING, forwarded_listener, port_forward, run_isolated
from lab.planner.calibration import CalibrationError
from lab.planner.capacity import CapacityError
from lab.planner.predict_cli import PROFILE
from lab.planner.predict_cli import add_commands as add_prediction_commands
from lab.stage_tools import LAB_RECIPE_WORKLOAD, LAB_WORKLOAD, lab_tools
from lab.time_scale import MAX_TIME_SCALE
from stages import cli as stages_cli
from stages.ab.cli import ab_run, add_run_arguments, print_summary
from stages.ab.cli import say as ab_say
from stages.ab.orchestrator import run_ab as run_orchestrator
from stages.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE, AbandonRun, StageError
from stages.incluster.processes import signals_as_keyboard_interrupt
from stages.options import add_workload_arguments, checked_option, positive_integer_option


def _ab(args: argparse.Namespace) -> int:
    """The A/B orchestrator with the lab as its target (`lab.ab`)."""
    if args.frontends > 1 and not args.direct:  # a ValueError: exit 2, before anything starts
        raise ValueError(
            "--frontends: several frontends run on the direct path only (--direct); the local "
            "cluster's A/B stacks deploy one (`frontendReplicas` 1)"
        )
    install = LabInstall().require()  # before anything starts: say how to install it
    hashing = args.frontend_choice == "hash"
    source = DirectGraphs(args.frontends, hashing) if args.direct else ClusterGraphs()
    target = LabAbTarget(args.out, args.workers, install, args.time_scale, source=source)
    run = ab_run(args, lab_archive(args.out), LAB_WORKLOAD, LAB_RECIPE_WORKLOAD)
    started = time.monotonic()
    with target:  # the graphs, then the cluster: also after a failure or Ctrl-C
        result = run_orchestrator(target, run, ab_say)
    write_summary(target, run, result, time.monotonic() - started)
    copy_latest_report(result, args.out)
    if result.report is not None:
        print(read_text(result.report, "A/B report", MAX_RECORD_BYTES))
    print_summary(result, run)
    if result.interrupted:
        raise KeyboardInterrupt
    return 0 if result.passed else EXIT_FAILED


def _time_scale(text: str) -> float | None:
    if text == "auto":
        return None
    value = float(text)
    if not text.isascii() or not 1 <= value <= MAX_TIME_SCALE:  # NaN fails both
        raise ValueError(text)
    return value


def _up(args: argparse.Namespace) -> int:
    spec = GraphSpec(
        routing=routing_for(args.profile, RECIPE_AFFINITY_TTL_SECONDS), workers=args.workers
    )
    listener = forwarded_listener()  # in a network namespace of its own: reached through it
    with LabGraph(spec, args.out / "up" / args.profile) as graph:
        if listener is not None:
            graph.publish(port_forward(listener, graph.outputs.frontend_port))
        print(
            f"lab graph {spec.graph_name} serving at {graph.outputs.frontend_url}", file=sys.stderr
        )
        print(f"outputs: {graph.outputs_path}  (Ctrl-C stops it)", file=sys.stderr)
        if listener is None:
            print(ZMQ_WARNING, file=sys.stderr)
        return watch(graph)


WATCH_SECONDS = 1.0
WRITER = "python -m lab"
ISOLATED = {"ab", "up", "calibrate", "predict", "capacity"}
"""Commands run in their own network namespace (`lab.isolation`): nothing they start is
reachable from outside; `up`'s frontend is forwarded from 127.0.0.1, for trying things by hand."""


def watch(graph: LabGraph) -> int:
    """Serve until Ctrl-C, saying so when a process of the graph exits: a worker's exit leaves a
    smaller graph (the frontend routes around it); a frontend's or the pass-through's ends the
    graph (status 1)."""
    reported: set[str] = set()
    while True:
        time.sleep(WATCH_SECONDS)
        for process in graph.exited():
            if process.name in reported:
                continue
            reported.add(process.name)
            cause = graph.exit_cause(process)
            if process not in graph.processes[graph.spec.frontends :]:  # not a worker
                what = "the frontend" if process is graph.processes[0] else process.name
                print(
                    f"lab up: {what} exited ({cause}): stopping the graph; its "
                    f"log: {process.log_path}",
                    file=sys.stderr,
                )
                return EXIT_FAILED
            alive = graph.spec.workers - len(reported)
            print(
                f"lab up: {process.name} exited ({cause}); {alive} workers still serve; "
                f"its log: {process.log_path}",
                file=sys.stderr,
            )


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="python -m lab", description=__doc__.splitlines()[0])
    commands = add_subcommands(parser, dest="command", required=True, metavar="COMMAND")

    ab = commands.add_parser(
        "ab", help="the A/B orchestrator on the lab: both profiles, archived, then the report"
    )
    workers = positive_integer_option(MAX_WORKERS)
    ab.add_argument("--workers", default=DEFAULT_WORKERS, help="mock workers per graph", **workers)
    ab.add_argument(
        "--time-scale",
        default=None,
        metavar="auto|K",
        help="run both graphs K times slower than real time, results given in real time "
        f"(1 to {MAX_TIME_SCALE:g}; default auto: chosen by probing the host, docs/lab.md)",
        **checked_option(_time_scale, f"auto or a number from 1 to {MAX_TIME_SCALE:g}"),
    )
    ab.add_argument(
        "--direct",
        action="store_true",
        help="start each graph from the routing settings, without the local cluster and "
        "`pulumi up` (no engine needed; the way calibration and prediction start theirs)",
    )
    ab.add_argument(
        "--frontends",
        default=1,
        help=f"frontends per graph, behind the lab's pass-through (1 to {MAX_FRONTENDS}; --direct)",
        **positive_integer_option(MAX_FRONTENDS),
    )
    ab.add_argument(
        "--frontend-choice",
        choices=("hash", "random"),
        default="hash",
        help="with several frontends, each connection to the one its X-Dynamo-Session-ID hashes "
        "to (hash, default: a consistent-hashing load balancer) or to one at random (random: a "
        "plain Service, which splits a session's affinity over the frontends)",
    )
    add_run_arguments(ab, DEFAULT_OUT)
    add_workload_arguments(ab)
    ab.set_defaults(handler=_ab)

    up = commands.add_parser("up", help="run one lab graph until Ctrl-C")
    up.add_argument("--profile", **PROFILE, default=RoutingProfile.ROUND_ROBIN.value)
    up.add_argument("--workers", default=DEFAULT_WORKERS, help="mock workers", **workers)
    up.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT})"
    )
    up.set_defaults(handler=_up)

    stage = commands.add_parser(
        "stage",
        help="a `python -m stages` command against a lab graph (e.g. stage perf --outputs F)",
        add_help=False,
    )
    stage.add_argument("stage_argv", nargs=argparse.REMAINDER, help="the stage command line")
    stage.set_defaults(handler=_stage)
    add_prediction_commands(commands)
    return parser


def _stage(args: argparse.Namespace) -> int:
    return stages_cli.main(args.stage_argv, local=lab_tools())


def main(argv: Sequence[str] | None = None) -> int:
    with masked_output():
        args = build_parser().parse_args(argv)
        if args.command in ISOLATED and argv is None:  # the command line, not a test's main()
            # Returns inside the namespace, or where it cannot make one.
            run_isolated(sys.argv[1:], forward=args.command == "up")
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    try:
        with signals_as_keyboard_interrupt():
            if not hasattr(args, "out"):  # `stage`: the stage claims its own --out
                return int(args.handler(args))
            with claimed_folder(args.out, WRITER, command=f"{WRITER} {args.command}"):
                return int(args.handler(args))
    except (KeyboardInterrupt, AbandonRun):  # AbandonRun: the A/B's second Ctrl-C
        print("lab: interrupted; every lab process was stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (LabNotInstalled, LabGraphError, StageError) as error:
        print(f"lab {args.command} FAILED: {error}", file=sys.stderr)
        return EXIT_FAILED
    except (CalibrationError, CapacityError, OutputFolderError, ValueError) as error:
        # A table, results file, calibration or --out the lab cannot use (pydantic's
        # ValidationError is a ValueError): checked before any graph starts, so nothing ran.
        print(f"lab {args.command}: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as error:  # a full disk, a folder it may not write: say which
        where = f" {error.filename}" if error.filename else ""
        reason = os_error_reason(error)
        print(f"lab {args.command} FAILED: cannot write{where}: {reason}", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    raise SystemExit(main())
