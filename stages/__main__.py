"""`python -m stages`: see stages/cli.py."""

from stages.cli import main

raise SystemExit(main())
