"""Stack outputs: the contract of `components.contract`, and the shared layer's own handshake.

A profile stack and the stack that owns the shared layer talk only through the layer stack's
outputs (read by StackReference). Both sides are here: what the layer stack exports
(`layer_outputs`) and what a profile stack requires of them (`shared_layer_from_outputs`).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from components import names
from components.contract import StackOutputs
from components.k8s_values import is_system_namespace
from components.layer_manifests import RECIPE_SELECTION, SharedLayer
from components.settings import StackSettings, config_key


def graph_outputs(settings: StackSettings, layer: SharedLayer) -> StackOutputs:
    """What a profile stack tells the test stages: where the frontend is and how it routes."""
    graph = names.graph_name(settings.profile)
    service = names.frontend_service(graph)
    port = names.FRONTEND_PORT
    url = f"http://{service}.{layer.namespace}.svc.cluster.local:{port}"
    routing = settings.routing
    autoscaling = settings.worker_autoscaling
    return StackOutputs(
        namespace=layer.namespace,
        profile=settings.profile,
        graph_name=graph,
        frontend_service=service,
        frontend_port=port,
        frontend_url=url,
        models_url=f"{url}/v1/models",
        served_model=names.SERVED_MODEL,
        session_affinity_ttl_seconds=routing.affinity_ttl_seconds,
        session_header=routing.session_header,
        # With an autoscaler, the most workers it may run: the GPUs the graph can come to hold.
        worker_replicas=(settings.worker_max_replicas if autoscaling else settings.worker_replicas),
        worker_gpus=settings.worker_gpus,
        model_cache_claim=layer.model_cache_claim,
        # Absent for one frontend: the outputs of every stack that has one stay as they were.
        frontend_replicas=settings.frontend_replicas if settings.frontend_replicas > 1 else None,
        frontend_external_url=external_url(
            settings.frontend_exposure, settings.frontend_host, settings.frontend_tls_secret
        ),
        port_forward_command=(  # a context may hold a space (an EKS ARN's cluster name)
            f"kubectl --context {shlex.quote(settings.kube_context)} -n {layer.namespace} "
            f"port-forward service/{service} {port}:{port}"
        ),
        kube_context=settings.kube_context,
        target="cluster",
        worker_autoscaling=True if autoscaling else None,
        worker_min_replicas=settings.worker_min_replicas if autoscaling else None,
        worker_max_replicas=settings.worker_max_replicas if autoscaling else None,
        worker_scaling_adapter=names.scaling_adapter(graph) if autoscaling else None,
    )


def external_url(mode: str, host: str, tls_secret: str) -> str | None:
    """Where clients reach the frontend, when the program knows it: an Ingress with a host (its
    TLS says the scheme). A Service's address comes from the load balancer or the node, and an
    HTTPRoute's scheme from the Gateway's listener: neither is the program's to say."""
    if mode != "ingress" or not host or host.startswith("*"):
        return None
    return f"{'https' if tls_secret else 'http'}://{host}"


