"""`python -m stages <stage> ...`: the test stages, against any stack-outputs file.

    pulumi stack output --json | python -m stages smoke --outputs -
    python -m stages perf --outputs build/lab/outputs-round-robin.json --out build/perf/rr
    python -m stages report --results rr/results.json aff/results.json --out build/report
    python -m stages report --archive-bucket B --stacks round-robin session-affinity --out DIR
    python -m stages archive push --stack round-robin --outputs outputs.json --stage perf ...

The outputs' `target` chooses where smoke and perf run: `lab` on this machine, `cluster` as Jobs
in the stack's namespace (see stages/targets.py). Each stage is one subcommand added by one
`_add_<stage>` function; `archive` mounts the archive's own command line (stages/archive_cli.py).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from components.contract import OutputsError, StackOutputs
from stages.results import ProfileResults, ResultsError
from stages.workload import LAB_RECIPE_WORKLOAD, LAB_WORKLOAD, RECIPE_WORKLOAD, PerfWorkload

if TYPE_CHECKING:
    from stages.cluster import ClusterOptions

EXIT_FAILED = 1
EXIT_USAGE = 2
DEFAULT_PERF_DIR = Path("build/perf")
SMOKE_MODEL_WAIT_SECONDS = 60.0
PERF_MODEL_WAIT_SECONDS = 600.0

EXIT_STATUS = """\
exit status:
  0  passed
  1  the stage failed (the reason is on stderr; for smoke the last stdout line says it passed)
  2  bad usage, or stack outputs that break the contract
  3  cluster: the frontend never listed the served model (the Job's pod says so)
  4  cluster: the Job did not finish within --timeout (or its activeDeadlineSeconds)
  5  cluster: the Job's pod did not start within --start-timeout (image pull, scheduling, quota)
  6  cluster: the Kubernetes API is unreachable or refuses (kubeconfig, context, credentials, RBAC)
The lab target reports a frontend that never lists the model with status 1."""


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
    group = parser.add_argument_group(
        "workload (defaults: the reduced lab sweep for the lab, the recipe's sweep for a cluster)"
    )
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


def workload_from_args(args: argparse.Namespace, base: PerfWorkload | None = None) -> PerfWorkload:
    """The workload the options describe, on top of `base` (default: the lab's sweeps)."""
    if base is None:
        base = LAB_RECIPE_WORKLOAD if args.recipe_sizes else LAB_WORKLOAD
    fields = ("videos", "questions", "output_tokens", "concurrencies", "prefix_tokens",
              "turn_jitter_ms", "seed")  # fmt: skip
    overrides = {name: getattr(args, name) for name in fields if getattr(args, name) is not None}
    return PerfWorkload.model_validate(base.model_dump() | overrides)


def _add_cluster_arguments(parser: argparse.ArgumentParser, stage: str) -> argparse._ArgumentGroup:
    from stages.cluster_jobs import POD_IMAGE

    default_timeout = "900" if stage == "smoke" else "14400 (4 h)"
    group = parser.add_argument_group("cluster target (outputs with target: cluster)")
    group.add_argument("--kubeconfig", type=Path,
                       help="kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")  # fmt: skip
    group.add_argument("--context", help="kubeconfig context (default: the outputs' kubeContext)")
    group.add_argument("--timeout", type=float,
                       help=f"seconds for the whole Job, from submission (default {default_timeout})")  # fmt: skip
    group.add_argument("--start-timeout", type=float, default=600.0,
                       help="seconds for the Job's pod to start (default 600)")  # fmt: skip
    group.add_argument("--image", default=POD_IMAGE,
                       help=f"the pod's Python image; a digest pins harder (default {POD_IMAGE})")  # fmt: skip
    group.add_argument("--pip-index-url", help="a PyPI mirror for the pod's pip (default: PyPI)")
    group.add_argument("--run-id", help="label value tying the Job, pod and Service of one run")
    return group


def cluster_options(args: argparse.Namespace) -> ClusterOptions:
    """`ClusterOptions` from the cluster arguments; perf adds its tokenizer and connections."""
    from stages.cluster import ClusterOptions

    perf_only = {
        name: getattr(args, name)
        for name in ("tokenizer", "connection_reuse")
        if getattr(args, name, None) is not None
    }
    return ClusterOptions(
        kubeconfig=args.kubeconfig,
        context=args.context,
        timeout_seconds=args.timeout,
        start_timeout_seconds=args.start_timeout,
        image=args.image,
        pip_index_url=args.pip_index_url,
        run_id=args.run_id,
        **perf_only,
    )


def _smoke(args: argparse.Namespace) -> int:
    from stages import targets

    outputs = load_outputs(args.outputs)
    cluster = cluster_options(args)
    if args.dry_run:
        print(targets.smoke_dry_run(outputs, args.wait_seconds, cluster))
        return 0
    answer = targets.run_smoke(outputs, args.wait_seconds, cluster)
    print(f"Smoke test passed: {answer}")
    return 0


def _perf(args: argparse.Namespace) -> int:
    from stages import targets

    outputs = load_outputs(args.outputs)
    base = RECIPE_WORKLOAD if outputs.target == "cluster" else None
    workload = workload_from_args(args, base)
    out_dir = args.out or DEFAULT_PERF_DIR / outputs.profile.value
    cluster = cluster_options(args)
    if args.dry_run:
        print(targets.perf_dry_run(outputs, workload, out_dir, args.wait_seconds, cluster,
                                   args.tokenizer))  # fmt: skip
        return 0
    results = targets.run_perf(
        outputs, workload, out_dir, args.wait_seconds, cluster, args.aiperf, args.tokenizer
    )
    print(f"perf results: {out_dir / 'results.json'} ({len(results.levels)} levels)")
    return 0


def _report(args: argparse.Namespace) -> int:
    from stages.report import REPORT_FILE, write_report

    if args.archive_bucket:
        first, second = _archived_results(args)
    else:
        first, second = (ProfileResults.load(Path(p)) for p in args.results)
    markdown = write_report(first, second, args.out)
    print(markdown)
    print(f"report written to {args.out / REPORT_FILE}", file=sys.stderr)
    return 0


def _archived_results(args: argparse.Namespace) -> tuple[ProfileResults, ProfileResults]:
    """The two stacks' perf results from the archive; `sources.json` records which runs."""
    from stages.archive import ArchiveLocation
    from stages.archive_report import fetch_pair, write_sources

    location = ArchiveLocation(
        bucket=args.archive_bucket, prefix=args.archive_prefix, endpoint_url=args.archive_endpoint
    )
    with tempfile.TemporaryDirectory(prefix="report-archive-") as work_dir:
        pair = fetch_pair(location, args.stacks, args.run_ids, Path(work_dir))
    for item in pair:
        print(f"report: {item.describe()}", file=sys.stderr)
    write_sources(pair, args.out)
    return pair[0].results, pair[1].results


def _outputs_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--outputs", required=True, help="stack-outputs JSON file, or - for stdin")


def _stage_parser(
    stages: argparse._SubParsersAction[argparse.ArgumentParser], name: str, summary: str
) -> argparse.ArgumentParser:
    return stages.add_parser(
        name,
        help=summary,
        description=summary,
        epilog=EXIT_STATUS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _add_smoke(stages: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = _stage_parser(stages, "smoke", "one question about a synthetic video must be answered")
    _outputs_argument(parser)
    parser.add_argument("--wait-seconds", type=float, default=SMOKE_MODEL_WAIT_SECONDS,
                        help="how long to wait for /v1/models to list the model (default 60)")  # fmt: skip
    parser.add_argument("--dry-run", action="store_true",
                        help="print the request body (lab) or the manifests (cluster); send nothing")  # fmt: skip
    _add_cluster_arguments(parser, "smoke")
    parser.set_defaults(handler=_smoke)


def _add_perf(stages: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from stages.cluster_jobs import CLUSTER_TOKENIZER

    parser = _stage_parser(stages, "perf", "AIPerf concurrency sweep, parsed into results.json")
    _outputs_argument(parser)
    parser.add_argument(
        "--out", type=Path, help=f"artifacts directory (default {DEFAULT_PERF_DIR}/<profile>)"
    )
    parser.add_argument("--wait-seconds", type=float, default=PERF_MODEL_WAIT_SECONDS,
                        help="cluster: how long the pod waits for /v1/models (default 600)")  # fmt: skip
    parser.add_argument("--aiperf", type=Path, help="lab: AIPerf executable (default: the lab's)")
    parser.add_argument("--tokenizer",
                        help=f"AIPerf's tokenizer (default: the lab's tiny model; cluster: {CLUSTER_TOKENIZER})")  # fmt: skip
    parser.add_argument("--dry-run", action="store_true",
                        help="print the AIPerf commands (lab) or the manifests (cluster); run nothing")  # fmt: skip
    add_workload_arguments(parser)
    cluster = _add_cluster_arguments(parser, "perf")
    cluster.add_argument("--connection-reuse", choices=["never", "pooled", "sticky-user-sessions"],
                         help="AIPerf's connections in the pod (default never, as in the lab)")  # fmt: skip
    parser.set_defaults(handler=_perf)


def _add_report(stages: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = _stage_parser(stages, "report", "both profiles side by side: report.md and a chart")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--results", nargs=2, metavar="RESULTS_JSON",
                        help="the two profiles' results.json files, in any order")  # fmt: skip
    source.add_argument("--archive-bucket", metavar="BUCKET",
                        help="read both profiles' perf runs from this S3 archive instead")  # fmt: skip
    archive = parser.add_argument_group("from the archive (credentials: the AWS environment)")
    archive.add_argument("--stacks", nargs=2, metavar="STACK",
                         help="the two stacks whose perf runs to compare")  # fmt: skip
    archive.add_argument("--run-ids", nargs=2, metavar="RUN_ID",
                         help="one run id per stack (default: each stack's latest perf run)")  # fmt: skip
    archive.add_argument("--archive-endpoint", metavar="URL",
                         help="S3-compatible endpoint (default: AWS_ENDPOINT_URL_S3 / AWS)")  # fmt: skip
    archive.add_argument("--archive-prefix", default="cosmos3-nano-reasoner",
                         help="key prefix (default: %(default)s)")  # fmt: skip
    parser.add_argument(
        "--out", type=Path, required=True, help="directory for report.md and the chart"
    )
    parser.set_defaults(handler=_report, report_parser=parser)


def _add_archive(stages: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from stages import archive_cli

    parser = stages.add_parser("archive", help="store stage results in S3; list and download them")
    archive_cli.configure_parser(parser)
    parser.set_defaults(handler=archive_cli.run)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m stages",
        description=__doc__.splitlines()[0],
        epilog=EXIT_STATUS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    stages = parser.add_subparsers(dest="stage", required=True, metavar="STAGE")
    adders: list[Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]] = [
        _add_smoke, _add_perf, _add_report, _add_archive,
    ]  # fmt: skip
    for add in adders:
        add(stages)
    return parser


def _check_report_arguments(args: argparse.Namespace) -> None:
    if args.stage == "report" and args.archive_bucket and not args.stacks:
        args.report_parser.error("--archive-bucket needs --stacks STACK STACK")
    if args.stage == "report" and not args.archive_bucket and (args.stacks or args.run_ids):
        args.report_parser.error(
            "--stacks and --run-ids read from the archive: add --archive-bucket"
        )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _check_report_arguments(args)
    from stages.archive import ArchiveError
    from stages.kube import ClusterStageError
    from stages.perf import PerfError
    from stages.report import ReportError
    from stages.smoke import SmokeError
    from stages.targets import TargetError

    label = "smoke test" if args.stage == "smoke" else args.stage
    try:
        return int(args.handler(args))
    except OutputsError as error:
        print(f"{args.stage}: {error}", file=sys.stderr)
        return EXIT_USAGE
    except ClusterStageError as error:
        print(f"{label} FAILED: {error}", file=sys.stderr)
        return error.exit_code
    except (SmokeError, PerfError, ReportError, ResultsError, TargetError, ArchiveError,
            RuntimeError) as error:  # fmt: skip
        print(f"{label} FAILED: {error}", file=sys.stderr)
        return EXIT_FAILED
