"""graph-readiness-wait: someone waits for the graph, within a bound; the download's waits are safe.

A custom resource is "ready" on admission unless its annotations say otherwise, so a graph with
neither `pulumi.com/waitFor` (the provider waits, bounded by the create timeout) nor
`pulumi.com/skipAwait` (the program waits itself: this project's components/graph_deployment.py,
which the pack cannot see and the real tier proves) lets `pulumi up` report success while the
workers still download or crash-loop.

The download Job must carry neither `pulumi.com/replaceUnready` (a re-run would delete a download
that is still running and start it over) nor `pulumi.com/skipAwait` (for a Job it also skips the
wait for its deletion, so its replacement would meet the old Job still terminating).
"""

from __future__ import annotations

import re

from pulumi_policy import ReportViolation, ResourceValidationArgs

from .workloads import GRAPH, JOB, get_at, mandatory

WAIT_FOR = "pulumi.com/waitFor"
SKIP_AWAIT = "pulumi.com/skipAwait"
REPLACE_UNREADY = "pulumi.com/replaceUnready"


@mandatory(
    "graph-readiness-wait",
    (
        "The DynamoGraphDeployment is awaited (by the provider with a create timeout, or by the "
        "program); the download Job carries no replaceUnready and no skipAwait."
    ),
)
def graph_readiness(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    annotations = get_at(args.props, ("metadata", "annotations")) or {}
    skip = str(annotations.get(SKIP_AWAIT, "")).lower() == "true"
    if args.resource_type == JOB:
        for key in (REPLACE_UNREADY, SKIP_AWAIT):
            if str(annotations.get(key, "")).lower() == "true":
                report_violation(f'metadata.annotations["{key}"]: unsafe on the download Job', None)
        return
    if args.resource_type != GRAPH:
        return
    wait_for = str(annotations.get(WAIT_FOR) or "")
    if skip:
        return  # the program waits (see the module docstring)
    if not re.match(r"^(condition=|jsonpath=|\[)", wait_for):
        report_violation(
            f'metadata.annotations["{WAIT_FOR}"]: must make Pulumi wait for readiness '
            f"(e.g. condition=Ready), or {SKIP_AWAIT} for a program that waits itself; "
            f"got {wait_for or 'nothing'!r}",
            None,
        )
    elif not args.opts.custom_timeouts.create_seconds > 0:
        report_violation(
            "customTimeouts.create must bound the provider's readiness wait (cold NIM workers "
            "take many minutes; the default is 10 minutes)",
            None,
        )
