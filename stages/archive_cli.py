"""Command line of the archive: `push`, `list` and `pull` stage results (see stages.archive).

    python -m stages.archive_cli push --stack round-robin --outputs outputs.json --stage perf \\
        --dir build/perf --bucket my-results [--endpoint-url http://127.0.0.1:9000]
    python -m stages.archive_cli list --bucket my-results [--stack S] [--profile P]
    python -m stages.archive_cli pull --stack round-robin --profile round-robin --latest \\
        --dest build/archive/round-robin --bucket my-results

Credentials, and unless given the endpoint and region, come from the standard AWS environment
or profile. `configure_parser` adds the same subcommands to any parser, so the tool can be
mounted as `python -m stages archive ...`; `run` executes parsed arguments.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from components.contract import OutputsError, StackOutputs
from components.routing import RoutingProfile
from stages.archive import (
    DEFAULT_PREFIX,
    ArchiveError,
    ArchiveLocation,
    RunRecord,
    Stage,
    archive_plan,
    archive_run,
    download_record,
    fetch_record,
    latest_run,
    list_runs,
)

PROG = "python -m stages.archive_cli"
DESCRIPTION = "Store stage results in S3 by stack, profile and run; list and download them."


def main(argv: Sequence[str] | None = None) -> int:
    """Run one archive subcommand; returns the exit status (0 ok, 1 archive error)."""
    parser = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION)
    configure_parser(parser)
    return run(parser.parse_args(argv))


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Add the `push`, `list` and `pull` subcommands to `parser`."""
    store = _store_options()
    commands = parser.add_subparsers(dest="archive_command", required=True)
    push = commands.add_parser(
        "push", parents=[store], help="store a stage's result directory as a new run"
    )
    _add_push_arguments(push)
    listing = commands.add_parser(
        "list", parents=[store], help="list the complete runs, oldest first"
    )
    _add_list_arguments(listing)
    pull = commands.add_parser(
        "pull", parents=[store], help="download one run into an empty directory"
    )
    _add_pull_arguments(pull)


def run(args: argparse.Namespace) -> int:
    """Execute parsed arguments; an ArchiveError becomes a one-line message and status 1."""
    handlers = {"push": _push, "list": _list, "pull": _pull}
    try:
        handlers[args.archive_command](args)
    except (ArchiveError, OutputsError) as error:
        print(f"archive {args.archive_command}: error: {error}", file=sys.stderr)
        return 1
    return 0


def _store_options() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    group = options.add_argument_group(
        "store (credentials only from the AWS environment or profile)"
    )
    group.add_argument("--bucket", required=True, help="S3 bucket of the archive")
    group.add_argument("--prefix", default=DEFAULT_PREFIX, help="key prefix (default: %(default)s)")
    group.add_argument(
        "--endpoint-url",
        help="S3-compatible endpoint (default: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, AWS)",
    )
    group.add_argument("--region", help="region (default: the AWS environment or profile)")
    group.add_argument("--aws-profile", help="AWS profile (default: AWS_PROFILE)")
    group.add_argument("--path-style", action="store_true", help="path-style bucket addressing")
    return options


def _add_push_arguments(push: argparse.ArgumentParser) -> None:
    push.add_argument("--stack", required=True, help="Pulumi stack name (short form)")
    push.add_argument(
        "--outputs",
        required=True,
        type=Path,
        help="stack outputs JSON the stage ran against (`pulumi stack output --json`)",
    )
    push.add_argument("--stage", required=True, choices=[s.value for s in Stage])
    push.add_argument("--dir", required=True, type=Path, help="result directory to store")
    push.add_argument(
        "--run-id",
        help="run id (default: UTC time and short commit, e.g. 20261130T184200Z-0518aea)",
    )
    push.add_argument("--commit", help="git commit (default: `git rev-parse HEAD`)")
    push.add_argument(
        "--dry-run",
        action="store_true",
        help="scan the files and print the keys a push would write; contact no store",
    )


def _add_list_arguments(listing: argparse.ArgumentParser) -> None:
    listing.add_argument("--stack", help="only this stack")
    listing.add_argument("--profile", choices=[p.value for p in RoutingProfile])
    listing.add_argument("--stage", choices=[s.value for s in Stage])


def _add_pull_arguments(pull: argparse.ArgumentParser) -> None:
    pull.add_argument("--stack", required=True, help="Pulumi stack name (short form)")
    pull.add_argument("--profile", required=True, choices=[p.value for p in RoutingProfile])
    pull.add_argument("--stage", default=Stage.PERF.value, choices=[s.value for s in Stage])
    which = pull.add_mutually_exclusive_group(required=True)
    which.add_argument("--run-id", help="the run to download")
    which.add_argument("--latest", action="store_true", help="the newest run")
    pull.add_argument(
        "--dest", required=True, type=Path, help="new or empty directory for the files"
    )


def _location(args: argparse.Namespace) -> ArchiveLocation:
    return ArchiveLocation(
        bucket=args.bucket,
        prefix=args.prefix,
        endpoint_url=args.endpoint_url,
        region=args.region,
        aws_profile=args.aws_profile,
        path_style=args.path_style,
    )


def _push(args: argparse.Namespace) -> None:
    location = _location(args)
    record = RunRecord.create(
        stack=args.stack,
        stage=args.stage,
        outputs=StackOutputs.load(args.outputs),
        run_id=args.run_id,
        commit=args.commit,
    )
    if args.dry_run:
        for key in archive_plan(args.dir, record, location):
            print(f"s3://{location.bucket}/{key}")
        return
    stored = archive_run(args.dir, record, location)
    print(
        f"archived {len(stored.files)} files of {args.dir} as "
        f"s3://{location.bucket}/{location.prefix}/{stored.describe()}/"
    )
    print(f"run id: {stored.run_id}")


def _list(args: argparse.Namespace) -> None:
    runs = list_runs(_location(args), args.stack, args.profile, args.stage)
    rows = [("created (UTC)", "stack", "profile", "stage", "run id", "commit", "files")]
    rows += [
        (
            f"{r.created_at:%Y-%m-%d %H:%M:%S}",
            r.stack,
            r.profile.value,
            r.stage.value,
            r.run_id,
            r.commit[:12],
            str(len(r.files)),
        )
        for r in runs
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    if not runs:
        print("(no complete runs)")


def _pull(args: argparse.Namespace) -> None:
    location = _location(args)
    if args.latest:
        record = latest_run(location, args.stack, args.profile, args.stage)
    else:
        record = fetch_record(location, args.stack, args.profile, args.run_id, args.stage)
    directory = download_record(location, record, args.dest)
    print(f"downloaded run {record.describe()} ({len(record.files)} files) to {directory}")


if __name__ == "__main__":
    sys.exit(main())
