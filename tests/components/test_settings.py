"""Validation of stack config: each rule stops with a message naming the key and the fix."""

import itertools
import re
from typing import Any

import pytest

from components import config_checks
from components import settings as settings_module
from components.config_checks import CrossCheck
from components.config_parser import ConfigError, declared_keys, parse_stack_config
from components.settings import QUIET_KEYS, StackSettings
from tests.components.support import (
    INT32_MAX,
    LEGAL_EDGES,
    TESTERS_ACCEPTED_BUT_INVALID,
    P,
    parse,
    refused,
)
from tools.stack_files import cli_config, example_site_for


def test_shipped_dev_stack_parses_into_typed_settings() -> None:
    settings = parse()
    assert settings.namespace == "cosmos3-dev"
    assert settings.worker_replicas == 1
    assert settings.manages_model_cache and settings.manages_secrets
    assert settings.routing.affinity_ttl_seconds is None


def test_secret_values_never_enter_the_settings() -> None:
    settings = parse(secrets={"ngcApiKey": "nvapi-very-secret"})
    assert "nvapi-very-secret" not in repr(settings.model_dump())


@pytest.mark.parametrize(
    ("overrides", "key", "fix"),
    [
        ({"profile": "round-robbin"}, "profile", "round-robin"),
        (
            {"sessionAffinityTtlSeconds": 0},
            "sessionAffinityTtlSeconds",
            "greater than or equal to 1",
        ),
        (
            {"sessionAffinityTtlSeconds": 31_536_001},
            "sessionAffinityTtlSeconds",
            "less than or equal",
        ),
        ({"workerReplicas": 0}, "workerReplicas", "greater than or equal to 1"),
        ({"namespace": "Cosmos_Dev"}, "namespace", "RFC 1123 label"),
        ({"modelCacheSize": "lots"}, "modelCacheSize", "quantity"),
        ({"workerDynamoRuntimeVersion": "1.5"}, "workerDynamoRuntimeVersion", "pattern"),
        ({"workerNodeSelector": ["nvidia.com/gpu.product"]}, "workerNodeSelector", "key=value"),
        ({"workerTolerations": ["nvidia.com/gpu:Sometimes"]}, "workerTolerations", "NoSchedule"),
        ({"workerExtraEnv": ["NGC_API_KEY=abc"]}, "workerExtraEnv", "must not be plain config"),
        ({"sharedStack": "acme/shared"}, "sharedStack", "<org>/<project>/<stack>"),
        ({"modelCacheMode": "adopt"}, "modelCacheMode", "'create' or 'existing'"),
        ({"kubeContext": None}, "kubeContext", "is required"),
    ],
)
def test_each_bad_value_names_its_key(overrides: dict[str, Any], key: str, fix: str) -> None:
    message = refused(f"{P}:{key}", **overrides)
    assert fix in message


def test_storage_class_is_required_only_when_the_cache_is_created() -> None:
    message = refused("modelCacheStorageClass is required", modelCacheStorageClass="")
    assert "ReadWriteMany" in message and "modelCacheMode=existing" in message
    assert (
        parse(modelCacheStorageClass="", modelCacheMode="existing").model_cache_mode == "existing"
    )


def test_registry_server_without_credentials_is_refused() -> None:
    refused(
        f"{P}:registryServer is set without {P}:registryUsername", registryServer="mirror.example"
    )


def test_registry_password_is_required_with_a_mirror() -> None:
    refused(
        f"{P}:registryPassword is required",
        registryServer="mirror.example",
        registryUsername="robot",
    )


def test_missing_ngc_key_is_refused_on_a_stack_that_creates_the_secret() -> None:
    message = refused(f"{P}:ngcApiKey is required", secrets={})
    assert "pulumi config set --secret" in message


def test_a_secret_set_in_plain_text_is_refused() -> None:
    raw = cli_config("dev", example_site_for("dev")) | {f"{P}:ngcApiKey": "nvapi-plain"}
    with pytest.raises(ConfigError, match="stored in plain text") as caught:
        parse_stack_config(raw, secret_keys=set())
    assert "nvapi-plain" not in str(caught.value)


def test_a_typo_in_a_key_is_reported_with_the_likely_key() -> None:
    message = refused(f"{P}:workerReplica", workerReplica=8)
    assert f"did you mean {P}:workerReplicas" in message


def test_other_namespaces_are_not_this_programs_business() -> None:
    assert (
        parse(**dict[str, Any]({"kubernetes:context": "whatever"})).kube_context == "h200-cluster"
    )


