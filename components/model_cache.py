"""Model cache component: the ReadWriteMany claim that holds the downloaded NIM weights.

Losing it means a new multi-GB download, so a created claim is protected: the engine refuses, at
preview already, the replacement a new storage class or access mode plans, and a destroy or a
renamed claim (docs/deploying.md). A claim that already exists (`modelCacheMode: existing`) is
only read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import pulumi

from components import layer_manifests
from components.args import ModelCacheArgs
from components.drift import applied
from components.kubernetes_object import KubernetesObject
from components.live import Live


class ModelCache(pulumi.ComponentResource):
    """The shared model cache claim, created (protected) or adopted."""

    claim_name: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        args: ModelCacheArgs,
        live: Live,
        depends_on: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("cosmos3:recipe:ModelCache", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, depends_on=list(depends_on))
        if not args.create:
            claim = KubernetesObject.get(
                name, "v1", "PersistentVolumeClaim", f"{args.namespace}/{args.claim}", child
            )
        else:
            # Read the class first: a misspelt one stops the update here, before any claim
            # exists (and fails every preview once the stack's provider exists). Created on a
            # missing class, the claim would stay Pending, protected, in the state (real tier).
            storage_class = KubernetesObject.get(
                f"{name}-storage-class",
                "storage.k8s.io/v1",
                "StorageClass",
                args.storage_class,
                child,
            )
            manifest = layer_manifests.model_cache_claim(args)
            kept = pulumi.ResourceOptions(protect=True, depends_on=[storage_class])
            claim = applied(name, manifest, pulumi.ResourceOptions.merge(child, kept), live)
        self.claim = claim
        # Always set: the claim is created or read under its configured name.
        self.claim_name = claim.metadata.apply(lambda metadata: cast(str, metadata["name"]))
        self.register_outputs({"claimName": self.claim_name})
