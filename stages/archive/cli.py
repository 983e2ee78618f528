"""Command line of the archive (see stages.archive), mounted as `python -m stages archive`:

    push --stack S --outputs outputs.json --stage perf --dir build/perf --bucket B [--resume]
    list --bucket B [--stack S] [--profile P] [--stage X]
    pull --stack S --profile P (--latest | --run-id R) --dest DIR --bucket B
    incomplete --bucket B [--stack S]
    clean --stack S --profile P --run-id R --stage X --bucket B [--older-than MINUTES]

Credentials, and unless given the endpoint and region, come from the standard AWS environment
or profile. Exit status: 0 done, 1 the archive refused or failed (one line on stderr), 2 usage.

Over 300 lines: one command line, the archive's five subcommands, which share the store's
options, the bucket and segment checks and one error path; each subcommand is a parser
function and a handler of a few lines.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping, Sequence
from contextlib import suppress
from datetime import datetime, timedelta
from pathlib import Path

from pydantic import ValidationError

from common.credentials import credential_kind, masked_output
from common.output_folders import (
    OutputFolderError,
    claimed_folder,
    os_error_reason,
    running_writer,
)
from common.parsers import CommandParser, add_subcommands
from common.terminal import visible
from components.contract import OutputsError, StackOutputs
from components.routing import RoutingProfile
from stages.archive import (
    DEFAULT_MIN_AGE,
    ArchiveError,
    ArchiveLocation,
    DestinationNotEmptyError,
    RunPlace,
    RunRecord,
    Stage,
    archive_plan,
    archive_run,
    clean_incomplete_run,
    download_record,
    fetch_record,
    latest_run,
    list_incomplete_runs,
    list_runs,
    resume_run,
)
from stages.archive.records import DEFAULT_PREFIX, SEGMENT_PATTERN, validation_summary
from stages.errors import EXIT_USAGE

PROG = "python -m stages archive"
DESCRIPTION = "Store stage results in S3 by stack, profile and run; list and download them."
PROFILES = [profile.value for profile in RoutingProfile]
STAGES = [stage.value for stage in Stage]
DEFAULT_MINUTES = DEFAULT_MIN_AGE.total_seconds() / 60


class ArchiveUsageError(ArchiveError):
    """Arguments that cannot work together: nothing was done."""

    exit_status = EXIT_USAGE


BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
BUCKET_RULES = (
    "3 to 63 lowercase letters, digits, `.` and `-`, starting and ending with a letter or digit, "
    "no `..`, not an IP address, no xn--, sthree- or amzn-s3-demo- prefix and no -s3alias, "
    "--ol-s3, .mrap, --x-s3 or --table-s3 suffix (S3's bucket naming rules)"
)
_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")


def archive_location(options: Mapping[str, str], **fields: object) -> ArchiveLocation:
    """The location the options give, or an ArchiveUsageError (exit status 2) naming the option
    of each refused value (`options`: field -> option, else `--<field>`); it never shows an
    endpoint (a URL may carry credentials)."""
    named = {f: f"--{f.replace('_', '-')}" for f in ArchiveLocation.model_fields} | dict(options)
    bucket = str(fields.get("bucket"))
    # S3's rules for a general purpose bucket, checked before any request: a typo is the
    # option's error, not a store's 400.
    if (
        not BUCKET_NAME.fullmatch(bucket)
        or ".." in bucket
        or re.fullmatch(r"[0-9]+(\.[0-9]+){3}", bucket)  # IP-formatted, leading zeros too
        or bucket.startswith(_RESERVED_PREFIXES)
        or bucket.endswith(_RESERVED_SUFFIXES)
    ):
        raise ArchiveUsageError(f"{named['bucket']} must be a bucket name: {BUCKET_RULES}")
    endpoint = str(fields.get("endpoint_url") or "").lower()
    if endpoint.startswith("file://") and not endpoint.startswith("file:///"):
        # `file://user:pa/ss@/dir` would have named a folder by the password.
        raise ArchiveUsageError(
            f"{named['endpoint_url']}: a file:// endpoint is a local directory, "
            "file:///absolute/dir, without a host or user-info (credentials come only from the "
            "AWS environment)"
        )
    try:
        return ArchiveLocation.model_validate(fields)
    except ValidationError as error:
        found = [f"{named.get(str((*p['loc'], '')[0]), '')}: {p['msg']}" for p in error.errors()]
        raise ArchiveUsageError("; ".join(found)) from None


def main(argv: Sequence[str] | None = None) -> int:
    """Run one archive subcommand; returns the exit status."""
    parser = CommandParser(prog=PROG, description=DESCRIPTION)
    configure_parser(parser)
    with masked_output():
        return run(parser.parse_args(argv))


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Add the archive's subcommands to `parser` (its own or `python -m stages archive`)."""
    store = _store_options()
    commands = add_subcommands(parser, dest="archive_command", required=True)
    for handler, summary, add_arguments in [
        (_push, "store a stage's result directory as a new run", _add_push_arguments),
        (_list, "list the complete runs, oldest first", _add_list_arguments),
        (_pull, "download one run into an empty directory", _add_pull_arguments),
        (_incomplete, "list runs that have objects but no manifest", _add_incomplete_arguments),
        (_clean, "delete the objects of one incomplete run", _add_clean_arguments),
    ]:
        name = handler.__name__.lstrip("_")
        command = commands.add_parser(name, parents=[store], help=summary, description=summary)
        add_arguments(command)
        command.set_defaults(archive_handler=handler)


