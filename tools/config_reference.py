"""The README's configuration reference, generated from the declarations in Pulumi.yaml.

    python -m tools.config_reference      # prints the Markdown table

A test compares the README with this output, so the reference cannot drift from Pulumi.yaml.
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
