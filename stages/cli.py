"""`python -m stages <stage> ...`: the test stages, against any stack-outputs file.

    pulumi stack output --json | python -m stages smoke --outputs -
    python -m stages perf --outputs outputs.json --out build/perf/rr
    python -m stages report --results rr/results.json aff/results.json --out build/report
    python -m stages report --archive-bucket B --stacks round-robin session-affinity --out DIR
    python -m stages archive push --stack round-robin --outputs outputs.json --stage perf ...
    python -m stages ab --archive-bucket my-results          # the whole A/B on a cluster

The outputs' `target` chooses, once, where smoke and perf run (`stages.targets.stage_target`):
`cluster` as Jobs in the stack's namespace; `lab` as local processes, through the lab (`python -m
lab stage ...`), which passes in its tools. Each stage is one subcommand: one `_add_<stage>`
parser and one handler. A stage's `--out` is its own (`common.output_folders`); its output is
masked (`credentials`).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from argparse import ArgumentParser
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeAlias

from common.credentials import masked_output
from common.output_folders import OutputFolderError, claimed_folder, os_error_reason
from common.parsers import CommandParser, add_subcommands
from components.contract import OutputsError, StackOutputs
from stages.ab.cli import archive_of, archive_problem, usage_problem
from stages.ab.cli import configure_parser as configure_ab_parser
from stages.ab.cli import run as run_ab
from stages.archive.cli import configure_parser as configure_archive_parser
from stages.archive.cli import run as run_archive
from stages.archive.cli import segment
from stages.archive.records import DEFAULT_PREFIX
from stages.archive.report_inputs import fetch_pair, write_sources
from stages.core.report import REPORT_FILE, write_report
from stages.core.results import ProfileResults, ResultsError
from stages.errors import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    StageError,
    UsageError,
    exit_status_help,
)
from stages.incluster.processes import signals_as_keyboard_interrupt
from stages.local.run import LocalTools
from stages.options import (
    add_cluster_arguments,
    add_perf_cluster_arguments,
    add_workload_arguments,
    cluster_options,
    seconds_option,
    workload_from_args,
)
from stages.targets import stage_target

DEFAULT_PERF_DIR = Path("build/perf")
SMOKE_MODEL_WAIT_SECONDS = 60.0
PERF_MODEL_WAIT_SECONDS = 600.0

Handler = Callable[[argparse.Namespace, LocalTools | None], int]
Stages: TypeAlias = "argparse._SubParsersAction[ArgumentParser]"


def load_outputs(source: str) -> StackOutputs:
    """`-` reads stdin (`pulumi stack output --json | ...`), anything else is a path; what the
    contract refuses is an `OutputsError`, which `main` reports as bad usage."""
    return StackOutputs.load(sys.stdin if source == "-" else Path(source))


def _smoke(args: argparse.Namespace, local: LocalTools | None) -> int:
    target = stage_target(load_outputs(args.outputs), cluster_options(args), local)
    if args.dry_run:
        print(target.smoke_dry_run(args.wait_seconds))
    else:
        print("\n".join(target.run_smoke(args.wait_seconds).lines()))
    return 0


def _perf(args: argparse.Namespace, local: LocalTools | None) -> int:
    target = stage_target(load_outputs(args.outputs), cluster_options(args), local)
    workload = workload_from_args(args, target.default_workload(), target.recipe_workload())
    out_dir = args.out or DEFAULT_PERF_DIR / target.outputs.profile.value
    if args.dry_run:
        print(target.perf_dry_run(workload, out_dir, args.wait_seconds))
        return 0
    with claimed_folder(out_dir, "python -m stages perf"):
        results = target.run_perf(workload, out_dir, args.wait_seconds)
    print(f"perf results: {out_dir / 'results.json'} ({len(results.levels)} levels)")
    return 0


def _report(args: argparse.Namespace, local: LocalTools | None) -> int:
    if not args.archive_bucket:  # read before anything is written
        first, second = (_load_results(Path(p)) for p in args.results)
    with claimed_folder(args.out, "python -m stages report"):
        if args.archive_bucket:
            first, second = _archived_results(args)
        try:
            markdown = write_report(first, second, args.out)
        except OSError as error:
            reason = os_error_reason(error)
            raise UsageError(f"--out {args.out}: cannot write the report ({reason})") from None
    print(markdown)
    print(f"report written to {args.out / REPORT_FILE}", file=sys.stderr)
    return 0


def _load_results(path: Path) -> ProfileResults:
    try:
        return ProfileResults.load(path)
    except ResultsError as error:  # a file argument that is not a result: nothing ran
        raise UsageError(f"--results: {error}") from None
    except OSError as error:  # a directory, an unreadable file (a missing one is a ResultsError)
        reason = error.strerror or type(error).__name__
        raise UsageError(f"--results {path} cannot be read ({reason})") from None


def _archived_results(args: argparse.Namespace) -> tuple[ProfileResults, ProfileResults]:
    """The two stacks' perf results from the archive; `sources.json` records which runs."""
    location = archive_of(args)
    with tempfile.TemporaryDirectory(prefix="report-archive-") as work_dir:
        pair = fetch_pair(location, args.stacks, args.run_ids, Path(work_dir))
    for item in pair:
        print(f"report: {item.describe()}", file=sys.stderr)
    write_sources(pair, args.out)
    return pair[0].results, pair[1].results


