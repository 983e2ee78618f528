"""What every room of the house shares, standard library only: the credential masker, checked
input files, output folders a command owns and locks (and the paths it may touch in them, never
through a link), reserved loopback ports, Ctrl-C while importing, command-line parsers,
terminal-safe text, and where the repository is."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
"""The clone's root, where Pulumi.yaml is: the one name for it in the whole house."""
