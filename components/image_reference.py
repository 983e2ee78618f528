"""Image references as the container runtime parses them, and registry hosts. Pure: no Pulumi.

Kubernetes checks only that a container's image is non-empty and has no surrounding whitespace;
the kubelet hands the text to the runtime, which parses it with the distribution/reference
grammar (containerd's CRI: `reference.ParseDockerRef`, i.e. `ParseNormalizedNamed`) and fails the
pod with `InvalidImageName` for anything else. So config the program accepts is parsed here with
that grammar, and the pod never meets a reference it cannot pull:

    reference  := name [ ":" tag ] [ "@" digest ]
    name       := [ domain "/" ] path-component [ "/" path-component ]*     (255 characters at most)
    domain     := host [ ":" port ]       host: DNS components, or an IPv6 address in brackets
    path-component := [a-z0-9]+ ( ( "." | "_" | "__" | "-"+ ) [a-z0-9]+ )*
    tag        := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
    digest     := algorithm ":" hex     sha256: 64, sha384: 96, sha512: 128 lowercase hex digits

The first component is the registry only when it has a `.` or a `:port`, is `localhost`, or has
an uppercase letter (`splitDockerDomain`); otherwise the name is a Docker Hub path, whose components must be
lowercase. A 64-hex-digit name is refused (it reads as an image id). Ports are 1 to 65535: the
grammar takes any digits, the pull of any other fails.

Problems never show the value: a reference may carry `user:password@`, which is refused as a
credential (`holds_userinfo`), as is a URL (`https://...`): a reference has no scheme.
"""

from __future__ import annotations

import re

