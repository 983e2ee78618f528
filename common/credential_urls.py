"""URLs and logins, the credentials of the one masker (`common.credentials`) that lie in an
address: a URL's user-info of any content, a credential in its query or fragment, and
`user:password@host` without a scheme (an image reference, a registry server).

User-info is everything between `scheme://` and the last `@` before the host, so a password may
hold `/`, `?`, `#` or `@` (`https://user:pa/ss@host/`). When it holds `/`, `?` or `#`, the text
before the first of them decides (`_reads_as_userinfo`): a dotted host there means the `@` lies
in its path or query. Standard library only.
"""

from __future__ import annotations

import re

from common.credential_names import MASK, MASK_IN_HTML, names_like

_URL = re.compile(r"(?<![A-Za-z+.-])[A-Za-z][A-Za-z0-9+.-]{0,31}://(?:[^\s\"'<>`\\]|\\.)+")
"""A URL runs to whitespace, a quote, `<`, `>` or a backtick; a backslash escapes (JSON text).
Its scheme may follow a digit (`0https://u:pw@host` glued to a number is still a URL)."""
_HOST = r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.?)"
_HOST_THEN_END = re.compile(rf"(?P<host>{_HOST}(?::\d*)?)(?:[/?#\\]|$)")
"""What follows user-info: a host, a port, then the path, query, fragment or the URL's end."""
_NAMED_HOST = re.compile(
    r"(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+|localhost|\[[0-9A-Fa-f:.]+\])(?::\d*)?"
)
"""A host that no user-info looks like: dotted (a name, an IPv4 address), localhost, IPv6."""
_DOTLESS_HOST = re.compile(r"[A-Za-z0-9-]+(?::\d*)?")
"""`mirror`, `frontend:8000`: a cluster's host, or a user with a numeric password."""
_FIRST_USERINFO = re.compile(r"[^/?#\s]+(?=@)")
_QUERY_PART = re.compile(r"([?&#;])([^=&#;?]*)=([^&#;]*)")
is_credential_parameter = names_like(
    frozenset(
        {"token", "code_verifier", "auth", "authorization", "key", "apikey", "secret", "password"}
        | {"passwd", "pwd", "pass", "signature", "sig", "credential", "credentials"}
    ),
    ("_token", "_key", "_secret", "_password", "_signature", "_credential"),
    ("x_amz_", "x_goog_"),
)
"""A query parameter named like a credential: `token`, `access_token`, `X-Amz-Signature`,
`X-Amz-Credential` (S3 and GCS pre-signed URLs), ..."""
_MASKED_USERINFO = re.compile(rf"(?:[^:]*:)?(?:\*+|{re.escape(MASK)}|{re.escape(MASK_IN_HTML)})")
"""User-info already masked: `user:****` (what pip prints) or ours (escaped for Markdown too)."""
_USER_ONLY = re.compile(r"[A-Za-z0-9._~+-]{1,15}")
"""A user without a password, short enough to be a name (`git@`, `robot@`), not a token."""
_LOGIN = re.compile(
    rf"(?<![^\s\"'=(\[{{,<|;])(?P<user>[A-Za-z0-9._~%+-]+):(?!//)(?P<password>[^\s\"'`]+)"
    rf"@{_HOST}(?::\d+)?(?=[/\s\"'`,;)\]}}>\\]|$)"
)
"""`user:password@host` where a word starts, no scheme before it; the last `@` before a host
(a digest `image:tag@sha256:...` has no host after its `@`)."""
_NOT_LOGINS = frozenset(("mailto", "sip", "sips", "xmpp", "tel", "im", "pres", "urn", "news"))
"""Schemes written `scheme:user@host`: an address, no password."""


def _userinfo_end(url: str, start: int) -> int | None:
    """Where the user-info that starts at `start` (just after a `//`) ends: the last `@` before
    a host, whatever comes between; None for a URL without user-info."""
    rest = url[start:]
    for at in reversed([index for index, char in enumerate(rest) if char == "@"]):
        host = _HOST_THEN_END.match(rest, at + 1)
        if host:
            info = rest[:at]
            head = re.split(r"[/?#]", info, maxsplit=1)[0]
            if head == info or _reads_as_userinfo(head, host.group("host")):
                return start + at
            break  # an @ in the path or query after a host
    first = _FIRST_USERINFO.match(rest)
    return start + first.end() if first else None


def _reads_as_userinfo(head: str, host: str) -> bool:
    """Whether user-info holding `/`, `?` or `#` ends at an `@` before `host`, judged by its
    `head` (the text before the first of them): a dotted host there means the `@` lies in its
    path (`https://registry.npmjs.org/@scope/pkg`); `user:pa` cannot be a host, so it is a
    password with a `/` in it; a dotless head (`mirror`, `frontend:8000`) is a user only before a
    named host (`https://tok/en@registry.example.com`, not `https://mirror/simple?x=a@b`)."""
    if _NAMED_HOST.fullmatch(head):
        return False
    if not _DOTLESS_HOST.fullmatch(head):
        return True
    return _NAMED_HOST.fullmatch(host) is not None


def _mask_userinfo(url: str) -> str:
    """The URL with each user-info masked (a nested URL's too: a redirect target)."""
    pieces, done = [], 0
    for slashes in re.finditer("//", url):
        start = slashes.end()
        end = None if start <= done else _userinfo_end(url, start)
        if end is None:
            continue
        info = url[start:end]
        if _MASKED_USERINFO.fullmatch(info) or _USER_ONLY.fullmatch(info):
            continue
        pieces += [url[done:start], MASK]
        done = end
    return "".join([*pieces, url[done:]])


def mask_url(url: str) -> str:
    """The URL with its user-info and every credential parameter's value replaced by `<secret>`;
    a URL inside it too (a host name made from a value, a redirect target)."""

    def value(match: re.Match[str]) -> str:
        mark, name, given = match.groups()
        secret = given and given not in (MASK, MASK_IN_HTML) and is_credential_parameter(name)
        return f"{mark}{name}={MASK}" if secret else match.group(0)

    return _QUERY_PART.sub(value, _mask_userinfo(url))


def _login(match: re.Match[str]) -> str:
    user, password = match.group("user"), match.group("password")
    if user.lower() in _NOT_LOGINS or _MASKED_USERINFO.fullmatch(f"{user}:{password}"):
        return match.group(0)
    return MASK + match.group(0)[match.end("password") - match.start() :]


def mask_urls(text: str) -> str:
    """`text` with every URL in it masked (`mask_url`)."""
    return _URL.sub(lambda match: mask_url(match.group(0)), text)


def mask_logins(text: str) -> str:
    """`text` with every `user:password@host` that starts a word masked (no scheme before it)."""
    return _LOGIN.sub(_login, text)
