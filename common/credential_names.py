"""Credentials by the name they travel under: the half of the one masker (`common.credentials`)
that reads a value as secret because of what it is called, whatever the value looks like.

- a secret-named environment variable, `NAME=value` or `NAME: value` (also `export NAME=...`,
  `--env NAME=...`, a `.env` line) and a Kubernetes env entry `{name: NAME, value: ...}`:
  names holding PASSWORD, PASSWD, PASSPHRASE, SECRET, TOKEN, APIKEY, API_KEY or CREDENTIAL,
  a word ending in KEY, or ending in `_PASS`, `_PWD`, `_AUTH`, `_PAT` (PGPASSWORD, MYSQL_PWD,
  DB_PASS, NGC_KEY, SSHKEY, HFTOKEN); not TOKENS, TOKENIZER or TIKTOKEN (token counts and
  tokenizers), not PWD (the shell's folder);
- a credential-named field of JSON, YAML or an HTTP header, `"password": "..."`, `token: ...`,
  `Authorization: Basic ...`, `X-Api-Key: ...`, docker config's `auth` and `identitytoken`;
- a credential-named command-line option, `--password ...`, `--api-key ...`, `--apikey ...`
  (a legacy NGC key), `--token=...`, and the password of `curl -u user:password` (`--user`,
  `--proxy-user`, `-U`; not `-u 1000:1000`, a uid and gid).

A value that is a reference or a literal stays: `$VAR`, `${VAR}`, `null`, `true`, a `<...>`
placeholder, one already masked. Without a name these values are the shapes' business.
Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

MASK = "<secret>"
MASK_IN_HTML = "&lt;secret&gt;"
"""The mask as Markdown or HTML shows it (report.md escapes what came from input): masked too."""

_SECRET_NAME = re.compile(
    r"PASSWORD|PASSWD|PASSPHRASE|SECRET|APIKEY|API_KEY|CREDENTIAL|(?<!TIK)TOKEN(?!S|IZER)"
    r"|KEY(?![A-Z0-9])|_(?:PASS|PWD|AUTH|PAT)$"
)
"""A secret's name, upper case with `-` and `.` read as `_` (see `is_secret_env_name`)."""
_KEYS = frozenset(
    {"token", "auth", "authorization", "proxy_authorization", "registrytoken", "private_key"}
    | {"credentials"}
)
"""Credential-named fields (and `_KEY_ENDS`), compared lowercased with `-` read as `_`."""
_KEY_ENDS = (
    *("password", "passwd", "passphrase", "clientsecret", "client_secret", "apikey", "api_key"),
    "accesstoken",
    *("access_token", "authtoken", "auth_token", "refreshtoken", "refresh_token"),
    *("privatetoken", "private_token", "sessiontoken", "session_token", "identitytoken"),
    *("secretkey", "secret_key", "secret_access_key", "secretaccesskey"),
)
"""`registryPassword`, `ngcApiKey`, `client-secret`, `X-Auth-Token`, `PRIVATE-TOKEN` ...; not a
bare `_token` end (`eos_token`, `pad_token` are tokenizer words), `_key` (`cache_key`) or
`secret` (`ngcSecret`, `secretName` name a Kubernetes Secret; "is a secret: ..." is prose)."""
_OPTIONS = frozenset(
    {"password", "passwd", "pass", "passphrase", "token", "apikey", "api_key", "secret_key"}
    | {"secret_access_key"}
)
_OPTION_ENDS = ("_password", "_passwd", "_token", "_secret", "_api_key", "_apikey")
_PLAIN_VALUE = re.compile(
    r"(?:(?i:null|none|nil|true|false)|~|\*+|\.\.\.|…|<[^<>]*>|&lt;secret&gt;|\[secret\]"
    r"|\$[A-Z_][A-Z0-9_]*|\$\{[^{}]*\}|\$\{\{[^{}]*\}\}|\$\([^()]*\))"
)
"""A value that is no secret: a literal, a reference (`$VAR`, `${VAR}`, `${{ secrets.X }}`,
`$(cat file)`), a placeholder (`...`, `<password>`) or one already masked (`<secret>`). A
reference's name is upper case, as a variable's is: `$ecret1` may be a password."""