def run(args: argparse.Namespace) -> int:
    """Execute parsed arguments; any refusal or failure is one line on stderr, never a trace."""
    try:
        args.archive_handler(args)
    except ArchiveError as error:
        return _failed(args, error, error.exit_status)
    except (OutputsError, OutputFolderError, ValidationError) as error:
        return _failed(args, error, EXIT_USAGE)
    except OSError as error:
        reason = f"{error.filename or 'a file'}: {os_error_reason(error)}"
        return _failed(args, ArchiveError(reason), ArchiveError.exit_status)
    return 0


def _failed(args: argparse.Namespace, error: Exception, status: int) -> int:
    reason = validation_summary(error) if isinstance(error, ValidationError) else str(error)
    print(f"archive {args.archive_command}: error: {' '.join(reason.split())}", file=sys.stderr)
    return status


def segment(value: str) -> str:
    """A stack name or run id: one key segment, so that it cannot reach into another run, and
    no credential (`glpat-...` fits a segment's letters), which the keys would store in plain."""
    if not re.fullmatch(SEGMENT_PATTERN, value):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a key segment (letters, digits, `.`, `_`, `-`; no `/`)"
        )
    kind = credential_kind(value)
    if kind:
        raise argparse.ArgumentTypeError(
            f"holds {kind} (not shown): a stack name or run id becomes part of the archive's keys"
        )
    return value


def commit_id(value: str) -> str:
    """A commit as the record keeps it and a run id begins with it: letters, digits, `.`, `_`,
    `-` (a hash, a tag); an escape sequence or a newline would reach every `archive list`."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", value):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a commit (letters, digits, `.`, `_`, `-`; e.g. a git hash)"
        )
    return value


def _minutes(value: str) -> timedelta:
    with suppress(ValueError, OverflowError):  # not a number, or inf
        if float(value) >= 0:  # and not nan
            return timedelta(minutes=float(value))
    raise argparse.ArgumentTypeError(f"{value!r} is not a number of minutes (0 or more)")


REGION_NAME = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?")
"""botocore's check of a region name (`validate_region_name`)."""


def region_name(value: str) -> str:
    if not REGION_NAME.fullmatch(value):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a region name (letters, digits and `-`, e.g. us-east-1)"
        )
    return value


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
    group.add_argument(
        "--region", type=region_name, help="region (default: the AWS environment or profile)"
    )
    group.add_argument("--aws-profile", help="AWS profile (default: AWS_PROFILE)")
    group.add_argument("--path-style", action="store_true", help="path-style bucket addressing")
    return options


def _add_push_arguments(push: argparse.ArgumentParser) -> None:
    push.add_argument("--stack", required=True, type=segment, help="Pulumi stack (short name)")
    push.add_argument(
        "--outputs",
        required=True,
        type=Path,
        help="stack outputs JSON the stage ran against (`pulumi stack output --json`)",
    )
    push.add_argument("--stage", required=True, choices=STAGES)
    push.add_argument("--dir", required=True, type=Path, help="result directory to store")
    push.add_argument(
        "--run-id",
        type=segment,
        help="run id (default: UTC time and short commit, e.g. 20261130T184200Z-0518aea)",
    )
    push.add_argument("--commit", type=commit_id, help="git commit (default: `git rev-parse HEAD`)")
    mode = push.add_mutually_exclusive_group()
    mode.add_argument(
        "--dry-run",
        action="store_true",
        help="scan the files and print the keys a push would write; contact no store",
    )
    mode.add_argument(
        "--resume",
        action="store_true",
        help="finish an interrupted push of --run-id from the same directory: keep "
        "the files stored that match, upload the rest, then the manifest",
    )


def _add_list_arguments(listing: argparse.ArgumentParser) -> None:
    listing.add_argument("--stack", type=segment, help="only this stack")
    listing.add_argument("--profile", choices=PROFILES)
    listing.add_argument("--stage", choices=STAGES)


def _add_pull_arguments(pull: argparse.ArgumentParser) -> None:
    pull.add_argument("--stack", required=True, type=segment, help="Pulumi stack (short name)")
    pull.add_argument("--profile", required=True, choices=PROFILES)
    pull.add_argument("--stage", default=Stage.PERF.value, choices=STAGES)
    which = pull.add_mutually_exclusive_group(required=True)
    which.add_argument("--run-id", type=segment, help="the run to download")
    which.add_argument("--latest", action="store_true", help="the newest run")
    pull.add_argument(
        "--dest", required=True, type=Path, help="new or empty directory for the files"
    )


def _add_incomplete_arguments(incomplete: argparse.ArgumentParser) -> None:
    incomplete.add_argument("--stack", type=segment, help="only this stack")


