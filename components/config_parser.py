"""Stack config as the CLI hands it to the program -> `StackSettings`, or one `ConfigError` that
names every offending key and its fix: unknown keys, each value that breaks its rule, the checks
across keys (on the keys that did validate) and the secrets. A refusal shows a value only for a
key outside `QUIET_KEYS`, and only when it is short; never a secret.

A key the program does not know is a typo of one it does, or of its namespace: one of this
project's namespace that is not declared (`workerReplica`), or one of a namespace close to the
project's (`cosmos3_nano_reasoner:workerReplicas`, another case, a zero-width space inside), the
worse one: it looks like another namespace's key, so it would be ignored and the default deployed
instead of what the file says. Each is refused with the key it most likely means, its invisible
characters shown as escapes (`common.terminal`), so two keys that print alike are told apart.

Over 300 lines: one pass over the stack config, whose every refusal lands in one message.
No Pulumi import: the program, the offline render and the tests use it.
"""

from __future__ import annotations

import difflib
import functools
import json
from collections.abc import Collection, Mapping
from typing import Annotated, Any

import yaml
from pydantic import TypeAdapter, ValidationError

from common import REPO_ROOT
from common.credentials import credential_kind, mask
from common.input_files import MAX_PULUMI_FILE_BYTES, read_text
from common.terminal import invisible_characters, visible
from common.yaml_input import yaml_documents
from components.affinity import STRING_HINT
from components.config_checks import cross_check_problems
from components.config_rules import shown
from components.image_reference import holds_userinfo
from components.settings import (
    LAYER_KEYS,
    PROJECT,
    QUIET_KEYS,
    SECRET_KEYS,
    StackSettings,
    config_key,
)

PROJECT_FILE = REPO_ROOT / "Pulumi.yaml"
"""Declares every key with its default; the CLI merges the defaults under the stack's own values."""

REGISTRY_KEYS = frozenset({"frontendImage", "workerImage", "registryServer"})
"""The keys whose values name a registry: a `user:password@` in one is a registry's credential."""
MAX_VALUE_BYTES = 64 * 1024
"""One config value's size at most. The API server refuses a request over 3 MiB and etcd an
object over 1.5 MiB; an object carries a handful of values at most, so 64 KiB each keeps every
object the program makes under both."""


class ConfigError(ValueError):
    """Stack config that cannot be deployed; the message names each key and the fix."""


def parse_stack_config(raw: Mapping[str, Any], secret_keys: Collection[str]) -> StackSettings:
    """`raw`: every config value the CLI passes (keys with or without the project prefix; other
    namespaces' are ignored), `secret_keys`: those it marks secret. Secret values are only checked
    for presence and secrecy; they never enter the settings. Raises only `ConfigError`."""
    own = _own_keys(raw)
    declared = declared_keys()
    unknown = sorted(set(own) - declared - SECRET_KEYS)
    values = {key: value for key, value in own.items() if key in declared}
    marked = set(_own_keys(dict.fromkeys(secret_keys)))
    settings, unvalidated, problems = _validated(values, marked)
    problems += [f"  {problem}" for problem in cross_check_problems(settings, unvalidated)]
    problems += _ignored_layer_keys(settings, unvalidated)
    problems += _oversized_lines(own)
    present = {key: bool(own.get(key)) for key in SECRET_KEYS}
    secret_problems = _secret_problems(settings, unvalidated, present, marked)
    secret_problems += _secret_but_written_plain(marked & declared - SECRET_KEYS)
    sections = [
        (
            _mistyped_namespace_lines(raw) + _unknown_lines(unknown),
            "Unknown stack config (a typo?):",
        ),
        (_plain_credential_lines(own), "Credentials in plain stack config:"),
        (problems, "Invalid stack config:"),
        (secret_problems, "Invalid secret config:"),
    ]
    message = "\n".join(line for lines, title in sections if lines for line in (title, *lines))
    if message:
        raise ConfigError(mask(message))  # whatever a rule quoted, never a credential
    return settings


