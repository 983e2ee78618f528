"""graph-readiness-wait: `pulumi up` waits, within a bound, until the graph is Ready."""

from __future__ import annotations

import re

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)

from .workloads import GRAPH, get_at

WAIT_FOR = "pulumi.com/waitFor"
SKIP_AWAIT = "pulumi.com/skipAwait"


def check_graph_readiness(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Custom resources are "ready" on admission unless `pulumi.com/waitFor` says otherwise; without
    it `pulumi up` reports success while the workers are still downloading or crash-looping."""
    if args.resource_type != GRAPH:
        return
    annotations = get_at(args.props, ("metadata", "annotations")) or {}
    wait_for = str(annotations.get(WAIT_FOR) or "")
    if not re.match(r"^(condition=|jsonpath=|\[)", wait_for):
        report_violation(
            f'metadata.annotations["{WAIT_FOR}"]: must make Pulumi wait for readiness '
            f"(e.g. condition=Ready), got {wait_for or 'nothing'!r}",
            None,
        )
    if str(annotations.get(SKIP_AWAIT, "")).lower() == "true":
        report_violation(f'metadata.annotations["{SKIP_AWAIT}"]: disables the readiness wait', None)
    if not args.opts.custom_timeouts.create_seconds > 0:
        report_violation(
            "customTimeouts.create must bound the readiness wait (cold NIM workers take many "
            "minutes; the default is 10 minutes)",
            None,
        )


graph_readiness = ResourceValidationPolicy(
    name="graph-readiness-wait",
    description="The DynamoGraphDeployment is awaited (pulumi.com/waitFor) with a create timeout.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=check_graph_readiness,
)
