"""The guardrail policies, run by `pulumi preview --policy-pack policy` (and `pulumi up`).

The pack checks what the engine is about to deploy, whatever code produced it: the resource's
inputs (`args.props`, camelCase wire names, secret values already decrypted) and its options
(`args.opts`: protect, custom timeouts). During a preview an input that is not known yet raises
`UnknownValueError` when read; the policy SDK turns that into an advisory note for that policy.

Self-contained on purpose: the CLI runs the pack in its own virtualenv (`policy/requirements.txt`,
pulumi-policy only), so nothing here imports the program. Tests call each policy's `validate`
with `ResourceValidationArgs` built from the program's real inputs under mocks.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
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

GPU = "nvidia.com/gpu"
WORKER_TYPES = ("worker", "prefill", "decode")
MAIN_CONTAINER = "main"
DEFAULT_GPUS_PER_WORKER = 1
WAIT_FOR = "pulumi.com/waitFor"
SKIP_AWAIT = "pulumi.com/skipAwait"

SECRET_WORDS = ("KEY", "TOKEN", "PASSWORD", "PASSWD", "SECRET", "CREDENTIAL", "CREDENTIALS")
"""A name looks secret when one of its words (split at `_`, `-`, `.`) is or ends with one of these:
NGC_API_KEY, HF_TOKEN, APIKEY, DB_PASSWORD match; MAX_TOKENS and KEYWORDS do not."""
SECRET_VALUE_SHAPES = (re.compile(r"^nvapi-"),)
"""Values that are credentials whatever their name: an NGC API key."""
SECRET_FIELDS = frozenset(
    {"apiVersion", "kind", "metadata", "type", "data", "stringData", "immutable"}
)

PropPath = tuple[str | int, ...]
"""Where a value sits in the props: ("spec", "components", 1, "podTemplate")."""


# --- Reading workloads --------------------------------------------------------------------------


def dotted(path: PropPath) -> str:
    """`spec.components[1].podTemplate` for error messages."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def _get(value: Any, path: Sequence[str | int]) -> Any:
    for part in path:
        if isinstance(part, int):
            value = value[part] if _is_list(value) and part < len(value) else None
        else:
            value = value.get(part) if isinstance(value, Mapping) else None
    return value


def _is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str)


def _entries(value: Any) -> list[Any]:
    return list(value) if _is_list(value) else []


def pod_specs(
    resource_type: str, props: Mapping[str, Any]
) -> Iterator[tuple[PropPath, Mapping[str, Any]]]:
    """Every pod spec a resource creates pods from, with its path in the props."""
    if resource_type in POD_TEMPLATE_KINDS:
        path = POD_TEMPLATE_KINDS[resource_type]
        spec = _get(props, path)
        if isinstance(spec, Mapping):
            yield path, spec
    elif resource_type == GRAPH:
        for index, component in enumerate(_entries(_get(props, ("spec", "components")))):
            spec = _get(component, ("podTemplate", "spec"))
            if isinstance(spec, Mapping):
                yield ("spec", "components", index, "podTemplate", "spec"), spec


def containers(
    resource_type: str, props: Mapping[str, Any]
) -> Iterator[tuple[PropPath, Mapping[str, Any]]]:
    """Every container and init container of a resource's pod specs, with its path."""
    for spec_path, spec in pod_specs(resource_type, props):
        for field in ("initContainers", "containers"):
            for index, container in enumerate(_entries(spec.get(field))):
                if isinstance(container, Mapping):
                    yield (*spec_path, field, index), container


def worker_main_containers(
    props: Mapping[str, Any],
) -> Iterator[tuple[PropPath, str, Mapping[str, Any] | None]]:
    """(path, component name, its `main` container or None) of each GPU worker component."""
    for index, component in enumerate(_entries(_get(props, ("spec", "components")))):
        if not isinstance(component, Mapping) or component.get("type") not in WORKER_TYPES:
            continue
        path: PropPath = ("spec", "components", index, "podTemplate", "spec", "containers")
        entries = _entries(_get(component, ("podTemplate", "spec", "containers")))
        mains = [
            (i, c)
            for i, c in enumerate(entries)
            if isinstance(c, Mapping) and c.get("name") == MAIN_CONTAINER
        ]
        if not mains:
            yield path, str(component.get("name")), None
        for position, container in mains:
            yield (*path, position), str(component.get("name")), container


# --- Images pinned ------------------------------------------------------------------------------


def image_is_pinned(image: str) -> bool:
    """A digest (`...@sha256:...`), or a tag that is not `latest`. `registry:5000/repo` has no tag."""
    if "@" in image:
        return True
    last_component = image.rsplit("/", 1)[-1]
    _, colon, tag = last_component.partition(":")
    return bool(colon and tag) and tag != "latest"


