"""Keep generated parts of README.md in step with their sources.

python -m tools.readme_sync          # rewrite the generated blocks in README.md
python -m tools.readme_sync --check  # exit 1 when README.md is out of date
"""

from __future__ import annotations

import sys
from pathlib import Path

from tools.config_reference import reference_table

README = Path(__file__).resolve().parent.parent / "README.md"
START, END = "<!-- CONFIG-REFERENCE:START -->", "<!-- CONFIG-REFERENCE:END -->"


def synced(text: str) -> str:
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{reference_table()}\n{END}{tail}"


def main(argv: list[str]) -> int:
    text = README.read_text()
    if "--check" in argv:
        if synced(text) != text:
            print(
                "README.md configuration reference is stale: run python -m tools.readme_sync",
                file=sys.stderr,
            )
            return 1
        return 0
    README.write_text(synced(text))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
