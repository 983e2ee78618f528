"""The explicit Kubernetes provider: every resource deploys through it, never a default provider."""

from __future__ import annotations

import pulumi_kubernetes as k8s

from components.settings import StackSettings


def kubernetes_provider(name: str, settings: StackSettings) -> k8s.Provider:
    """A provider bound to the configured kubeconfig context, and to that cluster's identity.

    The stack config disables default providers (`pulumi:disable-default-providers`), so a
    resource that forgot this provider fails instead of deploying to the current context.

    `kubeconfig` is never None: given None, the Python SDK copies `$KUBECONFIG` verbatim into the
    provider's config (pulumi_kubernetes 4.25.0 `provider.py`), and the provider parses that string
    as one path or as kubeconfig text (`parseKubeconfigString`); a list such as `a:b` parses as
    neither, so the provider marks the cluster unreachable: preview then skips every dry run and
    passes, and up fails. An empty string makes it load client-go's default rules instead
    (`Configure`: "explicitly check for empty string"), which read `$KUBECONFIG` lists properly.

    `cluster_identifier` is the context: with an ambient kubeconfig the provider cannot see which
    cluster a context names (its `DiffConfig` compares the active cluster of an explicit kubeconfig
    only), so without it a new `kubeContext` would silently point every resource at another
    cluster. With it, changing the context replaces the provider and with it every resource,
    which the protected namespace and model cache refuse at preview.
    """
    return k8s.Provider(
        name,
        context=settings.kube_context,
        kubeconfig=settings.kubeconfig_path,
        cluster_identifier=settings.kube_context,
    )
