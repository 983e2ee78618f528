"""The configuration reference in docs/configuration.md, generated from Pulumi.yaml's declarations.

    python -m tools.config_reference      # prints the Markdown table

`python -m tools.readme_sync` writes it into docs/configuration.md; a test compares that page with
this output, so the reference cannot drift from Pulumi.yaml.
"""

from __future__ import annotations

import json
from typing import Any

from tools.stack_files import declared_config


def _default(declaration: dict[str, Any]) -> str:
    if "default" not in declaration:
        return "required"
    value = declaration["default"]
    return (
        f"`{json.dumps(value)}`"
        if not isinstance(value, str)
        else (f"`{value}`" if value else '`""`')
    )


def reference_table() -> str:
    lines = ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
    for key, declaration in declared_config().items():
        if ":" in key:
            continue
        kind = declaration["type"]
        if kind == "array":
            kind = f"array of {declaration['items']['type']}"
        description = " ".join(declaration["description"].split()).replace("<", "&lt;")
        lines.append(f"| `{key}` | {kind} | {_default(declaration)} | {description} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(reference_table())
