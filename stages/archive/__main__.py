"""`python -m stages.archive`: the archive's command line alone (see stages/archive/cli.py)."""

import sys

from stages.archive.cli import main

sys.exit(main())
