"""`python -m stages <stage> ...`: the test stages, against any stack-outputs file.

    pulumi stack output --json | python -m stages smoke --outputs -
    python -m stages perf --outputs build/lab/outputs-round-robin.json --out build/perf/rr
    python -m stages report --results rr/results.json aff/results.json --out build/report
    python -m stages archive push --stack round-robin --outputs outputs.json --stage perf ...

Each stage is one subcommand added by one `_add_<stage>` function; `archive` mounts the archive's
own command line (stages/archive_cli.py).
Exit status: 0 passed, 1 the stage failed (reason on stderr), 2 bad usage or unusable outputs.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from components.contract import OutputsError, StackOutputs
from stages.results import ProfileResults, ResultsError
from stages.workload import LAB_RECIPE_WORKLOAD, LAB_WORKLOAD, PerfWorkload

EXIT_FAILED = 1
EXIT_USAGE = 2
DEFAULT_PERF_DIR = Path("build/perf")


def load_outputs(source: str) -> StackOutputs:
    """`-` reads stdin (`pulumi stack output --json | ...`), anything else is a path."""
    return StackOutputs.load(sys.stdin if source == "-" else Path(source))


def _concurrency_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"expected e.g. 1,2,4,8,16, got {text!r}") from error


def add_workload_arguments(parser: argparse.ArgumentParser) -> None:
    """Workload options shared by `stages perf` and `lab ab`."""
    group = parser.add_argument_group("workload (defaults: the reduced lab sweep)")
    group.add_argument("--recipe-sizes", action="store_true",
                       help="the recipe's sweep: 200 videos x 20 questions, 128 tokens, c=1..16")  # fmt: skip
    group.add_argument("--videos", type=int, help="videos (sessions) per concurrency level")
    group.add_argument("--questions", type=int, help="questions (requests) per video")
    group.add_argument("--output-tokens", type=int, help="exact output tokens per request")
    group.add_argument("--concurrency", type=_concurrency_list, dest="concurrencies",
                       help="comma-separated levels, e.g. 1,2,4,8,16")  # fmt: skip
    group.add_argument("--prefix-tokens", type=int, help="lab: tokens of a video's text stand-in")
    group.add_argument("--turn-jitter-ms", type=int,
                       help="random pause (0..N ms) before each follow-up question")  # fmt: skip
    group.add_argument("--seed", type=int, help="random seed for datasets and AIPerf")


def workload_from_args(args: argparse.Namespace) -> PerfWorkload:
    base = LAB_RECIPE_WORKLOAD if args.recipe_sizes else LAB_WORKLOAD
    fields = ("videos", "questions", "output_tokens", "concurrencies", "prefix_tokens",
              "turn_jitter_ms", "seed")  # fmt: skip
    overrides = {name: getattr(args, name) for name in fields if getattr(args, name) is not None}
    return PerfWorkload.model_validate(base.model_dump() | overrides)


def _smoke(args: argparse.Namespace) -> int:
    from stages.smoke import run_smoke, smoke_request_body

    outputs = load_outputs(args.outputs)
    if args.dry_run:
        body = smoke_request_body(outputs.served_model, "<served video URL>")
        print(json.dumps(body, indent=2))
        return 0
    with tempfile.TemporaryDirectory(prefix="smoke-") as work_dir:
        answer = run_smoke(outputs, Path(work_dir), args.wait_seconds)
    print(f"Smoke test passed: {answer}")
    return 0


def _perf(args: argparse.Namespace) -> int:
    from stages.aiperf import aiperf_profile_args
    from stages.perf import LocalAIPerf, run_perf

    outputs = load_outputs(args.outputs)
    workload = workload_from_args(args)
    out_dir = args.out or DEFAULT_PERF_DIR / outputs.profile.value
    if args.dry_run:
        tokenizer = args.tokenizer or "<tokenizer>"
        for c in workload.concurrencies:
            level = out_dir / f"c{c}"
            argv = aiperf_profile_args(
                outputs, workload, c, level / "dataset.jsonl", level / "aiperf", tokenizer
            )
            print("aiperf " + " ".join(argv))
        return 0
    client = LocalAIPerf.for_lab(args.aiperf, args.tokenizer)
    results = run_perf(outputs, workload, out_dir, client)
    print(f"perf results: {out_dir / 'results.json'} ({len(results.levels)} levels)")
    return 0


def _report(args: argparse.Namespace) -> int:
    from stages.report import REPORT_FILE, write_report

    first, second = (ProfileResults.load(Path(p)) for p in args.results)
    markdown = write_report(first, second, args.out)
    print(markdown)
    print(f"report written to {args.out / REPORT_FILE}", file=sys.stderr)
    return 0


def _add_smoke(stages: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = stages.add_parser(
        "smoke", help="one question about a synthetic video must be answered"
    )
    parser.add_argument("--outputs", required=True, help="stack-outputs JSON file, or - for stdin")
    parser.add_argument("--wait-seconds", type=float, default=60.0,
                        help="how long to wait for /v1/models to list the model (default 60)")  # fmt: skip
    parser.add_argument(
        "--dry-run", action="store_true", help="print the request body, send nothing"
    )
    parser.set_defaults(handler=_smoke)


def _add_perf(stages: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = stages.add_parser("perf", help="AIPerf concurrency sweep, parsed into results.json")
    parser.add_argument("--outputs", required=True, help="stack-outputs JSON file, or - for stdin")
    parser.add_argument(
        "--out", type=Path, help=f"artifacts directory (default {DEFAULT_PERF_DIR}/<profile>)"
    )
    parser.add_argument("--aiperf", type=Path, help="AIPerf executable (default: the lab's venv)")
    parser.add_argument("--tokenizer", help="tokenizer for AIPerf (default: the lab's tiny model)")
    parser.add_argument(
        "--dry-run", action="store_true", help="print the AIPerf commands, run nothing"
    )
    add_workload_arguments(parser)
    parser.set_defaults(handler=_perf)


def _add_report(stages: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = stages.add_parser("report", help="both profiles side by side: report.md and a chart")
    parser.add_argument("--results", nargs=2, required=True, metavar="RESULTS_JSON",
                        help="the two profiles' results.json files, in any order")  # fmt: skip
    parser.add_argument(
        "--out", type=Path, required=True, help="directory for report.md and the chart"
    )
    parser.set_defaults(handler=_report)


def _add_archive(stages: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from stages import archive_cli

    parser = stages.add_parser("archive", help="store stage results in S3; list and download them")
    archive_cli.configure_parser(parser)
    parser.set_defaults(handler=archive_cli.run)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m stages", description=__doc__.splitlines()[0])
    stages = parser.add_subparsers(dest="stage", required=True, metavar="STAGE")
    adders: list[Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]] = [
        _add_smoke, _add_perf, _add_report, _add_archive,
    ]  # fmt: skip
    for add in adders:
        add(stages)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from stages.perf import PerfError
    from stages.report import ReportError
    from stages.smoke import SmokeError
    from stages.targets import TargetError

    try:
        return int(args.handler(args))
    except OutputsError as error:
        print(f"{args.stage}: {error}", file=sys.stderr)
        return EXIT_USAGE
    except (SmokeError, PerfError, ReportError, ResultsError, TargetError, RuntimeError) as error:
        label = "smoke test" if args.stage == "smoke" else args.stage
        print(f"{label} FAILED: {error}", file=sys.stderr)
        return EXIT_FAILED
