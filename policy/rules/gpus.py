"""worker-gpus-exact: each GPU worker's `main` container requests and limits exactly the
configured number of GPUs (policy config `gpusPerWorker`, the stack's workerGpus; 1 by default)."""

from __future__ import annotations

from typing import Any

from pulumi_policy import PolicyConfigSchema, ReportViolation, ResourceValidationArgs

from .workloads import GRAPH, dotted, get_at, mandatory, worker_main_containers

GPU = "nvidia.com/gpu"
DEFAULT_GPUS_PER_WORKER = 1


def gpus_per_worker(args: ResourceValidationArgs) -> int:
    """The configured count (policy config `gpusPerWorker`), 1 (the recipe's) when not configured."""
    return int(args.get_config().get("gpusPerWorker", DEFAULT_GPUS_PER_WORKER))


def _gpu_count(resources: Any, side: str) -> int | None:
    """The whole number of GPUs in `resources.<side>`, or None (absent or not a whole number)."""
    value = get_at(resources, (side, GPU))
    if isinstance(value, str) and value.isdigit():
        return int(value)
    if isinstance(value, int | float) and not isinstance(value, bool) and float(value).is_integer():
        return int(value)
    return None


@mandatory(
    "worker-gpus-exact",
    f"Each worker's main container requests and limits exactly the configured {GPU} count.",
    config_schema=PolicyConfigSchema(
        properties={
            "gpusPerWorker": {
                "type": "integer",
                "minimum": 1,
                "default": DEFAULT_GPUS_PER_WORKER,
                "description": "GPUs each worker must request (the stack's workerGpus).",
            }
        }
    ),
)
def worker_gpus(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if args.resource_type != GRAPH:
        return
    wanted = gpus_per_worker(args)
    for path, component, container in worker_main_containers(args.props):
        if container is None:
            report_violation(
                f"{dotted(path)}: worker {component!r} has no 'main' container to hold its GPUs",
                None,
            )
            continue
        resources = container.get("resources")
        requests, limits = _gpu_count(resources, "requests"), _gpu_count(resources, "limits")
        if requests != wanted or limits != wanted:
            report_violation(
                f"{dotted((*path, 'resources'))}: worker {component!r} must request and limit exactly "
                f"{wanted} {GPU} (got requests={requests}, limits={limits}); configure `gpusPerWorker` "
                "in the policy config when the stack's workerGpus differs",
                None,
            )
