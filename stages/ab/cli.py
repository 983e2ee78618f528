"""`python -m stages ab`: the recipe's whole A/B on a cluster, as one command.

    python -m stages ab --archive-bucket my-results [--run-id ID] [--gpus 8] [--keep]

Per profile (round robin, then session affinity): its stack up, smoke, perf, both archived, its
graph taken down; the shared layer stack first (once); the report of both last, archived too. A
second run with the same `--run-id` continues where a failed one stopped. The lab runs the same
orchestration with `python -m lab ab`.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

from common import REPO_ROOT
from common.input_files import MAX_RECORD_BYTES, read_text
from stages.ab.cluster_target import LAYER_STACK, PROFILE_STACKS, ClusterAbTarget
from stages.ab.orchestrator import AbResult
from stages.ab.orchestrator import run_ab as run_orchestrator
from stages.ab.plan import AbRun
from stages.ab.pulumi_stacks import PulumiStacks
from stages.ab.run_archive import own_name
from stages.archive import DEFAULT_PREFIX, ArchiveLocation, current_commit, new_run_id
from stages.archive.cli import ArchiveUsageError, archive_location, segment
from stages.cluster.run import check_cluster_workload
from stages.core.ab_verdict import VERDICT_PREFIX, verdict_in
from stages.core.workload import RECIPE_WORKLOAD, PerfWorkload
from stages.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_PASSED, AbandonRun
from stages.options import (
    add_cluster_arguments,
    add_perf_cluster_arguments,
    add_workload_arguments,
    cluster_options,
    integer_option,
    workload_from_args,
)

DEFAULT_OUT = Path("build/ab")
REHEARSAL_BUCKET = "rehearsal-archives-nothing"
MAX_GPUS = 100_000
"""`--gpus`: more GPUs than any one Kubernetes cluster holds (5,000 nodes of 8) is a typo."""
ARCHIVE_OPTIONS = {
    "bucket": "--archive-bucket",
    "prefix": "--archive-prefix",
    "endpoint_url": "--archive-endpoint",
}
"""The archive location's fields and the options of `report` and `ab` that set them."""


_SAY = threading.Lock()
"""`pulumi`'s lines are relayed from threads that follow its output: one line at a time, so that
a line said from the main thread is never run into one of them (print writes the text and the
newline separately)."""


def say(message: str) -> None:
    with _SAY:
        print(f"[ab] {message}", file=sys.stderr, flush=True)


def add_run_arguments(parser: argparse.ArgumentParser, default_out: Path) -> None:
    """What every A/B command takes: which run, where its files go, and whether to keep graphs."""
    parser.add_argument(
        "--run-id",
        type=segment,  # an archive key segment, and printed on every line of the run
        help="the run to start or continue (default: a new one, UTC time + commit)",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="leave every graph deployed, even after a failure (default: take each down)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=default_out,
        help=f"directory for the run's files (default {default_out})",
    )


def configure_parser(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(parser, DEFAULT_OUT)
    parser.add_argument(
        "--gpus",
        help="GPUs the graphs may use (default: what the cluster's nodes offer)",
        **integer_option(1, MAX_GPUS, f"1 to {MAX_GPUS} GPUs"),
    )
    parser.add_argument(
        "--rehearse",
        action="store_true",
        help="deploy and take down each graph for real, but only write what each "
        "stage would run: nothing measured or archived (for the local cluster)",
    )
    archive = parser.add_argument_group("archive (credentials from the AWS environment)")
    archive.add_argument(
        "--archive-bucket",
        metavar="BUCKET",
        help="where results and the report go (required unless --rehearse)",
    )
    archive.add_argument(
        "--archive-endpoint",
        metavar="URL",
        help="S3-compatible endpoint, or file:///dir for a local directory",
    )
    archive.add_argument("--archive-prefix", default=DEFAULT_PREFIX)
    stacks = parser.add_argument_group("stacks (Pulumi Automation API; the `pulumi` on PATH)")
    stacks.add_argument(
        "--org",
        default=os.environ.get("PULUMI_ORG"),
        help="organization that owns the stacks (default: $PULUMI_ORG; DIY: organization)",
    )
    stacks.add_argument("--layer-stack", type=pulumi_stack_name, default=LAYER_STACK)
    stacks.add_argument(
        "--policy-pack",
        action="append",
        default=[],
        metavar="PACK",
        help="CrossGuard pack for every preview and update (e.g. policy/analyzer)",
    )
    stacks.add_argument(
        "--stacks",
        nargs=2,
        metavar="STACK",
        type=pulumi_stack_name,
        default=list(PROFILE_STACKS.values()),
        help="the round-robin and the session-affinity stack",
    )
    add_workload_arguments(parser)
    cluster = add_cluster_arguments(parser, default_timeout="14400 (4 h)", job_run_id=False)
    add_perf_cluster_arguments(cluster)


PULUMI_STACK_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")
"""A stack's name as Pulumi takes it (`tokens.ValidateStackName`: alphanumerics, `-`, `_`, `.`);
the organization and project of a qualified `<org>/<project>/<stack>` likewise."""


def pulumi_stack_name(value: str) -> str:
    """A stack name or `<org>/<project>/<stack>`: never a path (`./rr`, `/tmp/rr`, `a/b`), which
    the CLI would read as another organization's stack or refuse after the layer is up."""
    parts = value.split("/")
    if len(parts) not in (1, 3) or not all(
        PULUMI_STACK_NAME.fullmatch(part) and part not in (".", "..") for part in parts
    ):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a Pulumi stack name (letters, digits, `-`, `_`, `.`; at most 100) "
            "or <org>/<project>/<stack>"
        )
    return value