CACHE_READY_KEY = "modelCacheReady"
WORKER_IMAGE_KEY = "workerImage"
SELECTED_BY_KEYS = ("workerMemory", "nimModelProfile", "nimSelectionEnv")
"""What the download selected the NIM's model profile by (its pod's memory limit counts as the
system's memory, a pinned profile wins, and `workerExtraEnv` may override the recipe's selection
variables): a profile stack's workers must select the same one, the one the cache holds.
Exported only where the layer runs the download."""
SELECTED_BY_SETTING = {"nimSelectionEnv": "workerExtraEnv"}
"""The config key behind an output of SELECTED_BY_KEYS where the two names differ."""
CREDENTIALS_DIGEST_KEY = "credentialsDigest"
NGC_SECRET_FIELD_KEY = "ngcSecretField"
"""The key inside ngcSecret that holds the NGC key: named `Field`, since a name ending in `Key`
is a credential's to the masker (`common.credential_names`), which would hide its value."""
LAYER_OUTPUT_KEYS = (
    "namespace",
    "modelCacheClaim",
    "ngcSecret",
    NGC_SECRET_FIELD_KEY,
    "registryPullSecret",
    WORKER_IMAGE_KEY,
    *SELECTED_BY_KEYS,
    CACHE_READY_KEY,
    CREDENTIALS_DIGEST_KEY,
)
OPTIONAL_LAYER_KEYS = frozenset(
    {"ngcSecret", "registryPullSecret", CREDENTIALS_DIGEST_KEY, NGC_SECRET_FIELD_KEY}
    | set(SELECTED_BY_KEYS)
)
"""None when there is no NGC key (`ngcApiKeyNeeded` false) or no pull secret; the engine then
stores no such key at all. A layer deployed
by an earlier version of this program has no credentialsDigest (`ordering_problems` says so), nor
ngcSecretField (its Secret's key is then NGC_API_KEY, the only one it knew), nor what the download
selected by (not compared then); a layer without a download exports none of those."""


def layer_outputs(layer: SharedLayer) -> dict[str, object]:
    """The layer's names, as the stack that owns it exports them for profile stacks; the recipe
    adds the download's `workerImage` and `modelCacheReady`."""
    return {
        "namespace": layer.namespace,
        "modelCacheClaim": layer.model_cache_claim,
        "ngcSecret": layer.ngc_secret,
        NGC_SECRET_FIELD_KEY: layer.ngc_secret_key if layer.ngc_secret else None,
        "registryPullSecret": layer.registry_pull_secret,
    }


def missing_layer_outputs(outputs: Mapping[str, Any]) -> list[str]:
    """The layer keys that `outputs` (as the engine stores them) lacks, without which no graph can
    be built on it."""
    return [
        key
        for key in LAYER_OUTPUT_KEYS
        if key not in OPTIONAL_LAYER_KEYS and outputs.get(key) is None
    ]


class SharedLayerError(ValueError):
    """The shared layer stack's outputs cannot carry this profile stack; says what to do."""


def shared_layer_from_outputs(
    outputs: Mapping[str, Any], settings: StackSettings, stack: str, preview: bool = False
) -> tuple[SharedLayer, list[str]]:
    """The layer a profile stack runs on, from the layer stack's outputs as the engine stores them,
    and what a preview warns about.

    Refuses, saying what to do, a layer stack with no outputs (never updated), one that deploys a
    graph, or one whose namespace the cluster owns. What only the order of updates settles
    (`ordering_problems`) is refused in `up` and only warned about in a preview, which then shows
    this stack's diff: a pull request that changes the image shows every stack's.
    """
    missing = missing_layer_outputs(outputs)
    if missing:
        raise SharedLayerError(
            f"{config_key('sharedStack')} {stack} has no output {', '.join(missing)}: that stack "
            "has not completed a `pulumi up` of this program (or of a version before these "
            f"outputs). Deploy it first (`pulumi up --stack {stack}`), then update this stack."
        )
    if outputs.get("graphName"):  # two stacks would own one graph (decision 0011)
        raise SharedLayerError(
            f"{config_key('sharedStack')} {stack} deploys a graph of its own "
            f"({outputs['graphName']}), so it is no layer stack: name one that deploys none "
            f"({config_key('deployGraph')} false, as `shared`)"
        )
    if is_system_namespace(str(outputs["namespace"])):
        raise SharedLayerError(
            f"{stack} puts the layer in namespace {outputs['namespace']!r}, which the cluster owns: "
            f"set {config_key('namespace')} on {stack} to a namespace of its own and update it first"
        )
    problems = ordering_problems(outputs, settings, stack)
    if problems and not preview:
        raise SharedLayerError("\n".join(problems))
    notes = [f"{problem} (`pulumi up` refuses this until then)" for problem in problems]
    layer = SharedLayer(
        namespace=str(outputs["namespace"]),
        model_cache_claim=str(outputs["modelCacheClaim"]),
        ngc_secret=outputs.get("ngcSecret"),
        registry_pull_secret=outputs.get("registryPullSecret"),
        ngc_secret_key=str(outputs.get(NGC_SECRET_FIELD_KEY) or names.NGC_SECRET_KEY),
        credentials_digest=str(outputs.get(CREDENTIALS_DIGEST_KEY) or ""),
    )
    return layer, notes


