"""Every Kubernetes object the program registers, from its manifest as built, under the type
pulumi-kubernetes gives its kind, as `apiextensions.CustomResource` registers any kind: the URNs,
inputs and diffs of the typed classes (`k8s.core.v1.Secret`, ...) without importing them, which
took a third of the program's imports in every preview and update (decision 0016). Outputs are
the live object's top-level fields, as dicts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi

OUTPUTS = ("apiVersion", "kind", "metadata", "spec", "status")
"""The top-level fields read back as outputs, whether or not the manifest sets them."""
SECRET_FIELDS = ("data", "stringData")
"""A Secret's fields the typed class marks secret, inputs and outputs: encrypted in the state
even where an input was plain."""


def type_token(api_version: str, kind: str) -> str:
    """The provider's type for objects of `api_version` and `kind`: the core group is `core`."""
    return f"kubernetes:{'core/v1' if api_version == 'v1' else api_version}:{kind}"


class KubernetesObject(pulumi.CustomResource):
    """One object of kind `kind`, its fields (but apiVersion and kind) `fields`."""

    metadata: pulumi.Output[Any]
    spec: pulumi.Output[Any]
    status: pulumi.Output[Any]

    def __init__(
        self,
        name: str,
        api_version: str,
        kind: str,
        fields: Mapping[str, pulumi.Input[Any]],
        opts: pulumi.ResourceOptions | None = None,
        *,
        read: bool = False,
    ) -> None:
        props: dict[str, Any] = dict.fromkeys(OUTPUTS)
        if not read:
            props |= {**fields, "apiVersion": api_version, "kind": kind}
        if (api_version, kind) == ("v1", "Secret"):
            for key in SECRET_FIELDS:
                if props.get(key) is not None:
                    props[key] = pulumi.Output.secret(props[key])
            secret = pulumi.ResourceOptions(additional_secret_outputs=list(SECRET_FIELDS))
            opts = pulumi.ResourceOptions.merge(opts, secret)
        super().__init__(type_token(api_version, kind), name, props, opts)

    @classmethod
    def get(
        cls,
        name: str,
        api_version: str,
        kind: str,
        object_id: str,
        opts: pulumi.ResourceOptions | None = None,
    ) -> KubernetesObject:
        """The live object `object_id` (`namespace/name`, or `name` for a cluster-wide kind),
        read into the state, never created or changed."""
        read = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(id=object_id))
        return cls(name, api_version, kind, {}, read, read=True)
