"""Validation of stack config: each rule stops with a message naming the key and the fix."""

from typing import Any

import pytest

from components.config_parser import ConfigError, parse_stack_config
from components.settings import StackSettings
from tools.stack_files import cli_config, example_site_for

P = "cosmos3-nano-reasoner"


def parse(
    stack: str = "dev", secrets: dict[str, str] | None = None, **overrides: Any
) -> StackSettings:
    raw = cli_config(stack, example_site_for(stack) | overrides)
    secrets = {"ngcApiKey": "nvapi-x"} if secrets is None else secrets
    raw |= {f"{P}:{key}": value for key, value in secrets.items()}
    return parse_stack_config(raw, secret_keys={f"{P}:{key}" for key in secrets})


def refused(match: str, **kwargs: Any) -> str:
    with pytest.raises(ConfigError, match=match) as caught:
        parse(**kwargs)
    return str(caught.value)


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
        ({"namespace": "Cosmos_Dev"}, "namespace", "pattern"),
        ({"modelCacheSize": "lots"}, "modelCacheSize", "pattern"),
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
    assert parse(**{"kubernetes:context": "whatever"}).kube_context == "h200-cluster"


def test_profile_stacks_must_not_redefine_what_the_shared_layer_owns() -> None:
    message = refused(
        f"{P}:modelCacheStorageClass set on a stack",
        stack="round-robin",
        secrets={},
        modelCacheStorageClass="other",
    )
    assert "shared stack" in message
    refused(
        "secrets are set on a stack that reads them",
        stack="round-robin",
        secrets={"ngcApiKey": "k"},
    )


def test_all_problems_are_reported_at_once() -> None:
    message = refused("Invalid stack config", workerReplicas=0, profile="nope")
    assert f"{P}:workerReplicas" in message and f"{P}:profile" in message
