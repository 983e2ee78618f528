"""Credentials by their shape, whatever key, option or file they came through: the one masker.

A value is a credential when it looks like one, not when its key or option says so:

- a URL's user-info, whatever it holds: everything between `scheme://` and the last `@` before
  the host (`https://user:pa/ss@host/`, `https://u:p@ss#w@host`, a token as the user), or a
  credential in its query or fragment (`?token=`, `&X-Amz-Signature=`, `#access_token=`);
- `user:password@host` without a scheme: a login in an image reference or a registry server
  (`ci:pw@registry.example.com/team/image:1.0`, `--docker-server=ci:pw@nvcr.io`);
- tokens by their shape: an NGC API key (`nvapi-...`, and a legacy one: base64 of
  `<id>:<uuid>`), an AWS access key id (`AKIA...`), a JWT, a PEM private key, a bearer token,
  HTTP Basic credentials (`Basic <base64 of user:password>`), a base64 docker config with
  `auths`, GitHub, GitLab (`glpat-...`), Hugging Face and Slack tokens;
- a value under a credential's name (`common.credential_names`): `PGPASSWORD=...`,
  `"password": ...`, `Authorization: ...`, `--password ...`, `curl -u user:password`.

Look-alikes that stay as they are: an image digest (`python:3.12@sha256:...`), a URL without
user-info, a user without a password (`git@github.com:org/repo`, `git+ssh://git@host/...`, an
e-mail address, `mailto:a@b.org`), an `@` in the path of a URL whose host has a dot or is
`localhost` (`https://registry.npmjs.org/@scope/pkg`), or of a dotless host before a dotless
name (`http://frontend:8000/path@v2`, `https://mirror/simple?x=a@b`), `user:****@` as pip
prints it. Not seen, being those look-alikes to the letter: a password whose text before its
first `/` is digits, after a user with a dot (`https://first.last:2024/x@host`) or before a
dotless host (`https://admin:2024/x@db/`), and a dotless token holding a `/` before a dotless
host (`https://tok/en@mirror/`); nor a password holding whitespace, a quote, `<`, `>` or a
backtick inside a URL (a URL percent-encodes them).

`credential_kind` says which kind a text holds (never the value), `mask` replaces each with
`<secret>`. One definition for every place text leaves the project: the stack config's refusal
of a credential in a plain key (`components.config_parser`), the policy pack's of one in a plain
env value, every command's stdout and stderr (`masked_output`), the rendered and dry-run
manifests, every file the stages write (`masked_document`), and the archive's scan and manifest.
Standard library only: the Pulumi program, the policy pack, the tools, the stages and the lab all
import it (the pod programs cannot, being standard library alone; the archive's scan stands
behind what they write).
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO, cast

from common.credential_names import MASK, NAMED_RULES, is_named_secret, is_secret_env_name
from common.credential_urls import mask_logins, mask_url, mask_urls

__all__ = [
    "MASK",
    "credential_kind",
    "credential_kind_in_bytes",
    "is_secret_env_name",
    "mask",
    "mask_url",
    "mask_values",
    "masked_document",
    "masked_output",
]

_BASE64 = r"[A-Za-z0-9+/]"
_LEGACY_NGC_KEY = re.compile(rb"[A-Za-z0-9]{16,40}:[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}")


def _decodes_to(check: Callable[[bytes], bool]) -> Callable[[re.Match[str]], str]:
    """A `re.sub` function masking a base64 match (after the text of its group 1, if any) when
    its decoded bytes pass `check`."""

    def replace(match: re.Match[str]) -> str:
        kept = match.group(1) if match.re.groups else ""
        text = match.group(0)[len(kept) :]
        try:
            decoded = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
        except (binascii.Error, ValueError):
            return match.group(0)
        return kept + MASK if check(decoded) else match.group(0)

    return replace


def _shape(pattern: str, replacement: Any = MASK) -> Callable[[str], str]:
    compiled = re.compile(pattern)
    return lambda text: compiled.sub(replacement, text)


def _basic_credentials(decoded: bytes) -> bool:
    return b":" in decoded and decoded.isascii() and decoded.decode().isprintable()


_RULES: tuple[tuple[str, Callable[[str], str]], ...] = (
    (
        "a private key",
        _shape(
            r"(?s)-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----"
            r"(?:.*?-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----|.*)"
        ),
    ),
    ("a URL with embedded credentials", mask_urls),
    ("a login before a host (user:password@host)", mask_logins),
    ("an NGC API key", _shape(r"nvapi-[A-Za-z0-9_-]{16,}")),
    (
        "an AWS access key id",
        _shape(r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Z0-9])"),
    ),
    ("a JWT", _shape(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*")),
    (
        "a bearer token",
        # A token, not an English word: 16 characters or more, at least one not a letter.
        _shape(
            r"(?i)\b(bearer\s+)(?=[A-Za-z0-9._~+/=-]*[0-9._~+/=-])[A-Za-z0-9._~+/=-]{16,}",
            rf"\1{MASK}",
        ),
    ),
    (
        "HTTP Basic credentials",
        _shape(
            rf"(?i)\b(basic\s+){_BASE64}{{4,}}={{0,2}}(?![A-Za-z0-9+/=])",
            _decodes_to(_basic_credentials),
        ),
    ),
    (
        "a docker config with credentials",
        _shape(
            rf"\be[wy]{_BASE64}{{16,}}={{0,2}}", _decodes_to(lambda decoded: b'"auths"' in decoded)
        ),
    ),
    (
        "a legacy NGC API key",
        _shape(
            rf"(?<![A-Za-z0-9+/]){_BASE64}{{60,120}}={{0,2}}(?![A-Za-z0-9+/=])",
            _decodes_to(lambda decoded: _LEGACY_NGC_KEY.fullmatch(decoded) is not None),
        ),
    ),
    ("a GitHub token", _shape(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_\w{22,})")),
    (
        "a GitLab token",
        _shape(
            r"\b(?:gl(?:pat|dt|rt|ptt|cbt|ft|imt|oas|soat|agent|wt)-[A-Za-z0-9_.-]{20,}"
            r"|GR1348941[A-Za-z0-9_-]{20,})"
        ),
    ),
    ("a Hugging Face token", _shape(r"\bhf_[A-Za-z0-9]{30,}")),
    ("a Slack token", _shape(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    *NAMED_RULES,
)
"""(kind, masker) of every credential the masker knows, in the order `mask` applies them: the
private key first (it spans lines), URLs before the logins that a URL may hold, the values under
a credential's name last (a shape names its kind better: `"api_key": "nvapi-..."` holds an NGC
API key)."""


def mask(text: str) -> str:
    """`text` with every credential it holds replaced by `<secret>` (the rest unchanged)."""
    for _, masked in _RULES:
        text = masked(text)
    return text


def credential_kind(text: str) -> str | None:
    """Which kind of credential `text` holds ("a URL with embedded credentials", "an NGC API
    key", ...), never the credential itself; None when it holds none (when `mask` keeps it)."""
    for kind, masked in _RULES:
        if masked(text) != text:
            return kind
    return None


PRINTABLE_RUN = re.compile(rb"[\t\x20-\x7e]{16,}")
"""What `strings -n 16` shows of a binary file: where a credential written into it would be."""


def credential_kind_in_bytes(data: bytes) -> str | None:
    """`credential_kind` of a file's bytes: UTF-8 text whole; anything else (a PNG chart, a
    gzip) run by run of printable ASCII, as `strings -n 16` sees it, and line by line where a
    line is text but for a stray byte (a log with one Latin-1 line still has its `DB_PASS=...`
    found). Read whole as Latin-1, one random 60 kB file in twelve looked like `-u a:b` or
    `user:pw@host` somewhere (a lab A/B's compressed chart was refused that way)."""
    try:
        return credential_kind(data.decode("utf-8"))
    except UnicodeDecodeError:
        runs = (run.group().decode("ascii") for run in PRINTABLE_RUN.finditer(data))
        lines = (line.decode("utf-8", errors="replace") for line in data.splitlines())
        texts = (text for group in (runs, filter(_mostly_text, lines)) for text in group)
        return next((kind for text in texts if (kind := credential_kind(text))), None)


def _mostly_text(line: str) -> bool:
    """Nine characters in ten printable (an undecodable byte is U+FFFD, which is not counted):
    a text line, not a stretch of binary data between two newline bytes."""
    text = sum(1 for c in line if c != "\ufffd" and (c.isprintable() or c == "\t"))
    return text >= 0.9 * len(line)


def mask_values(value: Any) -> Any:
    """A JSON- or YAML-shaped value with every string in it (keys too) masked, and every
    scalar under a credential's name (`password`, `NGC_API_KEY`, the `value` of an env entry
    named `PGPASSWORD`) replaced whole."""
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, dict):
        return {
            mask_values(key): MASK if is_named_secret(key, value) else mask_values(item)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [mask_values(item) for item in value]
    return value


def masked_document(data: bytes) -> bytes:
    """A file's bytes as they may be written: unchanged when they hold no credential; else JSON
    masked value by value (it stays JSON), anything else masked as UTF-8 text."""
    if credential_kind_in_bytes(data) is None:
        return data
    try:
        document = json.loads(data)
    except (ValueError, RecursionError):
        return mask(data.decode("utf-8", errors="replace")).encode()
    return (json.dumps(mask_values(document), indent=2, ensure_ascii=False) + "\n").encode()


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
