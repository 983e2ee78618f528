"""The policy pack, against the real resource inputs and options of every shipped stack.

The inputs and options come from the program under Pulumi's mock runtime (`tools.offline`), and
the validation args are built the way the policy analyzer builds them: props wrapped in the SDK's
unknown-checking proxy, secrets plain, custom timeouts in seconds.
"""

from __future__ import annotations

import ast
import copy
import importlib
import pkgutil
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from pulumi_policy import (
    PolicyCustomTimeouts,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)
from pulumi_policy.proxy import unknown_checking_proxy
from pydantic import TypeAdapter, ValidationError

from common import REPO_ROOT
from common.credentials import mask
from components.config_rules import ExtraEnv
from policy import rules
from tests.support import NGC_KEY
from tools.offline import ProgramRun, Registered
from tools.stack_files import SHIPPED_STACKS

RunStack = Callable[..., ProgramRun]
POLICY_DIR = REPO_ROOT / "policy"


def seconds(duration: str | None) -> float:
    """A Pulumi custom timeout ("1200s", "1h30m") in seconds, as the analyzer receives it."""
    units = {"h": 3600, "m": 60, "s": 1}
    return float(
        sum(float(n) * units[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)([hms])", duration or ""))
    )


def validation_args(
    resource: Registered,
    inputs: dict[str, Any] | None = None,
    config: dict[str, Any] | None = None,
    protect: bool | None = None,
    create_timeout: str | None = None,
) -> ResourceValidationArgs:
    """What the analyzer hands a policy for `resource`; keyword arguments override one aspect."""
    timeouts = resource.custom_timeouts
    opts = PolicyResourceOptions(
        protect=resource.protect if protect is None else protect,
        ignore_changes=[],
        delete_before_replace=None,
        aliases=[],
        custom_timeouts=PolicyCustomTimeouts(
            seconds(timeouts.get("create") if create_timeout is None else create_timeout),
            seconds(timeouts.get("update")),
            0,
        ),
        additional_secret_outputs=[],
        parent=resource.parent or None,
    )
    props = unknown_checking_proxy(copy.deepcopy(resource.inputs if inputs is None else inputs))
    return ResourceValidationArgs(
        resource.type, props, resource.urn, resource.name, opts, None, config
    )


def violations(policy: ResourceValidationPolicy, args: ResourceValidationArgs) -> list[str]:
    reported: list[str] = []

    def report(message: str, urn: str | None = None) -> None:
        reported.append(message)

    policy.validate(args, report)
    return reported


def one(run: ProgramRun, type_: str) -> tuple[Registered, dict[str, Any]]:
    """The resource and a deep copy of its inputs, to break."""
    resource = run.one(type_)
    return resource, copy.deepcopy(resource.inputs)


def worker_main(inputs: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = inputs["spec"]["components"][1]["podTemplate"]["spec"][
        "containers"
    ][0]
    return container


def job_container(inputs: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = inputs["spec"]["template"]["spec"]["containers"][0]
    return container


# --- Every shipped stack passes every policy -----------------------------------------------------


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_every_shipped_stack_passes_every_policy(run_stack: RunStack, stack: str) -> None:
    found = {
        (policy.name, resource.name): message
        for resource in run_stack(stack).kubernetes_objects()
        for policy in rules.POLICIES
        for message in violations(policy, validation_args(resource))
    }
    assert found == {}


@pytest.mark.parametrize("kind", ["PodMonitor", "ServiceMonitor"])
def test_monitoring_objects_pass_every_policy(run_stack: RunStack, kind: str) -> None:
    run = run_stack("round-robin", {"monitoring": True, "monitoringKind": kind})
    found = {
        (policy.name, resource.name): message
        for resource in run.kubernetes_objects()
        for policy in rules.POLICIES
        for message in violations(policy, validation_args(resource))
    }
    assert found == {}
    # the graph, its disruption budget, the monitor, the rule, the dashboard
    assert len(run.kubernetes_objects()) == 5


def test_policies_cover_the_objects_they_are_about(run_stack: RunStack) -> None:
    run = run_stack("dev")
    graph, job = run.one(rules.GRAPH), run.one(rules.JOB)
    assert len(list(rules.containers(graph.type, graph.inputs))) == 2
    assert len(list(rules.containers(job.type, job.inputs))) == 2  # the cache-owner init step too
    assert [name for _, name, _ in rules.worker_main_containers(graph.inputs)] == ["Worker"]


# --- images-pinned -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("image", "pinned"),
    [
        ("nvcr.io/nim/nvidia/cosmos3:2.1.0", True),
        ("nvcr.io/nim/nvidia/cosmos3@sha256:" + "a" * 64, True),
        ("mirror.example:5000/nim/cosmos3:2.1.0", True),
        ("nvcr.io/nim/nvidia/cosmos3", False),
        ("nvcr.io/nim/nvidia/cosmos3:latest", False),
        ("mirror.example:5000/nim/cosmos3", False),
        ("cosmos3:", False),
    ],
)
def test_image_pinning(image: str, pinned: bool) -> None:
    assert rules.image_is_pinned(image) is pinned


def test_unpinned_worker_image_is_refused(run_stack: RunStack) -> None:
    graph, inputs = one(run_stack("round-robin"), rules.GRAPH)
    worker_main(inputs)["image"] = "nvcr.io/nim/nvidia/cosmos3:latest"
    (message,) = violations(rules.images_pinned, validation_args(graph, inputs))
    assert message.startswith("spec.components[1].podTemplate.spec.containers[0].image: image ")
    assert "'nvcr.io/nim/nvidia/cosmos3:latest' is not pinned" in message


def test_untagged_job_image_is_refused(run_stack: RunStack) -> None:
    job, inputs = one(run_stack("shared"), rules.JOB)
    job_container(inputs)["image"] = "nvcr.io/nim/nvidia/cosmos3"
    (message,) = violations(rules.images_pinned, validation_args(job, inputs))
    assert "spec.template.spec.containers[0].image" in message


def test_worker_image_config_that_is_not_pinned_fails_the_policy(run_stack: RunStack) -> None:
    run = run_stack("dev", {"workerImage": "nvcr.io/nim/nvidia/cosmos3:latest"})
    reported = [
        m
        for r in run.kubernetes_objects()
        for m in violations(rules.images_pinned, validation_args(r))
    ]
    assert len(reported) == 3, "the worker and the download Job (and its init step) share the image"


# --- worker-gpus-exact ---------------------------------------------------------------------------


def test_worker_limits_must_equal_requests(run_stack: RunStack) -> None:
    graph, inputs = one(run_stack("session-affinity"), rules.GRAPH)
    worker_main(inputs)["resources"]["limits"]["nvidia.com/gpu"] = "2"
    (message,) = violations(rules.worker_gpus, validation_args(graph, inputs))
    assert "worker 'Worker' must request and limit exactly 1 nvidia.com/gpu" in message
    assert "requests=1, limits=2" in message


def test_worker_without_gpu_request_is_refused(run_stack: RunStack) -> None:
    graph, inputs = one(run_stack("round-robin"), rules.GRAPH)
    del worker_main(inputs)["resources"]["requests"]["nvidia.com/gpu"]
    (message,) = violations(rules.worker_gpus, validation_args(graph, inputs))
    assert "requests=None, limits=1" in message


def test_gpu_count_comes_from_the_policy_config(run_stack: RunStack) -> None:
    graph = run_stack("round-robin", {"workerGpus": 2}).one(rules.GRAPH)
    assert violations(rules.worker_gpus, validation_args(graph, config={"gpusPerWorker": 2})) == []
    (message,) = violations(rules.worker_gpus, validation_args(graph))
    assert "exactly 1" in message and "gpusPerWorker" in message
    assert rules.worker_gpus.config_schema is not None
    assert rules.worker_gpus.config_schema.properties["gpusPerWorker"]["default"] == 1


# --- model-cache-rwx-protected -------------------------------------------------------------------


def test_unprotected_cache_is_refused(run_stack: RunStack) -> None:
    claim = run_stack("shared").one(rules.CLAIM)
    assert claim.protect
    (message,) = violations(rules.model_cache, validation_args(claim, protect=False))
    assert "protect=True" in message


def test_cache_that_is_not_read_write_many_is_refused(run_stack: RunStack) -> None:
    claim, inputs = one(run_stack("dev"), rules.CLAIM)
    inputs["spec"]["accessModes"] = ["ReadWriteOnce"]
    (message,) = violations(rules.model_cache, validation_args(claim, inputs))
    assert message.startswith("spec.accessModes: the model cache must be ReadWriteMany")


# --- no-plain-secrets ----------------------------------------------------------------------------


def test_plain_ngc_key_in_worker_env_is_refused(run_stack: RunStack) -> None:
    graph, inputs = one(run_stack("dev"), rules.GRAPH)
    env = worker_main(inputs)["env"]
    index = next(i for i, entry in enumerate(env) if entry["name"] == "NGC_API_KEY")
    env[index] = {"name": "NGC_API_KEY", "value": NGC_KEY}
    (message,) = violations(rules.no_plain_secrets, validation_args(graph, inputs))
    assert message == (
        f"spec.components[1].podTemplate.spec.containers[0].env[{index}]: NGC_API_KEY looks secret, "
        "so its value must come from valueFrom.secretKeyRef"
    )


@pytest.mark.parametrize(
    ("entry", "refused"),
    [
        ({"name": "HF_TOKEN", "value": "hf_x"}, True),
        (
            {"name": "DB_PASSWORD", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}},
            True,
        ),
        ({"name": "NIM_LOG_LEVEL", "value": NGC_KEY}, True),
        ({"name": "DYN_MAX_TOKENS", "value": "128"}, False),
        ({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}, False),
    ],
)
def test_secret_looking_env_in_the_job(
    run_stack: RunStack, entry: dict[str, Any], refused: bool
) -> None:
    job, inputs = one(run_stack("shared"), rules.JOB)
    job_container(inputs)["env"].append(entry)
    assert bool(violations(rules.no_plain_secrets, validation_args(job, inputs))) is refused


def test_graph_wide_env_is_checked_too(run_stack: RunStack) -> None:
    graph, inputs = one(run_stack("round-robin"), rules.GRAPH)
    inputs["spec"]["env"] = [{"name": "AWS_SECRET_ACCESS_KEY", "value": "x"}]
    (message,) = violations(rules.no_plain_secrets, validation_args(graph, inputs))
    assert message.startswith("spec.env[0]: AWS_SECRET_ACCESS_KEY looks secret")


def test_secret_keeps_values_only_in_its_data(run_stack: RunStack) -> None:
    secret, inputs = one(run_stack("dev"), rules.SECRET)
    assert violations(rules.no_plain_secrets, validation_args(secret)) == []
    inputs["metadata"]["annotations"] = {"ngc-api-key": NGC_KEY}
    inputs["plainData"] = {"NGC_API_KEY": NGC_KEY}
    assert violations(rules.no_plain_secrets, validation_args(secret, inputs)) == [
        "plainData: a Secret carries its values only in data/stringData (secret in Pulumi state)",
        'metadata.annotations["ngc-api-key"]: plain text in state and in `kubectl get`; keep secrets in data',
    ]


def test_secret_looking_config_map_key_is_refused(run_stack: RunStack) -> None:
    namespace = run_stack("dev").one("kubernetes:core/v1:Namespace")
    config_map = copy.copy(namespace)
    config_map.type = rules.CONFIG_MAP
    inputs = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "data": {"log-level": "info", "hf-token": "hf_x"},
    }
    (message,) = violations(rules.no_plain_secrets, validation_args(config_map, inputs))
    assert message.startswith('data["hf-token"]: looks secret')


