"""YAML read within a budget, as the Pulumi CLI reads it: nesting and aliases are measured before
a single Python object is constructed, and a document past either limit is an `InputFileError`
naming the file and the limit (`common.input_files` says both limits and why).

Why: PyYAML constructs a billion-laughs document (anchors of anchors of anchors, each alias a full
copy once constructed) until the memory runs out, and composes and constructs by recursion, so
10,000 levels end in a RecursionError (or libyaml's own error) after seconds. yaml.v3, the Pulumi
CLI's parser, refuses both at once. Here, in three steps:

1. the parser's events are counted before anything is composed: the parser is not recursive, and
   it stops at the first level past MAX_NESTING;
2. the composed graph is measured: in it an alias is the anchored node itself, so composing costs
   what the text does, and each node's unfolded size and depth is computed once (bottom up), which
   gives what constructing would make without making it. yaml.v3 counts aliases the same way:
   every node that construction visits, and those among them reached through an alias;
3. only a document within both budgets is constructed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from common.input_files import (
    MAX_NESTING,
    YAML_ALIAS_RATIO_HIGH,
    YAML_ALIAS_RATIO_LOW,
    InputFileError,
    read_text,
    too_deep,
)

LoaderClass = Callable[[str], Any]
"""A PyYAML loader class (`yaml.SafeLoader`, `yaml.CSafeLoader` or a subclass)."""
EVENTS_LOADER: LoaderClass = getattr(yaml, "CBaseLoader", yaml.BaseLoader)
"""What step 1 parses with: libyaml's parser when PyYAML was built with it."""
SAFE_LOADER: LoaderClass = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml_file(path: Path, what: str, max_bytes: int) -> list[Any]:
    """Every document of the YAML file `path`, a `what`: a regular file of at most `max_bytes`,
    within both budgets; YAML's own errors too are an InputFileError naming it."""
    text = read_text(path, what, max_bytes)
    try:
        return yaml_documents(text, str(path), what, SAFE_LOADER)
    except yaml.YAMLError as error:
        detail = " ".join(str(error).split())[:200]
        raise InputFileError(f"{what} {path} is not valid YAML: {detail}") from None


def yaml_documents(text: str, name: str, what: str, loader_class: LoaderClass) -> list[Any]:
    """Every document of `text`, constructed once it is within budget. YAML's own errors
    (`yaml.YAMLError`) reach the caller, who names the file."""
    check_nesting(text, name, what)
    loader = loader_class(text)
    try:
        documents = []
        while loader.check_node():
            node = loader.get_node()
            check_composed(node, name, what)
            documents.append(loader.construct_document(node))
        return documents
    finally:
        loader.dispose()


def check_nesting(text: str, name: str, what: str) -> None:
    """Refuse `text` where its lists and mappings nest past MAX_NESTING, from the parser's
    events alone (step 1). libyaml's parser when there is one: an event is an event whichever
    schema resolves the scalars later, and PyYAML's own scanner takes most of a second to look
    1,024 characters ahead in `[[[[...`; libyaml refuses 1,000 levels itself."""
    loader = EVENTS_LOADER(text)
    depth = 0
    try:
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_NESTING:
                    raise InputFileError(f"{too_deep(name, what)}, at line {_line(event)}")
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.MarkedYAMLError as error:
        if error.problem != "exceeded maximum nesting depth":
            raise
        raise InputFileError(f"{too_deep(name, what)}, at line {_line(error)}") from None
    finally:
        loader.dispose()


def check_composed(node: yaml.Node, name: str, what: str) -> None:
    """Refuse a composed document that constructing would blow up (step 2): an anchor that holds
    itself, more aliasing than yaml.v3's budget allows, or aliases that unfold past MAX_NESTING."""
    sizes, depths = _unfolded(node, name, what)
    visited = sizes[id(node)]  # what constructing the document would make
    through_aliases = visited - len(sizes)  # the same nodes again, made once per alias
    allowed = allowed_alias_ratio(visited)
    if through_aliases > 100 and visited > 1000 and through_aliases / visited > allowed:
        raise InputFileError(
            f"{what} {name} has excessive aliasing: constructing it would make {visited:,} "
            f"values, {through_aliases:,} of them copies made by aliases (at most {allowed:.0%} "
            "in a document that size: the Pulumi CLI's budget, by which it refuses it too)"
        )
    if depths[id(node)] > MAX_NESTING:
        raise InputFileError(f"{too_deep(name, what)} once its aliases are unfolded")


def allowed_alias_ratio(visited: int) -> float:
    """yaml.v3's `allowedAliasRatio`: the share of a document's values aliases may make."""
    if visited <= YAML_ALIAS_RATIO_LOW:
        return 0.99
    if visited >= YAML_ALIAS_RATIO_HIGH:
        return 0.10
    spread = (visited - YAML_ALIAS_RATIO_LOW) / (YAML_ALIAS_RATIO_HIGH - YAML_ALIAS_RATIO_LOW)
    return 0.99 - 0.89 * spread


def _unfolded(root: yaml.Node, name: str, what: str) -> tuple[dict[int, int], dict[int, int]]:
    """Each distinct node's unfolded size (itself and everything below, aliases copied out) and
    depth, by id; without recursion, each node once. An anchor reached again below itself is
    refused: yaml.v3 says its "value contains itself"."""
    sizes: dict[int, int] = {}
    depths: dict[int, int] = {}
    below: set[int] = set()  # the nodes whose children are being measured: the current path
    pending: list[tuple[yaml.Node, bool]] = [(root, False)]
    while pending:
        node, measured = pending.pop()
        key = id(node)
        if measured:
            children = list(_children(node))
            sizes[key] = 1 + sum(sizes[id(child)] for child in children)
            nested = isinstance(node, yaml.CollectionNode)
            depths[key] = nested + max((depths[id(child)] for child in children), default=0)
            below.discard(key)
        elif key in below:
            raise InputFileError(
                f"{what} {name} is not valid YAML: the anchor at line {_line(node)} contains "
                "itself (the Pulumi CLI refuses it too)"
            )
        elif key not in sizes:
            below.add(key)
            pending.append((node, True))
            pending.extend((child, False) for child in _children(node) if id(child) not in sizes)
    return sizes, depths


def _children(node: yaml.Node) -> Iterator[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        yield from node.value
    elif isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            yield key
            yield value


def _line(item: yaml.Node | yaml.Event | yaml.MarkedYAMLError) -> int:
    mark = item.problem_mark if isinstance(item, yaml.MarkedYAMLError) else item.start_mark
    return mark.line + 1 if mark is not None else 0
