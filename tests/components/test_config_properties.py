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
import functools
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pulumi
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from pydantic.alias_generators import to_camel

from components import k8s_values as k8s
from components.affinity import affinity_problems
from components.config_checks import FRONTEND_PLACEMENT_FIELDS
from components.config_parser import ConfigError, parse_stack_config
from components.config_rules import MAX_GPUS_PER_POD, MAX_WORKER_REPLICAS
from components.graph_manifest import graph_deployment
from components.layer_manifests import (
    model_cache_claim,
    model_download_job,
    namespace,
    ngc_secret,
)
from components.recipe_args import cache_args, download_args, graph_args, namespace_args, own_layer
from components.settings import PROJECT, StackSettings, qualified_stack_name
from tests.components.test_placement import (
    BAD_AFFINITIES,
    GOOD_AFFINITIES,
    STRICTER_AFFINITIES,
)
from tests.components.test_settings import LEGAL_EDGES, TESTERS_ACCEPTED_BUT_INVALID
from tests.support import NGC_KEY, quiet_about_aborted_programs
from tools import offline
from tools.offline import ProgramRun
from tools.render import rendered_objects
from tools.stack_files import (
    ORGANIZATION,
    cli_config,
    cli_value,
    example_site_for,
    owns_layer,
    qualified,
)
from tools.violations import admission_violations_of

Manifest = dict[str, Any]
# Hypothesis runs the whole program on hundreds of generated configs: seconds in all.
pytestmark = pytest.mark.slow

MARK = "s3cr3tMARK"
"""Planted in every value of a key whose values may be secrets; a refusal must never show it."""
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


# --- generated stack configs ---------------------------------------------------------------------

Drawn = tuple[Any, bool]
"""A config value and whether it is valid for its key on its own (cross-checks aside)."""

HOSTILE_TEXT = st.one_of(
    st.sampled_from(
        [
            "",
            " ",
            "\n",
            "a\n",
            "\t",
            "Ä",
            "日本",
            "a b",
            "x" * 300,
            "-1",
            "0",
            "1e999",
            "9" * 40,
            "null",
            "[]",
            "{}",
            "[1]",
            '["a"',
            "'",
            '"',
            "\\",
            "a/b/c",
            ":",
            "=",
            "a=b:c",
            "\x00",
        ]
    ),
    st.text(max_size=24),
)
HOSTILE_INT = st.one_of(
    st.sampled_from([0, -1, 2**31, 2**63, -(2**31), 10**40]),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.sampled_from(["1.5", "0x10", "", "abc", " 8 ", "1e3", "٣"]),
)
LABEL = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?\Z")
SUBDOMAIN = st.lists(LABEL, min_size=1, max_size=4).map(".".join).filter(lambda s: len(s) <= 253)
NAME = st.from_regex(r"\A([A-Za-z0-9][-A-Za-z0-9_.]{0,20})?[A-Za-z0-9]\Z")
LABEL_KEY = st.one_of(NAME, st.tuples(SUBDOMAIN, NAME).map("/".join))
LABEL_VALUE = st.one_of(st.just(""), NAME)
QUANTITY = st.from_regex(r"\A[1-9][0-9]{0,3}(\.[0-9]{1,3})?(Ki|Mi|Gi|Ti|m|k|M|G|T|e[0-9])?\Z")
ENV_NAME = st.from_regex(r"\A[A-Z_][A-Z0-9_]{0,12}\Z").filter(
    lambda n: not re.search(r"TOKEN|KEY($|_)|SECRET|PASS|CREDENTIAL|_(PWD|AUTH|PAT)$", n)
)
ENV_VALUE = st.text(max_size=12).map(lambda v: f"{MARK}{v}")


def tagged(
    valid: st.SearchStrategy[Any], *others: st.SearchStrategy[Any]
) -> st.SearchStrategy[Drawn]:
    """Values tagged valid or not; about two draws in three valid, so that whole configs are
    accepted often enough to check what they deploy."""
    good = valid.map(lambda v: (v, True))
    return st.one_of(good, good, good, st.one_of(*others).map(lambda v: (v, False)))