SECRET_NAMES = {
    **dict.fromkeys(["NGC_API_KEY", "HF_TOKEN", "hf-token", "PGPASSWORD", "DB_PASS"], True),
    **dict.fromkeys(["MYSQL_PWD", "SSHKEY", "db.password", "AWS_SECRET_ACCESS_KEY"], True),
    **dict.fromkeys(["MAX_TOKENS", "KEYWORDS", "TIKTOKEN_CACHE_DIR", "PWD", "log-level"], False),
}


@pytest.mark.parametrize(("name", "secret"), SECRET_NAMES.items())
def test_the_pack_the_config_and_the_masker_agree_on_a_secrets_name(
    name: str, secret: bool
) -> None:
    """One rule (`common.credential_names`): what the pack refuses as plain, stack config refuses
    in workerExtraEnv and the masker hides."""
    try:
        TypeAdapter(ExtraEnv).validate_python([f"{name}=s3cr3t-value"])
        refused = False
    except ValidationError as error:
        refused = "is a secret" in str(error)
    entry = f'{{"name": "{name}", "value": "s3cr3t-value"}}'
    masked = mask(entry) != entry
    assert (rules.looks_secret(name), refused, masked) == (secret, secret, secret)


# --- graph-readiness-wait ------------------------------------------------------------------------


