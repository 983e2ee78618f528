"""The explicit Kubernetes provider: every resource deploys through it, never a default provider."""

from __future__ import annotations

import inspect
from collections.abc import Collection
from typing import Any

import pulumi_kubernetes as k8s

from components.settings import StackSettings


def kubernetes_provider(name: str, settings: StackSettings) -> k8s.Provider:
    """A provider bound to the configured kubeconfig context, and to that cluster's identity
    (decision 0010). `kubeconfig` is never None: given None, the SDK copies `$KUBECONFIG` verbatim
    into the provider's config, which parses a list such as `a:b` as neither a path nor kubeconfig
    text; an empty string loads client-go's default rules, which read such lists properly.
    `cluster_identifier` is the context: with an ambient kubeconfig the provider cannot see which
    cluster a context names, so a new `kubeContext` would silently point every resource at another
    cluster; with it, the provider and every resource are replaced, which the protected namespace
    and model cache refuse at preview.
    """
    return k8s.Provider(
        name,
        context=settings.kube_context,
        kubeconfig=settings.kubeconfig_path,
        cluster_identifier=settings.kube_context,
        **provider_options(inspect.signature(k8s.ProviderArgs.__init__).parameters),
    )


def provider_options(supported: Collection[str]) -> dict[str, Any]:
    """The provider's behaviours this program relies on, among the options it `supported`.

    - `enable_secret_mutable`: a changed key or password updates its Secret in place. Without it
      the provider replaces the Secret (delete, then create), and a pod that starts in between
      fails (components/secrets.py). `enable_config_map_mutable` likewise keeps the protected
      layer guard's ConfigMap updatable in place (components/layer_guard.py).
    - `upsert_existing_objects` (pulumi-kubernetes 4.29 and later): a create that finds the object
      takes it over, as 4.25.0, the pin, always does. Adopting a recipe deployed with kubectl and
      an `up` after a hard-killed one (a pending create) depend on it; without it 4.29 fails them
      with `AlreadyExists` (docs/decisions/0011-provider-4.25.md). Set when the SDK offers it.
    """
    options: dict[str, Any] = {"enable_secret_mutable": True, "enable_config_map_mutable": True}
    if "upsert_existing_objects" in supported:
        options["upsert_existing_objects"] = True
    return options
