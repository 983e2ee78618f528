"""Every way a stage can end, with the exit status a pipeline sees: the one definition.

Each error carries its `exit_status`; the CLI prints the message and returns that status, and
`EXIT_STATUSES` is the table its `--help` and the docs show (a test checks the docs against it).
The pod programs (`stages.incluster`, standard library only) exit with the same numbers for what
they can tell: their definitions are imported here, not repeated.
"""

from __future__ import annotations

from stages.incluster import pod_common

EXIT_PASSED = 0
EXIT_FAILED = pod_common.EXIT_FAILED
EXIT_FRONTEND_NOT_READY = pod_common.EXIT_FRONTEND_NOT_READY
EXIT_INTERRUPTED = pod_common.EXIT_INTERRUPTED
EXIT_USAGE = 2
EXIT_TIMED_OUT = 4
EXIT_POD_NOT_STARTED = 5
EXIT_CLUSTER_UNREACHABLE = 6


class StageError(Exception):
    """A stage did not pass; the message says why, `exit_status` says which way."""

    exit_status = EXIT_FAILED


class UsageError(StageError):
    """Bad arguments, or stack outputs that break the contract: nothing was run."""

    exit_status = EXIT_USAGE


class StageFailed(StageError):
    """The stage ran and failed: no answer, a failed sweep, a broken promise, a failed Job."""


class FrontendNotReady(StageError):
    """The frontend never listed the served model within the wait."""

    exit_status = EXIT_FRONTEND_NOT_READY


class TimedOut(StageError):
    """The stage's run did not finish within its timeout (or the Job's activeDeadlineSeconds)."""

    exit_status = EXIT_TIMED_OUT


class PodNotStarted(StageError):
    """The Job's pod never started: unschedulable, image not pullable, config error."""

    exit_status = EXIT_POD_NOT_STARTED


class ClusterUnreachable(StageError):
    """The Kubernetes API cannot be reached or refuses (kubeconfig, context, credentials, RBAC)."""

    exit_status = EXIT_CLUSTER_UNREACHABLE


class AbandonRun(BaseException):
    """A second Ctrl-C while a run cleans up after the first: stop at once, run nothing more. A
    BaseException, so no `except Exception` on the way up runs clean-up; the message is the one
    command that recovers."""


EXIT_STATUSES: tuple[tuple[int, str], ...] = (
    (EXIT_PASSED, "passed"),
    (
        EXIT_FAILED,
        "the stage failed (the reason is on stderr; smoke's last stdout line says it passed)",
    ),
    (EXIT_USAGE, "bad usage, or stack outputs that break the contract (nothing was run)"),
    (EXIT_FRONTEND_NOT_READY, "the frontend never listed the served model"),
    (
        EXIT_TIMED_OUT,
        "cluster: the Job did not finish within --timeout (or its activeDeadlineSeconds), or "
        + "the previous run's objects outlived their deletion by 180 s",
    ),
    (EXIT_POD_NOT_STARTED, "cluster: the Job's pod did not start within --start-timeout"),
    (EXIT_CLUSTER_UNREACHABLE, "cluster: the Kubernetes API is unreachable or refuses"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C or SIGTERM); everything the stage started was stopped"),
)


def exit_status_help() -> str:
    """The `exit status:` epilog of every stage command."""
    return "exit status:\n" + "\n".join(f"  {code:<3} {text}" for code, text in EXIT_STATUSES)
