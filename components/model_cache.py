"""Model cache component: the ReadWriteMany claim that holds the downloaded NIM weights.

Losing it means a new multi-GB download, so a created claim is protected: `pulumi destroy` and any
replacement stop with an error instead of deleting it. Kubernetes cannot change a claim's storage
class or access mode in place, and Pulumi would answer such a change with a replacement; the guard
below refuses a storage class change with a message that says what to do, before the claim is
registered. A claim that already exists is kept as it is and only read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import pulumi
import pulumi_kubernetes as k8s

from components import layer_manifests
from components.settings import StackSettings, config_key


class CacheChangeRefused(ValueError):
    """A config change that would replace (and so empty) the model cache."""


def check_cache_unchanged(previous: dict[str, Any] | None, settings: StackSettings) -> None:
    """Refuse a change of the claim's immutable identity against this stack's last outputs."""
    if not previous or not previous.get("modelCacheClaim"):
        return
    if previous["modelCacheClaim"] != settings.model_cache_claim:
        raise CacheChangeRefused(
            f"{config_key('modelCacheClaim')} changed from {previous['modelCacheClaim']!r} to "
            f"{settings.model_cache_claim!r}: the existing cache is protected and would be orphaned. "
            f"Set it back, or set {config_key('modelCacheMode')}=existing to use another claim."
        )
    old_class = previous.get("modelCacheStorageClass")
    if old_class and old_class != settings.model_cache_storage_class:
        raise CacheChangeRefused(
            f"{config_key('modelCacheStorageClass')} changed from {old_class!r} to "
            f"{settings.model_cache_storage_class!r}: a claim's storage class is immutable and "
            "changing it would replace the claim and delete the downloaded weights. Set it back to "
            f"{old_class!r}. To move the cache, create a new claim under another "
            f"{config_key('modelCacheClaim')} and migrate deliberately."
        )


class ModelCache(pulumi.ComponentResource):
    """The shared model cache claim, created (protected) or adopted."""

    claim_name: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        settings: StackSettings,
        previous_outputs: pulumi.Output[dict[str, Any] | None],
        depends_on: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("cosmos3:recipe:ModelCache", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, depends_on=list(depends_on))
        if settings.model_cache_mode == "existing":
            claim = k8s.core.v1.PersistentVolumeClaim.get(
                name, f"{settings.namespace}/{settings.model_cache_claim}", opts=child
            )
        else:
            claim = _protected_claim(name, settings, previous_outputs, child)
        self.claim = claim
        # Always set: the claim is created or read under its configured name.
        self.claim_name = claim.metadata.apply(lambda metadata: cast(str, metadata.name))
        self.register_outputs({"claimName": self.claim_name})


def _protected_claim(
    name: str,
    settings: StackSettings,
    previous_outputs: pulumi.Output[dict[str, Any] | None],
    child: pulumi.ResourceOptions,
) -> k8s.core.v1.PersistentVolumeClaim:
    manifest = layer_manifests.model_cache_claim(settings)

    def guarded_spec(
        previous: dict[str, Any] | None,
    ) -> k8s.core.v1.PersistentVolumeClaimSpecArgsDict:
        check_cache_unchanged(previous, settings)
        return cast(k8s.core.v1.PersistentVolumeClaimSpecArgsDict, manifest["spec"])

    return k8s.core.v1.PersistentVolumeClaim(
        name,
        metadata=manifest["metadata"],
        spec=previous_outputs.apply(guarded_spec),
        opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(protect=True)),
    )
