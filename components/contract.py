"""The stack-output contract: what a deployment tells the test stages.

A Pulumi stack exports these keys (`pulumi stack output --json`); the local lab writes the same JSON
to a file. Test stages read either with `StackOutputs.load`, so they run unchanged against a cluster
or the lab. Keys are camelCase, values are plain, and no secret is ever among them. Add keys when a
stage needs them; never rename one silently.

An optional key may be absent, and absent means null: the Python SDK drops every None-valued
output before it reaches the engine (decision 0009).
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel

from common.input_files import (
    MAX_OUTPUTS_BYTES,
    InputFileError,
    parsed_json,
    read_stream,
    read_text,
)
from components.config_rules import MAX_GPUS_PER_POD, MAX_WORKER_REPLICAS
from components.k8s_values import is_dns1123_label
from components.routing import RoutingProfile, routing_for


class StackOutputs(BaseModel):
    """One deployment of the recipe, as the test stages see it."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="ignore"
    )

    namespace: str
    profile: RoutingProfile
    graph_name: str
    frontend_service: str
    frontend_port: int = Field(ge=1, le=65535)
    frontend_url: str = Field(description="Base URL of the frontend, without a trailing slash.")
    models_url: str
    served_model: str
    session_affinity_ttl_seconds: int | None = None
    session_header: str | None = None
    worker_replicas: int = Field(ge=1, le=MAX_WORKER_REPLICAS)
    worker_gpus: int = Field(
        default=1,
        ge=0,
        le=MAX_GPUS_PER_POD,
        description="GPUs per worker (0 in the lab): the graph takes replicas x this",
    )
    model_cache_claim: str | None = None
    frontend_replicas: int | None = Field(
        default=None,
        ge=2,
        description="Frontend replicas when more than one (absent: one). With affinity, the "
        "operator's Service spreads one session over them, so the A/B refuses it",
    )
    frontend_external_url: str | None = Field(
        default=None,
        description="Where clients outside the cluster reach the frontend, when the program "
        "knows it (an Ingress with a host); None otherwise",
    )
    port_forward_command: str | None = None
    kube_context: str | None = Field(
        default=None, description="kubeconfig context of the cluster; None for the lab."
    )
    target: Literal["cluster", "lab"] = "cluster"
    # Autoscaler-owned replicas (workerAutoscaling): absent on a graph of a fixed count.
    worker_autoscaling: bool | None = Field(
        default=None,
        description=(
            "True: an autoscaler owns the worker count, workerReplicas is its maximum; "
            "absent (null) or false: the graph runs exactly workerReplicas workers."
        ),
    )
    worker_min_replicas: int | None = Field(default=None, ge=1, le=MAX_WORKER_REPLICAS)
    worker_max_replicas: int | None = Field(default=None, ge=1, le=MAX_WORKER_REPLICAS)
    worker_scaling_adapter: str | None = Field(
        default=None,
        description="The DynamoGraphDeploymentScalingAdapter an autoscaler scales the workers by.",
    )

    @field_validator("namespace")
    @classmethod
    def _a_namespace_name(cls, namespace: str) -> str:
        # What the API server would refuse of every Job, Service and ConfigMap a stage makes
        # there (ValidateNamespaceName: an RFC 1123 label); a dry run must refuse it too.
        problems = is_dns1123_label(namespace)
        if problems:
            raise ValueError("is no namespace name: it " + "; ".join(problems))
        return namespace

    @field_validator("frontend_url", "models_url", "frontend_external_url")
    @classmethod
    def _an_http_url(cls, url: str | None) -> str | None:
        if url is None:
            return None
        # The pod programs and AIPerf speak HTTP(S) only: a file:// or ftp:// URL, one without a
        # host or with a port outside 1-65535 would fail in the pod, after the Job was created.
        problem = http_url_problem(url)
        if problem:
            raise ValueError(problem)
        return url

    @model_validator(mode="after")
    def _routing_is_consistent(self) -> StackOutputs:
        # Raises when the profile, TTL and header disagree, e.g. a hand-edited outputs file.
        routing = routing_for(self.profile, self.session_affinity_ttl_seconds or 0)
        if routing.affinity_ttl_seconds != self.session_affinity_ttl_seconds:
            raise ValueError(
                f"profile {self.profile} does not match sessionAffinityTtlSeconds="
                f"{self.session_affinity_ttl_seconds}"
            )
        if routing.session_header != self.session_header:
            raise ValueError(
                f"profile {self.profile} expects sessionHeader={routing.session_header!r}, "
                f"got {self.session_header!r}"
            )
        return self

    @model_validator(mode="after")
    def _bounds_in_order(self) -> StackOutputs:
        low, high = self.worker_min_replicas, self.worker_max_replicas
        if low is not None and high is not None and low > high:
            raise ValueError(f"workerMinReplicas {low} is above workerMaxReplicas {high}")
        return self

    @property
    def autoscaled(self) -> bool:
        """The worker count changes under the graph: no fixed number of workers to measure."""
        return bool(self.worker_autoscaling)

    @property
    def frontends(self) -> int:
        return self.frontend_replicas or 1

    @property
    def graph_gpus(self) -> int:
        """GPUs the graph holds while it is deployed."""
        return self.worker_replicas * self.worker_gpus

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        """The exported key of every field, in contract order."""
        return tuple(field.alias or name for name, field in cls.model_fields.items())

    def to_json_dict(self) -> dict[str, object]:
        """The contract as the engine stores it: camelCase keys, plain JSON values, and no key
        for a None value (what `pulumi stack output --json` prints; the lab writes the same)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    @classmethod
    def load(cls, source: Path | IO[str]) -> StackOutputs:
        """Read `pulumi stack output --json` (or a lab outputs file) from a path or a stream."""
        name = str(source) if isinstance(source, Path) else getattr(source, "name", "<stream>")
        what = "stack-outputs file"
        try:
            if isinstance(source, Path):
                text = read_text(source, what, MAX_OUTPUTS_BYTES)
            else:
                text = read_stream(source, name, what, MAX_OUTPUTS_BYTES)
            data = parsed_json(text, name, what)  # nested at most MAX_NESTING deep
            if not isinstance(data, dict):
                kind = "an array" if isinstance(data, list) else f"a {type(data).__name__}"
                raise OutputsError(
                    f"stack outputs in {name} are {kind}, not a JSON object: pass what "
                    "`pulumi stack output --json` prints"
                )
            if "graphName" not in data and "modelCacheReady" in data:
                raise OutputsError(
                    f"stack outputs in {name} are a shared layer's (a stack with deployGraph "
                    "false): it deploys no graph to test; pass the outputs of a stack that does "
                    "(dev, round-robin or session-affinity)"
                )
            return cls.model_validate(data)
        except InputFileError as error:  # missing, a device, too big, not text, not JSON, deep
            raise OutputsError(str(error)) from None
        except ValidationError as error:
            problems = contract_problems(error)
            raise OutputsError(f"stack outputs in {name} break the contract:\n{problems}") from None
        except (RecursionError, ValueError) as error:
            # json refuses numbers over 4,300 digits (ValueError) and nests by recursion.
            detail = f"{type(error).__name__}: {str(error)[:100]}"
            raise OutputsError(f"stack outputs in {name} are not usable JSON ({detail})") from error


def contract_problems(error: ValidationError) -> str:
    """One line per problem, `  frontendUrl: <why>`, never the value: any field may carry a
    credential, and pydantic's cut-short quote of a long one hides it from the masker."""
    lines = []
    for problem in error.errors():
        where = ".".join(str(part) for part in problem["loc"]) or "the outputs"
        lines.append(f"  {where}: {problem['msg'].removeprefix('Value error, ')}")
    return "\n".join(lines)


def http_url_problem(url: str) -> str | None:
    """Why `url` is no http(s) URL a client can reach (no scheme, another scheme, no host, a port
    outside 1-65535), or None; never the URL itself (it may carry a password)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:  # an unclosed IPv6 bracket, a port that is no number or above 65535
        return "must be an http:// or https:// URL with a host and a port of 1 to 65535"
    if parts.scheme not in ("http", "https"):
        return f"must be an http:// or https:// URL, not {parts.scheme + '://' if parts.scheme else 'one without a scheme'}"
    if not parts.hostname:
        return "must be an http:// or https:// URL with a host"
    if port == 0:
        return "must have a port of 1 to 65535"
    return None


class OutputsError(Exception):
    """Stack outputs that a stage cannot use, with the reason."""
