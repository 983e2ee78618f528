"""Command-line options the stage commands share: the workload, and how to reach a cluster."""

from __future__ import annotations

import argparse
from pathlib import Path

from stages.cluster.pod_template import POD_IMAGE
from stages.cluster.run import CLUSTER_TOKENIZER, ClusterOptions
from stages.core.workload import PerfWorkload

WORKLOAD_FIELDS = (
    "videos", "questions", "output_tokens", "concurrencies", "prefix_tokens", "turn_jitter_ms",
    "seed",
)  # fmt: skip


def _concurrency_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"expected e.g. 1,2,4,8,16, got {text!r}") from error


def add_workload_arguments(parser: argparse.ArgumentParser) -> None:
    """Workload options shared by `stages perf` and the A/B commands."""
    group = parser.add_argument_group(
        "workload (defaults: the recipe's sweep on a cluster, the lab's reduced sweep in the lab)"
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


def workload_from_args(
    args: argparse.Namespace, default: PerfWorkload, recipe: PerfWorkload
) -> PerfWorkload:
    """The workload the options describe, on top of `default` (or `recipe` with --recipe-sizes)."""
    base = recipe if args.recipe_sizes else default
    overrides = {
        name: getattr(args, name) for name in WORKLOAD_FIELDS if getattr(args, name) is not None
    }
    return PerfWorkload.model_validate(base.model_dump() | overrides)


def add_cluster_arguments(
    parser: argparse.ArgumentParser, default_timeout: str, job_run_id: bool = True
) -> argparse._ArgumentGroup:
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
    if job_run_id:  # the A/B has a --run-id of its own, and gives each Job a fresh label value
        group.add_argument("--run-id", dest="job_run_id",
                           help="label value tying the Job, pod and Service of one run")  # fmt: skip
    return group


def add_perf_cluster_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--tokenizer",
                       help=f"AIPerf's tokenizer in the pod (default {CLUSTER_TOKENIZER})")  # fmt: skip
    group.add_argument("--connection-reuse", choices=["never", "pooled", "sticky-user-sessions"],
                       help="AIPerf's connections in the pod (default never, as in the lab)")  # fmt: skip


def cluster_options(args: argparse.Namespace) -> ClusterOptions:
    """`ClusterOptions` from the cluster arguments; perf adds its tokenizer and connections."""
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
