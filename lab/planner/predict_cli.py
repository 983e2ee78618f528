"""`python -m lab calibrate | predict | capacity | report`: the calibrated lab's command lines.

    python -m lab calibrate                 the recipe's concurrency-1 row -> calibration.json
    python -m lab calibrate --results rr/results.json aff/results.json
                                            your own cluster's perf results instead
    python -m lab predict                   the recipe's sweep, against the recipe's table
    python -m lab predict --check-slowdown 16
                                            ... and again 16x slower: does the factor matter?
    python -m lab predict --workers 16 --questions 10 --concurrency 8,32
                                            what if: another fleet or workload
    python -m lab capacity --profile session-affinity --target-rps 60 --max-ttft-p95-ms 200
    python -m lab report                    the saved prediction's report again; runs nothing

Everything goes under build/lab/predict/ unless --out says otherwise. The four commands' options
are one table (`COMMANDS`): those they share (the output folder, the calibration, the what-if
workload) are written and checked once.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from common.confined_paths import write_file
from components.routing import (
    MAX_AFFINITY_TTL_SECONDS,
    RECIPE_AFFINITY_TTL_SECONDS,
    RoutingProfile,
)
from lab.graph import MAX_WORKERS
from lab.planner.calibration import Calibration, calibrate
from lab.planner.capacity import plan_capacity
from lab.planner.measured_table import RECIPE_TABLE, MeasuredTable
from lab.planner.prediction import Prediction, predict
from lab.planner.prediction_report import render
from lab.sweep import LabRunner, LabSweep
from stages.core.typed_files import write_model
from stages.core.workload import MAX_CONCURRENCY, MAX_QUESTIONS, MAX_TOKENS
from stages.options import (
    concurrency_option,
    integer_option,
    positive_integer_option,
    positive_number_option,
)

DEFAULT_OUT = Path("build/lab/predict")
DEFAULT_SLOWDOWN = 6.0
MAX_SLOWDOWN = 1000.0
"""A lab 1,000 times slower than the deployment already takes hours a level; beyond, it never ends."""
MAX_MS = 3_600_000.0
"""An hour: no latency or engine time of a request is longer."""
CALIBRATION_FILE = "calibration.json"
PREDICTION_FILE = "prediction.json"
CHECK_FILE = "prediction-check.json"
REPORT_FILE = "prediction.md"


def _calibrate(args: argparse.Namespace) -> int:
    table = MeasuredTable.from_results(*args.results) if args.results else RECIPE_TABLE
    if args.reference_concurrency not in table.concurrencies:
        raise ValueError(
            f"--reference-concurrency {args.reference_concurrency}: {table.source} has no such "
            f"level; choose one of {', '.join(map(str, table.concurrencies))}"
        )
    calibration = calibrate(
        table,
        args.reference_concurrency,
        LabRunner(args.out / "calibration-runs"),
        args.slowdown or DEFAULT_SLOWDOWN,
        args.warm_engine_ms,
        args.tolerance,
        args.max_runs,
    )
    path = write_model(calibration, args.out / CALIBRATION_FILE)
    print(f"calibration: {path}" + ("" if calibration.converged else " (did not converge)"))
    return 0


def _sweep(
    args: argparse.Namespace, calibration: Calibration, measured: MeasuredTable | None = None
) -> LabSweep:
    """The calibration's workload and fleet, the what-if options over it; the levels of the
    measured table given, else the recipe's."""
    return LabSweep(
        workers=args.workers or calibration.workers,
        questions=args.questions or calibration.questions,
        output_tokens=args.output_tokens or calibration.output_tokens,
        concurrencies=args.concurrency or (measured or RECIPE_TABLE).concurrencies,
        waves=args.waves,
        affinity_ttl_seconds=args.affinity_ttl or RECIPE_AFFINITY_TTL_SECONDS,
        turn_jitter_ms=args.turn_jitter_ms,
    )


