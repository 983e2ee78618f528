"""`python -m testenv.engine build | env | path | crds` (see the package docstring)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from common.parsers import CommandParser
from testenv.engine import EngineError, cache_home, located
from testenv.engine import __doc__ as package_doc
from testenv.engine.build import build, build_tools, pinned_crds
from testenv.engine.pins import CRD_SOURCES


def main(argv: Sequence[str] | None = None) -> int:
    parser = CommandParser(
        prog="python -m testenv.engine", description=(package_doc or "").split("\n")[0]
    )
    parser.add_argument("command", choices=("build", "env", "path", "crds"))
    parser.add_argument(
        "tools", nargs="*", help="build: only these tools, into their slots (no engine assembled)"
    )
    args = parser.parse_args(argv)
    home = cache_home()
    try:
        if args.command == "crds":
            for source in CRD_SOURCES:
                print("\n".join(map(str, pinned_crds(home, source))))
            return 0
        if args.command == "build" and args.tools:
            for name, binary in build_tools(home, args.tools).items():
                print(f"{name}: {binary}")
            return 0
        engine = build(home) if args.command == "build" else located(home)
    except EngineError as error:
        print(error, file=sys.stderr)
        return 1
    if args.command == "env":
        sys.stdout.write(engine.exports())
    elif args.command == "path":
        print(engine.root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
