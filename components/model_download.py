"""Model download component: the Job that fills the cache before any worker starts.

What a re-run does with the Job the cluster holds is decided from the live Job (components/live.py),
never from the provider's view of it:

- **still running** (an interrupted `pulumi up` run again): left alone and waited for. The
  provider's `replaceUnready`, which this program no longer sets, would start it over.
- **failed**: run again. Its uid goes into the new Job's pod template (`names.RERUN_ANNOTATION`): a
  changed template is what makes the provider replace a Job, and the preview shows why.
- **complete**: left alone. A Job that ran again keeps its mark, so nothing changes.

The wait (`components.readiness`) ends when the Job completes, when Kubernetes fails it (its
`activeDeadlineSeconds`, `modelDownloadTimeoutSeconds`), or at that deadline plus
`DEADLINE_MARGIN_SECONDS`; a failure says why, with its pods' states and what to check.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pulumi

from components import layer_manifests, names
from components.args import DownloadArgs
from components.drift import applied
from components.kubernetes_object import KubernetesObject
from components.layer_manifests import SharedLayer
from components.live import ClusterView, Live, ObjectRef, Unknown
from components.readiness import (
    DEADLINE_MARGIN_SECONDS,
    Outcome,
    Verdict,
    WaitFailed,
    duration,
    job_failure,
    job_verdict,
    parsed_time,
    wait_for,
)

JOB_DELETE_TIMEOUT_SECONDS = 600
"""How long a replacement waits for the old Job's deletion (its pods' termination): a pod stuck
`Terminating` fails the update then, with the provider's message, instead of holding it."""
STUCK_TERMINATING_SECONDS = 300


class ModelDownload(pulumi.ComponentResource):
    """Job `cosmos3-nano-reasoner-model-download`, awaited to completion by the program.

    `cache_ready` resolves once the wait saw the Job complete (True in a preview, where nothing
    waits); an update whose download failed never resolves it, so the stack keeps the outputs of
    the last update that completed. `image` is the image of the Job's container.
    """

    job: KubernetesObject
    cache_ready: pulumi.Output[bool]
    image: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        args: DownloadArgs,
        layer: SharedLayer,
        live: Live,
        depends_on: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("cosmos3:recipe:ModelDownload", name, None, opts)
        ref = ObjectRef("batch/v1", "Job", names.MODEL_DOWNLOAD_JOB, layer.namespace)
        found = live.attempt(lambda view: _read_job(view, ref))
        manifest = layer_manifests.model_download_job(args, layer, rerun_of(found))
        opts = pulumi.ResourceOptions(
            parent=self,
            depends_on=list(depends_on),
            custom_timeouts=pulumi.CustomTimeouts(delete=f"{JOB_DELETE_TIMEOUT_SECONDS}s"),
        )
        self.job = applied(name, manifest, opts, live)
        for warning, note in live_job_notes(found, ref, datetime.now(UTC)):
            (pulumi.log.warn if warning else pulumi.log.info)(note, resource=self.job)
        self.cache_ready = self.job.metadata.apply(
            lambda _: _awaited(self.job, live, ref, args.timeout_seconds)
        )
        self.image = self.job.spec.apply(download_image)
        self.register_outputs({"cacheReady": self.cache_ready, "image": self.image})


LiveJob = tuple[dict[str, Any], list[dict[str, Any]]]
"""The live Job and its pods."""


def _read_job(view: ClusterView, ref: ObjectRef) -> LiveJob | None:
    job = view.get(ref)
    if job is None:
        return None
    uid = job["metadata"].get("uid", "")
    pods = view.list(
        ObjectRef("v1", "Pod", "", ref.namespace),
        {"labelSelector": f"batch.kubernetes.io/controller-uid={uid}"},
    )
    return job, pods


def rerun_of(found: LiveJob | None | Unknown) -> str | None:
    """The failed Job the new one runs again: the live Job's uid when it failed, else the mark it
    carries (kept, so that a Job that runs again is not replaced once more)."""
    if not isinstance(found, tuple):
        return None
    job, _ = found
    if job_failure(job) is not None:
        return str(job["metadata"]["uid"])
    template = ((job.get("spec") or {}).get("template") or {}).get("metadata") or {}
    mark = (template.get("annotations") or {}).get(names.RERUN_ANNOTATION)
    return str(mark) if mark else None


def live_job_notes(
    found: LiveJob | None | Unknown, ref: ObjectRef, now: datetime
) -> list[tuple[bool, str]]:
    """What this run does with the live Job, as (is a warning, text): shown in preview and up."""
    if not isinstance(found, tuple):
        return []
    job, pods = found
    verdict = job_verdict(job, pods, now)
    notes: list[tuple[bool, str]] = []
    if verdict.outcome is Outcome.FAILED:
        then = "this update runs it again (the Job is replaced; what it downloaded stays cached)"
        notes.append((True, f"the model download {ref} failed ({verdict.summary}): {then}"))
    elif verdict.outcome is Outcome.WAITING:
        then = "this update waits for it and does not restart it"
        notes.append(
            (False, f"the model download {ref} is still running ({verdict.summary}): {then}")
        )
    notes += [(True, stuck) for pod in pods if (stuck := _stuck_terminating(pod, ref, now))]
    return notes


