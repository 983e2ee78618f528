"""resource-requests-set: every container requests cpu and memory, so the scheduler can place it."""

from __future__ import annotations

from pulumi_policy import ReportViolation, ResourceValidationArgs

from .workloads import containers, dotted, get_at, mandatory


@mandatory(
    "resource-requests-set",
    "Every container of Jobs and of the DynamoGraphDeployment requests cpu and memory.",
)
def resource_requests(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    for path, container in containers(args.resource_type, args.props):
        requests = get_at(container, ("resources", "requests")) or {}
        missing = [resource for resource in ("cpu", "memory") if resource not in requests]
        if missing:
            report_violation(
                f"{dotted((*path, 'resources', 'requests'))}: container {container.get('name')!r} "
                f"sets no {' or '.join(missing)} request; the scheduler needs them to place it",
                None,
            )
