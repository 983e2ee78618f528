"""Secrets component: the NGC API key and, for a private mirror, the registry pull secret; or
the Secrets the cluster's own store keeps (`ngcApiKeyFrom`, `imagePullFrom`), which this
program reads by their metadata only and never creates, changes or deletes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi

from components import layer_manifests, names
from components.args import SecretsArgs
from components.credentials_digest import (
    credentials_digest,
    existing_credentials_digest,
    secret_identity,
)
from components.drift import applied
from components.kubernetes_object import KubernetesObject
from components.live import Live, ObjectRef, Unknown
from components.settings import StackSettings, config_key


@dataclass(frozen=True)
class SecretValues:
    """Secret Outputs from `pulumi config --secret`; kept apart from the plain settings. No NGC
    key when it comes from an existing Secret (`ngcApiKeyFrom`)."""

    ngc_api_key: pulumi.Output[str] | None
    registry_password: pulumi.Output[str] | None = None


class Secrets(pulumi.ComponentResource):
    """`ngc-api-secret` (key NGC_API_KEY) and optionally `registry-pull-secret`, updated in place
    (`provider_options`), each unless an existing Secret replaces it. `digest` marks the workers
    that read them (components/credentials_digest.py); it is plain, never the values."""

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
        # A Secret's `data` and `stringData` are secret inputs and outputs (KubernetesObject, as
        # pulumi-kubernetes's typed Secret), so the values stay encrypted in state even when an
        # input was plain.
        self.ngc: KubernetesObject | None = None
        if values.ngc_api_key is not None:
            manifest = layer_manifests.ngc_secret(args.namespace, values.ngc_api_key)
            self.ngc = applied(f"{name}-ngc", manifest, child, live)
        self.registry: KubernetesObject | None = None
        docker_config: pulumi.Output[str | None] = pulumi.Output.from_input(
            args.existing_pull_secret or None
        )
        if args.registry_server and values.registry_password is not None:
            docker_config = values.registry_password.apply(
                lambda password: layer_manifests.docker_config_json(
                    args.registry_server, args.registry_username, password
                )
            )
            manifest = layer_manifests.registry_pull_secret(args.namespace, docker_config)
            self.registry = applied(f"{name}-registry", manifest, child, live)
        if values.ngc_api_key is None:
            digest = pulumi.Output.from_input(
                existing_credentials_digest(args.existing_ngc_secret, args.existing_pull_secret)
            )
        else:
            digest = pulumi.Output.all(values.ngc_api_key, docker_config).apply(
                lambda both: credentials_digest(both[0], both[1])
            )
        self.digest = pulumi.Output.unsecret(digest)
        self.register_outputs({"digest": self.digest})


# --- Secrets that exist already ------------------------------------------------------------------


def existing_secret_identity(
    live: Live, namespace: str, key: str, name: str, creates_secrets: bool = False
) -> str:
    """The identity of the existing Secret `name` that config `key` names
    (`credentials_digest.secret_identity`), from its metadata alone. Refused, before anything is
    created, when it is not there, or when a stack that creates Secrets (`creates_secrets`) names
    one this project created and labelled: the program would stop creating it, and the engine
    would delete the Secret the pods are about to read. A cluster that cannot be read leaves a
    preview going (it warns once, and the digest it shows is not the one `up` writes) but stops
    `up`, which would otherwise mark the workers with a digest of nothing."""
    ref = ObjectRef("v1", "Secret", name, namespace)
    found = live.attempt(lambda view: view.metadata(ref))
    if isinstance(found, Unknown):
        if pulumi.runtime.is_dry_run():
            pulumi.log.warn(
                f"cannot read {ref}, which {config_key(key)} names: this preview does not know "
                "whether it exists, and the workers' credentials digest it shows is not the one "
                "`pulumi up` writes"
            )
            return ""
        raise pulumi.RunError(
            f"cannot read {ref}, which {config_key(key)} names: `pulumi up` reads its metadata "
            "to restart the workers when it changes; check the cluster's credentials (and that "
            "they may get Secrets in the namespace)"
        )
    if found is None:
        raise pulumi.RunError(
            f"{config_key(key)} names the Secret {name}, which is not in namespace {namespace}: "
            f"create it first (`kubectl create secret ... {name} -n {namespace}`, or through your "
            f"secret store), or `pulumi config rm {config_key(key)}` to have this stack create "
            "its own"
        )
    metadata = found.get("metadata") or {}
    if creates_secrets and _created_by_this_project(metadata):
        raise pulumi.RunError(
            f"{config_key(key)} names the Secret {name}, which this project's stacks create (its "
            f"labels say so): once this stack no longer creates it, `pulumi up` would delete it "
            f"under the pods that read it. Hand it over first: `pulumi state delete --target-"
            f"dependents <its URN, from pulumi stack --show-urns>` (Pulumi forgets it, the Secret "
            f"stays), then `kubectl label secret {name} -n {namespace} "
            f"app.kubernetes.io/managed-by-` once your store manages it; or name another Secret"
        )
    return secret_identity(namespace, name, metadata)


def _created_by_this_project(metadata: Mapping[str, object]) -> bool:
    """The labels the Secrets component writes (`names.labels("credentials")`)."""
    labels = metadata.get("labels")
    ours = names.labels("credentials")
    return isinstance(labels, Mapping) and all(labels.get(k) == v for k, v in ours.items())


def existing_secrets_args(live: Live, settings: StackSettings) -> SecretsArgs:
    """The Secrets component's args, each existing Secret checked and read by its identity."""
    ngc, pull = (
        existing_secret_identity(live, settings.namespace, key, name, settings.manages_secrets)
        if name
        else ""
        for key, name in (
            ("ngcApiKeyFrom", settings.ngc_api_key_from),
            ("imagePullFrom", settings.image_pull_from),
        )
    )
    return SecretsArgs(
        namespace=settings.namespace,
        registry_server=settings.registry_server,
        registry_username=settings.registry_username,
        existing_ngc_secret=ngc,
        existing_pull_secret=pull,
    )
