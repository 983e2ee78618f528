"""`python -m tools.readme_sync [--check]`: the generated block of docs/configuration.md rewritten,
or checked (exit 1 when stale); `tools.config_reference` makes it."""

import sys

from tools.config_reference import sync

if __name__ == "__main__":
    sys.exit(sync(sys.argv[1:]))