LAYER_VALUES = {
    "namespace": "elsewhere",
    "createNamespace": False,
    "registryServer": "mirror.example:5000",
    "registryUsername": "robot",
    "modelCacheClaim": "another-cache",
    "modelCacheMode": "existing",
    "modelCacheStorageClass": "other",
    "modelCacheSize": "1Ti",
    "modelDownload": False,
    "modelDownloadCommand": ["/bin/true"],
    "modelDownloadGpus": 0,
    "modelDownloadTimeoutSeconds": 60,
    "modelDownloadNodeSelector": ["pool=download"],
    "modelDownloadTolerations": ["pool:NoSchedule"],
    "modelDownloadAffinity": {"podAntiAffinity": {}},
    "modelDownloadPriorityClassName": "batch",
    "modelDownloadRuntimeClassName": "nvidia",
    "modelDownloadSchedulerName": "default-scheduler",
    "ngcApiKeyFrom": "synced-ngc-key",
    "ngcApiKeyFromField": "token",
    "imagePullFrom": "synced-pull-secret",
    "ngcApiKeyNeeded": False,
}


def test_the_layer_values_cover_every_layer_key() -> None:
    assert set(LAYER_VALUES) == set(settings_module.LAYER_KEYS)


@pytest.mark.parametrize(("key", "value"), LAYER_VALUES.items())
def test_a_profile_stack_refuses_each_layer_key_it_would_ignore(key: str, value: Any) -> None:
    message = refused(
        f"{P}:{key} is set on a stack that reads its layer",
        stack="round-robin",
        secrets={},
        **{key: value},
    )
    assert f"set it on shared and `pulumi config rm {P}:{key}` here" in message
    assert message.count("is set on a stack that reads its layer") == 1


def test_a_profile_stack_takes_a_layer_key_at_its_default() -> None:
    """The CLI merges the defaults in: a key at its default cannot be told from one not set, and
    changes nothing either way."""
    assert parse("round-robin", secrets={}, namespace="cosmos3-nano-reasoner").namespace


def test_profile_stacks_must_not_redefine_what_the_shared_layer_owns() -> None:
    refused(
        f"secrets {P}:ngcApiKey are set on a stack that reads them from {P}:sharedStack=shared",
        stack="round-robin",
        secrets={"ngcApiKey": "k"},
    )


def test_all_problems_are_reported_at_once() -> None:
    message = refused("Invalid stack config", workerReplicas=0, profile="nope")
    assert f"{P}:workerReplicas" in message and f"{P}:profile" in message


# --- the Kubernetes API server's rules, key by key (components/k8s_values.py) -------------------
# The tester's values and the legal edges are the real tier's too: tests/components/support.py.