@functools.cache
def declared_defaults() -> dict[str, Any]:
    """Each key's default as `Pulumi.yaml` declares it (keys without one are left out)."""
    text = read_text(PROJECT_FILE, "project file", MAX_PULUMI_FILE_BYTES)
    (project,) = yaml_documents(text, str(PROJECT_FILE), "project file", yaml.SafeLoader)
    return {
        key: spec["default"]
        for key, spec in (project.get("config") or {}).items()
        if isinstance(spec, dict) and "default" in spec
    }


def _ignored_layer_keys(settings: StackSettings, unvalidated: set[str]) -> list[str]:
    """A layer key set on a profile stack (a value other than its default), where the layer comes
    from `sharedStack` and the key would change nothing: one line per key, with where it goes.
    The CLI hands the program its defaults merged in, so a key set to its default cannot be told
    apart from one not set; it changes nothing either way."""
    if "shared_stack" in unvalidated or not settings.uses_shared_layer:
        return []
    defaults = declared_defaults()
    lines = []
    for name, field in StackSettings.model_fields.items():
        key = field.alias or name
        if key not in LAYER_KEYS or name in unvalidated:
            continue
        if getattr(settings, name) != _field_adapter(name).validate_python(defaults[key]):
            lines.append(
                f"  {config_key(key)} is set on a stack that reads its layer from "
                f"{config_key('sharedStack')}={settings.shared_stack}, where it changes nothing: "
                f"set it on {settings.shared_stack} and `pulumi config rm {config_key(key)}` here"
            )
    return lines


def _validated(
    values: dict[str, Any], marked: set[str]
) -> tuple[StackSettings, set[str], list[str]]:
    """The settings, the fields that did not validate, and a line per problem (never the value
    of a key `marked` secret). With problems the settings are partial: only the fields that
    validated, for the checks across keys."""
    try:
        return StackSettings.model_validate(values), set(), []
    except ValidationError as error:
        errors = error.errors()
    failed = {str(problem["loc"][0]) for problem in errors if problem["loc"]}
    valid: dict[str, Any] = {}
    unvalidated: set[str] = set()
    for name, field in StackSettings.model_fields.items():
        alias = field.alias or name
        if alias in failed or alias not in values:
            unvalidated.add(name)
            continue
        try:
            valid[name] = _field_adapter(name).validate_python(values[alias])
        except ValidationError:  # pragma: no cover - the model accepted this field
            unvalidated.add(name)
    return StackSettings.model_construct(**valid), unvalidated, [_line(p, marked) for p in errors]


@functools.cache
def _field_adapter(name: str) -> TypeAdapter[Any]:
    field = StackSettings.model_fields[name]
    annotation: Any = field.annotation
    if field.metadata:
        annotation = Annotated[(annotation, *field.metadata)]
    return TypeAdapter(annotation)


def _line(problem: Mapping[str, Any], marked: set[str]) -> str:
    """One pydantic error (`ValidationError.errors()` item) as a line naming its key."""
    key = _location(problem["loc"])
    if problem["type"] == "missing":
        return f"  {config_key(key)} is required: `pulumi config set {config_key(key)} <value>`"
    message = problem["msg"].removeprefix("Value error, ")
    if problem["type"] == "string_type":  # `pulumi config set --path` stores 8 as a number
        message = STRING_HINT
    value = problem.get("input")
    # Never the value of a quiet key, or of one marked secret.
    quiet = not problem["loc"] or str(problem["loc"][0]) in QUIET_KEYS | SECRET_KEYS | marked
    got = "" if quiet else f" (got {shown(value if isinstance(value, str) else repr(value))})"
    return f"  {config_key(key)}: {message}{got}"


def _location(loc: tuple[int | str, ...]) -> str:
    """`workerExtraEnv[2]`: the key, then the item's position in a list."""
    key = str(loc[0]) if loc else ""
    return key + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc[1:])


