"""Command-line options the stage commands share: the workload, and how to reach a cluster.

Every value is checked when the command line is parsed: a bad one is an argparse error (exit
status 2), `--option must be <requirement>, got '<value>'`, before anything runs; a `secret`
option's value is never shown (a URL may carry a password). `smoke`, `perf`, both A/B commands and
the lab's build their options from this vocabulary (`checked_option` and the `*_option` kinds); the
archive's and `report --stacks/--run-ids` use argparse types of their own (also exit status 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from common.credentials import mask
from common.input_files import MAX_KUBECONFIG_BYTES, InputFileError, InputFileMissing
from common.yaml_input import read_yaml_file
from components.k8s_values import image_problems
from stages.cluster.manifests import (
    POD_IMAGE,
    RUN_ID_REQUIREMENT,
    check_pip_index_url,
    check_run_id,
)
from stages.cluster.run import CLUSTER_TOKENIZER, ClusterOptions
from stages.core.workload import PerfWorkload
from stages.errors import UsageError

T = TypeVar("T")
CONCURRENCY_EXAMPLE = "1,2,4,8,16"
MAX_POSITIVE_NUMBER = 1e9
"""A factor, rate or tolerance beyond a billion is a typo; 1e308 would overflow what uses it."""
MAX_SECONDS = 30 * 24 * 3600
"""The longest wait or timeout an option takes: 30 days, longer than any stage runs. Python's
waits refuse more than ~292 years and a Job's activeDeadlineSeconds is an int64; 1e308 is a typo."""


def _shown(text: str) -> str:
    """A bad value as an error shows it: masked, quoted, and cut short if it is long (masked
    first: cut short, `https://user:pa/ss@host` would lose the `@host` that marks a password)."""
    masked = mask(text)
    return repr(masked) if len(masked) <= 40 else repr(masked[:37]) + "..."


class _Checked(argparse.Action):
    """An option whose value `check` parses; its ValueError is the parser's error (exit 2)."""

    def __init__(
        self, *args: Any, check: Callable[[str], Any], requirement: str, secret: bool, **kw: Any
    ) -> None:
        super().__init__(*args, **kw)
        self.check = check
        self.requirement = requirement
        self.secret = secret

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        text = str(values)
        try:
            value = self.check(text)
        except ValueError:
            got = "" if self.secret else f", got {_shown(text)}"
            parser.error(f"{self.option_strings[0]} must be {self.requirement}{got}")
        setattr(namespace, self.dest, value)


def checked_option(
    check: Callable[[str], Any], requirement: str, secret: bool = False, **kw: Any
) -> dict[str, Any]:
    """`add_argument` keywords: the value `check` parses (a ValueError for a bad one), or exit 2
    saying `--option must be <requirement>, got '<value>'`."""
    return {"action": _Checked, "check": check, "requirement": requirement, "secret": secret, **kw}


def _within(parse: Callable[[str], T], accepted: Callable[[T], bool]) -> Callable[[str], T]:
    """A check: `parse` the text (ASCII only, as a person types it), then require `accepted`.
    A NaN or an infinity fails every bound below, so no number check lets one through."""

    def check(text: str) -> T:
        value = parse(text)  # ValueError for anything else, or an int of over 4300 digits
        if not text.isascii() or not accepted(value):
            raise ValueError(text)
        return value

    return check


def _integer(minimum: float = -math.inf, maximum: float | None = None) -> Callable[[str], int]:
    return _within(int, lambda value: minimum <= value <= (maximum or math.inf))


def _levels(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(","))


def positive_integer_option(maximum: int | None = None) -> dict[str, Any]:
    """A positive integer (up to `maximum`; without one, what takes the value bounds it)."""
    upto = f" up to {maximum}" if maximum else ""
    return checked_option(_integer(1, maximum), "a positive integer" + upto)


def integer_option(
    minimum: int, maximum: int | None = None, requirement: str | None = None
) -> dict[str, Any]:
    requirement = requirement or f"an integer of {minimum} or more"
    return checked_option(_integer(minimum, maximum), requirement)


def positive_number_option(maximum: float = MAX_POSITIVE_NUMBER) -> dict[str, Any]:
    """A finite number above 0, up to `maximum`."""
    check = _within(float, lambda value: 0 < value <= maximum)
    return checked_option(check, f"a number above 0, at most {maximum:g}")


def concurrency_option() -> dict[str, Any]:
    """Comma-separated distinct positive integers."""
    check = _within(_levels, lambda levels: min(levels) >= 1 and len(set(levels)) == len(levels))
    requirement = f"distinct positive integers, e.g. {CONCURRENCY_EXAMPLE}"
    return checked_option(check, requirement, metavar="LEVELS")


def seconds_option() -> dict[str, Any]:
    """A duration: a finite number of seconds, 0 or more."""
    requirement = f"a number of seconds (0 or more, at most {MAX_SECONDS}: 30 days)"
    return checked_option(_within(float, lambda value: 0 <= value <= MAX_SECONDS), requirement)


_POSITIVE = positive_integer_option()
WORKLOAD_KINDS: dict[str, dict[str, Any]] = {
    "videos": _POSITIVE,
    "questions": _POSITIVE,
    "output_tokens": _POSITIVE,
    "concurrencies": concurrency_option(),
    "prefix_tokens": _POSITIVE,
    "turn_jitter_ms": integer_option(0),
    "seed": checked_option(_integer(), "an integer"),
}
"""Each workload field's check; its option and help come from the field (`PerfWorkload`)."""
WORKLOAD_OPTIONS = {field: f"--{field.replace('_', '-')}" for field in WORKLOAD_KINDS} | {
    "concurrencies": "--concurrency"
}
"""Each workload field and the option that sets it (what an error about the field names)."""
WORKLOAD_FIELDS = tuple(WORKLOAD_OPTIONS)
_UNDESCRIBED = {
    "concurrencies": f"comma-separated levels, e.g. {CONCURRENCY_EXAMPLE}",
    "seed": "random seed for datasets and AIPerf",
}


