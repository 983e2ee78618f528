"""The explicit Kubernetes provider: every resource deploys through it, never a default provider."""

from __future__ import annotations

import pulumi_kubernetes as k8s

from components.settings import StackSettings


def kubernetes_provider(name: str, settings: StackSettings) -> k8s.Provider:
    """A provider bound to the configured kubeconfig context.

    The stack config disables default providers (`pulumi:disable-default-providers`), so a
    resource that forgot this provider fails instead of deploying to the current context.
    """
    return k8s.Provider(
        name,
        context=settings.kube_context,
        kubeconfig=settings.kubeconfig_path or None,
    )
