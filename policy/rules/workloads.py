"""Reading the resources the policies check: resource types, and where pod specs and containers
sit; `mandatory`, which makes a check one of the pack's policies.

Props are the engine's view of a resource's inputs (camelCase wire names); every reader here
tolerates missing or mistyped fields, which are the schema checks' business, not the policies'.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)

JOB = "kubernetes:batch/v1:Job"
GRAPH = "kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment"
CLAIM = "kubernetes:core/v1:PersistentVolumeClaim"
SECRET = "kubernetes:core/v1:Secret"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"

POD_TEMPLATE_KINDS = {
    JOB: ("spec", "template", "spec"),
    "kubernetes:batch/v1:CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
    "kubernetes:apps/v1:Deployment": ("spec", "template", "spec"),
    "kubernetes:apps/v1:StatefulSet": ("spec", "template", "spec"),
    "kubernetes:apps/v1:DaemonSet": ("spec", "template", "spec"),
    "kubernetes:core/v1:Pod": ("spec",),
}
"""Where the pod spec sits in each workload kind; the DGD has one per component."""

WORKER_TYPES = ("worker", "prefill", "decode")
MAIN_CONTAINER = "main"  # components.names' again: the pack imports nothing of the program's

Check = Callable[[ResourceValidationArgs, ReportViolation], None]
PropPath = tuple[str | int, ...]
"""Where a value sits in the props: ("spec", "components", 1, "podTemplate")."""


def mandatory(
    name: str, description: str, **options: Any
) -> Callable[[Check], ResourceValidationPolicy]:
    """The decorated check as a policy of the pack: every one is mandatory (a violation fails
    the preview or stops the update)."""

    def policy(check: Check) -> ResourceValidationPolicy:
        level = EnforcementLevel.MANDATORY
        return ResourceValidationPolicy(name, description, check, level, **options)

    return policy


def dotted(path: PropPath) -> str:
    """`spec.components[1].podTemplate` for error messages."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def get_at(value: Any, path: Sequence[str | int]) -> Any:
    """The value at `path` below `value`, or None where the path leads nowhere."""
    for part in path:
        if isinstance(part, int):
            value = value[part] if is_list(value) and part < len(value) else None
        else:
            value = value.get(part) if isinstance(value, Mapping) else None
    return value


def is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str)


def entries(value: Any) -> list[Any]:
    """The entries of a list, or none when `value` is no list."""
    return list(value) if is_list(value) else []


def pod_specs(
    resource_type: str, props: Mapping[str, Any]
) -> Iterator[tuple[PropPath, Mapping[str, Any]]]:
    """Every pod spec a resource creates pods from, with its path in the props."""
    if resource_type in POD_TEMPLATE_KINDS:
        path = POD_TEMPLATE_KINDS[resource_type]
        spec = get_at(props, path)
        if isinstance(spec, Mapping):
            yield path, spec
    elif resource_type == GRAPH:
        for index, component in enumerate(entries(get_at(props, ("spec", "components")))):
            spec = get_at(component, ("podTemplate", "spec"))
            if isinstance(spec, Mapping):
                yield ("spec", "components", index, "podTemplate", "spec"), spec


def containers(
    resource_type: str, props: Mapping[str, Any]
) -> Iterator[tuple[PropPath, Mapping[str, Any]]]:
    """Every container and init container of a resource's pod specs, with its path."""
    for spec_path, spec in pod_specs(resource_type, props):
        for field in ("initContainers", "containers"):
            for index, container in enumerate(entries(spec.get(field))):
                if isinstance(container, Mapping):
                    yield (*spec_path, field, index), container


def worker_main_containers(
    props: Mapping[str, Any],
) -> Iterator[tuple[PropPath, str, Mapping[str, Any] | None]]:
    """(path, component name, its `main` container or None) of each GPU worker component."""
    for index, component in enumerate(entries(get_at(props, ("spec", "components")))):
        if not isinstance(component, Mapping) or component.get("type") not in WORKER_TYPES:
            continue
        path: PropPath = ("spec", "components", index, "podTemplate", "spec", "containers")
        listed = entries(get_at(component, ("podTemplate", "spec", "containers")))
        mains = [
            (i, c)
            for i, c in enumerate(listed)
            if isinstance(c, Mapping) and c.get("name") == MAIN_CONTAINER
        ]
        if not mains:
            yield path, str(component.get("name")), None
        for position, container in mains:
            yield (*path, position), str(component.get("name")), container