MORE_BAD_VALUES = [
    ({"namespace": "ns\n"}, "namespace", "RFC 1123 label"),
    ({"namespace": "a" * 64}, "namespace", "no more than 63"),
    ({"modelCacheClaim": "Shared_Cache"}, "modelCacheClaim", "RFC 1123 subdomain"),
    ({"modelCacheClaim": "c" * 254}, "modelCacheClaim", "no more than 253 characters"),
    (
        {"modelDownloadCommand": ["/bin/bash", "-lc", "x", 8]},
        "modelDownloadCommand[3]",
        "--type string",
    ),
    ({"modelCacheStorageClass": "a" * 254}, "modelCacheStorageClass", "no more than 253"),
    ({"modelCacheStorageClass": "rwx-nfs\n"}, "modelCacheStorageClass", "RFC 1123 subdomain"),
    ({"modelCacheSize": "-1Gi"}, "modelCacheSize", "greater than zero"),
    ({"modelCacheSize": "200GB"}, "modelCacheSize", "quantity"),
    ({"modelCacheSize": "200Gi\n"}, "modelCacheSize", "quantity"),
    ({"modelCacheSize": "16Ei"}, "modelCacheSize", "int64"),
    ({"workerCpu": "0"}, "workerCpu", "greater than zero"),
    ({"workerCpu": "0.0m"}, "workerCpu", "greater than zero"),
    ({"workerMemory": "0Gi"}, "workerMemory", "greater than zero"),
    ({"workerSharedMemorySize": "0"}, "workerSharedMemorySize", "greater than zero"),
    ({"workerSharedMemorySize": "1e999"}, "workerSharedMemorySize", "exponent"),
    ({"workerGpus": 0}, "workerGpus", "greater than or equal to 1"),
    ({"workerGpus": INT32_MAX + 1}, "workerGpus", "must be at most 16"),
    ({"modelDownloadGpus": -1}, "modelDownloadGpus", "greater than or equal to 0"),
    ({"modelDownloadTimeoutSeconds": 0}, "modelDownloadTimeoutSeconds", "greater than or equal"),
    ({"graphReadyTimeoutSeconds": INT32_MAX + 1}, "graphReadyTimeoutSeconds", "less than or equal"),
    ({"workerNodeSelector": ["/gpu=x"]}, "workerNodeSelector[0]", "prefix part must be non-empty"),
    ({"workerNodeSelector": ["a/b/c=x"]}, "workerNodeSelector[0]", "qualified name"),
    ({"workerNodeSelector": ["Bad.Prefix/gpu=x"]}, "workerNodeSelector[0]", "prefix part"),
    ({"workerNodeSelector": ["k" * 64 + "=x"]}, "workerNodeSelector[0]", "no more than 63"),
    ({"workerNodeSelector": ["gpu=a", "gpu=b"]}, "workerNodeSelector", "set twice: 'gpu'"),
    ({"workerNodeSelector": ["=x"]}, "workerNodeSelector[0]", "name part must be non-empty"),
    ({"workerNodeSelector": "not json"}, "workerNodeSelector", "list of strings"),
    ({"workerNodeSelector": '{"gpu": "x"}'}, "workerNodeSelector", "valid list"),
    ({"workerNodeSelector": "[1]"}, "workerNodeSelector[0]", "--type string"),
    ({"workerTolerations": ["k:Sometimes"]}, "workerTolerations[0]", "NoSchedule"),
    ({"workerTolerations": ["k"]}, "workerTolerations[0]", "exactly one ':'"),
    ({"workerTolerations": ["k=:NoSchedule\n"]}, "workerTolerations[0]", "NoSchedule"),
    ({"workerExtraEnv": ["1FOO=x"]}, "workerExtraEnv[0]", "not starting with a digit"),
    ({"workerExtraEnv": ["..=x"]}, "workerExtraEnv[0]", "must not be '.' or '..'"),
    ({"workerExtraEnv": ["=x"]}, "workerExtraEnv[0]", "the name before '='"),
    ({"workerExtraEnv": ["A=1", "A=2"]}, "workerExtraEnv", "set twice: 'A'"),
    ({"workerExtraEnv": ["HF_TOKEN=hf_x"]}, "workerExtraEnv[0]", "'HF_TOKEN' is a secret"),
    ({"workerExtraEnv": ["my_password=x"]}, "workerExtraEnv[0]", "is a secret"),
    ({"workerExtraEnv": ["AWS_SECRET_ACCESS_KEY=x"]}, "workerExtraEnv[0]", "is a secret"),
    ({"workerImage": ""}, "workerImage", "non-empty"),
    ({"workerImage": " nvcr.io/nim/nvidia/cosmos3:2.1.0"}, "workerImage", "whitespace"),
    ({"frontendImage": "nvcr.io/x:1\n"}, "frontendImage", "whitespace"),
    ({"workerDynamoRuntimeVersion": "1.5.0\n"}, "workerDynamoRuntimeVersion", "pattern"),
    ({"nimModelProfile": "abc\n"}, "nimModelProfile", "pattern"),
    ({"kubeContext": " h200"}, "kubeContext", "whitespace"),
    ({"kubeContext": "   "}, "kubeContext", "must name a kubeconfig context"),
    ({"kubeContext": "h200\n"}, "kubeContext", "whitespace"),
    ({"kubeContext": "h2\x0700"}, "kubeContext", "control characters"),
    ({"kubeconfigPath": "/etc/kube\x00"}, "kubeconfigPath", "control characters"),
    ({"modelDownloadCommand": []}, "modelDownloadCommand", "at least 1 item"),
    ({"modelDownloadCommand": [" ", "x"]}, "modelDownloadCommand", "program to run"),
    ({"sharedStack": "shared\n"}, "sharedStack", "<org>/<project>/<stack>"),
]


@pytest.mark.parametrize(
    ("overrides", "key", "fix"), TESTERS_ACCEPTED_BUT_INVALID + MORE_BAD_VALUES
)
def test_values_the_api_server_would_reject_are_refused_naming_the_key(
    overrides: dict[str, Any], key: str, fix: str
) -> None:
    message = refused(re.escape(f"{P}:{key}: "), **overrides)
    assert fix in message, message


@pytest.mark.slow
def test_registry_values_are_checked_too() -> None:
    message = refused(
        "Invalid stack config",
        registryServer="mirror example",
        registryUsername="robot:1",
        secrets={"ngcApiKey": "k", "registryPassword": "p"},
    )
    assert f"{P}:registryServer: must contain no whitespace" in message
    assert f"{P}:registryUsername: must not contain ':'" in message
    assert "robot:1" not in message, "registryUsername is never shown"


@pytest.mark.parametrize("overrides", LEGAL_EDGES)
def test_legal_edge_values_are_accepted(overrides: dict[str, Any]) -> None:
    parse(**overrides)


# --- every problem at once, nothing shown that may be secret ------------------------------------


