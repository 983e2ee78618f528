"""Ctrl-C at any moment of a command: one line on stderr and exit status 130, never a traceback.

Each command catches KeyboardInterrupt in its `main` and stops what it started. Before `main`
runs, though, `python -m tools.render` spends most of its first second importing (pulumi, grpc,
yaml): a Ctrl-C there used to end in a traceback of whichever import it hit, and in death by
SIGINT. `end_interrupts_quietly` covers that window: the packages that hold commands (`stages`,
`lab`, `tools`, `testenv`) call it first thing, and it acts only while `python -m` is locating a
module of theirs (`sys.argv[0]` is `-m` exactly then, per the `-m` documentation), so importing
them from a test or a program changes nothing.

What it installs is a last resort, `sys.excepthook`: it is called only for an exception nothing
caught, after every `finally` and `with` block has unwound. For a KeyboardInterrupt it prints
`<command>: interrupted` and ends with 130 (128 + SIGINT, what a shell reports for Ctrl-C) at
once: Python would otherwise kill itself with SIGINT after finalization, which a parent process
sees as -2. Every other exception keeps the hook that was there. Standard library only.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import TracebackType

from common import REPO_ROOT

EXIT_INTERRUPTED = 130
"""128 + SIGINT: what a shell reports for a command ended by Ctrl-C, and what our mains return."""


def end_interrupts_quietly() -> None:
    """Under `python -m <our package>.<command>`, an uncaught Ctrl-C is one line and status 130."""
    if sys.argv[:1] != ["-m"] or sys.excepthook is not sys.__excepthook__:
        return  # imported by a test or a program, or installed already
    previous = sys.excepthook

    def hook(
        kind: type[BaseException], error: BaseException, traceback: TracebackType | None
    ) -> None:
        if not issubclass(kind, KeyboardInterrupt):
            previous(kind, error, traceback)
            return
        print(f"{command_name(sys.argv[0])}: interrupted", file=sys.stderr)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed pipe, a closed stream: nothing more to say
                pass
        os._exit(EXIT_INTERRUPTED)

    sys.excepthook = hook


def command_name(main_file: str) -> str:
    """`python -m tools.render` for `<repo>/tools/render.py`; the file's name for anything else
    (`-m` itself while the module is still being located)."""
    if main_file == "-m":
        return "python -m"
    path = Path(main_file)
    try:
        parts = path.resolve().relative_to(REPO_ROOT).with_suffix("").parts
    except (OSError, ValueError):
        return path.name or "python"
    module = ".".join(parts[:-1] if parts[-1] == "__main__" else parts)
    return f"python -m {module}"