def _secret_problems(
    settings: StackSettings, unvalidated: set[str], present: dict[str, bool], marked: set[str]
) -> list[str]:
    problems = [
        f"  {config_key(key)} is stored in plain text: set it again with "
        f"`pulumi config set --secret {config_key(key)} <value>`"
        for key, is_set in sorted(present.items())
        if is_set and key not in marked
    ]
    if unvalidated & {
        "shared_stack",
        "registry_server",
        "ngc_api_key_from",
        "image_pull_from",
        "ngc_api_key_needed",
    }:
        return problems  # whether this stack needs its secrets is not known yet
    problems += _existing_secret_problems(settings, present)
    if settings.creates_ngc_secret and not present["ngcApiKey"]:
        problems.append(
            f"  {config_key('ngcApiKey')} is required to create the ngc-api-secret: "
            f'`pulumi config set --secret {config_key("ngcApiKey")} "$NGC_API_KEY"`'
        )
    needs_password = settings.uses_registry_mirror and not present["registryPassword"]
    if settings.manages_secrets and needs_password:
        problems.append(
            f"  {config_key('registryPassword')} is required with registryServer: "
            f"`pulumi config set --secret {config_key('registryPassword')} <password>`"
        )
    unused = not settings.uses_registry_mirror and not settings.image_pull_from
    if settings.manages_secrets and present["registryPassword"] and unused:
        problems.append(
            f"  {config_key('registryPassword')} is set without {config_key('registryServer')}, "
            "so no pull secret uses it: set the mirror's server and registryUsername, or "
            f"`pulumi config rm {config_key('registryPassword')}`"
        )
    set_here = [config_key(key) for key, is_set in sorted(present.items()) if is_set]
    if settings.uses_shared_layer and set_here:
        problems.append(
            f"  secrets {', '.join(set_here)} are set on a stack that reads them from "
            f"{config_key('sharedStack')}={settings.shared_stack}: set them on the shared stack "
            "and `pulumi config rm` them here"
        )
    return problems


def _secret_but_written_plain(keys: set[str]) -> list[str]:
    """A key marked secret that the program writes as it is into the objects it makes (and so
    into the state and the cluster): saying nothing would let a user think it stays encrypted."""
    return [
        f"  {config_key(key)} is set as a secret, but the program writes it in plain text into "
        f"the objects it makes: `pulumi config set --plaintext {config_key(key)} <value>` if it "
        "is no secret; credentials go only in ngcApiKey, registryPassword or an existing Secret "
        "(ngcApiKeyFrom, imagePullFrom)"
        for key in sorted(keys)
    ]


def _existing_secret_problems(settings: StackSettings, present: dict[str, bool]) -> list[str]:
    """A secret set beside the existing Secret that replaces it: which one counts is ambiguous,
    and the value would sit in the stack file unused."""
    pairs = (
        ("ngcApiKey", "ngcApiKeyFrom", settings.ngc_api_key_from),
        ("registryPassword", "imagePullFrom", settings.image_pull_from),
    )
    problems = [
        f"  {config_key(secret)} is set, and {config_key(existing)}={name} names the existing "
        f"Secret the pods read instead: `pulumi config rm {config_key(secret)}`, or unset "
        f"{config_key(existing)} to have this stack create the Secret from it"
        for secret, existing, name in pairs
        if name and present[secret] and settings.manages_secrets
    ]
    if not settings.ngc_api_key_needed and present["ngcApiKey"] and settings.manages_secrets:
        problems.append(
            f"  {config_key('ngcApiKey')} is set, and {config_key('ngcApiKeyNeeded')} is false: "
            f"`pulumi config rm {config_key('ngcApiKey')}`, or set ngcApiKeyNeeded true"
        )
    return problems


def _text(value: Any) -> str:
    """A config value as the CLI hands it over: text, structured values as JSON."""
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _plain_credential_lines(own: Mapping[str, Any]) -> list[str]:
    """A credential (by its shape, `common.credentials`) in a key that is not secret: plain
    text in the stack file, the state and the objects. The value is never shown. A registry's
    `user:password@` in an image or the registry server says where the registry's go."""
    lines = []
    for key in sorted(set(own) - SECRET_KEYS):
        if key in REGISTRY_KEYS and holds_userinfo(_text(own[key])):
            lines.append(
                f"  {config_key(key)} holds a registry user or password (user:password@, not "
                f"shown): the mirror's user goes in {config_key('registryUsername')}, its "
                f"password in `pulumi config set --secret {config_key('registryPassword')}`, "
                f"its host in {config_key('registryServer')}; then set {config_key(key)} "
                "without them"
            )
            continue
        kind = credential_kind(_text(own[key]))
        if kind:
            lines.append(
                f"  {config_key(key)} holds {kind} (not shown): credentials go only in secret "
                f"config, the NGC key in `pulumi config set --secret {config_key('ngcApiKey')}`, "
                f"a mirror's password in `pulumi config set --secret "
                f"{config_key('registryPassword')}`; then `pulumi config rm {config_key(key)}`"
            )
    return lines