_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])"
_DOMAIN = re.compile(rf"(?P<host>{_HOST})(?::(?P<port>[0-9]+))?")
_PATH = re.compile(rf"{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_DIGEST_ALGORITHM = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*"
DIGEST_HEX_LENGTHS = {"sha256": 64, "sha384": 96, "sha512": 128}
"""The algorithms go-digest registers, and their hex length (lowercase hex, `^[a-f0-9]{n}$`)."""
NAME_MAX_LENGTH = 255
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_DIGEST_LIKE = re.compile(
    rf"(?:{'|'.join(DIGEST_HEX_LENGTHS)}):[0-9A-Fa-f]*|{_DIGEST_ALGORITHM}:[0-9A-Fa-f]{{32,}}"
)
EXAMPLE = "nvcr.io/nim/nvidia/cosmos3:2.1.0"


def holds_userinfo(value: str) -> bool:
    """True when `value` carries `user[:password]@` before its registry: an `@` in the first
    part (before any `/`) that is not the `@` of a digest (`name@sha256:...`)."""
    head = _SCHEME.sub("", value, count=1).partition("/")[0]
    if "@" not in head:
        return False
    return _DIGEST_LIKE.fullmatch(head.rpartition("@")[2]) is None


def reference_problems(value: str) -> list[str]:
    """What the runtime refuses of an image reference (an empty list: it parses)."""
    refused = _not_a_reference(value)
    if refused:
        return refused
    rest, at, digest = value.partition("@")
    name, tag = _split_tag(rest)
    problems = name_problems(name)
    if tag is not None and not _TAG.fullmatch(tag):
        problems.append(
            "must have a tag of letters, digits, '_', '.' or '-' (at most 128, not starting "
            "with '.' or '-') after ':', or no ':' at all"
        )
    if at:
        problems += digest_problems(digest)
    return problems


_SEMVER_TAG = re.compile(
    r"v?(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?"
)
"""runtimeversion.go's tag: an optional v, MAJOR.MINOR.PATCH, optional pre-release and build."""


def semver_tag_problems(value: str) -> list[str]:
    """The Dynamo operator reads a component's runtime version from its image's tag when the
    graph sets no `runtimeVersionOverride`, and DGD admission refuses a graph whose frontend
    image tag it cannot parse (the CRD's description of `runtimeVersionOverride`)."""
    _, tag = _split_tag(value.partition("@")[0])
    if tag is not None and _SEMVER_TAG.fullmatch(tag):
        return []
    example = "dynamo-frontend:1.6.1, optionally with its digest, dynamo-frontend:1.6.1@sha256:..."
    why = "DGD admission reads the frontend's Dynamo version from it"
    return [f"must have a semantic-version tag (e.g. {example}): {why}"]


def registry_host_problems(value: str) -> list[str]:
    """What a registry server (the first part of every reference pulled through it, and the
    pull secret's key) must be: a host with an optional port, optionally a path below it."""
    refused = _not_a_reference(value)
    if refused:
        return refused
    domain, _, path = value.partition("/")
    problems = domain_problems(domain)
    if not problems and not _is_registry(domain):
        problems.append(
            "must name a registry host: one with a '.' or a ':port', or localhost (a first part "
            "without them is read as a Docker Hub path)"
        )
    if path and not _PATH.fullmatch(path):
        problems.append("must have a path of lowercase path components after the host, if any")
    return problems


def name_problems(name: str) -> list[str]:
    """The repository name: an optional registry, then lowercase path components."""
    if not name:
        return [f"must name a repository before any ':' or '@' (e.g. {EXAMPLE})"]
    if len(name) > NAME_MAX_LENGTH:
        return [f"must have a repository name of at most {NAME_MAX_LENGTH} characters"]
    if re.fullmatch(r"[a-f0-9]{64}", name):
        return ["must not be 64 hexadecimal digits (that is an image id, not a name)"]
    first, slash, remainder = name.partition("/")
    domain, path = (first, remainder) if slash and _is_registry(first) else ("", name)
    problems = domain_problems(domain) if domain else []
    if not _PATH.fullmatch(path):
        lowercase = path.lower() != path and _PATH.fullmatch(path.lower())
        problems.append(
            "must have a lowercase repository path"
            if lowercase
            else "must have a repository path of lowercase letters and digits, separated by "
            "'.', '_', '__' or '-' within a component and '/' between them (no empty component, "
            "no '//')"
        )
    return problems


def domain_problems(domain: str) -> list[str]:
    """A registry's `host[:port]`, the port 1 to 65535."""
    match = _DOMAIN.fullmatch(domain)
    if match is None:
        return ["must have a registry host of DNS names or [IPv6], with an optional :port"]
    port = match["port"]
    if port is not None and not 1 <= int(port) <= 65535:
        return ["must have a registry port of 1 to 65535"]
    return []


def digest_problems(digest: str) -> list[str]:
    """`algorithm:hex`, of an algorithm the runtime knows and its exact length."""
    algorithm, colon, hex_digits = digest.partition(":")
    if not colon or not re.fullmatch(_DIGEST_ALGORITHM, algorithm):
        return ["must have a digest algorithm:hex after '@' (e.g. @sha256:<64 hex digits>)"]
    length = DIGEST_HEX_LENGTHS.get(algorithm)
    if length is None:
        return [f"must have a digest of {', '.join(DIGEST_HEX_LENGTHS)} after '@'"]
    if not re.fullmatch(rf"[a-f0-9]{{{length}}}", hex_digits):
        return [f"must have a {algorithm} digest of exactly {length} lowercase hex digits"]
    return []


def _not_a_reference(value: str) -> list[str]:
    """A URL or a credential: no grammar problem matters before these."""
    if _SCHEME.match(value):
        return ["must be a reference without a scheme, not a URL: drop the '...://'"]
    if holds_userinfo(value):
        return ["must not hold a user or password (user:password@): credentials go in a secret"]
    return []


def _split_tag(rest: str) -> tuple[str, str | None]:
    """`name` and `tag` of `name[:tag]`: the ':' after the last '/' starts the tag (a ':' before
    it is a registry port)."""
    name, colon, tag = rest.rpartition(":")
    return (name, tag) if colon and "/" not in tag else (rest, None)


def _is_registry(first: str) -> bool:
    """splitDockerDomain: the first component names a registry when it has a '.' or ':', is
    localhost, or has an uppercase letter (which no Docker Hub path may)."""
    return "." in first or ":" in first or first == "localhost" or first.lower() != first