def _recipe_if_same_workload(sweep: LabSweep) -> MeasuredTable | None:
    ours = (sweep.workers, sweep.questions, sweep.output_tokens, sweep.affinity_ttl_seconds)
    recipe_ttl = RECIPE_AFFINITY_TTL_SECONDS
    recipe = (RECIPE_TABLE.workers, RECIPE_TABLE.questions, RECIPE_TABLE.output_tokens, recipe_ttl)
    return RECIPE_TABLE if ours == recipe else None


def _predict(args: argparse.Namespace) -> int:
    calibration = Calibration.load(args.calibration or args.out / CALIBRATION_FILE)
    given = MeasuredTable.from_results(*args.results) if args.results else None
    sweep = _sweep(args, calibration, given)
    slowdown = args.slowdown or calibration.slowdown
    sweep.check_scaled_ttl(slowdown, args.check_slowdown)
    runner = LabRunner(args.out / "prediction-runs")
    prediction = predict(calibration, sweep, runner, slowdown)
    check = args.check_slowdown
    second = predict(calibration, sweep, runner, check) if check else None
    _write(args.out, calibration, prediction, second, given)
    return 0


def _report(args: argparse.Namespace) -> int:
    calibration = Calibration.load(args.calibration or args.out / CALIBRATION_FILE)
    prediction = Prediction.load(args.out / PREDICTION_FILE).reassembled(calibration)
    check = args.out / CHECK_FILE
    second = Prediction.load(check).reassembled(calibration) if check.exists() else None
    given = MeasuredTable.from_results(*args.results) if args.results else None
    _write(args.out, calibration, prediction, second, given)
    return 0


def _write(
    out: Path,
    calibration: Calibration,
    prediction: Prediction,
    second: Prediction | None,
    given: MeasuredTable | None,
) -> None:
    write_model(prediction, out / PREDICTION_FILE)
    if second is not None:
        write_model(second, out / CHECK_FILE)
    measured = given or _recipe_if_same_workload(prediction.sweep)
    report = render(prediction, calibration, measured, second)
    write_file(out / REPORT_FILE, report)
    print(report)


def _capacity(args: argparse.Namespace) -> int:
    calibration = Calibration.load(args.calibration or args.out / CALIBRATION_FILE)
    sweep = _sweep(args, calibration)
    sweep.check_scaled_ttl(args.slowdown or calibration.slowdown)
    plan = plan_capacity(
        calibration,
        RoutingProfile(args.profile),
        sweep,
        args.target_rps,
        args.max_ttft_p95_ms,
        args.sessions_per_worker,
        args.max_workers,
        LabRunner(args.out / "capacity-runs"),
        args.slowdown or calibration.slowdown,
    )
    write_model(plan, args.out / f"capacity-{args.profile}.json")
    goal = f"{args.target_rps:g} req/s within TTFT p95 {args.max_ttft_p95_ms:g} ms"
    if plan.workers is None:
        print(f"{args.profile}: no fleet up to {args.max_workers} workers serves {goal}")
        return 1
    print(f"{args.profile}: {plan.workers} workers serve {goal} (the lab's prediction)")
    return 0


