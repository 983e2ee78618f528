"""Command-line options the stage commands share: the workload, and how to reach a cluster.

Every value is checked when the command line is parsed: a bad one is an argparse error (exit
status 2) that names the option, before anything runs.

Over 300 lines: one checked-option vocabulary: the argparse action that checks a value, and
every option built on it, so a bad value fails the same way in every stage command.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

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

WORKLOAD_OPTIONS = {
    "videos": "--videos",
    "questions": "--questions",
    "output_tokens": "--output-tokens",
    "concurrencies": "--concurrency",
    "prefix_tokens": "--prefix-tokens",
    "turn_jitter_ms": "--turn-jitter-ms",
    "seed": "--seed",
}
"""Each workload field and the option that sets it (what an error about the field names)."""
WORKLOAD_FIELDS = tuple(WORKLOAD_OPTIONS)
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
    """An option whose value `check` parses; a ValueError becomes the parser's error
    `--option must be <requirement>, got '<value>'` (exit status 2). A `secret` option's value
    is never shown (a URL may carry a password)."""

    def __init__(
        self,
        *args: Any,
        check: Callable[[str], Any],
        requirement: str,
        secret: bool = False,
        **kw: Any,
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


def _integer(minimum: int | None, maximum: int | None = None) -> Callable[[str], int]:
    def check(text: str) -> int:
        value = int(text)  # ValueError for anything else, or for more than 4300 digits
        if not text.isascii() or (minimum is not None and value < minimum):
            raise ValueError(text)
        if maximum is not None and value > maximum:
            raise ValueError(text)
        return value

    return check


def _concurrencies(text: str) -> tuple[int, ...]:
    levels = tuple(int(part) for part in text.split(","))
    if not text.isascii() or any(level < 1 for level in levels) or len(set(levels)) != len(levels):
        raise ValueError(text)
    return levels


def _image_reference(text: str) -> str:
    if image_problems(text):  # what the kubelet's runtime would refuse (InvalidImageName)
        raise ValueError(text)
    return text


def _seconds(text: str) -> float:
    value = float(text)
    if not text.isascii() or not math.isfinite(value) or not 0 <= value <= MAX_SECONDS:
        raise ValueError(text)
    return value


def _positive_number(maximum: float) -> Callable[[str], float]:
    def check(text: str) -> float:
        value = float(text)
        if not text.isascii() or not math.isfinite(value) or not 0 < value <= maximum:
            raise ValueError(text)
        return value

    return check


def checked_option(check: Callable[[str], Any], requirement: str) -> dict[str, Any]:
    """`add_argument` keywords: the value `check` parses (a ValueError for a bad one), or exit 2
    saying `--option must be <requirement>, got '<value>'`."""
    return {"action": _Checked, "check": check, "requirement": requirement}


def positive_integer_option(maximum: int | None = None) -> dict[str, Any]:
    """`add_argument` keywords: a positive integer (up to `maximum`), or exit 2 naming the
    option. Without a maximum, what takes the value bounds it (the workload's model)."""
    requirement = "a positive integer" + (f" up to {maximum}" if maximum else "")
    return {"action": _Checked, "check": _integer(1, maximum), "requirement": requirement}


def integer_option(minimum: int) -> dict[str, Any]:
    """`add_argument` keywords: an integer of `minimum` or more, or exit 2 naming the option."""
    return {
        "action": _Checked,
        "check": _integer(minimum),
        "requirement": f"an integer of {minimum} or more",
    }


def positive_number_option(maximum: float = MAX_POSITIVE_NUMBER) -> dict[str, Any]:
    """`add_argument` keywords: a finite number above 0, up to `maximum`, or exit 2 naming the
    option."""
    requirement = f"a number above 0, at most {maximum:g}"
    return {"action": _Checked, "check": _positive_number(maximum), "requirement": requirement}


def concurrency_option() -> dict[str, Any]:
    """`add_argument` keywords: comma-separated distinct positive integers."""
    return {
        "action": _Checked,
        "check": _concurrencies,
        "metavar": "LEVELS",
        "requirement": f"distinct positive integers, e.g. {CONCURRENCY_EXAMPLE}",
    }


def add_seconds_argument(
    group: argparse.ArgumentParser | argparse._ArgumentGroup, *names: str, **kw: Any
) -> None:
    """A duration option: a finite number of seconds, 0 or more."""
    requirement = f"a number of seconds (0 or more, at most {MAX_SECONDS}: 30 days)"
    group.add_argument(*names, action=_Checked, check=_seconds, requirement=requirement, **kw)


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
    positive = positive_integer_option()
    group.add_argument("--videos", help="videos (sessions) per concurrency level", **positive)
    group.add_argument("--questions", help="questions (requests) per video", **positive)
    group.add_argument("--output-tokens", help="exact output tokens per request", **positive)
    group.add_argument(
        "--concurrency",
        dest="concurrencies",
        **concurrency_option(),
        help=f"comma-separated levels, e.g. {CONCURRENCY_EXAMPLE}",
    )
    group.add_argument("--prefix-tokens", help="lab: tokens of a video's text stand-in", **positive)
    group.add_argument(
        "--turn-jitter-ms",
        **integer_option(0),
        help="random pause (0..N ms) before each follow-up question",
    )
    group.add_argument(
        "--seed",
        action=_Checked,
        check=_integer(None),
        requirement="an integer",
        help="random seed for datasets and AIPerf",
    )


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


def add_cluster_arguments(
    parser: argparse.ArgumentParser, default_timeout: str, job_run_id: bool = True
) -> argparse._ArgumentGroup:
    group = parser.add_argument_group("cluster target (outputs with target: cluster)")
    group.add_argument(
        "--kubeconfig",
        type=Path,
        help="kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)",
    )
    group.add_argument("--context", help="kubeconfig context (default: the outputs' kubeContext)")
    add_seconds_argument(
        group,
        "--timeout",
        help=f"seconds for the whole Job, from submission (default {default_timeout})",
    )
    add_seconds_argument(
        group,
        "--start-timeout",
        default=600.0,
        help="seconds for the Job's pod to start (default 600)",
    )
    group.add_argument(
        "--image",
        default=POD_IMAGE,
        action=_Checked,
        check=_image_reference,
        requirement="an image reference as the runtime pulls it, e.g. registry/name:tag or "
        "name@sha256:<64 hex digits> (no URL, no user:password@)",
        secret=True,  # a refused reference may hold user:password@
        help=f"the pod's Python image; a digest pins harder (default {POD_IMAGE})",
    )
    group.add_argument(
        "--pip-index-url",
        action=_Checked,
        check=check_pip_index_url,
        requirement="an http:// or https:// URL with a host",
        secret=True,
        metavar="URL",
        help="a PyPI mirror for the pod's pip (default: PyPI); a URL with "
        "user:password@ reaches the pod through a Secret",
    )
    if job_run_id:  # the A/B has a --run-id of its own, and gives each Job a fresh label value
        group.add_argument(
            "--run-id",
            dest="job_run_id",
            action=_Checked,
            metavar="RUN_ID",
            check=check_run_id,
            requirement=RUN_ID_REQUIREMENT,
            help="label value tying the Job, pod and Service of one run",
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
        run_id=getattr(args, "job_run_id", None),
        **perf_only,
    )