def check_images_pinned(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    for path, container in containers(args.resource_type, args.props):
        image = container.get("image")
        if not isinstance(image, str) or not image_is_pinned(image):
            report_violation(
                f"{dotted((*path, 'image'))}: image {image!r} is not pinned; name a version tag "
                "(not `latest`) or a digest, so every node runs the image that was reviewed",
                None,
            )


images_pinned = ResourceValidationPolicy(
    name="images-pinned",
    description="Every container of Jobs and of the DynamoGraphDeployment names a version tag or digest.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=check_images_pinned,
)


# --- GPUs per worker ----------------------------------------------------------------------------


def gpus_per_worker(args: ResourceValidationArgs) -> int:
    """The configured count (policy config `gpusPerWorker`), 1 (the recipe's) when not configured."""
    return int(args.get_config().get("gpusPerWorker", DEFAULT_GPUS_PER_WORKER))


def _gpu_count(resources: Any, side: str) -> int | None:
    """The whole number of GPUs in `resources.<side>`, or None (absent or not a whole number)."""
    value = _get(resources, (side, GPU))
    if isinstance(value, str) and value.isdigit():
        return int(value)
    if isinstance(value, int | float) and not isinstance(value, bool) and float(value).is_integer():
        return int(value)
    return None


def check_worker_gpus(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
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


worker_gpus = ResourceValidationPolicy(
    name="worker-gpus-exact",
    description=f"Each worker's main container requests and limits exactly the configured {GPU} count.",
    enforcement_level=EnforcementLevel.MANDATORY,
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
    validate=check_worker_gpus,
)


# --- The model cache ----------------------------------------------------------------------------


def check_model_cache(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Every claim this program creates is the model cache: shared by all workers, and expensive
    to lose (a multi-GB download), so ReadWriteMany and protected from delete and replacement."""
    if args.resource_type != CLAIM:
        return
    modes = _entries(_get(args.props, ("spec", "accessModes")))
    if "ReadWriteMany" not in modes:
        report_violation(
            f"spec.accessModes: the model cache must be ReadWriteMany (every worker mounts it), got {modes}",
            None,
        )
    if not args.opts.protect:
        report_violation(
            "the model cache claim must be created with `protect=True`: a destroy or replacement "
            "would delete the downloaded weights",
            None,
        )


model_cache = ResourceValidationPolicy(
    name="model-cache-rwx-protected",
    description="The model cache PersistentVolumeClaim is ReadWriteMany and protected.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=check_model_cache,
)


# --- No secret in plain env or config -----------------------------------------------------------


def looks_secret(name: str) -> bool:
    words = re.split(r"[_.\-]", name.upper())
    return any(word.endswith(secret) for word in words for secret in SECRET_WORDS)


def _plain_secret_env(env: Any, path: PropPath) -> Iterator[str]:
    for index, entry in enumerate(_entries(env)):
        if not isinstance(entry, Mapping):
            continue
        name, value = str(entry.get("name", "")), entry.get("value")
        where = dotted((*path, index))
        if looks_secret(name) and (
            value is not None or _get(entry, ("valueFrom", "secretKeyRef")) is None
        ):
            yield f"{where}: {name} looks secret, so its value must come from valueFrom.secretKeyRef"
        elif isinstance(value, str) and any(shape.match(value) for shape in SECRET_VALUE_SHAPES):
            yield f"{where}: {name}'s value is a credential; put it in a Secret and use valueFrom.secretKeyRef"


def _workload_secret_problems(args: ResourceValidationArgs) -> Iterator[str]:
    for path, container in containers(args.resource_type, args.props):
        yield from _plain_secret_env(container.get("env"), (*path, "env"))
    if args.resource_type == GRAPH:
        yield from _plain_secret_env(_get(args.props, ("spec", "env")), ("spec", "env"))


def _secret_resource_problems(props: Mapping[str, Any]) -> Iterator[str]:
    for field in sorted(set(props) - SECRET_FIELDS):
        yield f"{field}: a Secret carries its values only in data/stringData (secret in Pulumi state)"
    for kind in ("annotations", "labels"):
        for name in _get(props, ("metadata", kind)) or {}:
            if (
                looks_secret(str(name))
                or name == "kubectl.kubernetes.io/last-applied-configuration"
            ):
                yield f'metadata.{kind}["{name}"]: plain text in state and in `kubectl get`; keep secrets in data'


def _config_map_problems(props: Mapping[str, Any]) -> Iterator[str]:
    for field in ("data", "binaryData"):
        for key in _get(props, (field,)) or {}:
            if looks_secret(str(key)):
                yield f'{field}["{key}"]: looks secret; a ConfigMap is plain text: use a Secret'


def _plain_secret_problems(args: ResourceValidationArgs) -> Iterator[str]:
    if args.resource_type == SECRET:
        return _secret_resource_problems(args.props)
    if args.resource_type == CONFIG_MAP:
        return _config_map_problems(args.props)
    return _workload_secret_problems(args)


def check_no_plain_secrets(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    for problem in _plain_secret_problems(args):
        report_violation(problem, None)


no_plain_secrets = ResourceValidationPolicy(
    name="no-plain-secrets",
    description="Secret-looking env comes from secretKeyRef; Secrets hold values only in data/stringData.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=check_no_plain_secrets,
)


# --- Graph readiness ----------------------------------------------------------------------------


def check_graph_readiness(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Custom resources are "ready" on admission unless `pulumi.com/waitFor` says otherwise; without
    it `pulumi up` reports success while the workers are still downloading or crash-looping."""
    if args.resource_type != GRAPH:
        return
    annotations = _get(args.props, ("metadata", "annotations")) or {}
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


# --- Resource requests --------------------------------------------------------------------------


def check_resource_requests(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    for path, container in containers(args.resource_type, args.props):
        requests = _get(container, ("resources", "requests")) or {}
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


POLICIES = [
    images_pinned,
    worker_gpus,
    model_cache,
    no_plain_secrets,
    graph_readiness,
    resource_requests,
]
"""Every policy of the pack, in the order the CLI reports them."""