def _stuck_terminating(pod: dict[str, Any], ref: ObjectRef, now: datetime) -> str:
    metadata = pod.get("metadata") or {}
    deleting = parsed_time(metadata.get("deletionTimestamp"))
    if deleting is None or now - deleting < timedelta(seconds=STUCK_TERMINATING_SECONDS):
        return ""
    name = metadata.get("name", "?")
    how_long = duration((now - deleting).total_seconds())
    return (
        f"pod {name} of {ref} has been Terminating for {how_long}: its node may be gone, and a "
        "replacement of the Job waits for it. Once you know the node is down: "
        f"`kubectl delete pod {name} -n {ref.namespace} --force --grace-period=0`"
    )


def _awaited(job: KubernetesObject, live: Live, ref: ObjectRef, deadline: int) -> Any:
    if pulumi.runtime.is_dry_run():
        return True  # what a successful `up` makes it; nothing is awaited in a preview

    seen: list[str] = []
    """What its pods did last while it ran: Kubernetes deletes them as it fails the Job."""

    def judge() -> Verdict:
        found = _read_job(live.view, ref)
        if found is None:
            return Verdict(Outcome.FAILED, f"{ref} is gone: something deleted it")
        verdict = past_deadline(*found, deadline) or job_verdict(*found)
        if verdict.details:
            seen[:] = verdict.details
        elif verdict.outcome is Outcome.FAILED and seen:
            return Verdict(verdict.outcome, verdict.summary, tuple(f"last seen: {s}" for s in seen))
        return verdict

    def report(summary: str) -> None:
        pulumi.log.info(f"model download: {summary}", resource=job, ephemeral=True)

    async def wait() -> bool:
        try:
            await wait_for(judge, deadline + 2 * DEADLINE_MARGIN_SECONDS, report)
        except WaitFailed as failure:
            raise pulumi.RunError(download_failure(failure, ref, deadline)) from None
        return True

    return wait()


def past_deadline(job: dict[str, Any], pods: list[dict[str, Any]], deadline: int) -> Verdict | None:
    """A running Job past its deadline and the margin: Kubernetes has not ended it."""
    start = parsed_time((job.get("status") or {}).get("startTime"))
    if start is None or job_failure(job) is not None:
        return None
    if datetime.now(UTC) - start < timedelta(seconds=deadline + DEADLINE_MARGIN_SECONDS):
        return None
    running = job_verdict(job, pods)
    return Verdict(
        Outcome.FAILED,
        f"still running {DEADLINE_MARGIN_SECONDS} s past its deadline: Kubernetes has not ended it",
        running.details,
    )


def download_failure(failure: WaitFailed, ref: ObjectRef, deadline: int) -> str:
    """The error of a download that did not complete: why, its pods, what to check, what next."""
    verdict = failure.verdict
    what = "did not complete within" if failure.timed_out else "failed"
    lines = [
        f"the model download {ref} {what}: {verdict.summary}",
        *(f"  {line}" for line in verdict.details),
        (
            f"  its deadline: {deadline} s from its start "
            "(cosmos3-nano-reasoner:modelDownloadTimeoutSeconds, the Job's activeDeadlineSeconds)"
        ),
        *(f"  check: {hint}" for hint in _hints(verdict, ref, deadline)),
        "  the next `pulumi up` runs the download again (what it downloaded stays in the cache)",
    ]
    return "\n".join(lines)


def _hints(verdict: Verdict, ref: ObjectRef, deadline: int) -> list[str]:
    text = verdict.text()
    hints = []
    if "Unschedulable" in text:
        hints.append(
            "no node takes its pod: compare workerNodeSelector and workerTolerations (or the "
            "Job's own modelDownloadNodeSelector, modelDownloadTolerations, modelDownloadAffinity "
            "where set) with your GPU nodes (`kubectl get nodes --show-labels`), and free a GPU "
            "(a profile graph may hold them all: `pulumi destroy` it first)"
        )
    if "ImagePull" in text or "ErrImage" in text:
        hints.append("workerImage, and for a mirror registryServer and its credentials")
    if "CreateContainerConfigError" in text:
        hints.append(f"the Secrets it reads exist in {ref.namespace} (ngc-api-secret)")
    if "Terminating" in text:
        hints.append(
            "a pod stuck Terminating: its node may be gone; once you know it is, "
            f"`kubectl delete pod <pod> -n {ref.namespace} --force --grace-period=0`"
        )
    if "BackoffLimitExceeded" in text:
        hints.append(f"its logs: `kubectl logs job/{ref.name} -n {ref.namespace} --all-containers`")
    if "DeadlineExceeded" in text and not hints:
        hints.append(f"a slow link needs more than {deadline} s: raise modelDownloadTimeoutSeconds")
    hints.append(f"`kubectl describe job {ref.name} -n {ref.namespace}`")
    return hints


def download_image(spec: Any) -> str:
    """The image of the Job's (only) container, from its spec output."""
    return str(spec["template"]["spec"]["containers"][0]["image"])
