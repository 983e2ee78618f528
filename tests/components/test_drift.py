"""Which fields the next update removes: those kubectl's managers own and the program does not
set, read from `managedFields` as the API server writes them (the entries below are shaped as
kube-apiserver 1.37 wrote them on the real tier)."""

from __future__ import annotations

from typing import Any

from components.drift import fields_removed

GRAPH = {
    "apiVersion": "nvidia.com/v1beta1",
    "kind": "DynamoGraphDeployment",
    "metadata": {"name": "g", "labels": {"app.kubernetes.io/name": "x"}},
    "spec": {
        "components": [
            {"name": "Frontend", "podTemplate": {"spec": {"containers": [{"name": "main"}]}}},
            {"name": "Worker", "replicas": 8},
        ]
    },
}


def managed(
    manager: str, fields: dict[str, Any], operation: str = "Update", **extra: Any
) -> dict[str, Any]:
    return {
        "manager": manager,
        "operation": operation,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    } | extra


def test_a_label_added_with_kubectl_is_removed_by_the_next_update() -> None:
    live = {
        "managedFields": [
            managed(
                "pulumi-kubernetes-18edb138",
                {"f:metadata": {"f:labels": {"f:app.kubernetes.io/name": {}}}},
                "Apply",
            ),
            managed("kubectl-label", {"f:metadata": {"f:labels": {"f:team": {}}}}),
        ]
    }
    assert fields_removed(live, GRAPH) == ["metadata.labels.team"]


def test_fields_kubectl_set_that_the_program_sets_too_are_kept() -> None:
    live = {
        "managedFields": [
            managed(
                "kubectl-client-side-apply",
                {
                    "f:metadata": {
                        "f:labels": {"f:app.kubernetes.io/name": {}},
                        "f:annotations": {"f:kubectl.kubernetes.io/last-applied-configuration": {}},
                    },
                    "f:spec": {
                        "f:components": {
                            'k:{"name":"Worker"}': {
                                ".": {},
                                "f:replicas": {},
                                "f:nodeSelector": {},
                            },
                        }
                    },
                },
            )
        ]
    }
    assert fields_removed(live, GRAPH) == ["spec.components[name=Worker].nodeSelector"]


def test_fields_another_manager_owns_too_stay_and_status_is_never_touched() -> None:
    live = {
        "managedFields": [
            managed("kubectl-patch", {"f:metadata": {"f:labels": {"f:team": {}}}}),
            managed("dynamo-operator", {"f:metadata": {"f:labels": {"f:team": {}}}}),
            managed("kubectl-patch", {"f:status": {"f:state": {}}}, subresource="status"),
        ]
    }
    assert fields_removed(live, GRAPH) == []


def test_a_secrets_data_set_by_kubectl_is_kept_by_the_programs_string_data() -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s"},
        "stringData": {"NGC_API_KEY": "x"},
    }
    live = {
        "managedFields": [
            managed(
                "kubectl-create",
                {"f:data": {".": {}, "f:NGC_API_KEY": {}, "f:OTHER": {}}, "f:type": {}},
            )
        ]
    }
    assert fields_removed(live, secret) == ["data.OTHER", "type"]


def test_other_managers_are_not_handed_over() -> None:
    live = {
        "managedFields": [
            managed(
                "kube-controller-manager",
                {"f:metadata": {"f:annotations": {"f:pv.kubernetes.io/bind-completed": {}}}},
            )
        ]
    }
    assert fields_removed(live, GRAPH) == []
