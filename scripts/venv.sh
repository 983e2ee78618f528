#!/usr/bin/env bash
# A virtualenv holding exactly a lock, kept outside the work tree and linked into it:
#   scripts/venv.sh LINK LOCK [PIP_CONSTRAINT]
# e.g. `scripts/venv.sh .venv-dev requirements-dev.lock requirements-dev.lock` (the Makefile's
# venvs). The venv lives in $COSMOS3_VENV_HOME (default ~/.cache/cosmos3-venvs), named after LINK
# and keyed by the lock's hash and the interpreter's version: a fresh clone, a second worktree or
# the real tier's project copies link the one already built (seconds), and a changed lock gets a
# new venv from scratch, so no venv ever holds a package its lock dropped. LINK becomes a symlink
# to it (an in-tree venv an older Makefile made there is replaced). With PIP_CONSTRAINT, pip itself
# is first brought to that file's version (faster installs). Builds of one key are serialized by a
# lock file, so two runs of `make` at once build it once.
# PYTHON names the interpreter (the Makefile passes its checked 3.11).
set -euo pipefail

link="$1"
lock="$2"
pip_constraint="${3:-}"
PYTHON="${PYTHON:-python3}"
home="${COSMOS3_VENV_HOME:-$HOME/.cache/cosmos3-venvs}"
quiet=(--quiet --disable-pip-version-check --no-input)

version="$("$PYTHON" -c 'import sys; print(sys.version.split()[0])')"
key="$({ cat "$lock" ${pip_constraint:+"$pip_constraint"}; echo "$version"; } | sha256sum | cut -c1-16)"
name="${link#.}"  # .venv -> venv-<key>, .venv-dev -> venv-dev-<key>, policy/venv -> policy-venv-<key>
venv="$home/${name//\//-}-$key"

if [[ -e "$link" && ! -L "$link" && ! -f "$link/pyvenv.cfg" ]]; then
  echo "venv: $link exists and is no virtualenv; move it away and run again" >&2
  exit 2
fi

mkdir -p "$home"
exec 9>"$venv.lock"
flock 9
if [[ ! -f "$venv/.installed" ]]; then
  echo "venv: building $link from $lock into $venv"
  rm -rf "$venv"
  "$PYTHON" -m venv "$venv"
  if [[ -n "$pip_constraint" ]]; then
    "$venv/bin/python" -m pip install "${quiet[@]}" --constraint "$pip_constraint" pip
  fi
  "$venv/bin/python" -m pip install "${quiet[@]}" -r "$lock"
fi
# Touched on every link, so `make` sees the stamp newer than a freshly cloned lock.
touch "$venv/.installed"
flock -u 9

if [[ -d "$link" && ! -L "$link" ]]; then
  rm -rf "$link"  # an in-tree venv from before the cache
fi
ln -sfn "$venv" "$link"
