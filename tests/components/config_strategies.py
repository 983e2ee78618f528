"""Generated stack configs (hypothesis), key by key, and the objects an accepted config deploys."""

from __future__ import annotations

import functools
import re
from typing import Any

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
from components.settings import PROJECT, StackSettings
from tests.components.support import (
    BAD_AFFINITIES,
    GOOD_AFFINITIES,
    STRICTER_AFFINITIES,
    Manifest,
)
from tests.support import NGC_KEY
from tools.stack_files import (
    cli_config,
    cli_value,
    example_site_for,
    owns_layer,
    qualified,
)

MARK = "s3cr3tMARK"
"""Planted in every value of a key whose values may be secrets; a refusal must never show it."""

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
    support.py, valid; its bad ones, wrong operators and value counts, and hostile text."""
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
    "modelCacheClaim": tagged(SUBDOMAIN, st.just("c" * 254), HOSTILE_TEXT),
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
    "frontendImage": tagged(
        st.from_regex(r"\Areg\.io/[a-z]{1,8}:[0-9]\.[0-9]\.[0-9]\Z"), HOSTILE_TEXT
    ),
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
    refusals, each naming its key, are tests/components/test_config_properties.py's to test)."""
    raw = shipped_config(stack) | {qualified(k): cli_value(v) for k, v in overrides.items()}
    try:
        parsed = parse_stack_config(raw, {f"{PROJECT}:ngcApiKey"})
    except ConfigError:
        return None
    return pure_objects(parsed)
