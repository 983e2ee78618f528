"""Stack config the program must refuse whatever else is set (issue 20), through the pure parser:
a credential in a plain key (found by its shape, the value never shown), a namespace the cluster
owns, an absurd number, an oversized value, a typo under the project's namespace. Each is
refused with `ConfigError` naming the key, and the rest of the config does not change that.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components import k8s_values as k8s
from components.config_parser import MAX_VALUE_BYTES, ConfigError, parse_stack_config
from components.settings import PROJECT, SECRET_KEYS, StackSettings
from tests.tally import flag, record
from tools.stack_files import cli_config, example_site_for

FAMILY = "stack config"
canaries = st.text("0123456789abcdef", min_size=20, max_size=30).map(lambda h: f"Cn{h}Zq")
shapes = st.sampled_from(
    [
        "nvapi-{c}",
        "https://robot:{c}@mirror.example.com/v2",
        "https://mirror.example.com/simple?token={c}",
        "s3://b/k?X-Amz-Signature={c}",
        "Authorization: Bearer {c}.x",
        "eyJhbGciOiJIUzI1NiJ9.eyJ{c}.sig",
    ]
)
TEXT_KEYS = sorted(
    alias
    for name, field in StackSettings.model_fields.items()
    if (alias := field.alias or name) not in SECRET_KEYS
)


def config(**overrides: Any) -> dict[str, str]:
    raw = cli_config("dev", example_site_for("dev") | overrides)
    return raw | {f"{PROJECT}:ngcApiKey": "nvapi-x"}


def refusal(raw: dict[str, str]) -> str:
    try:
        parse_stack_config(raw, secret_keys={f"{PROJECT}:ngcApiKey"})
    except ConfigError as error:
        return str(error)
    return ""


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(key=st.sampled_from(TEXT_KEYS), shape=shapes, canary=canaries, as_list=st.booleans())
def test_a_credential_in_any_plain_key_is_refused_naming_it(
    key: str, shape: str, canary: str, as_list: bool
) -> None:
    credential = shape.format(c=canary)
    value = json.dumps(["A=b", f"X={credential}"]) if as_list else credential

    message = refusal(config(**{key: value}))

    record(FAMILY)
    flag(FAMILY, "secret", canary in message)
    assert canary not in message
    assert f"{PROJECT}:{key} holds " in message and "pulumi config set --secret" in message


SYSTEM = st.one_of(
    st.sampled_from(sorted(k8s.SYSTEM_NAMESPACES)),
    st.from_regex(r"\Akube-[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?\Z"),
)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(namespace=SYSTEM, create=st.sampled_from(["true", "false"]))
def test_a_namespace_the_cluster_owns_is_refused(namespace: str, create: str) -> None:
    message = refusal(config(namespace=namespace, createNamespace=create))
    record(FAMILY)
    assert f"{PROJECT}:namespace: is a namespace the cluster owns" in message


BOUNDS = {
    "workerReplicas": (1, 5000),
    "workerGpus": (1, 16),
    "modelDownloadGpus": (0, 16),
    "modelDownloadTimeoutSeconds": (1, 2**31 - 1),
    "graphReadyTimeoutSeconds": (1, 2**31 - 1),
    "graphUpdateTimeoutSeconds": (1, 2**31 - 1),
}


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    key=st.sampled_from(sorted(BOUNDS)),
    value=st.one_of(
        st.integers(-(10**30), 10**30),
        st.sampled_from(["1e308", "inf", "nan", "0x10", "1.5", "", " 8", "\u0663", "9" * 5000]),
    ),
)
def test_a_number_out_of_its_range_is_refused_naming_the_key(key: str, value: Any) -> None:
    message = refusal(config(**{key: value}))
    low, high = BOUNDS[key]
    text = str(value).strip()
    digits = text.isascii() and text.lstrip("-").isdigit() and len(text) < 100
    number = int(text) if digits else None
    in_range = number is not None and low <= number <= high
    record(FAMILY)
    assert (message == "") == in_range, (key, value, message)
    if message:
        assert f"{PROJECT}:{key}" in message


def test_an_oversized_value_is_refused_naming_the_key() -> None:
    message = refusal(config(kubeContext="c" * (MAX_VALUE_BYTES + 1)))
    record(FAMILY)
    assert f"{PROJECT}:kubeContext: 64 KiB, at most 64 KiB" in message


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(key=st.sampled_from(TEXT_KEYS), typo=st.sampled_from(["drop", "swap", "case"]))
def test_a_typo_under_the_project_namespace_names_the_nearest_key(key: str, typo: str) -> None:
    wrong = {"drop": key[:-1], "swap": key[1] + key[0] + key[2:], "case": key.lower()}[typo]
    if wrong == key or wrong in TEXT_KEYS:
        return
    raw = config() | {f"{PROJECT}:{wrong}": "x"}
    message = refusal(raw)
    record(FAMILY)
    assert f"{PROJECT}:{wrong} is unknown: " in message and "Unknown stack config" in message