def test_field_problems_cross_checks_unknown_keys_and_secrets_are_reported_together() -> None:
    message = refused(
        "Unknown stack config",
        secrets={},
        workerReplicas=0,
        modelCacheStorageClass="",
        registryServer="mirror.example",
        workerRepliks=8,
    )
    assert f"{P}:workerRepliks is unknown: did you mean {P}:workerReplicas?" in message
    assert f"{P}:workerReplicas: Input should be greater than or equal to 1" in message
    assert f"{P}:modelCacheStorageClass is required" in message
    assert f"{P}:registryServer is set without {P}:registryUsername" in message
    assert f"{P}:ngcApiKey is required" in message
    assert f"{P}:registryPassword is required" in message


def test_a_cross_check_is_skipped_only_when_a_field_it_needs_did_not_validate() -> None:
    message = refused("Invalid stack config", modelCacheStorageClass="", modelCacheMode="adopt")
    assert f"{P}:modelCacheMode: Input should be 'create' or 'existing'" in message
    assert "is required when this stack creates" not in message, "mode unknown: no guess"


@pytest.mark.parametrize("check", config_checks._CROSS_CHECKS)
def test_each_cross_check_declares_every_field_it_reads(check: CrossCheck) -> None:
    full = parse()
    variants = itertools.product(
        ("", "shared"),
        ("", "mirror"),
        ("", "robot"),
        ("", "rwx"),
        (True, False),
        ("create", "existing"),
    )
    for shared, server, user, storage, deploy, mode in variants:
        variant = full.model_copy(
            update={
                "shared_stack": shared,
                "registry_server": server,
                "registry_username": user,
                "model_cache_storage_class": storage,
                "deploy_graph": deploy,
                "model_cache_mode": mode,
            }
        )
        partial = StackSettings.model_construct(
            **{name: getattr(variant, name) for name in check.needs}
        )
        # An undeclared field raises AttributeError; the partial answer must be the full one.
        assert check.check(partial) == check.check(variant)


SECRET = "nvapi-" + "do-not-show-me-0123456789"


@pytest.mark.parametrize(
    "overrides",
    [
        {"workerExtraEnv": [f"NGC_API_KEY={SECRET}"]},
        {"workerExtraEnv": ["A=1", f"HF_TOKEN={SECRET}"]},
        {"workerExtraEnv": [SECRET]},
        {"workerExtraEnv": [f"{SECRET} =x"]},
        {"workerExtraEnv": f"NGC_API_KEY={SECRET}"},
        {"workerExtraEnv": [f"X={SECRET}", f"X={SECRET}"]},
        {"workerExtraEnv": [f"X={SECRET}"], "modelDownloadCommand": ["", f"--token={SECRET}"]},
        {"modelDownloadCommand": f"[{SECRET}"},
        {"registryUsername": f"{SECRET}:x"},
        {"kubeconfigPath": f"/{SECRET}\n"},
        {"nimModelProfile": f"{SECRET}-" * 5 + "\n"},
        {"workerImage": f"nvcr.io/{SECRET}/{SECRET} x"},
        {"namespace": SECRET.upper() * 2},
        {"workerNodeSelector": [f"k={SECRET}" * 3]},
        {"workerExtraEnv": [f"{SECRET.replace('-', '_')}_TOKEN" * 2 + "=x"]},
    ],
)
def test_a_refusal_never_shows_a_value_that_may_be_secret(overrides: dict[str, Any]) -> None:
    message = refused(P, **overrides)
    assert SECRET not in message and SECRET.replace("-", "_") not in message, message


def test_served_model_is_no_longer_config_and_an_old_stack_file_says_why() -> None:
    message = refused(
        f"{P}:servedModel is unknown: no longer config", servedModel="my-org/other-model"
    )
    assert f"`pulumi config rm {P}:servedModel`" in message


@pytest.mark.parametrize(
    "value",
    ["[" * 100_000, "\x00", "{}", "null", "[[]]", '["\\ud800"]', "9" * 5000, "1e309"],
)
def test_hostile_text_is_refused_as_config_never_a_crash(value: str) -> None:
    for key in ("workerExtraEnv", "workerReplicas", "modelCacheSize", "workerTolerations"):
        with pytest.raises(ConfigError, match=re.escape(f"{P}:{key}")):
            parse(**dict[str, Any]({key: value}))


def test_quiet_keys_are_declared_keys() -> None:
    assert QUIET_KEYS <= declared_keys()


def test_a_value_marked_secret_never_appears_in_its_refusal() -> None:
    """A key the user set with `--secret` (here an odd registryServer) is refused without its
    value, as the project's own secret keys are."""
    value = "mirror.corp-internal.example:99999"
    secrets = {"ngcApiKey": "nvapi-x", "registryServer": value}

    message = refused(re.escape(f"{P}:registryServer: "), secrets=secrets, registryUsername="robot")

    assert value not in message and "99999" not in message
