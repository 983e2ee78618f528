"""The value rules of stack config: each key's syntax, on top of the Kubernetes API server's own
rules for the field the value lands in (`components.k8s_values`). Pure: no Pulumi.

Each rule is a pydantic annotated type that `components.settings.StackSettings` uses for its
fields. A rule's message never shows the value: `components.config_parser` decides what a refusal
may show (`components.settings.QUIET_KEYS`), so a secret pasted into workerExtraEnv never reaches a
log.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field

from common.credentials import credential_kind, is_secret_env_name
from components import k8s_values as k8s
from components import names
from components.affinity import affinity_problems
from components.image_reference import holds_userinfo, semver_tag_problems
from components.routing import MAX_AFFINITY_TTL_SECONDS, MIN_AFFINITY_TTL_SECONDS

_STACK_SEGMENT = r"[A-Za-z0-9_.-]+"
_STACK_NAME = rf"({_STACK_SEGMENT}|{_STACK_SEGMENT}/{_STACK_SEGMENT}/{_STACK_SEGMENT})"
"""A stack's short name (`shared`: this stack's organization and project) or `<org>/<project>/<stack>`."""
SHOWN_MAX_CHARACTERS = 60
"""A refusal shows a longer value (or name) by its length only: long values are where secrets
hide."""


MAX_WORKER_REPLICAS = 5000
"""More workers than Kubernetes' largest supported cluster has nodes (5,000, "Considerations for
large clusters") is a typo, not a deployment; each worker holds at least one GPU."""
MAX_GPUS_PER_POD = 16
"""No GPU node offers more than 16 GPUs (8 on an H200 node), and one pod runs on one node."""


def shown(text: str) -> str:
    """`text` as a refusal may show it: quoted when short, else by its length; never a value
    that holds a credential (`common.credentials`, or `user:password@` before a registry),
    whatever its key."""
    if credential_kind(text) or holds_userinfo(text):
        return "a value that holds a credential (not shown)"
    quoted = repr(text)
    return quoted if len(quoted) <= SHOWN_MAX_CHARACTERS else f"a {len(text)}-character value"


def _rule(check: Callable[[Any], list[str]]) -> AfterValidator:
    """A pydantic validator from a rule that lists problems, as `components.k8s_values` does."""

    def validate(value: Any) -> Any:
        problems = check(value)
        if problems:
            raise ValueError("; ".join(problems))
        return value

    return AfterValidator(validate)


def _json(empty: Callable[[], Any], what: str) -> BeforeValidator:
    """The CLI passes typed `array` and `object` config as JSON text; tests and the render may
    pass lists and dicts. The message never shows the text: it may be workerExtraEnv, whose values
    may be secrets."""

    def decode(value: Any) -> Any:
        if isinstance(value, str):
            try:
                return json.loads(value) if value.strip() else empty()
            except (ValueError, RecursionError):
                raise ValueError(f"expected a YAML/JSON {what}") from None
        return value

    return BeforeValidator(decode)


_JSON_LIST = _json(list, "list of strings")


def _stack_reference_name(value: str) -> list[str]:
    if value and not re.fullmatch(_STACK_NAME, value):
        return [
            (
                "must be a stack's short name (e.g. shared: same organization and project as "
                "this stack) or its fully qualified name <org>/<project>/<stack>"
            )
        ]
    return []


def _no_control_characters(value: str) -> list[str]:
    if any(not character.isprintable() for character in value):
        return ["must contain no control characters (e.g. a newline)"]
    return []


def _context_name(value: str) -> list[str]:
    if not value.strip():
        return ["must name a kubeconfig context"]
    if value != value.strip():
        return ["must not begin or end with whitespace"]
    return _no_control_characters(value)


def _own_namespace(value: str) -> list[str]:
    problems = k8s.is_dns1123_label(value)
    if not problems and k8s.is_system_namespace(value):
        owned = "default, kube-system, kube-public, kube-node-lease, any kube-*"
        return [
            (
                f"is a namespace the cluster owns ({owned}): the stack would create, protect or "
                "adopt it and everything in it; choose one of its own, e.g. cosmos3-nano-reasoner"
            )
        ]
    return problems


