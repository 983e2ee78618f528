"""Stack config against the rest of issue 30's hostile input, each case counted (`tests.tally`,
families `rest: images` and `rest: config keys`):

- image references parsed as the container runtime parses them: references built from the
  grammar are taken, each kind of near miss (a URL, `user:password@`, an empty tag, a short or
  unknown digest, `//`, an uppercase path, a port outside 1-65535, an image id) is refused naming
  the key, and a credential names the secret key to use instead, its value never shown;
- keys of a mistyped namespace (`cosmos3_nano_reasoner:`, another case, an invisible character)
  and mistyped keys are refused with the nearest valid key, before the program registers anything.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pulumi
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.config_parser import ConfigError, parse_stack_config
from components.settings import PROJECT, StackSettings
from tests.support import NGC_KEY, quiet_about_aborted_programs
from tests.tally import record
from tools import offline
from tools.offline import ProgramRun
from tools.stack_files import cli_config, example_site_for

CANARY = "Pw7c0ffee5e1d2Zq"
IMAGE_KEYS = ["workerImage", "frontendImage"]
GENERATED = settings(max_examples=150, deadline=None)


@functools.cache
def _dev_config() -> tuple[tuple[str, str], ...]:
    return tuple(cli_config("dev", example_site_for("dev")).items())


def parse(extra: dict[str, Any], secrets: dict[str, str] | None = None) -> StackSettings:
    """The dev stack with its example site and NGC key, `extra` config keys on top (unqualified
    keys are this project's)."""
    raw = dict(_dev_config())
    raw |= {(key if ":" in key else f"{PROJECT}:{key}"): value for key, value in extra.items()}
    secrets = {"ngcApiKey": NGC_KEY} | (secrets or {})
    raw |= {f"{PROJECT}:{key}": value for key, value in secrets.items()}
    return parse_stack_config(raw, {f"{PROJECT}:{key}" for key in secrets})


def refusal(extra: dict[str, Any], secrets: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as refused:
        parse(extra, secrets)
    return str(refused.value)


def printable(text: str) -> bool:
    return all(c.isprintable() or c == "\n" for c in text)


# --- image references ---------------------------------------------------------------------------

# The grammar's pieces as text and joins, not `st.from_regex`: drawing from regexes took half of
# these tests' time (they run in `make check`, each within a few seconds on a busy host).
DIGITS = "0123456789"
LOWER_ALNUM = "abcdefghijklmnopqrstuvwxyz" + DIGITS


def separated(
    piece: st.SearchStrategy[str], separators: list[str], most: int
) -> st.SearchStrategy[str]:
    """`piece`, then up to `most` times a separator and another `piece`."""
    rest = st.lists(st.tuples(st.sampled_from(separators), piece), max_size=most)
    return st.builds(lambda first, more: first + "".join(a + b for a, b in more), piece, rest)


# [a-z0-9]{1,6}((\.|_|__|-{1,2})[a-z0-9]{1,6}){0,2}: a path component
COMPONENT = separated(st.text(LOWER_ALNUM, min_size=1, max_size=6), [".", "_", "__", "-", "--"], 2)
PATH = st.lists(COMPONENT, min_size=1, max_size=3).map("/".join)
# [a-z0-9]{1,8}(-[a-z0-9]{1,8})?: a DNS label
DNS = separated(st.text(LOWER_ALNUM, min_size=1, max_size=8), ["-"], 1)
# 1?[0-9]{1,2}: a part of a dotted address
OCTET = st.tuples(st.sampled_from(["", "1"]), st.text(DIGITS, min_size=1, max_size=2)).map("".join)
HOST = st.one_of(
    st.lists(DNS, min_size=2, max_size=3).map(".".join),
    st.just("localhost"),
    st.just("[::1]"),
    st.lists(OCTET, min_size=4, max_size=4).map(".".join),
)
PORT = st.integers(1, 65535)
REGISTRY = st.one_of(
    HOST.filter(lambda host: host not in ("[::1]",) and ("." in host or host == "localhost")),
    st.tuples(HOST, PORT).map(lambda hp: f"{hp[0]}:{hp[1]}"),
)
TAG = st.from_regex(r"\A[A-Za-z0-9_][A-Za-z0-9_.-]{0,20}\Z")
HEX = {"sha256": 64, "sha384": 96, "sha512": 128}
DIGEST = st.sampled_from(sorted(HEX)).flatmap(
    lambda algorithm: (
        st.text("0123456789abcdef", min_size=HEX[algorithm], max_size=HEX[algorithm])
        .filter(lambda digits: len(set(digits)) > 1)
        .map(lambda digits: f"{algorithm}:{digits}")
    )
)


@st.composite
def references(draw: st.DrawFn) -> dict[str, str | None]:
    """A reference the runtime pulls, in its parts: [registry/]path[:tag][@digest]."""
    registry = draw(st.none() | REGISTRY)
    # Without a registry, a first component with a '.' would be read as one (splitDockerDomain).
    path = draw(PATH.filter(lambda path: registry is not None or "." not in path.split("/")[0]))
    return {
        "registry": registry,
        "path": path,
        "tag": draw(st.none() | TAG),
        "digest": draw(st.none() | DIGEST),
    }


def joined(parts: dict[str, str | None]) -> str:
    name = f"{parts['registry']}/{parts['path']}" if parts["registry"] else str(parts["path"])
    return (
        name
        + (f":{parts['tag']}" if parts["tag"] is not None else "")
        + (f"@{parts['digest']}" if parts["digest"] is not None else "")
    )


def _with(parts: dict[str, str | None], **changes: str | None) -> str:
    return joined(parts | changes)


NEAR_MISSES = {
    "a URL": lambda p: "https://" + joined(p),
    "another scheme": lambda p: "oci://" + joined(p),
    "a user and password": lambda p: _with(p, registry=f"robot:{CANARY}@{p['registry'] or 'r.io'}"),
    "a user": lambda p: _with(p, registry=f"robot@{p['registry'] or 'r.io'}"),
    "an empty tag": lambda p: _with(p, tag="", digest=None),
    "an empty tag before a digest": lambda p: _with(
        p, tag="", digest=p["digest"] or "sha256:" + "a1" * 32
    ),
    "no digest after @": lambda p: _with(p, digest=""),
    "a digest without hex": lambda p: _with(p, digest="sha256:"),
    "a short digest": lambda p: _with(p, digest="sha256:" + "ab" * 20),
    "a long digest": lambda p: _with(p, digest="sha256:" + "ab" * 33),
    "an uppercase digest": lambda p: _with(p, digest="sha256:" + "AB" * 32),
    "an unknown algorithm": lambda p: _with(p, digest="md5:" + "ab" * 16),
    "//": lambda p: _with(p, path=f"{p['path']}//x"),
    "a leading /": lambda p: "/" + joined(p | {"registry": None}),
    "an uppercase path": lambda p: _with(p, path=f"{p['path']}/Upper"),
    "an empty path component": lambda p: _with(p, path=f"{p['path']}/"),
    "port 0": lambda p: _with(p, registry="reg.io:0"),
    "a port over 65535": lambda p: _with(p, registry="reg.io:65536"),
    "an image id": lambda p: "0123456789abcdef" * 4,
    "a tag starting with .": lambda p: _with(p, tag=".v1"),
    "a tag starting with -": lambda p: _with(p, tag="-v1"),
    "a tag of 129": lambda p: _with(p, tag="v" * 129),
    "a tag with +": lambda p: _with(p, tag="1.0+build"),
}


@GENERATED
@given(parts=references())
def test_a_reference_the_runtime_pulls_is_taken(parts: dict[str, str | None]) -> None:
    image = joined(parts)

    settings_ = parse({"workerImage": image})

    record("rest: images")
    assert settings_.worker_image == image


@GENERATED
@given(
    parts=references(),
    key=st.sampled_from(IMAGE_KEYS),
    near_miss=st.sampled_from(sorted(NEAR_MISSES)),
)
def test_a_near_miss_of_a_reference_is_refused_naming_the_key(
    parts: dict[str, str | None], key: str, near_miss: str
) -> None:
    image = NEAR_MISSES[near_miss](parts)

    message = refusal({key: image})

    record("rest: images", secret=int(CANARY in message))
    assert f"{PROJECT}:{key}" in message, message
    assert CANARY not in message and printable(message)
    if "user" in near_miss:  # the secret key to use instead
        assert f"pulumi config set --secret {PROJECT}:registryPassword" in message, message


@pytest.mark.parametrize(
    "image",
    [
        "nvcr.io/nim/nvidia/cosmos3:2.1.0",
        "localhost:5000/x:tag",
        "localhost:5000/x",
        "reg.io:443/nim/x:2.1.0@sha256:" + "0123456789abcdef" * 4,
        "nvcr.io/nim/x@sha512:" + "0123456789abcdef" * 8,
        "[::1]:5000/a/b:c",
        "10.0.0.1:1/x:1",
        "reg.io:65535/x:1",
        "python:3.11.7-slim-bookworm",
        "a__b/c--d/e.f_g:TAG_1.0-x",
        "Registry.Example/x:1",
        "x",
    ],
)
def test_legal_edge_references_are_taken(image: str) -> None:
    record("rest: images")
    assert parse({"workerImage": image}).worker_image == image


@pytest.mark.parametrize(
    "image",
    [
        "nvcr.io/nvidia/ai-dynamo/dynamo-frontend:1.6.1",
        "reg.io:443/dynamo-frontend:v1.6.1@sha256:" + "0123456789abcdef" * 4,
        "localhost:5000/frontend:1.7.0-rc1",
    ],
)
def test_a_frontend_image_with_a_version_tag_is_taken(image: str) -> None:
    """The frontend carries no runtimeVersionOverride: its tag is the version admission reads."""
    assert parse({"frontendImage": image}).frontend_image == image


@pytest.mark.parametrize(
    "image",
    [
        "nvcr.io/nvidia/ai-dynamo/dynamo-frontend@sha256:" + "0123456789abcdef" * 4,
        "nvcr.io/nvidia/ai-dynamo/dynamo-frontend-nightly:20260906-c70f1c7",
        "nvcr.io/nvidia/ai-dynamo/dynamo-frontend:latest",
        "nvcr.io/nvidia/ai-dynamo/dynamo-frontend",
        "nvcr.io/nvidia/ai-dynamo/dynamo-frontend:1.6",
    ],
)
def test_a_frontend_image_without_a_version_tag_is_refused_naming_the_key(image: str) -> None:
    message = refusal({"frontendImage": image})
    assert f"{PROJECT}:frontendImage: must have a semantic-version tag" in message, message


SERVERS_TAKEN = [
    "mirror.example",
    "mirror.example:5000",
    "localhost",
    "localhost:5000",
    "10.0.0.1:5000",
    "mirror.example/nvcr",
    "mirror.example:1",
    "mirror.example:65535",
]
SERVERS_REFUSED = {
    "https://mirror.example": "not a URL",
    "http://mirror.example:5000": "not a URL",
    f"robot:{CANARY}@mirror.example": "registryPassword",
    f"https://robot:{CANARY}@mirror.example": "registryPassword",
    "robot@mirror.example:5000": "registryPassword",
    "mirror": "registry host",
    "mirror.example:0": "port of 1 to 65535",
    "mirror.example:70000": "port of 1 to 65535",
    "mirror.example//nvcr": "path",
    "mirror.example/NVCR": "path",
    "-mirror.example": "registry host",
}
MIRROR = {"registryUsername": "robot"}


@pytest.mark.parametrize("server", SERVERS_TAKEN)
def test_a_registry_server_is_a_host_with_an_optional_port_and_path(server: str) -> None:
    record("rest: images")
    settings_ = parse({"registryServer": server} | MIRROR, {"registryPassword": "pw"})
    assert settings_.registry_server == server


@pytest.mark.parametrize("server", sorted(SERVERS_REFUSED))
def test_a_registry_server_that_no_pull_could_use_is_refused(server: str) -> None:
    message = refusal({"registryServer": server} | MIRROR, {"registryPassword": "pw"})

    record("rest: images", secret=int(CANARY in message))
    assert f"{PROJECT}:registryServer" in message and SERVERS_REFUSED[server] in message, message
    assert CANARY not in message


# --- mistyped namespaces and keys ----------------------------------------------------------------

INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u202e", "\x1b"]
DECLARED = sorted(
    StackSettings.model_fields[name].alias or name for name in StackSettings.model_fields
)


@st.composite
def mistyped(draw: st.DrawFn, text: str) -> str:
    """`text` with one mistake a person or a copy-paste makes, never `text` itself."""
    how = draw(st.sampled_from(["underscores", "case", "invisible", "drop", "swap"]))
    if how == "underscores" and "-" in text:
        result = text.replace("-", "_")
    elif how == "case":
        flips = draw(st.sets(st.integers(0, len(text) - 1), min_size=1, max_size=3))
        result = "".join(c.swapcase() if i in flips else c for i, c in enumerate(text))
    elif how == "invisible":
        at = draw(st.integers(0, len(text)))
        result = text[:at] + draw(st.sampled_from(INVISIBLE)) + text[at:]
    elif how == "drop" and len(text) > 8:
        at = draw(st.integers(0, len(text) - 1))
        result = text[:at] + text[at + 1 :]
    else:
        at = draw(st.integers(0, len(text) - 2))
        result = text[:at] + text[at + 1] + text[at] + text[at + 2 :]
    if result == text:
        result = text.upper() if text.upper() != text else text + "\u200b"
    return result


@st.composite
def near_miss_keys(draw: st.DrawFn) -> tuple[str, str]:
    """A declared key, and a full key that misses it: in its namespace, its name, or both."""
    key = draw(st.sampled_from(DECLARED))
    where = draw(st.sampled_from(["namespace", "key", "both"]))
    namespace = draw(mistyped(PROJECT)) if where != "key" else PROJECT
    name = draw(mistyped(key)) if where != "namespace" else key
    return key, f"{namespace}:{name}"


@GENERATED
@given(case=near_miss_keys())
def test_a_near_miss_key_is_refused_with_the_nearest_valid_key(case: tuple[str, str]) -> None:
    key, typed = case
    value = parse({}).model_dump(by_alias=True)[key]

    message = refusal({typed: value if isinstance(value, str) else str(value).lower()})

    record("rest: config keys")
    assert "did you mean cosmos3-nano-reasoner:" in message or "this project's is" in message, (
        message
    )
    assert printable(message), repr(message)
    if typed.replace("_", "-").casefold() == f"{PROJECT}:{key}".casefold() or any(
        c in typed for c in INVISIBLE
    ):
        assert f"did you mean {PROJECT}:{key}?" in message, message


@pytest.mark.parametrize(
    "key", ["kubernetes:context", "pulumi:disable-default-providers", "aws:region", "mine:any"]
)
def test_keys_of_other_namespaces_are_still_left_to_them(key: str) -> None:
    record("rest: config keys")
    assert parse({key: "x"}).worker_replicas == 1


@contextmanager
def program_runs() -> Iterator[list[ProgramRun]]:
    """Every ProgramRun `run_program` makes, so a refused run's registrations can be seen."""
    runs: list[ProgramRun] = []

    def made() -> ProgramRun:
        runs.append(ProgramRun())
        return runs[-1]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(offline, "ProgramRun", made)
        yield runs


@pytest.mark.parametrize(
    "key",
    [
        "cosmos3_nano_reasoner:workerReplicas",
        "Cosmos3-Nano-Reasoner:workerReplicas",
        "cosmos3-nano-reasoner\u200b:workerReplicas",
        "cosmos3-nano-reasoner:worker\u200bReplicas",
        "cosmos3-nano-reasoner:WorkerReplicas",
    ],
)
def test_the_program_refuses_a_near_miss_key_before_registering_anything(key: str) -> None:
    loop = asyncio.new_event_loop()
    loop.set_exception_handler(quiet_about_aborted_programs)
    asyncio.set_event_loop(loop)
    overrides = example_site_for("dev") | {key: "3"}
    with program_runs() as runs, pytest.raises(pulumi.RunError) as refused:
        offline.run_program("dev", overrides, secrets={"ngcApiKey": NGC_KEY})

    record("rest: config keys")
    assert f"did you mean {PROJECT}:workerReplicas?" in str(refused.value)
    assert runs[0].resources == []