def list_of(item: st.SearchStrategy[Drawn], min_valid: int = 0) -> st.SearchStrategy[Drawn]:
    """Lists of items, valid when every item is and each name (before '=') is unique; or text
    that is no list at all."""

    def combine(items: list[Drawn]) -> Drawn:
        values = [value for value, _ in items]
        names = [str(value).partition("=")[0] for value in values]
        unique = len(set(names)) == len(names)
        return values, all(ok for _, ok in items) and unique and len(values) >= min_valid

    whole_text = HOSTILE_TEXT.map(lambda v: (v, False))
    lists = st.lists(item, max_size=4).map(combine)
    return st.one_of(lists, lists, lists, whole_text)


def _env_item() -> st.SearchStrategy[Drawn]:
    secret_name = st.sampled_from(
        ["NGC_API_KEY", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "db_password"]
    )
    return tagged(
        st.tuples(ENV_NAME, ENV_VALUE).map("=".join),
        st.tuples(secret_name, ENV_VALUE).map("=".join),
        ENV_VALUE,
        st.tuples(ENV_NAME, st.sampled_from(["\n", " ", "=", "\u00e9"]), ENV_VALUE).map(
            lambda t: f"{t[0]}{t[1]}={t[2]}"
        ),
        st.tuples(HOSTILE_TEXT, ENV_VALUE).map("=".join),
    )


def _node_selector_item() -> st.SearchStrategy[Drawn]:
    return tagged(
        st.tuples(LABEL_KEY, LABEL_VALUE).map("=".join),
        st.tuples(HOSTILE_TEXT, LABEL_VALUE).map("=".join),
        st.tuples(LABEL_KEY, HOSTILE_TEXT).map("=".join),
        st.tuples(LABEL_KEY, st.just("v" * 64)).map("=".join),
        HOSTILE_TEXT,
    )


def _toleration() -> st.SearchStrategy[Drawn]:
    effect = st.sampled_from(k8s.TAINT_EFFECTS)
    key = st.one_of(st.just(""), LABEL_KEY)
    return tagged(
        st.one_of(
            st.tuples(key, effect).map(":".join),
            st.tuples(LABEL_KEY, LABEL_VALUE, effect).map(lambda t: f"{t[0]}={t[1]}:{t[2]}"),
        ),
        st.tuples(LABEL_VALUE, effect).map(lambda t: f"={t[0]}:{t[1]}"),
        st.tuples(key, LABEL_VALUE, effect).map(lambda t: f"{t[0]}:{t[1]}:{t[2]}"),
        st.tuples(LABEL_KEY, LABEL_VALUE, effect).map(lambda t: f"{t[0]}={t[1]}=w:{t[2]}"),
        st.tuples(HOSTILE_TEXT, effect).map(":".join),
        st.tuples(LABEL_KEY, HOSTILE_TEXT, effect).map(lambda t: f"{t[0]}={t[1]}:{t[2]}"),
        HOSTILE_TEXT,
    )


_NODE_OPERATOR_VALUES = {
    "In": st.lists(LABEL_VALUE, min_size=1, max_size=3),
    "NotIn": st.lists(LABEL_VALUE, min_size=1, max_size=3),
    "Exists": st.just([]),
    "DoesNotExist": st.just([]),
    "Gt": st.lists(st.from_regex(r"\A[0-9]{1,3}\Z"), min_size=1, max_size=1),
    "Lt": st.lists(st.from_regex(r"\A[0-9]{1,3}\Z"), min_size=1, max_size=1),
}


def _node_requirement(operator: str) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"key": LABEL_KEY, "operator": st.just(operator), "values": _NODE_OPERATOR_VALUES[operator]}
    )


def _affinity() -> st.SearchStrategy[Drawn]:
    """Affinities: generated node affinities and the hand-made ones of tests/components/
    test_placement.py, valid; its bad ones, wrong operators and value counts, and hostile text."""
    requirement = st.sampled_from(sorted(_NODE_OPERATOR_VALUES)).flatmap(_node_requirement)
    terms = st.lists(
        st.lists(requirement, min_size=1, max_size=2).map(lambda r: {"matchExpressions": r}),
        min_size=1,
        max_size=2,
    )
    required = terms.map(
        lambda t: {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": t}
            }
        }
    )
    broken = st.tuples(LABEL_KEY, st.sampled_from(["In", "Exists", "Gt", "Near", ""])).map(
        lambda t: {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": t[0], "operator": t[1]}]}]
                }
            }
        }
    )
    bad = [affinity for affinity, _, _ in BAD_AFFINITIES + STRICTER_AFFINITIES]
    return tagged(
        st.one_of(required, st.sampled_from(GOOD_AFFINITIES)),
        st.sampled_from(bad),
        broken.filter(lambda a: bool(affinity_problems(a))),
        HOSTILE_TEXT,
    )