def _at_most(limit: int, why: str) -> AfterValidator:
    return _rule(lambda value: [f"must be at most {limit}: {why}"] if value > limit else [])


def _registry_username(value: str) -> list[str]:
    # The pull secret's `auth` is base64("user:password"): a ':' in the user would split it.
    return ["must not contain ':'"] if ":" in value else _no_control_characters(value)


def _env_item(item: str) -> list[str]:
    """NAME=value, the name as core/validation checks env names (IsEnvVarName), never a secret.
    Problems name the variable only when it is a valid name; they never show the value."""
    name, equals, _ = item.partition("=")
    if not equals:
        return ["must be NAME=value (it has no '='; the item is not shown, it may be a secret)"]
    name_problems = k8s.is_env_var_name(name)
    if name_problems:
        return [f"the name before '=' {problem}" for problem in name_problems]
    if is_secret_env_name(name):  # the masker's rule, and the policy pack's
        return [
            (
                f"{shown(name)} is a secret and must not be plain config (the value is not shown); "
                "the NGC key comes from the ngcApiKey secret"
            )
        ]
    return []


def _unique(what: str) -> AfterValidator:
    """Each name (before '=') once: a second one would silently win over the first."""

    def check(items: list[str]) -> list[str]:
        names = [item.partition("=")[0] for item in items]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"each {what} at most once; set twice: {', '.join(map(shown, twice))}")
        return items

    return AfterValidator(check)


def _monitoring_label(item: str) -> list[str]:
    key = item.partition("=")[0]
    if key in names.labels(""):
        return [f"{key} is the recipe's own label on every object; choose another key"]
    return k8s.label_problems(item)


MAX_RESTART_ID_CHARACTERS = 256
"""A restart id is a marker (a date, a counter), written to spec.restart.id and carried by the
operator into pod annotations; longer text is a paste, not an id."""


def _restart_id(value: str) -> list[str]:
    if len(value) > MAX_RESTART_ID_CHARACTERS:
        return [f"must be at most {MAX_RESTART_ID_CHARACTERS} characters"]
    if value != value.strip():
        return ["must not begin or end with whitespace"]
    return _no_control_characters(value)


def _scheduler_name(value: str) -> list[str]:
    # The API server checks no schedulerName (core/validation has no rule for it). Refused here
    # is what names no scheduler: a path segment name's exclusions (IsValidPathSegmentName: '.',
    # '..', '/', '%') and whitespace, each a typo that would leave the pods Pending.
    if k8s.has_whitespace_or_control(value):
        return ["must contain no whitespace or control characters"]
    return k8s.is_path_segment_name(value)


def _service_annotation(item: str) -> list[str]:
    if item.startswith("pulumi.com/"):
        return ["pulumi.com/ annotations are the program's own (how Pulumi applies and awaits it)"]
    return k8s.annotation_problems(item)


def _optional(check: Callable[[str], list[str]]) -> AfterValidator:
    """`check` on a value that is set; empty means "not used"."""
    return _rule(lambda value: check(value) if value else [])


def _command(items: list[str]) -> list[str]:
    if not items[0].strip():
        raise ValueError("the first item must name the program to run")
    return items


# --- the types of StackSettings' fields -----------------------------------------------------------

