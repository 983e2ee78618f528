"""What every room of the house shares, standard library only: the credential masker, checked
input files, output folders a command owns and locks, reserved loopback ports, and where the
repository is."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
"""The clone's root, where Pulumi.yaml is: the one name for it in the whole house."""