def test_the_programs_own_graph_wait_passes_and_a_graph_nobody_waits_for_is_refused(
    run_stack: RunStack,
) -> None:
    graph, inputs = one(run_stack("dev"), rules.GRAPH)
    assert inputs["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
    assert violations(rules.graph_readiness, validation_args(graph, inputs)) == []
    del inputs["metadata"]["annotations"]["pulumi.com/skipAwait"]
    (message,) = violations(rules.graph_readiness, validation_args(graph, inputs))
    assert message.startswith('metadata.annotations["pulumi.com/waitFor"]: must make Pulumi wait')


def test_a_provider_wait_for_the_graph_needs_a_create_timeout(run_stack: RunStack) -> None:
    graph, inputs = one(run_stack("round-robin"), rules.GRAPH)
    del inputs["metadata"]["annotations"]["pulumi.com/skipAwait"]
    inputs["metadata"]["annotations"]["pulumi.com/waitFor"] = "condition=Ready"
    (message,) = violations(
        rules.graph_readiness, validation_args(graph, inputs, create_timeout="")
    )
    assert message.startswith("customTimeouts.create must bound the provider's readiness wait")
    assert (
        violations(rules.graph_readiness, validation_args(graph, inputs, create_timeout="1200s"))
        == []
    )


@pytest.mark.parametrize("annotation", ["pulumi.com/replaceUnready", "pulumi.com/skipAwait"])
def test_a_download_job_that_a_re_run_would_break_is_refused(
    run_stack: RunStack, annotation: str
) -> None:
    job, inputs = one(run_stack("shared"), rules.JOB)
    assert violations(rules.graph_readiness, validation_args(job, inputs)) == []
    inputs["metadata"]["annotations"][annotation] = "true"
    (message,) = violations(rules.graph_readiness, validation_args(job, inputs))
    assert message == f'metadata.annotations["{annotation}"]: unsafe on the download Job'


# --- resource-requests-set -----------------------------------------------------------------------


def test_frontend_without_requests_is_refused(run_stack: RunStack) -> None:
    graph, inputs = one(run_stack("round-robin"), rules.GRAPH)
    del inputs["spec"]["components"][0]["podTemplate"]["spec"]["containers"][0]["resources"][
        "requests"
    ]
    (message,) = violations(rules.resource_requests, validation_args(graph, inputs))
    assert message.startswith(
        "spec.components[0].podTemplate.spec.containers[0].resources.requests: "
    )
    assert "container 'main' sets no cpu or memory request" in message


def test_job_without_memory_request_is_refused(run_stack: RunStack) -> None:
    job, inputs = one(run_stack("dev"), rules.JOB)
    del job_container(inputs)["resources"]["requests"]["memory"]
    (message,) = violations(rules.resource_requests, validation_args(job, inputs))
    assert "container 'download' sets no memory request" in message


# --- The pack as the CLI runs it -----------------------------------------------------------------


def test_unknown_values_during_preview_surface_as_the_sdks_error(run_stack: RunStack) -> None:
    from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, UnknownValueError

    graph, inputs = one(run_stack("dev"), rules.GRAPH)
    worker_main(inputs)["image"] = UNKNOWN_STRING_VALUE
    with pytest.raises(UnknownValueError):
        violations(rules.images_pinned, validation_args(graph, inputs))


def test_pack_lists_every_policy_once() -> None:
    """Every policy any module of the package defines is in POLICIES, once."""
    modules = [
        importlib.import_module(f"policy.rules.{module.name}")
        for module in pkgutil.iter_modules(rules.__path__)
    ]
    policies = {
        value.name
        for module in modules
        for value in vars(module).values()
        if isinstance(value, ResourceValidationPolicy)
    }
    assert sorted(p.name for p in rules.POLICIES) == sorted(policies)
    assert len({p.name for p in rules.POLICIES}) == len(rules.POLICIES)
    assert "policies=POLICIES" in (POLICY_DIR / "__main__.py").read_text()


PACK_IMPORTS = {"__future__", "collections", "re", "typing", "pulumi_policy"}
"""What the pack's modules may import (besides each other): its venv has pulumi-policy only."""
FLOOR_IMPORTS = {"base64", "binascii", "contextlib", "io", "json", "pathlib", "sys"}
"""What the common floor's modules the pack imports may import too (the standard library):
`policy/__main__.py` puts the project's root on sys.path for them."""


def test_pack_modules_import_only_the_sdk_the_stdlib_and_each_other() -> None:
    pending = sorted((POLICY_DIR / "rules").glob("*.py"))
    seen: set[Path] = set()
    while pending:
        path = pending.pop()
        seen.add(path)
        allowed = PACK_IMPORTS if path.parent.name == "rules" else PACK_IMPORTS | FLOOR_IMPORTS
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [str(node.module)]
            else:
                continue  # relative imports: the package's own modules
            floor = [
                REPO_ROOT.joinpath(*name.split(".")) for name in names if name[:7] == "common."
            ]
            pending += [file for module in floor if (file := module.with_suffix(".py")) not in seen]
            outside = {name.split(".")[0] for name in names} - allowed - {"common"}
            assert not outside, f"{path.name} imports {outside}: the CLI's pack venv lacks them"
    assert REPO_ROOT / "common" / "credential_names.py" in seen


def test_pack_starts_the_way_the_cli_runs_it() -> None:
    """`python policy/` with the policy directory first on sys.path: it serves on a port."""
    process = subprocess.Popen(
        [sys.executable, "-u", str(POLICY_DIR)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        first_line = process.stdout.readline().strip()
        assert first_line.isdigit(), process.stderr.read() if process.stderr else first_line
    finally:
        process.kill()
        process.wait(timeout=10)


def test_project_file_and_requirements_fit_the_cli() -> None:
    project = yaml.safe_load((POLICY_DIR / "PulumiPolicy.yaml").read_text())
    assert project["runtime"]["name"] == "python"
    assert project["runtime"]["options"]["virtualenv"] == "venv"
    pins = _pins(POLICY_DIR / "requirements.txt")
    assert pins["pulumi-policy"] == "1.21.0"
    program_pins = _pins(REPO_ROOT / "requirements.txt")
    assert {name: pins[name] for name in pins.keys() & program_pins.keys()} == {
        name: program_pins[name] for name in pins.keys() & program_pins.keys()
    }, "the pack's venv and the program's venv must agree on shared packages"


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        name, sep, version = line.partition("==")
        if sep and not line.startswith("#"):
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version.strip()
    return pins