ContextName = Annotated[str, _rule(_context_name)]
Path = Annotated[str, _rule(_no_control_characters)]
StackReference = Annotated[str, _rule(_stack_reference_name)]
ClaimName = Annotated[str, _rule(k8s.is_dns1123_subdomain)]
"""A PersistentVolumeClaim's name: a DNS subdomain (ValidatePersistentVolumeName)."""
OwnNamespace = Annotated[str, _rule(_own_namespace)]
"""The namespace (ValidateNamespaceName: an RFC 1123 label), never one the cluster owns."""
RegistryServer = Annotated[str, _optional(k8s.registry_server_problems)]
"""The first part of every image reference pulled through the mirror; empty: no mirror."""
RegistryUsername = Annotated[str, _rule(_registry_username)]
Quantity = Annotated[str, _rule(k8s.is_positive_quantity)]
Image = Annotated[str, _rule(k8s.image_problems)]
FrontendImage = Annotated[
    str, _rule(lambda value: k8s.image_problems(value) or semver_tag_problems(value))
]
"""The frontend's image: it carries no runtimeVersionOverride, so its tag is its version."""
Count = Annotated[int, Field(ge=1, le=k8s.INT32_MAX)]
"""Counts and seconds: at least 1, at most int32 (replicas, activeDeadlineSeconds' range we use)."""
AffinityTtl = Annotated[int, Field(ge=MIN_AFFINITY_TTL_SECONDS, le=MAX_AFFINITY_TTL_SECONDS)]
"""A session affinity TTL in seconds, the stack's and the lab's (`components.routing`'s range)."""
_AT_MOST_GPUS = _at_most(MAX_GPUS_PER_POD, "one pod runs on one node, and none has more")
GpuCount = Annotated[int, Field(ge=0), _AT_MOST_GPUS]
WorkerGpus = Annotated[int, Field(ge=1), _AT_MOST_GPUS]
WorkerReplicas = Annotated[
    int,
    Field(ge=1),
    _at_most(MAX_WORKER_REPLICAS, "more workers than the largest Kubernetes cluster has nodes"),
]
RestartId = Annotated[str, _rule(_restart_id)]
"""spec.restart.id (the CRD: a string of at least one character); empty: no restart requested."""
RuntimeVersion = Annotated[
    str, Field(pattern=r"^(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})$")
]
"""The DGD CRD's pattern for runtimeVersionOverride."""
NimProfile = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.:=,-]*$", max_length=256)]
Command = Annotated[list[str], _JSON_LIST, Field(min_length=1), AfterValidator(_command)]
NodeSelector = Annotated[
    list[Annotated[str, _rule(k8s.node_selector_problems)]],
    _JSON_LIST,
    _unique("node selector key"),
]
MonitoringLabels = Annotated[
    list[Annotated[str, _rule(_monitoring_label)]],
    _JSON_LIST,
    _unique("label key"),
]
Tolerations = Annotated[list[Annotated[str, _rule(k8s.toleration_problems)]], _JSON_LIST]
ExtraEnv = Annotated[list[Annotated[str, _rule(_env_item)]], _JSON_LIST, _unique("variable")]


# --- placement (issue 32): the pod spec fields that decide where a pod runs ----------------------

Affinity = Annotated[dict[str, Any], _json(dict, "object"), _rule(affinity_problems)]
"""A core/v1 Affinity (`components.affinity`); empty: none."""
SchedulerName = Annotated[str, _optional(_scheduler_name)]
"""A scheduler's name (e.g. kai-scheduler); empty: the cluster's default scheduler."""
OptionalSubdomain = Annotated[str, _optional(k8s.is_dns1123_subdomain)]
"""An object's name, each a DNS subdomain in core/validation, or empty (not set): a storage class
(ValidateClassName; the cross-checks say whether a stack needs one), a PriorityClass or
RuntimeClass (ValidatePriorityClassName, ValidateRuntimeClassName), an existing Secret
(ValidateSecretName; empty: the program creates its own), an IngressClass, a Gateway."""
OptionalDnsLabel = Annotated[str, _optional(k8s.is_dns1123_label)]
"""A namespace, or empty."""
PublicHost = Annotated[str, _optional(k8s.host_problems)]
SourceRanges = Annotated[
    list[Annotated[str, _rule(k8s.cidr_problems)]], _JSON_LIST, _unique("range")
]
ServiceAnnotations = Annotated[
    list[Annotated[str, _rule(_service_annotation)]],
    _JSON_LIST,
    _unique("annotation key"),
]
# --- issue 32: disruption budget and existing Secrets ---------------------------------------------
MaxUnavailable = Annotated[str, BeforeValidator(str), _optional(k8s.int_or_percent_problems)]
"""A PodDisruptionBudget's maxUnavailable as text (`1`, `25%`), or empty for none. `str` first:
a stack file's `workerMaxUnavailable: 2` reaches the program as the text "2" from the CLI, but as
an int from the tests and the render. A value that lets no worker go is the cross-check's (it
needs replicas)."""
SecretKey = Annotated[str, _rule(k8s.is_config_map_key)]
