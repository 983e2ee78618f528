"""Credentials by their shape, whatever key, option or file they came through: the one masker.

A value is a credential when it looks like one, not when its key or option says so: a URL with
user-info (`https://user:password@host`, or a token as the user) or with a credential in its query
or fragment (`?token=`, `&X-Amz-Signature=`, `#access_token=`), an NGC API key (`nvapi-...`), an
AWS access key id (`AKIA...`, `ASIA...`), a bearer token, a JWT, a PEM private key, a GitHub, Hugging
Face or Slack token. `credential_kind` says which kind a text holds (never the value), `mask`
replaces each with `<secret>`.

One definition for every place text leaves the project: the stack config's refusal of a
credential in a plain key (`components.config_parser`), every command's stdout and stderr
(`masked_output`), the rendered and dry-run manifests, and the archive's scan and manifest.
Standard library only: the Pulumi program, the tools, the stages and the lab all import it (the pod
programs cannot, being standard library alone; the archive's scan stands behind what they write).
"""

from __future__ import annotations

import io
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO, cast

MASK = "<secret>"

_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]{0,31}://[^\s\"'<>`\\]+")
_USERINFO = re.compile(r"(?<=//)([^/?#\s]+)@")
"""`//user:password@`: up to the last `@` before the path, wherever `//` starts a netloc."""
_QUERY_PART = re.compile(r"([?&#;])([^=&#;?]*)=([^&#;]*)")
_CREDENTIAL_PARAMETERS = frozenset(
    (
        *("token", "access_token", "auth_token", "id_token", "refresh_token", "private_token"),
        *("session_token", "security_token", "code_verifier", "auth", "authorization"),
        *("key", "api_key", "apikey", "access_key", "secret", "client_secret", "secret_key"),
        *("password", "passwd", "pwd", "pass", "signature", "sig", "credential", "credentials"),
    )
)
"""Query parameters that carry a credential (compared lowercased, `-` read as `_`)."""
_CREDENTIAL_SUFFIXES = ("_token", "_key", "_secret", "_password", "_signature", "_credential")
_CREDENTIAL_PREFIXES = ("x-amz-", "x-goog-")
"""S3 and GCS pre-signed URLs: X-Amz-Signature, X-Amz-Credential, X-Amz-Security-Token, ..."""
_MASKED_USERINFO = re.compile(rf"(?:[^:]*:)?(?:\*+|{re.escape(MASK)})")
"""User-info already masked: `user:****` (what pip prints) or ours."""
_USER_ONLY = re.compile(r"[A-Za-z0-9._~+-]{1,15}")
"""A user without a password, short enough to be a name (`git@`, `robot@`), not a token."""

_SHAPES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    (
        "a private key",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----"
            r"(?:.*?-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----|.*)",
            re.DOTALL,
        ),
        MASK,
    ),
    ("an NGC API key", re.compile(r"nvapi-[A-Za-z0-9_-]{16,}"), MASK),
    (
        "an AWS access key id",
        re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Z0-9])"),
        MASK,
    ),
    ("a JWT", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"), MASK),
    (
        "a bearer token",
        # A token, not an English word: 16 characters or more, at least one not a letter.
        re.compile(r"(?i)\b(bearer\s+)(?=[A-Za-z0-9._~+/=-]*[0-9._~+/=-])[A-Za-z0-9._~+/=-]{16,}"),
        rf"\1{MASK}",
    ),
    ("a GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_\w{22,})"), MASK),
    ("a Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{30,}"), MASK),
    ("a Slack token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), MASK),
)


def is_credential_parameter(name: str) -> bool:
    """True for a query parameter named like a credential (`token`, `X-Amz-Signature`, ...)."""
    lowered = name.strip().lower()
    normal = lowered.replace("-", "_")
    return (
        normal in _CREDENTIAL_PARAMETERS
        or normal.endswith(_CREDENTIAL_SUFFIXES)
        or lowered.startswith(_CREDENTIAL_PREFIXES)
    )


def mask_url(url: str) -> str:
    """The URL with its user-info and every credential parameter's value replaced by `<secret>`;
    a URL inside it too (a host name made from a value, a redirect target)."""

    def userinfo(match: re.Match[str]) -> str:
        info = match.group(1)
        plain = _MASKED_USERINFO.fullmatch(info) or _USER_ONLY.fullmatch(info)
        return match.group(0) if plain else f"{MASK}@"

    def value(match: re.Match[str]) -> str:
        mark, name, given = match.groups()
        secret = given and given != MASK and is_credential_parameter(name)
        return f"{mark}{name}={MASK}" if secret else match.group(0)

    return _QUERY_PART.sub(value, _USERINFO.sub(userinfo, url))


def mask(text: str) -> str:
    """`text` with every credential it holds replaced by `<secret>` (the rest unchanged)."""
    masked = _URL.sub(lambda match: mask_url(match.group(0)), text)
    for _, pattern, replacement in _SHAPES:
        masked = pattern.sub(replacement, masked)
    return masked


def credential_kind(text: str) -> str | None:
    """Which kind of credential `text` holds ("a URL with embedded credentials", "an NGC API
    key", ...), never the credential itself; None when it holds none."""
    for match in _URL.finditer(text):
        if mask_url(match.group(0)) != match.group(0):
            return "a URL with embedded credentials"
    for kind, pattern, _ in _SHAPES:
        if pattern.search(text):
            return kind
    return None


def credential_kind_in_bytes(data: bytes) -> str | None:
    """`credential_kind` of a file's bytes, whatever their encoding (the shapes are ASCII)."""
    return credential_kind(data.decode("latin-1"))


def mask_values(value: Any) -> Any:
    """A JSON- or YAML-shaped value with every string in it (keys too) masked."""
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, dict):
        return {mask_values(key): mask_values(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [mask_values(item) for item in value]
    return value


class _MaskingStream(io.TextIOBase):
    """A text stream that masks what is written, then hands it to the stream it wraps."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self.wrapped = stream

    def write(self, text: str) -> int:
        self.wrapped.write(mask(text))
        return len(text)

    def flush(self) -> None:
        self.wrapped.flush()

    def isatty(self) -> bool:
        return self.wrapped.isatty()

    def fileno(self) -> int:
        return self.wrapped.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return str(getattr(self.wrapped, "encoding", "utf-8"))


@contextmanager
def masked_output() -> Iterator[None]:
    """Mask every credential this process prints on stdout and stderr inside the block: errors,
    argparse's own messages, dry runs, echoed logs, whatever option or key a value came through."""
    saved = sys.stdout, sys.stderr
    sys.stdout = cast(TextIO, _MaskingStream(saved[0]))
    sys.stderr = cast(TextIO, _MaskingStream(saved[1]))
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = saved
