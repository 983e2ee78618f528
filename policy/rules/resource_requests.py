"""resource-requests-set: every container requests cpu and memory, so the scheduler can place it."""

from __future__ import annotations

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)

from .workloads import containers, dotted, get_at


def check_resource_requests(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    for path, container in containers(args.resource_type, args.props):
        requests = get_at(container, ("resources", "requests")) or {}
        missing = [resource for resource in ("cpu", "memory") if resource not in requests]
        if missing:
            report_violation(
                f"{dotted((*path, 'resources', 'requests'))}: container {container.get('name')!r} "
                f"sets no {' or '.join(missing)} request; the scheduler needs them to place it",
                None,
            )


resource_requests = ResourceValidationPolicy(
    name="resource-requests-set",
    description="Every container of Jobs and of the DynamoGraphDeployment requests cpu and memory.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=check_resource_requests,
)