def usage_problem(args: argparse.Namespace) -> str | None:
    """What the parser cannot check option by option: an archive (unless rehearsing) and its
    location, and stacks that cannot be an A/B: one stack for both profiles (the second `up`
    would replace the first profile's graph), or the layer stack as a profile's (its destroy
    would delete the model cache's owner). Stacks are compared by their own names, the last part
    of `<org>/<project>/<stack>`: `shared` and `acme/cosmos3-nano-reasoner/shared` may be one
    stack, and the archive keys runs by that name alone."""
    if not args.rehearse and args.archive_bucket is None:
        return "--archive-bucket BUCKET is required (unless --rehearse)"
    first, second = (own_name(stack) for stack in args.stacks)
    if first == second:
        return (
            f"--stacks names {first} twice ({' and '.join(args.stacks)}): give the round-robin "
            "stack, then the session-affinity one, with different names"
        )
    layer = own_name(args.layer_stack)
    if layer in (first, second):
        return (
            f"--stacks includes the layer stack {layer} (--layer-stack {args.layer_stack}): a "
            "profile's stack is destroyed after its run, the layer stack never"
        )
    return archive_problem(args)


def archive_of(args: argparse.Namespace, bucket: str | None = None) -> ArchiveLocation:
    """The archive `report` and `ab` read and write; a refused option is an ArchiveUsageError."""
    return archive_location(
        ARCHIVE_OPTIONS,
        bucket=bucket or args.archive_bucket,
        prefix=args.archive_prefix,
        endpoint_url=args.archive_endpoint,
    )


def archive_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the archive options (checked before anything runs), if one is given."""
    try:
        if args.archive_bucket is not None:
            archive_of(args)
    except ArchiveUsageError as error:
        return str(error)
    return None


def ab_run(
    args: argparse.Namespace,
    archive: ArchiveLocation,
    default: PerfWorkload = RECIPE_WORKLOAD,
    recipe: PerfWorkload = RECIPE_WORKLOAD,
) -> AbRun:
    """The run the options describe (the lab passes its own workloads)."""
    workload = workload_from_args(args, default, recipe)
    commit = current_commit()
    return AbRun(
        run_id=args.run_id or new_run_id(datetime.now(UTC), commit),
        workload=workload,
        out_dir=args.out,
        archive=archive,
        keep=args.keep,
        commit=commit,
    )


def run(args: argparse.Namespace) -> int:
    stacks = PulumiStacks(
        work_dir=REPO_ROOT,
        say=say,
        organization=args.org,
        policy_packs=tuple(args.policy_pack),
        layer_stack=args.layer_stack,
    )
    target = ClusterAbTarget(
        stacks=stacks,
        cluster=cluster_options(args),
        gpus=args.gpus,
        layer_stack=args.layer_stack,
        profile_stacks=dict(zip(PROFILE_STACKS, args.stacks, strict=True)),
    )
    # A rehearsal archives nothing; its location is never read.
    archive = archive_of(args, args.archive_bucket or REHEARSAL_BUCKET)
    ab = dataclasses.replace(ab_run(args, archive), rehearse=args.rehearse)
    check_cluster_workload(ab.workload)  # before any stack is brought up
    stacks.require_cli()
    try:
        result = run_orchestrator(target, ab, say)
    except AbandonRun as abandoned:
        print(f"abandoned at the second interrupt: {abandoned}", file=sys.stderr)
        return EXIT_INTERRUPTED
    print_summary(result, ab)
    if result.interrupted:
        return EXIT_INTERRUPTED
    return EXIT_PASSED if result.passed else EXIT_FAILED


def print_summary(result: AbResult, ab: AbRun) -> None:
    """One line per profile, the report's path, then the verdict: always the last line."""
    for line in result.lines():
        print(line)
    if result.rehearsal:
        print(
            "report: none (a rehearsal runs no stage; what each would run is in the run's folder)"
        )
        verdict = "a rehearsal measures nothing"
    elif result.report is not None:
        print(f"report: {result.report}")
        verdict = "its report has no verdict line (written by an earlier version)"
    elif result.report_failure:
        print(f"report: failed ({result.report_failure})")
        verdict = f"no report ({result.report_failure})"
    else:
        print(f"report: not written (continue with --run-id {ab.run_id})")
        verdict = f"the A/B did not finish (continue with --run-id {ab.run_id})"
    report = result.report or result.refused_report  # the refused one says why it failed
    written = report and verdict_in(read_text(report, "A/B report", MAX_RECORD_BYTES))
    print(written or f"{VERDICT_PREFIX}inconclusive: {verdict}")
