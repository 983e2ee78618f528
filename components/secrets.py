"""Secrets component: the NGC API key and, for a private mirror, the registry pull secret."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components import layer_manifests
from components.args import SecretsArgs
from components.credentials_digest import credentials_digest
from components.drift import warn_kubectl_fields
from components.layer_manifests import Manifest
from components.live import Live


@dataclass(frozen=True)
class SecretValues:
    """Secret Outputs from `pulumi config --secret`; kept apart from the plain settings."""

    ngc_api_key: pulumi.Output[str]
    registry_password: pulumi.Output[str] | None = None


class Secrets(pulumi.ComponentResource):
    """`ngc-api-secret` (key NGC_API_KEY) and optionally `registry-pull-secret`, updated in place
    (`provider_options`). `digest` marks the workers that read them
    (components/credentials_digest.py); it is plain, never the values."""

    digest: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        args: SecretsArgs,
        values: SecretValues,
        live: Live,
        depends_on: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("cosmos3:recipe:Secrets", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, depends_on=list(depends_on))
        self.ngc = _secret(
            f"{name}-ngc",
            layer_manifests.ngc_secret(args.namespace, values.ngc_api_key),
            child,
            live,
        )
        self.registry: k8s.core.v1.Secret | None = None
        docker_config: pulumi.Output[str | None] = pulumi.Output.from_input(None)
        if args.registry_server and values.registry_password is not None:
            docker_config = values.registry_password.apply(
                lambda password: layer_manifests.docker_config_json(
                    args.registry_server, args.registry_username, password
                )
            )
            manifest = layer_manifests.registry_pull_secret(args.namespace, docker_config)
            self.registry = _secret(f"{name}-registry", manifest, child, live)
        digest = pulumi.Output.all(values.ngc_api_key, docker_config).apply(
            lambda both: credentials_digest(both[0], both[1])
        )
        self.digest = pulumi.Output.unsecret(digest)
        self.register_outputs({"digest": self.digest})


def _secret(
    name: str, manifest: Manifest, opts: pulumi.ResourceOptions, live: Live
) -> k8s.core.v1.Secret:
    # pulumi-kubernetes marks `data` and `stringData` as secret outputs, so the values stay
    # encrypted in state even when an input was plain.
    secret = k8s.core.v1.Secret(
        name,
        metadata=manifest["metadata"],
        type=manifest["type"],
        string_data=manifest["stringData"],
        opts=opts,
    )
    warn_kubectl_fields(live, manifest, secret)
    return secret