_CLOSERS = ",;)}]"
"""What may close a plain value's sentence or list: `$DB_PASS;`, `null, "token": ...`."""
_ARROWS = ("=>", "->")
"""`NGC_API_KEY: [secret] => [secret]`: a Pulumi diff of a secret shows no value."""
_QUOTED = r"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'"
_SEPARATOR = r"(?P<sep>[ \t]*(?:(?P<eq>=)|:(?!//))[ \t]*)"
_VALUE = rf"(?=(?P<value>{_QUOTED}|(?(eq)[^\s\"'`]+|[^\r\n\"'`]*[^\s\"'`])))"
"""After `=` a value runs to a space or quote (a shell word); after `:` to the line's end (a
YAML scalar, an HTTP header's `Basic dXNlcjpwdw==`); a quoted one is taken whole. A lookahead:
a name that is no credential does not swallow the value, where another name may follow."""
_ENV_ASSIGNMENT = re.compile(
    rf"(?<![A-Za-z0-9_$])(?<!\$\{{)(?P<name>[A-Z][A-Z0-9_]*){_SEPARATOR}{_VALUE}"
)
"""`PGPASSWORD=...`, `export DB_PASS=...`, `NGC_API_KEY: ...`; not `${NGC_API_KEY:?...}`."""
_ENV_ENTRY = re.compile(
    r"[\"']?name[\"']?[ \t]*:[ \t]*[\"']?(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)[\"']?[ \t]*,?\s*"
    rf"[\"']?value[\"']?[ \t]*:[ \t]*(?=(?P<value>{_QUOTED}|[^\s\"'`,}}]+))"
)
"""A Kubernetes env entry: `{"name": "PGPASSWORD", "value": "..."}`, or in YAML on two lines."""
_FIELD = re.compile(
    rf"(?<![A-Za-z0-9_.$-])(?<!\$\{{)(?P<quote>[\"']?)(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)(?P=quote)"
    rf"{_SEPARATOR}{_VALUE}"
)
"""`"password": "..."`, `token=...`, `Authorization: Basic ...`, `X-Api-Key: ...`."""
_OPTION = re.compile(
    rf"(?<![\w-])--(?P<name>[A-Za-z][A-Za-z0-9_-]*)(?P<sep>=|[ \t]+)"
    rf"(?=(?P<value>{_QUOTED}|[^\s\"'`]+))"
)
"""`--password ...`, `--api-key=...`; a value starting with `-` after a space is the next
option, and one spelled like the option's metavar (`--token TOKEN`) is its usage line."""
_USER_OPTION = re.compile(
    r"(?<![\w-])(?:--user|--proxy-user|-u|-U)(?:=|[ \t]*)[\"']?(?!\d+:\d+\b)[^\s:\"'`/]+:"
    r"(?!//)(?=(?P<value>[^\s\"'`]+))"
)
"""`curl -u user:password`: the password after the user (`-u 1000:1000` is a uid and gid)."""


def is_secret_env_name(name: str) -> bool:
    """True for a name that names a secret: the one rule of the masker, of the stack config
    (`workerExtraEnv`, `components.config_rules`) and of the policy pack (env, ConfigMap keys,
    annotations, `policy.rules.plain_secrets`). PGPASSWORD, DB_PASS, NGC_KEY, SSHKEY, HFTOKEN,
    hf-token, AWS_SECRET_ACCESS_KEY; not NIM_MAX_NUM_BATCHED_TOKENS, TIKTOKEN_CACHE_DIR, KEYWORDS
    or PWD."""
    return _SECRET_NAME.search(re.sub(r"[-.]", "_", name.upper())) is not None


def names_like(
    exact: frozenset[str], ends: tuple[str, ...], starts: tuple[str, ...] = ()
) -> Callable[[str], bool]:
    """Whether a name, lowercased with `-` read as `_`, is one of `exact`, or ends or starts
    with one of `ends` or `starts`."""

    def named(name: str) -> bool:
        normal = name.strip().lower().replace("-", "_")
        return normal in exact or normal.endswith(ends) or normal.startswith(starts)

    return named