def _stage_parser(stages: Stages, name: str, summary: str, handler: Handler) -> ArgumentParser:
    parser = stages.add_parser(
        name,
        help=summary,
        description=summary,
        epilog=exit_status_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(stage_parser=parser, handler=handler)
    return parser


def _target_arguments(parser: ArgumentParser, wait_seconds: float, wait: str, dry_run: str) -> None:
    """What smoke and perf take: the outputs, the wait for the model, and a dry run."""
    parser.add_argument("--outputs", required=True, help="stack-outputs JSON file, or - for stdin")
    parser.add_argument(
        "--wait-seconds",
        default=wait_seconds,
        help=f"{wait} (default {wait_seconds:g})",
        **seconds_option(),
    )
    parser.add_argument("--dry-run", action="store_true", help=dry_run)


def _add_smoke(stages: Stages) -> None:
    summary = "one question about a synthetic video must be answered"
    parser = _stage_parser(stages, "smoke", summary, _smoke)
    _target_arguments(
        parser,
        SMOKE_MODEL_WAIT_SECONDS,
        "how long to wait for /v1/models to list the model",
        "print the program's config (lab) or the manifests (cluster); send nothing",
    )
    add_cluster_arguments(parser, default_timeout="900")


def _add_perf(stages: Stages) -> None:
    summary = "AIPerf concurrency sweep, parsed into results.json"
    parser = _stage_parser(stages, "perf", summary, _perf)
    _target_arguments(
        parser,
        PERF_MODEL_WAIT_SECONDS,
        "how long the program waits for /v1/models",
        "print the AIPerf commands (lab) or the manifests (cluster); run nothing",
    )
    parser.add_argument(
        "--out", type=Path, help=f"artifacts directory (default {DEFAULT_PERF_DIR}/<profile>)"
    )
    add_workload_arguments(parser)
    add_perf_cluster_arguments(add_cluster_arguments(parser, default_timeout="14400 (4 h)"))


def _add_report(stages: Stages) -> None:
    summary = "both profiles side by side: report.md and a chart"
    parser = _stage_parser(stages, "report", summary, _report)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--results",
        nargs=2,
        metavar="RESULTS_JSON",
        help="the two profiles' results.json files, in any order",
    )
    source.add_argument(
        "--archive-bucket",
        metavar="BUCKET",
        help="read both profiles' perf runs from this S3 archive instead",
    )
    archive = parser.add_argument_group("from the archive (credentials from the AWS environment)")
    for option, metavar, help in (
        ("--stacks", "STACK", "the two stacks whose perf runs to compare"),
        ("--run-ids", "RUN_ID", "one run id per stack (default: each stack's latest perf run)"),
    ):
        archive.add_argument(option, nargs=2, metavar=metavar, type=segment, help=help)
    archive.add_argument(
        "--archive-endpoint",
        metavar="URL",
        help="S3-compatible endpoint (default: AWS_ENDPOINT_URL_S3 / AWS)",
    )
    archive.add_argument(
        "--archive-prefix",
        default=DEFAULT_PREFIX,
        help="key prefix (default: %(default)s)",
    )
    parser.add_argument(
        "--out", type=Path, required=True, help="directory for report.md and the chart"
    )


def _add_ab(stages: Stages) -> None:
    summary = "the recipe's A/B on a cluster: each profile deployed, tested, archived, taken down"
    configure_ab_parser(_stage_parser(stages, "ab", summary, _ab))


def _ab(args: argparse.Namespace, local: LocalTools | None) -> int:
    with claimed_folder(args.out, "python -m stages ab"):
        return run_ab(args)


def _add_archive(stages: Stages) -> None:
    parser = stages.add_parser("archive", help="store stage results in S3; list and download them")
    configure_archive_parser(parser)
    parser.set_defaults(handler=lambda args, local: run_archive(args))


def build_parser() -> ArgumentParser:
    parser = CommandParser(
        prog="python -m stages",
        description=__doc__.splitlines()[0],
        epilog=exit_status_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    stages = add_subcommands(parser, dest="stage", required=True, metavar="STAGE")
    for add in (_add_smoke, _add_perf, _add_report, _add_archive, _add_ab):
        add(stages)
    return parser


def _check_arguments(args: argparse.Namespace) -> None:
    """What the parser cannot check option by option (before anything runs)."""
    problem = None
    if args.stage == "report" and args.archive_bucket and not args.stacks:
        problem = "--archive-bucket needs --stacks STACK STACK"
    elif args.stage == "report" and not args.archive_bucket and (args.stacks or args.run_ids):
        problem = "--stacks and --run-ids read from the archive: add --archive-bucket"
    elif args.stage in {"report", "ab"}:
        problem = (usage_problem if args.stage == "ab" else archive_problem)(args)
    if problem:
        args.stage_parser.error(problem)


def main(argv: Sequence[str] | None = None, local: LocalTools | None = None) -> int:
    """Run one stage; returns its exit status. `local`: the tools of a graph on this machine
    (the lab passes them; without them, outputs with `target: lab` are refused)."""
    with masked_output():
        args = build_parser().parse_args(argv)
        _check_arguments(args)
        return _run(args, local)


def _run(args: argparse.Namespace, local: LocalTools | None) -> int:
    label = "smoke test" if args.stage == "smoke" else args.stage
    handler: Handler = args.handler
    try:
        with signals_as_keyboard_interrupt():
            return handler(args, local)
    except (OutputsError, OutputFolderError) as error:
        print(f"{args.stage}: {error}", file=sys.stderr)
        return EXIT_USAGE
    except StageError as error:
        print(f"{label} FAILED: {error}", file=sys.stderr)
        return error.exit_status
    except KeyboardInterrupt:
        print(f"{label}: interrupted; everything it started was stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as error:  # a full disk, a folder it may not write: say which
        where = f" {error.filename}" if error.filename else ""
        print(f"{label} FAILED: cannot write{where}: {os_error_reason(error)}", file=sys.stderr)
        return EXIT_FAILED
