"""YAML within a budget (`common.yaml_input`): nesting and aliases measured before anything is
constructed, refused as yaml.v3 (the Pulumi CLI's parser) refuses them, and everything else read
exactly as PyYAML reads it."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from common.input_files import MAX_NESTING, InputFileError
from common.yaml_input import allowed_alias_ratio, yaml_documents
from tests.support import ALIAS_BOMB
from tests.tally import no_hang, record

FAMILY = "bounded reads"
LOADERS: list[type[yaml.SafeLoader | yaml.CSafeLoader]] = [yaml.SafeLoader, yaml.CSafeLoader]


def laughs(levels: int, fan_out: int) -> str:
    """A billion laughs of `levels` anchors, each aliasing the one before `fan_out` times."""
    lines = [f"l0: &l0 [{', '.join(['lol'] * fan_out)}]"]
    for level in range(1, levels + 1):
        lines.append(f"l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * fan_out)}]")
    return "\n".join(lines) + "\n"


def unfolded_size(levels: int, fan_out: int) -> int:
    """What constructing `laughs` makes: the top mapping, its keys, and each level in full."""
    sizes = [1 + fan_out]
    for _ in range(levels):
        sizes.append(1 + fan_out * sizes[-1])
    return 1 + (levels + 1) + sum(sizes)


def refused(text: str, loader: Any) -> str | None:
    try:
        with no_hang(10):
            yaml_documents(text, "f.yaml", "test file", loader)
    except InputFileError as error:
        return str(error)
    return None


@settings(max_examples=60, deadline=None)
@given(
    levels=st.integers(1, 12),
    fan_out=st.integers(2, 12),
    loader=st.sampled_from(LOADERS),
)
def test_aliases_are_refused_by_yaml_v3s_budget(levels: int, fan_out: int, loader: Any) -> None:
    visited = unfolded_size(levels, fan_out)
    written = 1 + 2 * (levels + 1) + fan_out  # the mapping, its keys and values, l0's strings
    through_aliases = visited - written
    over = through_aliases > 100 and visited > 1000
    over = over and through_aliases / visited > allowed_alias_ratio(visited)

    message = refused(laughs(levels, fan_out), loader)

    record(FAMILY, traceback=0)
    if over:
        assert message is not None and "f.yaml has excessive aliasing" in message
        assert f"constructing it would make {visited:,} values" in message
    else:
        assert message is None


def test_the_billion_laughs_is_refused_by_both_loaders() -> None:
    for loader in LOADERS:
        message = refused(ALIAS_BOMB, loader)
        assert message is not None and "excessive aliasing" in message and "at most 10%" in message


def test_the_ratio_is_yaml_v3s() -> None:
    assert allowed_alias_ratio(1_000) == 0.99
    assert allowed_alias_ratio(400_000) == 0.99
    assert allowed_alias_ratio(2_200_000) == pytest.approx(0.545)
    assert allowed_alias_ratio(4_000_000) == 0.10
    assert allowed_alias_ratio(10**12) == 0.10


NESTINGS = {
    "flow sequence": lambda depth: "[" * depth + "]" * depth,
    "flow mapping": lambda depth: "{a: " * depth + "1" + "}" * depth,
    "block mapping": lambda depth: (
        "".join("  " * i + "a:\n" for i in range(depth)) + "  " * depth + "b"
    ),
    "block sequence": lambda depth: "- " * depth + "x",
}


@pytest.mark.parametrize("loader", LOADERS, ids=["pure", "libyaml"])
@pytest.mark.parametrize("style", sorted(NESTINGS))
@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 1_000, 10_000])
def test_a_nesting_past_the_limit_is_refused_naming_it(depth: int, style: str, loader: Any) -> None:
    if style.startswith("block") and depth > 1_000:
        depth = 1_000  # a block nesting of 10,000 needs 100 MB of indentation, over any limit
    message = refused(NESTINGS[style](depth), loader)
    record(FAMILY)
    assert message is not None and f"nests deeper than {MAX_NESTING} levels" in message


@pytest.mark.parametrize("loader", LOADERS, ids=["pure", "libyaml"])
@pytest.mark.parametrize("style", sorted(NESTINGS))
def test_a_nesting_at_the_limit_is_read_as_pyyaml_reads_it(style: str, loader: Any) -> None:
    text = NESTINGS[style](MAX_NESTING)
    assert yaml_documents(text, "f", "test file", loader) == [yaml.load(text, Loader=loader)]


def test_aliases_nested_past_the_limit_once_unfolded_are_refused() -> None:
    chain = "a0: &a0 [x]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 150))
    message = refused(chain, yaml.SafeLoader)
    assert message is not None and "once its aliases are unfolded" in message


def test_an_anchor_that_holds_itself_is_refused() -> None:
    for text in ["a: &x\n  b: *x\n", "&x [*x]", "a: &x [1, {b: *x}]"]:
        message = refused(text, yaml.SafeLoader)
        assert message is not None and "contains itself" in message, text


documents = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=80, deadline=None)
@given(value=documents, copies=st.integers(0, 5))
def test_a_document_within_budget_reads_as_pyyaml_reads_it(value: Any, copies: int) -> None:
    """Anchors and aliases included: a shared value is dumped once and aliased `copies` times."""
    text = yaml.safe_dump({"shared": value, "copies": [value] * copies, "other": value})
    for loader in LOADERS:
        assert yaml_documents(text, "f", "test file", loader) == list(
            yaml.load_all(text, Loader=loader)
        )
