"""Running one stage Job on a cluster: replace the previous run, submit, wait, follow the log.

The lifecycle is the same for smoke and perf; what the log means is decided by the caller
(`stages.core.verdicts`). Everything goes through the `ClusterApi` seam, with the clock and sleep
injectable (`Timer`), so the whole lifecycle is tested against a fake API without a cluster.

- Replace: a re-run deletes the previous Job (foreground, so its pods go first), Service,
  ConfigMap and pip Secret (when this run has one), waits until they are gone, then creates the
  new ones in order (the Secret and ConfigMap before the Job whose pod reads them). The previous
  run's pod can therefore never answer the new run's media Service or be mistaken for the new
  pod.
- Wait: poll the Job and its pod every few seconds, printing a line whenever the pod's state
  changes (pending reasons such as ImagePullBackOff or Unschedulable included) and a heartbeat
  while nothing does; print the pod's new log lines as they appear (exports hidden).
  Polling whole logs instead of a follow stream: the logs are small, and a poll survives the API
  server closing long-lived connections during an hour-long sweep.
  A poll the API server does not answer (a restart, a dropped connection) is tried again until
  it has not answered for `unanswered_seconds`.
- Give up: a pod that has not started within the start timeout (or has a reason that never
  resolves, like InvalidImageName), a Job still running at the timeout, or an API server that
  stopped answering, is deleted so nothing keeps loading the cluster unobserved, and the stage
  fails with its own exit code. So is the Job of a run interrupted once it began creating it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from stages.cluster.api import ClusterApi, JobState, Manifest, PodState
from stages.cluster.manifests import RUN_ID_LABEL
from stages.core.verdicts import LogEcho, PodRun
from stages.errors import ClusterUnreachable, PodNotStarted, StageError, StageFailed, TimedOut

PERMANENT_START_FAILURES = frozenset(
    {"InvalidImageName", "ErrImageNeverPull", "CreateContainerConfigError"}
)
"""Waiting reasons that never resolve on their own: fail at once instead of at the start timeout."""
HEARTBEAT_SECONDS = 60.0


@dataclass(frozen=True)
class WaitLimits:
    """How long to wait for what; the stage's timeout covers everything from submission."""

    timeout_seconds: float
    start_timeout_seconds: float = 600.0
    poll_seconds: float = 5.0
    delete_timeout_seconds: float = 180.0
    unanswered_seconds: float = 180.0
    """How long the API server may not answer the polls (a control plane's restart) before the
    stage gives up on the Job."""


class JobTimedOut(TimedOut):
    """The Job did not finish in time; `log` is its pod's log as far as it was read (a sweep keeps
    the levels it finished)."""

    def __init__(self, message: str, log: str) -> None:
        super().__init__(message)
        self.log = log


@dataclass(frozen=True)
class Timer:
    """The clock and sleep the runner waits with (tests pass a fake that jumps instead)."""

    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


