"""Keep the generated configuration reference in docs/configuration.md in step with Pulumi.yaml.

python -m tools.readme_sync          # rewrite the generated block in docs/configuration.md
python -m tools.readme_sync --check  # exit 1 when docs/configuration.md is out of date

The name is older than the page (the table used to live in README.md); `tools.config_reference`
renders the table itself.
"""

from __future__ import annotations

import sys

from common import REPO_ROOT
from common.confined_paths import OutputFolderError, write_inside
from common.input_files import MAX_RECORD_BYTES, read_text
from tools.config_reference import reference_table

PAGE = "docs/configuration.md"
TARGET = REPO_ROOT / PAGE
"""The page that holds the generated block."""
START, END = "<!-- CONFIG-REFERENCE:START -->", "<!-- CONFIG-REFERENCE:END -->"


def synced(text: str) -> str:
    """`text` with the block between START and END replaced by the current reference table."""
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{reference_table()}\n{END}{tail}"


def main(argv: list[str]) -> int:
    text = read_text(TARGET, "configuration reference", MAX_RECORD_BYTES)
    if "--check" in argv:
        if synced(text) != text:
            print(
                "docs/configuration.md configuration reference is stale: "
                "run python -m tools.readme_sync",
                file=sys.stderr,
            )
            return 1
        return 0
    try:  # a link there (a clone may carry one) is refused, never written through
        write_inside(REPO_ROOT, PAGE, synced(text))
    except OutputFolderError as error:
        print(f"tools.readme_sync: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
