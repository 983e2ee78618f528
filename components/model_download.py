"""Model download component: the Job that fills the cache before any worker starts."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from components import layer_manifests
from components.layer_manifests import SharedLayer
from components.settings import StackSettings


class ModelDownload(pulumi.ComponentResource):
    """Job `cosmos3-nano-reasoner-model-download`, awaited to completion.

    pulumi-kubernetes waits for a Job's Complete condition; the configured timeout replaces its
    10 minute default. `pulumi.com/replaceUnready` makes the next `pulumi up` re-run a Job that
    failed or timed out instead of waiting on it again. A change to the Job's pod template (image,
    command, env) replaces the Job, which re-runs the download into the same cache.
    """

    job: k8s.batch.v1.Job

    def __init__(
        self,
        name: str,
        settings: StackSettings,
        layer: SharedLayer,
        depends_on: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("cosmos3:recipe:ModelDownload", name, None, opts)
        manifest = layer_manifests.model_download_job(settings, layer)
        timeout = f"{settings.model_download_timeout_seconds}s"
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
        self.register_outputs({})