def _add_clean_arguments(clean: argparse.ArgumentParser) -> None:
    clean.add_argument("--stack", required=True, type=segment, help="Pulumi stack (short name)")
    clean.add_argument("--profile", required=True, choices=PROFILES)
    clean.add_argument("--run-id", required=True, type=segment, help="the incomplete run")
    clean.add_argument("--stage", required=True, choices=STAGES)
    clean.add_argument(
        "--older-than",
        type=_minutes,
        default=DEFAULT_MIN_AGE,
        metavar="MINUTES",
        help="only if nothing of the run was written in the last MINUTES, since "
        f"a push may still be running (default: {DEFAULT_MINUTES:g}; 0 to skip)",
    )
    clean.add_argument("--dry-run", action="store_true", help="print the keys; delete nothing")


def _location(args: argparse.Namespace) -> ArchiveLocation:
    return archive_location(
        {}, **{field: getattr(args, field) for field in ArchiveLocation.model_fields}
    )


def _push(args: argparse.Namespace) -> None:
    if args.resume and not args.run_id:
        raise ArchiveUsageError("--resume needs the --run-id of the interrupted push")
    location, outputs = _location(args), StackOutputs.load(args.outputs)
    record = RunRecord.create(
        stack=args.stack, stage=args.stage, outputs=outputs, run_id=args.run_id, commit=args.commit
    )
    for folder in (args.dir, *args.dir.resolve().parents):  # the A/B locks its --out only
        if writer := running_writer(folder):
            raise ArchiveError(
                f"{args.dir} is still being written by {writer} (it holds {folder}): push it "
                "once that run ends"
            )
    if args.dry_run:
        for key in archive_plan(args.dir, record, location):
            print(f"s3://{location.bucket}/{key}")
        return
    where = f"s3://{location.bucket}/{location.prefix}/{record.describe()}/"
    if not args.resume:
        stored = archive_run(args.dir, record, location)
        print(f"archived {len(stored.files)} files of {args.dir} as {where}")
    elif (outcome := resume_run(args.dir, record, location)).already_complete:
        print(f"{where} was already complete with the files of {args.dir}: nothing uploaded")
    else:
        print(
            f"archived {len(outcome.record.files)} files of {args.dir} as {where} "
            f"({outcome.kept} kept from the interrupted push, {outcome.uploaded} uploaded)"
        )
    print(f"run id: {record.run_id}")


def _list(args: argparse.Namespace) -> None:
    runs = list_runs(_location(args), args.stack, args.profile, args.stage)
    header = ("created (UTC)", "stack", "profile", "stage", "run id", "commit", "files")
    # A record written by anyone: its commit is printed with no escape sequence.
    rows = [
        [*_columns(run.created_at, RunPlace.of(run)), visible(run.commit[:12]), str(len(run.files))]
        for run in runs
    ]
    _print_table(header, rows, empty="(no complete runs)")


def _pull(args: argparse.Namespace) -> None:
    location = _location(args)
    if args.latest:
        record = latest_run(location, args.stack, args.profile, args.stage)
    else:
        record = fetch_record(location, args.stack, args.profile, args.run_id, args.stage)
    # --dest is claimed and locked for the whole pull (a second pull into it is refused), and is
    # written only once every file is verified; it must be new or empty (download_record).
    with claimed_folder(args.dest, "python -m stages archive pull", option="--dest"):
        try:
            directory = download_record(location, record, args.dest)
        except DestinationNotEmptyError as error:  # as the claim refuses a folder of the user's
            raise ArchiveUsageError(f"--dest {error}") from None
    print(f"downloaded run {record.describe()} ({len(record.files)} files) to {directory}")


def _incomplete(args: argparse.Namespace) -> None:
    runs = list_incomplete_runs(_location(args), args.stack)
    header = ("last written (UTC)", "stack", "profile", "stage", "run id", "objects", "bytes")
    rows = [
        [*_columns(run.last_written, run.place), str(run.objects), str(run.size)] for run in runs
    ]
    _print_table(header, rows, empty="(no incomplete runs)")
    if runs:
        print(
            "finish one with `archive push --resume --run-id R` (the push's other arguments) "
            "or delete it with `archive clean --stack S --profile P --run-id R --stage X`"
        )


def _clean(args: argparse.Namespace) -> None:
    location, place = _location(args), (args.stack, args.profile, args.run_id, args.stage)
    keys = clean_incomplete_run(location, *place, min_age=args.older_than, dry_run=args.dry_run)
    run = "/".join(place)
    if args.dry_run:
        for key in keys:
            print(f"s3://{location.bucket}/{key}")
        print(f"would delete {len(keys)} objects of the incomplete run {run}")
    else:
        print(
            f"deleted {len(keys)} objects of the incomplete run {run}; its run id stays taken "
            "(a mark at its manifest key): push it again under a new run id"
        )


def _columns(when: datetime, place: RunPlace) -> list[str]:
    """What both tables begin with: a time, then the run."""
    return [f"{when:%Y-%m-%d %H:%M:%S}", place.stack, place.profile, place.stage, place.run_id]


def _print_table(header: Sequence[str], rows: Sequence[Sequence[str]], empty: str) -> None:
    table = [header, *rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    if not rows:
        print(empty)
