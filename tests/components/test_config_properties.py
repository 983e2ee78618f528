"""Config the program accepts is config the Kubernetes API server accepts; anything else is refused
before any resource exists, naming the key, never showing a secret.

Properties (hypothesis) over generated stack configs that mix valid values, edge values and
hostile ones (empty, whitespace, unicode, newlines, huge and negative numbers, label syntax
breakers, secret-looking env items), checked two ways:

* through the pure path (parse -> builders), each key alone and several keys at once:
  `parse_stack_config` raises nothing but `ConfigError`, whose every problem names a key and shows
  nothing that may be secret; what it accepts builds objects that keep the operator's admission
  rules (`tools.violations`, ours); whether the API server accepts them is the real tier's to
  show, the one oracle of that: it sends accepted configs' objects to the API server itself,
  whole configs and each key alone (tests/real/test_server_validation.py);
* through the real program under Pulumi mocks (`tools.offline.run_program`), fewer examples: a
  `pulumi.RunError` naming the offending keys with nothing registered, or manifests as above.

Plus the tester's families as plain tests: the 14 accepted-but-invalid values now stop the program
before anything is registered, the legal edges still deploy valid objects.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pulumi
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from components import k8s_values as k8s
from components.config_parser import ConfigError, parse_stack_config
from components.settings import PROJECT, qualified_stack_name
from tests.components.config_strategies import (
    KEYS,
    MARK,
    objects_if_accepted,
    pure_objects,
    refused_together,
    secrets_for,
    shipped_config,
    stack_configs,
)
from tests.components.support import LEGAL_EDGES, TESTERS_ACCEPTED_BUT_INVALID
from tests.support import NGC_KEY, quiet_about_aborted_programs
from tools import offline
from tools.offline import ProgramRun
from tools.render import rendered_objects
from tools.stack_files import (
    ORGANIZATION,
    cli_value,
    example_site_for,
    qualified,
)
from tools.violations import admission_violations_of

# Hypothesis runs the whole program on hundreds of generated configs: seconds in all.
pytestmark = pytest.mark.slow

SHOWN_MAX = 60

# --- the API server's value rules, written again from the Kubernetes source ---------------------
# apimachinery pkg/util/validation/validation.go and pkg/apis/core/validation/validation.go; Go's
# regexp with ^...$ matches the whole text, as \A...\Z does here.

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"


def _whole(pattern: str, value: object) -> bool:
    return isinstance(value, str) and re.search(rf"\A(?:{pattern})\Z", value) is not None


def dns_label_ok(value: object) -> bool:
    return _whole(_LABEL, value) and len(str(value)) <= 63


def dns_subdomain_ok(value: object) -> bool:
    return _whole(rf"{_LABEL}(\.{_LABEL})*", value) and len(str(value)) <= 253


def label_key_ok(value: str) -> bool:
    prefix, slash, name = value.rpartition("/")
    if slash and not dns_subdomain_ok(prefix):
        return False
    return _whole(_NAME, name) and len(name) <= 63


def label_value_ok(value: str) -> bool:
    return value == "" or (_whole(_NAME, value) and len(value) <= 63)


def env_name_ok(value: str) -> bool:
    return (
        _whole(r"[-._a-zA-Z][-._a-zA-Z0-9]*", value) and not value.startswith("..") and value != "."
    )


# --- the per-rule unit tests ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "good", "bad"),
    [
        (
            k8s.is_dns1123_label,
            ["a", "0", "a-b", "a" * 63],
            ["", "A", "-a", "a-", "a.b", "a" * 64, "a\n"],
        ),
        (
            k8s.is_dns1123_subdomain,
            ["a", "a.b", "rwx-nfs.example.com", "a" * 63 + ".b"],
            ["", "A", "a..b", ".a", "a b", "a" * 254, "a\n", "é"],
        ),
        (
            k8s.is_qualified_name,
            ["a", "A_b.c-D", "example.com/Name", "nvidia.com/gpu.product", "n" * 63],
            ["", "/a", "a/", "a/b/c", "-a", "a_", "n" * 64, "Ex.com/a", "bad key!", "a\n"],
        ),
        (
            k8s.is_valid_label_value,
            ["", "a", "NVIDIA-H200", "v" * 63],
            ["-", "v" * 64, "a b", "a\n", "a=b"],
        ),
        (
            k8s.is_env_var_name,
            ["A", "_a", "my.env-name", "-x", ".a", "MY_ENV.NAME"],
            ["", "1A", "A B", "A=B", ".", "..", "..a", "FOO\n", "É"],
        ),
        (
            k8s.is_positive_quantity,
            ["1", "200Gi", "500m", ".5", "1.", "+1", "1e3", "1E", "1n", "7Ei"],
            ["", "0", "-1", "0.0", "Gi", "1GB", "1 Gi", "1Gi\n", "1e31", "8Ei", "٣", "1e1.5"],
        ),
        (
            k8s.node_selector_problems,
            ["a=b", "a=", "nvidia.com/gpu.product=NVIDIA-H200"],
            ["a", "=b", "a=b=c", "bad key!=x", "a=" + "v" * 64],
        ),
        (
            k8s.toleration_problems,
            ["k:NoSchedule", "k=v:NoExecute", "k=:PreferNoSchedule", ":NoSchedule"],
            [
                "k",
                "k:",
                "=v:NoSchedule",
                "k=v=w:NoSchedule",
                "a:b:NoSchedule",
                "k:Never",
                "k:NoSchedule\n",
            ],
        ),
        (
            k8s.image_problems,
            ["nvcr.io/nim/nvidia/cosmos3:2.1.0", "a@sha256:" + "0" * 64, "localhost:5000/a:b"],
            ["", " a", "a ", "a\nb", "a\tb", "a@sha256:0", "a:", "https://r.io/a", "u:p@r.io/a"],
        ),
    ],
)
def test_each_rule_accepts_what_kubernetes_accepts_and_refuses_the_rest(
    rule: Callable[[str], list[str]], good: list[str], bad: list[str]
) -> None:
    assert {value: rule(value) for value in good} == {value: [] for value in good}
    assert [value for value in bad if not rule(value)] == []


_LABELISH = st.text(alphabet="aZ09-_./:= \n\tÄ", max_size=80)


@settings(max_examples=300, deadline=None)
@given(_LABELISH)
def test_the_rules_agree_with_the_kubernetes_regexes(value: str) -> None:
    assert (not k8s.is_dns1123_label(value)) == dns_label_ok(value)
    assert (not k8s.is_dns1123_subdomain(value)) == dns_subdomain_ok(value)
    assert (not k8s.is_qualified_name(value)) == label_key_ok(value)
    assert (not k8s.is_valid_label_value(value)) == label_value_ok(value)
    assert (not k8s.is_env_var_name(value)) == env_name_ok(value)


# --- generated stack configs (tests/components/config_strategies.py) -----------------------------


def assert_refusal_is_clear(message: str, overrides: dict[str, Any]) -> None:
    """Every problem names a key; a value's problem names an overridden key (the shipped stacks'
    own values are valid); nothing that may be secret, nor any long value, is shown."""
    problems = [line for line in message.splitlines() if line.startswith("  ")]
    assert problems, message
    for line in problems:
        assert f"{PROJECT}:" in line, f"a problem without its key: {line}"
        value_problem = re.match(rf"  {PROJECT}:([A-Za-z]+)(\[\d+\])*: ", line)
        if value_problem:
            assert value_problem[1] in overrides, f"{line}\nnames no key of {sorted(overrides)}"
    assert MARK not in message and NGC_KEY not in message, message
    for value in _strings(overrides):
        if len(value) > SHOWN_MAX and len(set(value)) > 1:
            assert value not in message, f"a {len(value)}-character value shown:\n{message}"


def _strings(overrides: dict[str, Any]) -> Iterator[str]:
    for value in overrides.values():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str):
                yield item


def test_values_valid_alone_and_refused_together_are_not_counted_valid() -> None:
    together = {"frontendNodeSelector": ["0="], "deployGraph": "false"}  # hypothesis's example
    assert refused_together(together) and objects_if_accepted(together) is None
    for alone in ({"frontendNodeSelector": ["0="]}, {"deployGraph": "false"}):
        assert not refused_together(alone) and objects_if_accepted(alone) is not None
    unset = {"frontendPriorityClassName": "", "deployGraph": "false"}
    assert not refused_together(unset) and objects_if_accepted(unset) is not None


@settings(max_examples=300, deadline=None)
@given(stack_configs())
def test_parsed_config_is_refused_clearly_or_builds_objects_the_api_server_accepts(
    config: tuple[str, dict[str, Any], bool],
) -> None:
    stack, overrides, all_valid = config
    raw = shipped_config(stack) | {
        qualified(key): cli_value(value) for key, value in overrides.items()
    }
    try:
        parsed = parse_stack_config(raw, {f"{PROJECT}:ngcApiKey"})
    except ConfigError as error:
        event("refused")
        assert not (all_valid and stack == "dev"), f"valid config refused:\n{error}"
        assert_refusal_is_clear(str(error), overrides)
        return
    event("accepted")
    objects = pure_objects(parsed)
    assert admission_violations_of(objects) == []


@pytest.mark.parametrize("key", sorted(KEYS))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_each_key_alone_is_refused_clearly_or_lands_as_the_api_server_accepts(
    key: str, data: st.DataObject
) -> None:
    # One key at a time on the dev stack (which deploys every kind): its edges get drawn often.
    value, valid = data.draw(KEYS[key])
    overrides = {key: value}
    raw = shipped_config("dev") | {qualified(key): cli_value(value)}
    try:
        parsed = parse_stack_config(raw, {f"{PROJECT}:ngcApiKey"})
    except ConfigError as error:
        assert not valid, f"valid config refused:\n{error}"
        assert_refusal_is_clear(str(error), overrides)
        return
    objects = pure_objects(parsed)
    assert admission_violations_of(objects) == []


# --- the real program under Pulumi mocks ---------------------------------------------------------


@contextmanager
def recording() -> Iterator[list[ProgramRun]]:
    """Every ProgramRun `run_program` makes, so a refused run's registrations can be inspected."""
    runs: list[ProgramRun] = []

    def record() -> ProgramRun:
        run = ProgramRun()
        runs.append(run)
        return run

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(offline, "ProgramRun", record)  # where run_program looks it up
        yield runs