def _class_name() -> st.SearchStrategy[Drawn]:
    return tagged(
        st.one_of(st.just(""), SUBDOMAIN), st.just("A" * 3), st.just("b" * 254), HOSTILE_TEXT
    )


def _scheduler_name() -> st.SearchStrategy[Drawn]:
    name = st.from_regex(r"\A[A-Za-z0-9_.-]{1,30}\Z").filter(lambda n: n not in (".", ".."))
    return tagged(st.one_of(st.just(""), name), st.sampled_from(["a/b", "..", "a b", "50%"]))


def _placement_keys() -> dict[str, st.SearchStrategy[Drawn]]:
    keys: dict[str, st.SearchStrategy[Drawn]] = {}
    for prefix in ("worker", "frontend", "modelDownload"):
        keys |= {
            f"{prefix}Affinity": _affinity(),
            f"{prefix}PriorityClassName": _class_name(),
            f"{prefix}RuntimeClassName": _class_name(),
            f"{prefix}SchedulerName": _scheduler_name(),
        }
    for prefix in ("frontend", "modelDownload"):
        keys |= {
            f"{prefix}NodeSelector": list_of(_node_selector_item()),
            f"{prefix}Tolerations": list_of(_toleration()),
        }
    return keys


KEYS: dict[str, st.SearchStrategy[Drawn]] = {
    "namespace": tagged(
        LABEL.filter(lambda name: not k8s.is_system_namespace(name)),
        st.just("a" * 64),
        st.sampled_from(sorted(k8s.SYSTEM_NAMESPACES) + ["kube-mine"]),
        HOSTILE_TEXT,
    ),
    "modelCacheClaim": tagged(LABEL, HOSTILE_TEXT),
    "modelCacheStorageClass": tagged(SUBDOMAIN, st.just(""), st.just("b" * 254), HOSTILE_TEXT),
    "modelCacheMode": tagged(st.sampled_from(["create", "existing"]), st.just("adopt")),
    "modelCacheSize": tagged(
        QUANTITY, st.sampled_from(["0", "-1Gi", "1e-30", "8Ei", "1E"]), HOSTILE_TEXT
    ),
    "workerCpu": tagged(QUANTITY, HOSTILE_TEXT),
    "workerMemory": tagged(QUANTITY, HOSTILE_TEXT),
    "workerSharedMemorySize": tagged(QUANTITY, HOSTILE_TEXT),
    "workerReplicas": tagged(
        st.integers(1, MAX_WORKER_REPLICAS), st.integers(MAX_WORKER_REPLICAS + 1), HOSTILE_INT
    ),
    "workerGpus": tagged(st.integers(1, MAX_GPUS_PER_POD), st.just(100_000), HOSTILE_INT),
    "modelDownloadGpus": tagged(st.integers(0, 8), st.just(MAX_GPUS_PER_POD + 1), HOSTILE_INT),
    "modelDownloadTimeoutSeconds": tagged(st.integers(1, 2**31 - 1), HOSTILE_INT),
    "graphReadyTimeoutSeconds": tagged(st.integers(1, 2**31 - 1), HOSTILE_INT),
    "graphUpdateTimeoutSeconds": tagged(st.integers(1, 2**31 - 1), HOSTILE_INT),
    "sessionAffinityTtlSeconds": tagged(st.integers(1, 31_536_000), HOSTILE_INT),
    "profile": tagged(st.sampled_from(["round-robin", "session-affinity"]), HOSTILE_TEXT),
    "workerNodeSelector": list_of(_node_selector_item()),
    "workerTolerations": list_of(_toleration()),
    "workerExtraEnv": list_of(_env_item()),
    "modelDownloadCommand": list_of(
        tagged(ENV_VALUE, HOSTILE_TEXT.map(lambda v: MARK + v)), min_valid=1
    ),
    "workerImage": tagged(st.just("nvcr.io/nim/nvidia/cosmos3:2.1.0"), HOSTILE_TEXT),
    "frontendImage": tagged(st.from_regex(r"\Areg\.io/[a-z]{1,8}:[0-9]\Z"), HOSTILE_TEXT),
    "workerDynamoRuntimeVersion": tagged(
        st.just("1.6.1"), st.sampled_from(["1.5", "01.5.0", "1.5.0\n", "99999.0.0"])
    ),
    "nimModelProfile": tagged(st.from_regex(r"\A[A-Za-z0-9_.:=,-]{0,40}\Z"), HOSTILE_TEXT),
    "kubeContext": tagged(st.just("prod-h200"), HOSTILE_TEXT),
    "kubeconfigPath": tagged(st.just("/etc/kube/config"), HOSTILE_TEXT),
    "createNamespace": tagged(st.sampled_from(["true", "false"]), HOSTILE_TEXT),
    "modelDownload": tagged(st.sampled_from(["true", "false"]), HOSTILE_TEXT),
    "deployGraph": tagged(st.sampled_from(["true", "false"]), st.just("maybe")),
    "sharedStack": tagged(st.nothing(), st.sampled_from(["", "shared", "acme/p/s", "a/b", "x y"])),
    "registryServer": tagged(st.nothing(), st.sampled_from(["", "mirror.example:5000", "a b"])),
    "registryUsername": tagged(st.nothing(), st.sampled_from(["", "robot", "ro:bot"])),
    **_placement_keys(),
}