def add_workload_arguments(parser: argparse.ArgumentParser) -> None:
    """Workload options shared by `stages perf` and the A/B commands."""
    group = parser.add_argument_group(
        "workload (defaults: the recipe's sweep on a cluster, the lab's reduced sweep in the lab)"
    )
    group.add_argument(
        "--recipe-sizes",
        action="store_true",
        help="the recipe's sweep: 200 videos x 20 questions, 128 tokens, c=1..16",
    )
    for field, kind in WORKLOAD_KINDS.items():
        help = PerfWorkload.model_fields[field].description or _UNDESCRIBED[field]
        group.add_argument(WORKLOAD_OPTIONS[field], dest=field, help=help, **kind)


def workload_from_args(
    args: argparse.Namespace, default: PerfWorkload, recipe: PerfWorkload
) -> PerfWorkload:
    """The workload the options describe, on top of `default` (or `recipe` with --recipe-sizes).

    A workload the model refuses is a UsageError naming the options (the parser checks each
    value, so this only happens when a caller builds the namespace itself)."""
    base = recipe if args.recipe_sizes else default
    overrides = {
        name: getattr(args, name) for name in WORKLOAD_FIELDS if getattr(args, name) is not None
    }
    try:
        return PerfWorkload.model_validate(base.model_dump() | overrides)
    except ValidationError as error:
        raise UsageError(workload_problems(error)) from None


def workload_problems(error: ValidationError) -> str:
    """`--videos: Input should be greater than 0; ...`: each problem with its option, no value."""
    problems = []
    for problem in error.errors():
        field = str(problem["loc"][0]) if problem["loc"] else ""
        option = WORKLOAD_OPTIONS.get(field, field or "--videos x --questions")
        problems.append(f"{option}: {problem['msg'].removeprefix('Value error, ')}")
    return "the workload is refused: " + "; ".join(problems)


IMAGE_REQUIREMENT = (
    "an image reference as the runtime pulls it, e.g. registry/name:tag or "
    "name@sha256:<64 hex digits> (no URL, no user:password@)"
)


def add_cluster_arguments(
    parser: argparse.ArgumentParser, default_timeout: str, job_run_id: bool = True
) -> argparse._ArgumentGroup:
    """How to reach the cluster; each option's dest is the `ClusterOptions` field it sets."""
    group = parser.add_argument_group("cluster target (outputs with target: cluster)")
    group.add_argument(
        "--kubeconfig",
        type=Path,
        help="kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)",
    )
    group.add_argument("--context", help="kubeconfig context (default: the outputs' kubeContext)")
    group.add_argument(
        "--timeout",
        dest="timeout_seconds",
        help=f"seconds for the whole Job, from submission (default {default_timeout})",
        **seconds_option(),
    )
    group.add_argument(
        "--start-timeout",
        dest="start_timeout_seconds",
        default=600.0,
        help="seconds for the Job's pod to start (default 600)",
        **seconds_option(),
    )
    image = _within(str, lambda text: not image_problems(text))  # the kubelet's InvalidImageName
    group.add_argument(
        "--image",
        default=POD_IMAGE,
        help=f"the pod's Python image; a digest pins harder (default {POD_IMAGE})",
        **checked_option(image, IMAGE_REQUIREMENT, secret=True),  # it may hold user:password@
    )
    group.add_argument(
        "--pip-index-url",
        help="a PyPI mirror for the pod's pip (default: PyPI); a URL with "
        "user:password@ reaches the pod through a Secret",
        **checked_option(
            check_pip_index_url, "an http:// or https:// URL with a host", True, metavar="URL"
        ),
    )
    if job_run_id:  # the A/B has a --run-id of its own, and gives each Job a fresh label value
        group.add_argument(
            "--run-id",
            dest="job_run_id",
            help="label value tying the Job, pod and Service of one run",
            **checked_option(check_run_id, RUN_ID_REQUIREMENT, metavar="RUN_ID"),
        )
    return group


def add_perf_cluster_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--tokenizer", help=f"AIPerf's tokenizer in the pod (default {CLUSTER_TOKENIZER})"
    )
    group.add_argument(
        "--connection-reuse",
        choices=["never", "pooled", "sticky-user-sessions"],
        help="AIPerf's connections in the pod (default never, as in the lab)",
    )


def cluster_options(args: argparse.Namespace) -> ClusterOptions:
    """`ClusterOptions` from the cluster arguments; perf adds its tokenizer and connections. A
    `--kubeconfig` the Kubernetes client could not read safely (a device, huge, a YAML bomb) is
    refused here, before it is handed on; a missing one is the client's to report, when a stage
    connects (a dry run never does)."""
    if args.kubeconfig is not None:
        try:
            read_yaml_file(args.kubeconfig, "kubeconfig", MAX_KUBECONFIG_BYTES)
        except InputFileMissing:
            pass
        except InputFileError as error:
            raise UsageError(f"--kubeconfig: {error}") from None
    given = {  # each option's dest is its field; the A/B's --run-id is its own, not a Job's
        field.name: getattr(args, field.name)
        for field in dataclasses.fields(ClusterOptions)
        if field.name != "run_id" and getattr(args, field.name, None) is not None
    }
    return ClusterOptions(run_id=getattr(args, "job_run_id", None), **given)