def run_config(stack: str, overrides: dict[str, Any]) -> tuple[ProgramRun, pulumi.RunError | None]:
    """Run the program on a fresh runtime; the run and, when it refused, the RunError."""
    loop = asyncio.new_event_loop()
    loop.set_exception_handler(quiet_about_aborted_programs)
    asyncio.set_event_loop(loop)
    shared = overrides.get("sharedStack", "shared")
    image = {"workerImage": overrides["workerImage"]} if "workerImage" in overrides else {}
    layer = offline.shared_layer_outputs(**image)
    layer = {qualified_stack_name(str(shared), ORGANIZATION, PROJECT): layer.popitem()[1]}
    try:
        with recording() as runs:
            try:
                offline.run_program(
                    stack,
                    example_site_for(stack) | overrides,
                    secrets=secrets_for(stack),
                    stack_outputs=layer,
                )
                return runs[0], None
            except pulumi.RunError as error:
                return runs[0], error
    finally:
        pulumi.runtime.reset_options()
        loop.close()
        asyncio.set_event_loop(None)


def assert_deployable(run: ProgramRun) -> None:
    objects = rendered_objects(run)
    assert objects, "an accepted config deploys something"
    assert admission_violations_of(objects) == []


@settings(max_examples=80, deadline=None)
@given(stack_configs())
def test_the_program_refuses_before_registering_anything_or_deploys_valid_objects(
    config: tuple[str, dict[str, Any], bool],
) -> None:
    stack, overrides, all_valid = config
    run, error = run_config(stack, overrides)
    event("accepted" if error is None else "refused")
    if error is None:
        assert_deployable(run)
        return
    assert not (all_valid and stack == "dev"), f"valid config refused:\n{error}"
    assert run.resources == [], [r.type for r in run.resources]
    assert_refusal_is_clear(str(error), overrides)


@pytest.mark.parametrize(("overrides", "key", "fix"), TESTERS_ACCEPTED_BUT_INVALID)
def test_the_testers_accepted_but_invalid_values_stop_the_program_first(
    overrides: dict[str, Any], key: str, fix: str
) -> None:
    run, error = run_config("dev", overrides)
    assert error is not None and f"{PROJECT}:{key}: " in str(error) and fix in str(error)
    assert run.resources == []


def test_an_env_item_without_a_value_stops_the_program_before_the_namespace() -> None:
    run, error = run_config("dev", {"workerExtraEnv": ["FOO"]})
    assert error is not None and f"{PROJECT}:workerExtraEnv[0]" in str(error)
    assert run.resources == []


@pytest.mark.parametrize("overrides", LEGAL_EDGES)
def test_legal_edge_values_deploy_objects_the_api_server_accepts(overrides: dict[str, Any]) -> None:
    run, error = run_config("dev", overrides)
    assert error is None, str(error)
    assert_deployable(run)