def _oversized_lines(own: Mapping[str, Any]) -> list[str]:
    sizes = {key: len(_text(value).encode(errors="replace")) for key, value in own.items()}
    return [
        f"  {config_key(key)}: {size // 1024} KiB, at most {MAX_VALUE_BYTES // 1024} KiB: "
        "every object the program makes must stay under the API server's request limit"
        for key, size in sorted(sizes.items())
        if size > MAX_VALUE_BYTES
    ]


def _own_keys(raw: Mapping[str, Any]) -> dict[str, Any]:
    parts = [(key.rpartition(":"), value) for key, value in raw.items()]
    return {name: value for (space, sep, name), value in parts if not sep or space == PROJECT}


# --- keys the program does not know ----------------------------------------------------------

REMOVED_KEYS = {
    "servedModel": (
        "no longer config: the NIM serves its own model id, which no setting renames "
        "(components/names.py SERVED_MODEL); the stack output servedModel still names it"
    ),
}
"""Keys older stack files may still set, with why they went."""


def declared_keys() -> set[str]:
    return {field.alias or name for name, field in StackSettings.model_fields.items()}


def _unknown_lines(unknown: list[str]) -> list[str]:
    lines = []
    for key in unknown:
        hint = REMOVED_KEYS.get(key) or _did_you_mean(key, "see docs/configuration.md")
        # "<key> is unknown:", not "<key>:": the refusal is masked as a whole, and the masker
        # reads `SECRET_NAME: text` as a credential (an all-caps typo of imagePullFrom is
        # one), which would hide the hint.
        lines.append(f"  {_key_shown(config_key(key))} is unknown: {hint} ({_removal(key)})")
    return lines


NEAR_NAMESPACE_RATIO = 0.8
"""How alike a namespace must be to the project's to be a typo of it: one or two characters off
in `cosmos3-nano-reasoner` (`pulumi`, `kubernetes` or `aws` are nowhere near)."""


def _mistyped_namespace_lines(raw: Mapping[str, Any]) -> list[str]:
    lines = []
    for key in sorted(raw):
        namespace, sep, name = key.rpartition(":")
        if not sep or namespace == PROJECT:
            continue  # most keys: no need to compare (the program and every test parse dozens)
        ratio = difflib.SequenceMatcher(None, _folded(namespace), _folded(PROJECT)).ratio()
        if ratio < NEAR_NAMESPACE_RATIO:
            continue
        hint = _did_you_mean(name, f"this project's is {PROJECT}")
        lines.append(
            f"  {_key_shown(key)} is not in this project's namespace, so it would be ignored; {hint} "
            f"({_removal(key)})"
        )
    return lines


def _did_you_mean(key: str, otherwise: str) -> str:
    """The declared key `key` most likely means: the same once invisible characters, case and
    `_`/`-` are set aside, else the closest spelling; `otherwise` when none is close."""
    by_folded = {_folded(known): known for known in sorted(declared_keys() | SECRET_KEYS)}
    close = difflib.get_close_matches(_folded(key), list(by_folded), n=1)
    found = by_folded.get(_folded(key)) or (by_folded[close[0]] if close else None)
    return f"did you mean {config_key(found)}?" if found else otherwise


def _folded(text: str) -> str:
    """`text` without invisible characters, casefolded, `_` read as `-`."""
    return "".join(c for c in text if c.isprintable()).casefold().replace("_", "-")


def _removal(key: str) -> str:
    """How to remove a key: `pulumi config rm`, unless it holds a character nobody can type."""
    if invisible_characters(key):
        return "delete its line from the stack file: the key cannot be typed"
    return f"`pulumi config rm {key if ':' in key else config_key(key)}`"


def _key_shown(key: str) -> str:
    """The key with its invisible characters as escapes, and named."""
    hidden = invisible_characters(key)
    return visible(key) + (f" (holds the invisible {', '.join(hidden)})" if hidden else "")