OUT = {"type": Path, "default": DEFAULT_OUT, "help": f"where files go (default {DEFAULT_OUT})"}
PROFILE: dict[str, Any] = {"choices": [p.value for p in RoutingProfile]}
RESULTS = {"nargs": 2, "type": Path, "metavar": ("ROUND_ROBIN", "SESSION_AFFINITY")}
COMMON: dict[str, dict[str, Any]] = {
    "--out": OUT,
    "--slowdown": {
        **positive_number_option(MAX_SLOWDOWN),
        "help": f"run the lab this many times slower than the deployment (default: "
        f"the calibration's, {DEFAULT_SLOWDOWN:g} for a new one)",
    },
}
CALIBRATION = {"--calibration": {"type": Path, "help": f"default: <out>/{CALIBRATION_FILE}"}}
WHAT_IF: dict[str, dict[str, Any]] = {
    "--workers": positive_integer_option(MAX_WORKERS),
    "--questions": positive_integer_option(MAX_QUESTIONS),
    "--output-tokens": positive_integer_option(MAX_TOKENS),
    "--affinity-ttl": {
        **positive_integer_option(MAX_AFFINITY_TTL_SECONDS),
        "help": f"seconds (default {RECIPE_AFFINITY_TTL_SECONDS})",
    },
    "--concurrency": {**concurrency_option(), "help": "e.g. 1,2,4,8,16"},
    "--waves": {
        **positive_number_option(),
        "default": 2.0,
        "help": "videos per level = waves x concurrency (default 2)",
    },
    "--turn-jitter-ms": {
        **integer_option(0),
        "default": 0,
        "help": "pause of 0..N ms before each follow-up question (default 0)",
    },
}
# Each command: its help, its handler, its own options (after COMMON), whether it takes WHAT_IF.
COMMANDS: dict[str, tuple[str, Any, dict[str, dict[str, Any]], bool]] = {
    "calibrate": (
        "tune the lab to one measured level of both profiles",
        _calibrate,
        {
            "--results": {
                **RESULTS,
                "help": "both profiles' results.json from your perf stage (default: the "
                "recipe's table)",
            },
            "--reference-concurrency": {
                **positive_integer_option(MAX_CONCURRENCY),
                "default": 1,
                "help": "the level to calibrate on (default 1: nothing queues)",
            },
            "--warm-engine-ms": {
                **positive_number_option(MAX_MS),
                "help": "engine share of a warm first token (default: the mock engine's own, "
                "at speed 1)",
            },
            "--tolerance": {
                **positive_number_option(1.0),
                "default": 0.02,
                "help": "relative error accepted on each time (default 0.02)",
            },
            "--max-runs": {
                **positive_integer_option(100),
                "default": 3,
                "help": "lab checks at most (default 3)",
            },
        },
        False,
    ),
    "predict": (
        "the sweep's table from a calibration",
        _predict,
        {
            **CALIBRATION,
            "--results": {
                **RESULTS,
                "help": "a measured table to compare with (default: the recipe's, unless a "
                "what-if option changes the workload)",
            },
            "--check-slowdown": {
                **positive_number_option(MAX_SLOWDOWN),
                "help": "run again this many times slower and compare",
            },
        },
        True,
    ),
    "report": (
        "derive a saved prediction's report again from its lab levels; runs nothing",
        _report,
        {
            **CALIBRATION,
            "--results": {
                **RESULTS,
                "help": "the measured table to compare with (default: the recipe's, for the "
                "recipe's workload)",
            },
        },
        False,
    ),
    "capacity": (
        "workers needed for req/s at a TTFT p95",
        _capacity,
        {
            **CALIBRATION,
            "--profile": {**PROFILE, "required": True},
            "--target-rps": {**positive_number_option(), "required": True},
            "--max-ttft-p95-ms": {**positive_number_option(MAX_MS), "required": True},
            "--sessions-per-worker": {
                **concurrency_option(),
                "default": (1, 2, 4),
                "help": "sessions per worker to try (default 1,2,4)",
            },
            "--max-workers": {
                **positive_integer_option(MAX_WORKERS),
                "default": 32,
                "help": "largest fleet the lab runs (default 32)",
            },
        },
        True,
    ),
}


def add_options(parser: argparse._ActionsContainer, options: dict[str, dict[str, Any]]) -> None:
    for option, keywords in options.items():
        parser.add_argument(option, **keywords)


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    for name, (help_text, handler, options, what_if) in COMMANDS.items():
        parser = commands.add_parser(name, help=help_text)
        add_options(parser, COMMON | options)
        if what_if:
            title = "what if (default: the calibration's workload and fleet)"
            add_options(parser.add_argument_group(title), WHAT_IF)
        parser.set_defaults(handler=handler)
