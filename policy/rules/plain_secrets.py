"""no-plain-secrets: credentials reach workloads only through Secrets.

Secret-looking env must come from `valueFrom.secretKeyRef`: by name, the masker's rule
(`common.credential_names`: NGC_API_KEY, HF_TOKEN, DB_PASSWORD; not MAX_TOKENS or KEYWORDS), and
by value, any credential the masker knows by its shape (`common.credentials`); a Secret holds
its values only in data/stringData (which Pulumi keeps secret in its state); a ConfigMap, plain
text everywhere, holds no secret-looking key."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy import ReportViolation, ResourceValidationArgs

from common.credentials import credential_kind, is_secret_env_name

from .workloads import (
    CONFIG_MAP,
    GRAPH,
    SECRET,
    PropPath,
    containers,
    dotted,
    entries,
    get_at,
    mandatory,
)

looks_secret = is_secret_env_name
"""The masker's rule of a secret's name (`common.credential_names`), the pack's too."""
SECRET_FIELDS = frozenset(
    {"apiVersion", "kind", "metadata", "type", "data", "stringData", "immutable"}
)


def _plain_secret_env(env: Any, path: PropPath) -> Iterator[str]:
    for index, entry in enumerate(entries(env)):
        if not isinstance(entry, Mapping):
            continue
        name, value = str(entry.get("name", "")), entry.get("value")
        where = dotted((*path, index))
        if looks_secret(name) and (
            value is not None or get_at(entry, ("valueFrom", "secretKeyRef")) is None
        ):
            yield f"{where}: {name} looks secret, so its value must come from valueFrom.secretKeyRef"
        elif isinstance(value, str) and (kind := credential_kind(value)):
            yield f"{where}: {name}'s value holds {kind}; put it in a Secret and use valueFrom.secretKeyRef"


def _workload_secret_problems(args: ResourceValidationArgs) -> Iterator[str]:
    for path, container in containers(args.resource_type, args.props):
        yield from _plain_secret_env(container.get("env"), (*path, "env"))
    if args.resource_type == GRAPH:
        yield from _plain_secret_env(get_at(args.props, ("spec", "env")), ("spec", "env"))


def _secret_resource_problems(args: ResourceValidationArgs) -> Iterator[str]:
    props = args.props
    for field in sorted(set(props) - SECRET_FIELDS):
        yield f"{field}: a Secret carries its values only in data/stringData (secret in Pulumi state)"
    for kind in ("annotations", "labels"):
        for name in get_at(props, ("metadata", kind)) or {}:
            if (
                looks_secret(str(name))
                or name == "kubectl.kubernetes.io/last-applied-configuration"
            ):
                yield f'metadata.{kind}["{name}"]: plain text in state and in `kubectl get`; keep secrets in data'


def _config_map_problems(args: ResourceValidationArgs) -> Iterator[str]:
    for field in ("data", "binaryData"):
        for key in get_at(args.props, (field,)) or {}:
            if looks_secret(str(key)):
                yield f'{field}["{key}"]: looks secret; a ConfigMap is plain text: use a Secret'


@mandatory(
    "no-plain-secrets",
    "Secret-looking env comes from secretKeyRef; Secrets hold values only in data/stringData.",
)
def no_plain_secrets(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    problems = {SECRET: _secret_resource_problems, CONFIG_MAP: _config_map_problems}
    for problem in problems.get(args.resource_type, _workload_secret_problems)(args):
        report_violation(problem, None)
