"""Model download component: the Job that fills the cache before any worker starts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import layer_manifests
from components.args import DownloadArgs
from components.layer_manifests import SharedLayer


class ModelDownload(pulumi.ComponentResource):
    """Job `cosmos3-nano-reasoner-model-download`, awaited to completion.

    pulumi-kubernetes waits for a Job's Complete condition; the configured timeout replaces its
    10 minute default. `pulumi.com/replaceUnready` makes the next `pulumi up` re-run a Job that
    failed or timed out instead of waiting on it again. A change to the Job's pod template (image,
    command, env) replaces the Job, which re-runs the download into the same cache.

    `cache_ready` and `image` come from the Job's own outputs, which resolve only once the
    provider's await saw it complete: an update whose download failed never resolves them, and
    since a failed update keeps the outputs it did not resolve (pulumi/pulumi#15754), the stack's
    exports keep describing the last download that did complete, never the one that failed.
    """

    job: k8s.batch.v1.Job
    cache_ready: pulumi.Output[bool]
    image: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        args: DownloadArgs,
        layer: SharedLayer,
        depends_on: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("cosmos3:recipe:ModelDownload", name, None, opts)
        manifest = layer_manifests.model_download_job(args, layer)
        timeout = f"{args.timeout_seconds}s"
        self.job = k8s.batch.v1.Job(
            name,
            metadata=manifest["metadata"],
            spec=manifest["spec"],
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=list(depends_on),
                custom_timeouts=pulumi.CustomTimeouts(create=timeout, update=timeout),
            ),
        )
        self.cache_ready = self.job.status.apply(job_completed)
        self.image = self.job.spec.apply(download_image)
        self.register_outputs({"cacheReady": self.cache_ready, "image": self.image})


def download_image(spec: Any) -> str:
    """The image of the Job's (only) container, from its spec output."""
    return str(spec.template.spec.containers[0].image)


def job_completed(status: Any) -> bool:
    """True when a Job's status (the provider's output type) says it completed."""
    if status is None:
        return False
    conditions = status.conditions or []
    complete = any(c.type == "Complete" and c.status == "True" for c in conditions)
    return complete or (status.succeeded or 0) >= 1