NIM_SELECTION_NAMES = frozenset(
    {
        "NIM_CACHE_PATH",
        "NIM_MODEL_TYPE",
        "NIM_MODEL_SIZE",
        "NIM_MODEL_VARIANT",
        "NIM_PRECISION",
        "NIM_TAGS_SELECTOR",
        "NIM_MODEL_PROFILE",
    }
)
"""What the NIM reads to select its model profile and to find its cache (dynamo-cosmos3-facts,
the NIM's environment): `workerExtraEnv` entries of these names change what a pod selects."""


def selection_overrides(extra: tuple[str, ...]) -> list[str]:
    """The `workerExtraEnv` entries that change what the NIM selects (NAME=value), sorted; one
    that sets the recipe's own value changes nothing."""
    recipe = RECIPE_SELECTION | {"NIM_CACHE_PATH": names.CACHE_MOUNT_PATH}
    entries = (item.split("=", 1) for item in extra)
    return sorted(
        f"{name}={value}"
        for name, value in entries
        if name in NIM_SELECTION_NAMES and recipe.get(name) != value
    )


def selected_by(settings: StackSettings) -> dict[str, Any]:
    """What this stack's pods select the NIM's model profile by, under SELECTED_BY_KEYS."""
    values = (
        settings.worker_memory,
        settings.nim_model_profile,
        selection_overrides(tuple(settings.worker_extra_env)),
    )
    return dict(zip(SELECTED_BY_KEYS, values, strict=True))


def ordering_problems(outputs: Mapping[str, Any], settings: StackSettings, stack: str) -> list[str]:
    """What the layer stack must do before this stack's update: complete its download, download
    for this stack's image, export the credentials' digest. Each says the order."""
    problems = []
    if outputs[CACHE_READY_KEY] is not True:
        problems.append(
            f"the model download of {stack} has not completed ({CACHE_READY_KEY}="
            f"{outputs[CACHE_READY_KEY]!r}): run `pulumi up --stack {stack}` until its download "
            "Job completes, then update this stack."
        )
    if outputs[WORKER_IMAGE_KEY] != settings.worker_image:
        problems.append(
            f"{config_key('workerImage')} is {settings.worker_image!r}, but {stack} filled the "
            f"model cache with {outputs[WORKER_IMAGE_KEY]!r}: set the same workerImage on both "
            f"stacks. To change the image: `pulumi destroy` the profile graph that runs (its "
            f"workers hold the GPUs the new download needs), `pulumi up --stack {stack}` (it "
            "downloads for the new image), then `pulumi up` this stack."
        )
    for key, mine in selected_by(settings).items():
        if outputs.get(key) is None or outputs[key] == mine:
            continue
        setting = SELECTED_BY_SETTING.get(key)
        what = f"NIM selection entries of {setting}" if setting else key
        problems.append(
            f"{'the NIM selection entries of ' if setting else ''}{config_key(setting or key)} "
            f"{'are' if setting else 'is'} {mine!r}, but {stack} downloaded the model with "
            f"{outputs[key]!r}: set the same {what} on both stacks (the NIM selects its model "
            "profile by it, and the cache holds the one the download selected)."
        )
    if not outputs.get(CREDENTIALS_DIGEST_KEY):
        problems.append(
            f"{stack} has no output {CREDENTIALS_DIGEST_KEY}: it was deployed by an earlier "
            f"version of this program. Update it first (`pulumi up --stack {stack}`), then this "
            "stack, whose workers then restart whenever its credentials change."
        )
    return problems