@dataclass
class JobRunner:
    """Submits one stage's objects and follows its Job to the end."""

    api: ClusterApi
    limits: WaitLimits
    say: Callable[[str], None]
    timer: Timer = Timer()

    def run(self, manifests: list[Manifest]) -> PodRun:
        """Replace, create, and wait for the Job among `manifests` and its pod (of this run id);
        raises on timeout/no start."""
        manifest = next(m for m in manifests if m["kind"] == "Job")
        job = manifest["metadata"]["name"]
        run_id = manifest["spec"]["template"]["metadata"]["labels"][RUN_ID_LABEL]
        try:  # an interrupt while the Job is created may come after the API server made it
            self.replace(manifests)
            return self.wait(job, f"{RUN_ID_LABEL}={run_id}")
        except KeyboardInterrupt:
            self.say(f"interrupted: deleting Job {job}")
            self.api.delete("Job", job)
            raise

    # --- replace --------------------------------------------------------------------------------

    def replace(self, manifests: list[Manifest]) -> None:
        """Delete what a previous run left (Job first), wait until it is gone, create anew."""
        objects = [(m["kind"], m["metadata"]["name"]) for m in manifests]
        previous = [obj for obj in reversed(objects) if self.api.exists(*obj)]
        for kind, name in previous:
            self.say(f"replacing the previous {kind} {name}")
            self.api.delete(kind, name)
        self._wait_until_gone(previous)
        for manifest in manifests:
            self.api.create(manifest)
            self.say(f"created {manifest['kind']} {manifest['metadata']['name']}")

    def _wait_until_gone(self, objects: list[tuple[str, str]]) -> None:
        deadline = self.timer.clock() + self.limits.delete_timeout_seconds
        remaining = objects
        while remaining:
            remaining = [obj for obj in remaining if self.api.exists(*obj)]
            if not remaining:
                return
            if self.timer.clock() >= deadline:
                names = ", ".join(f"{kind} {name}" for kind, name in remaining)
                raise TimedOut(
                    f"the previous run's {names} still exist {self.limits.delete_timeout_seconds:.0f}"
                    f" s after deletion (a finalizer? check `kubectl -n {self.api.namespace} get`)"
                )
            self.timer.sleep(self.limits.poll_seconds)

    # --- wait -----------------------------------------------------------------------------------

    def wait(self, job: str, pod_selector: str) -> PodRun:
        """Follow the Job until it completes or fails; the pod's log is echoed as it grows, and
        what the pod is doing is said when that changes, and every minute while nothing does."""
        started = answered = self.timer.clock()
        echo = LogEcho(self.say)
        last, next_beat, log = "", started + HEARTBEAT_SECONDS, ""
        while True:
            try:
                state = self._job_state(job)
                pod = self._newest_pod(pod_selector)
                log = self.api.pod_log(pod.name) if pod is not None and pod.started else log
            except ClusterUnreachable as error:
                self._unanswered(job, error, self.timer.clock() - answered)
                self.timer.sleep(self.limits.poll_seconds)
                continue
            now = answered = self.timer.clock()
            current = f"pod {pod.name}: {pod.describe()}" if pod else "waiting for the Job's pod"
            if current != last or now >= next_beat:
                still = "still " if current == last else ""
                self.say(f"{still}{current} (after {now - started:.0f} s)")
                last, next_beat = current, now + HEARTBEAT_SECONDS
            echo.update(log)
            if state.complete or state.failure:
                return self._outcome(job, state, pod_selector, echo)
            self._check_limits(job, pod, started, log)
            self.timer.sleep(self.limits.poll_seconds)

    def _unanswered(self, job: str, error: ClusterUnreachable, for_seconds: float) -> None:
        """A poll the API server did not answer: said, and tried again until it has not answered
        for `unanswered_seconds`; then the Job is deleted if it still can be, and `error` raised."""
        if for_seconds < self.limits.unanswered_seconds:
            self.say(f"the API server did not answer ({error}); asking again")
            return
        self.say(f"deleting Job {job} so that nothing keeps running unobserved")
        try:
            self.api.delete("Job", job)
        except ClusterUnreachable:
            self.say(
                f"Job {job} could not be deleted: `kubectl -n {self.api.namespace} delete job "
                f"{job}` does it once the cluster answers"
            )
        raise error

    def _job_state(self, job: str) -> JobState:
        state = self.api.read_job(job)
        if state is None:
            raise StageFailed(f"Job {job} disappeared while running (deleted by someone else?)")
        return state

    def _newest_pod(self, selector: str) -> PodState | None:
        pods = self.api.pods(selector)
        return max(pods, key=lambda pod: pod.created) if pods else None

    def _check_limits(self, job: str, pod: PodState | None, started: float, log: str) -> None:
        """Give up (see the module docstring): delete the Job and raise why."""
        waited = self.timer.clock() - started
        permanent = pod is not None and pod.waiting_reason in PERMANENT_START_FAILURES
        error: StageError | None = None
        if not (pod and pod.started) and (permanent or waited >= self.limits.start_timeout_seconds):
            what = f"pod {pod.name} is {pod.describe()}" if pod else "no pod was created"
            error = PodNotStarted(
                f"the {job} pod did not start after {waited:.0f} s: {what}. "
                f"`kubectl -n {self.api.namespace} describe job {job}` shows the events "
                "(image pull, scheduling, quota)"
            )
        elif waited >= self.limits.timeout_seconds:
            where = f" (pod {pod.describe()})" if pod else ""
            error = JobTimedOut(
                f"Job {job} did not finish within {self.limits.timeout_seconds:.0f} s{where}; "
                "its log so far is above; raise --timeout for a longer run",
                log,
            )
        if error is not None:
            self.say(f"deleting Job {job} so that nothing keeps running unobserved")
            self.api.delete("Job", job)
            raise error

    def _outcome(self, job: str, state: JobState, selector: str, echo: LogEcho) -> PodRun:
        pod = self._newest_pod(selector)
        log = self.api.pod_log(pod.name) if pod is not None else ""
        echo.update(log, final=True)
        failure = state.failure
        if failure is not None and failure.reason == "DeadlineExceeded":
            raise JobTimedOut(
                f"Job {job} ran into its activeDeadlineSeconds: {failure.message}", log
            )
        reason = None
        if failure is not None:
            exit_code = f", container exit code {pod.exit_code}" if pod and pod.exit_code else ""
            reason = f"{failure.reason}: {failure.message}{exit_code}"
        self.say(f"Job {job} {'completed' if failure is None else 'failed'}")
        return PodRun(f"Job {job}", failure is None, log, reason)
