"""A client for one kubeconfig context, or a `KubeconfigError` that says why: never a traceback
from inside the `kubernetes` client's loader.

The loader ends in whatever its parsing meets in a malformed file: a YAML error, a TypeError for a
list where a mapping belongs, an AttributeError for a number where a server URL belongs, binascii's
error for bad base64, a RecursionError for deep nesting; and it reads a FIFO or `/dev/zero` given as
the file forever. So each file is checked first (`common.input_files`: a regular UTF-8 file of a
sane size, YAML within `common.yaml_input`'s budgets), and whatever the loader raises becomes one KubeconfigError naming the file and the
context. Its message never quotes the file: a kubeconfig holds tokens and keys.

The program (`components.live`), the cluster stages, the tools and the lab connect through it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from common.credentials import mask
from common.input_files import MAX_KUBECONFIG_BYTES, InputFileError, read_text
from common.yaml_input import SAFE_LOADER, yaml_documents

DEFAULT_KUBECONFIG = "~/.kube/config"


class KubeconfigError(ValueError):
    """A kubeconfig that cannot give a client for the context asked; the message says why."""


def api_client(kubeconfig: str | Path | None, context: str | None) -> Any:
    """A `kubernetes.client.ApiClient` for `context` of `kubeconfig` (None: `$KUBECONFIG`, which
    may list several files, else ~/.kube/config, as client-go and the provider read them), without
    touching the client's global configuration; None for `context` is the file's current context,
    which only a user's explicit tool run asks for (`tools.validate`)."""
    from kubernetes import config

    source = str(kubeconfig or os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG)
    where = f"context {context!r} of" if context else "the current context of"
    _check_files(source, named=bool(kubeconfig), where=where)
    try:
        return config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=source, context=context, persist_config=False
        )
    except Exception as error:  # noqa: BLE001 -- the loader raises whatever its parsing meets
        raise KubeconfigError(f"cannot use {where} {source}: {_reason(error)}") from None


def _check_files(source: str, named: bool, where: str) -> None:
    """Each file of `source` is a regular UTF-8 file of a sane size. A file of `$KUBECONFIG`'s
    list that does not exist is skipped, as client-go skips it; a named one must exist."""
    for part in source.split(os.pathsep):
        if not part:
            continue
        path = Path(part).expanduser()
        if not named and not path.exists() and not path.is_symlink():
            continue
        try:
            text = read_text(path, "kubeconfig", MAX_KUBECONFIG_BYTES)
            # Within the nesting and alias budgets before the client's own PyYAML load, which
            # takes seconds on 3,000 nested brackets, and forever on a billion laughs.
            yaml_documents(text, str(path), "kubeconfig", SAFE_LOADER)
        except yaml.YAMLError:
            pass  # the client's loader meets it too, and `_reason` says it without the file's text
        except InputFileError as error:
            raise KubeconfigError(f"cannot use {where} {source}: {error}") from None


def _reason(error: BaseException) -> str:
    """Why the loader refused, in one line, without the file's text (a YAML error quotes the
    line it stopped at, which may hold a token)."""
    if isinstance(error, yaml.MarkedYAMLError):
        mark = error.problem_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        return f"not valid YAML{where}: {error.problem}"
    if isinstance(error, yaml.YAMLError):
        return "not valid YAML"
    if isinstance(error, RecursionError):
        return "not valid YAML: nested too deep"
    if isinstance(error, (TypeError, AttributeError, KeyError, IndexError)):
        return f"its structure is not a kubeconfig's ({type(error).__name__})"
    kind = "" if type(error).__name__ == "ConfigException" else f"{type(error).__name__}: "
    return mask(kind + first_line(error))


def first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [""])[0][:300]