is_credential_key = names_like(_KEYS, _KEY_ENDS)
"""A JSON, YAML or header field named like a credential (`password`, `auth`, `identitytoken`,
`Authorization`, `X-Api-Key`, `registryPassword`)."""
is_credential_option = names_like(_OPTIONS, _OPTION_ENDS)
"""A long option named like a credential (`password`, `api-key`, `apikey`, `token`,
`client-secret`, `registry-password`), given without its dashes."""


def _secret_env(match: re.Match[str]) -> bool:
    return is_secret_env_name(match["name"])


def _credential_field(match: re.Match[str]) -> bool:
    """A field named like a credential, or like a secret variable when it is spelled as one
    (`"MYSQL_PWD": ...` in a JSON dump of an environment)."""
    name = match["name"]
    return is_credential_key(name) or (name.isupper() and is_secret_env_name(name))


def _an_option_value(match: re.Match[str]) -> bool:
    value, name = match["value"], match["name"]
    next_option = match["sep"] != "=" and value.startswith("-")
    metavar = value.rstrip("]),.") == name.upper().replace("-", "_")
    return is_credential_option(name) and not next_option and not metavar


def _secret_value(value: str) -> bool:
    inner = value[1:-1] if _quoted(value) else value
    words = inner.split()
    if not words or _plain(inner.strip()):
        return False
    return not all(_plain(word) or word in _ARROWS for word in words)


def _quoted(value: str) -> bool:
    return len(value) > 1 and value[0] in "\"'" and value[-1] == value[0]


def _plain(text: str) -> bool:
    return any(_PLAIN_VALUE.fullmatch(candidate) for candidate in (text, text.rstrip(_CLOSERS)))


def _masker(
    pattern: re.Pattern[str], named_secret: Callable[[re.Match[str]], bool]
) -> Callable[[str], str]:
    """Masks each value that `pattern` finds under a secret name, its quotes kept (a masked JSON
    or YAML text stays well formed)."""

    def masked(text: str) -> str:
        pieces, done = [], 0
        for match in pattern.finditer(text):
            start, end = match.span("value")
            if start < done or not named_secret(match) or not _secret_value(match["value"]):
                continue  # not a secret, or a name inside a value already masked
            value = text[start:end]
            pieces += [text[done:start], f"{value[0]}{MASK}{value[0]}" if _quoted(value) else MASK]
            done = end
        return "".join([*pieces, text[done:]])

    return masked


NAMED_RULES: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("the value of a secret-named variable", _masker(_ENV_ENTRY, _secret_env)),
    ("the value of a secret-named variable", _masker(_ENV_ASSIGNMENT, _secret_env)),
    ("a credential-named field", _masker(_FIELD, _credential_field)),
    ("a credential given to a command-line option", _masker(_OPTION, _an_option_value)),
    ("a credential given to a command-line option", _masker(_USER_OPTION, lambda match: True)),
)
"""(kind, masker) of each rule by name, in the order `common.credentials.mask` applies them."""


def is_named_secret(key: object, mapping: dict[Any, Any]) -> bool:
    """True when `mapping[key]` is a scalar and no literal or reference, and a credential by its
    key (`password`, `NGC_API_KEY`) or the `value` of a Kubernetes env entry whose `name` is a
    secret's (`{name: PGPASSWORD, ...}`)."""
    item = mapping[key]
    scalar = isinstance(item, (str, int, float)) and not isinstance(item, bool)
    if not isinstance(key, str) or not scalar or not _secret_value(str(item)):
        return False
    if key == "value" and isinstance(mapping.get("name"), str):
        return is_secret_env_name(str(mapping["name"]))
    env_style = key.isupper() and re.fullmatch(r"[A-Z][A-Z0-9_]*", key) is not None
    return is_secret_env_name(key) if env_style else is_credential_key(key)