@st.composite
def stack_configs(draw: st.DrawFn) -> tuple[str, dict[str, Any], bool]:
    """A shipped stack, overrides of some keys, and whether every override is valid alone."""
    stack = draw(st.sampled_from(["dev", "dev", "shared", "round-robin"]))
    keys = draw(st.permutations(sorted(KEYS)))[: draw(st.integers(1, 4))]
    drawn = {key: draw(KEYS[key]) for key in keys}
    overrides = {key: value for key, (value, _) in drawn.items()}
    return (
        stack,
        overrides,
        all(ok for _, ok in drawn.values()) and not refused_together(overrides),
    )


FRONTEND_PLACEMENT_KEYS = sorted(to_camel(field) for field in FRONTEND_PLACEMENT_FIELDS)


def refused_together(overrides: dict[str, Any]) -> bool:
    """Values valid alone that a cross-check refuses together (components/config_checks.py): the
    frontend placed on a stack that deploys no graph. Hypothesis found `frontendNodeSelector` with
    `deployGraph` false refused, rightly, where this module had counted the config valid. Set means
    not empty, as the check reads it."""
    placed = any(overrides.get(key) not in (None, "", []) for key in FRONTEND_PLACEMENT_KEYS)
    return overrides.get("deployGraph") == "false" and placed


@functools.cache
def _shipped_config(stack: str) -> tuple[tuple[str, str], ...]:
    config = cli_config(stack, example_site_for(stack))
    return tuple((config | {qualified(k): v for k, v in secrets_for(stack).items()}).items())


def shipped_config(stack: str) -> dict[str, str]:
    """A shipped stack's config with the example site and its secrets, as the CLI passes it."""
    return dict(_shipped_config(stack))


def secrets_for(stack: str) -> dict[str, str]:
    return {"ngcApiKey": NGC_KEY} if owns_layer(stack) else {}


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


def pure_objects(parsed: StackSettings) -> list[Manifest]:
    """What the stack deploys, from the pure builders (no Pulumi runtime), as `Recipe` picks them."""
    layer = own_layer(parsed)
    objects: list[Manifest] = []
    if not parsed.uses_shared_layer:
        if parsed.create_namespace:
            objects.append(namespace(namespace_args(parsed)))
        objects.append(ngc_secret(parsed.namespace, "<secret>"))
        if parsed.manages_model_cache:
            objects.append(model_cache_claim(cache_args(parsed)))
        if parsed.model_download:
            objects.append(model_download_job(download_args(parsed), layer))
    if parsed.deploy_graph:
        objects.append(graph_deployment(graph_args(parsed), layer))
    return objects


def objects_if_accepted(overrides: dict[str, Any], stack: str = "dev") -> list[Manifest] | None:
    """What `stack` deploys with `overrides`, or None when the config check refuses it (its
    refusals, each naming its key, are this module's to test)."""
    raw = shipped_config(stack) | {qualified(k): cli_value(v) for k, v in overrides.items()}
    try:
        parsed = parse_stack_config(raw, {f"{PROJECT}:ngcApiKey"})
    except ConfigError:
        return None
    return pure_objects(parsed)


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
