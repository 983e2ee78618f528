"""An object registered from its manifest is the one pulumi-kubernetes's typed class registers:
the same type, the same inputs, a Secret's data secret even where it was given plain."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest

from components.kubernetes_object import KubernetesObject, type_token

METADATA = {"name": "a", "namespace": "n", "labels": {"app.kubernetes.io/name": "x"}}


class Recorded(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.registered: dict[str, pulumi.runtime.MockResourceArgs] = {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.registered[args.name] = args
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], None]:
        return {}, None


@pytest.fixture
def mocks() -> Recorded:
    recorded = Recorded()
    pulumi.runtime.set_mocks(recorded, preview=False)
    return recorded


def settled(output: pulumi.Output[Any]) -> Any:
    @pulumi.runtime.test  # type: ignore[untyped-decorator]
    def resolve() -> pulumi.Output[Any]:
        return output

    seen: list[Any] = []
    output.apply(seen.append)
    resolve()
    return seen[0]


@pytest.mark.parametrize(
    ("typed", "api_version", "kind", "fields"),
    [
        (k8s.core.v1.Secret, "v1", "Secret", {"string_data": {"k": "v"}, "type": "Opaque"}),
        (k8s.core.v1.ConfigMap, "v1", "ConfigMap", {"data": {"k": "v"}}),
        (k8s.batch.v1.Job, "batch/v1", "Job", {"spec": {"backoffLimit": 0}}),
        (k8s.networking.v1.Ingress, "networking.k8s.io/v1", "Ingress", {"spec": {}}),
        (k8s.policy.v1.PodDisruptionBudget, "policy/v1", "PodDisruptionBudget", {"spec": {}}),
    ],
)
def test_the_type_and_inputs_are_the_typed_classes(
    mocks: Recorded, typed: Any, api_version: str, kind: str, fields: dict[str, Any]
) -> None:
    typed("typed", metadata=METADATA, **fields)
    camel = {"string_data": "stringData"}
    ours = KubernetesObject(
        "ours",
        api_version,
        kind,
        {"metadata": METADATA} | {camel.get(k, k): v for k, v in fields.items()},
    )
    settled(ours.urn)
    assert (
        mocks.registered["ours"].typ
        == mocks.registered["typed"].typ
        == type_token(api_version, kind)
    )
    assert mocks.registered["ours"].inputs == mocks.registered["typed"].inputs


def test_a_secrets_data_is_secret_even_given_plain(mocks: Recorded) -> None:
    secret = KubernetesObject("s", "v1", "Secret", {"metadata": METADATA, "stringData": {"k": "v"}})
    config_map = KubernetesObject(
        "c", "v1", "ConfigMap", {"metadata": METADATA, "data": {"k": "v"}}
    )
    assert settled(pulumi.Output.from_input(secret.stringData.is_secret())) is True  # type: ignore[attr-defined]
    assert settled(pulumi.Output.from_input(config_map.data.is_secret())) is False  # type: ignore[attr-defined]


def test_a_read_object_sends_no_inputs(mocks: Recorded) -> None:
    claim = KubernetesObject.get("claim", "v1", "PersistentVolumeClaim", "n/claim")
    settled(claim.urn)
    assert mocks.registered["claim"].resource_id == "n/claim"
    assert mocks.registered["claim"].typ == "kubernetes:core/v1:PersistentVolumeClaim"
