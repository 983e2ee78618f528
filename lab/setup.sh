#!/usr/bin/env bash
# Install the local lab into .lab/ (gitignored), reproducibly and idempotently:
#   .lab/dynamo-venv  Dynamo 1.6.1 (frontend + mock engine), from lab/requirements-dynamo.lock
#   .lab/aiperf-venv  AIPerf 0.13.0 (benchmark client), from stages/requirements-aiperf.lock
#                     (the stages' AIPerf: the cluster's perf pod installs the same lock)
#   .lab/model        a tiny tokenizer model, built offline by lab/tiny_model.py
# Both venvs are separate from the project's venvs, which this script never touches: Dynamo pins
# pydantic<=2.13.5 and kubernetes<33, AIPerf pins its own stack. Like those (scripts/venv.sh), each
# venv is built outside the work tree, in $COSMOS3_VENV_HOME (default ~/.cache/cosmos3-venvs) under
# a name keyed by its lock and the interpreter, and .lab/<name> links to it: a fresh clone links the
# venvs another clone built, and a venv whose stamp matches its lock is left alone, so a second run
# takes a second or two. A fresh install says what it is doing
# every PROGRESS_SECONDS (default 15): each venv, its packages fetched of the lock's, then their
# install, with the time since it began (about 80 s for all three on 2 idle cores with a warm
# pip cache; several minutes cold or on a busy host).
# Usage: bash lab/setup.sh        (PYTHON=python3.11 bash lab/setup.sh to choose the interpreter)
set -euo pipefail

PYTHON="${PYTHON:-python3}"
LAB_HOME="${LAB_HOME:-.lab}"
VENV_HOME="${COSMOS3_VENV_HOME:-$HOME/.cache/cosmos3-venvs}"
LOG_DIR="$LAB_HOME/logs"
PROGRESS_SECONDS="${PROGRESS_SECONDS:-15}"

since() {
  local seconds=$((SECONDS - $1))
  printf '%dm%02ds' $((seconds / 60)) $((seconds % 60))
}

fail() {
  echo "lab setup FAILED: $*" >&2
  exit 1
}

# Print the last lines of a log and fail.
fail_with_log() {
  local log="$1"
  shift
  echo "---- last lines of $log ----" >&2
  tail -n 30 "$log" >&2 || true
  fail "$*"
}

stamp_of() {
  # The content a venv's stamp must hold: the lock's hash and the interpreter version.
  echo "$(sha256sum "$1" | cut -d' ' -f1) $("$PYTHON" -c 'import sys; print(sys.version.split()[0])')"
}

# install_venv NAME LOCK EXPECTED_PIP_CHECK
# Recreates .lab/NAME from scratch unless its stamp matches, installs the lock without dependency
# resolution (the lock is the complete set), and compares `pip check` with what is expected.
install_venv() {
  local name="$1" lock="$2" expected_check="$3"
  local link="$LAB_HOME/$name" log="$LOG_DIR/$name.log" stamp venv lock_fd
  stamp="$(stamp_of "$lock")"
  venv="$VENV_HOME/lab-$name-$(echo "$stamp" | sha256sum | cut -c1-16)"
  mkdir -p "$VENV_HOME"
  exec {lock_fd}>"$venv.lock"
  flock "$lock_fd"  # another setup building the same venv: wait for it, then use it
  if [[ -f "$venv/.installed" && "$(cat "$venv/.installed")" == "$stamp" ]]; then
    flock -u "$lock_fd"
    link_venv "$venv" "$link"
    echo "lab setup: $name is up to date"
    return
  fi
  local began=$SECONDS packages
  packages="$(grep -c '^[^#].*==' "$lock")"
  echo "lab setup: installing $name: $packages packages from $lock (log: $log)"
  rm -rf "$venv"
  "$PYTHON" -m venv "$venv" >"$log" 2>&1 || fail_with_log "$log" "could not create $venv with $PYTHON"
  "$venv/bin/python" -m pip install --disable-pip-version-check --no-input --no-deps \
    -r "$lock" >>"$log" 2>&1 &
  watch_pip $! "$name" "$log" "$packages" "$began" \
    || fail_with_log "$log" "pip could not install $lock into $venv"
  local check
  check="$("$venv/bin/python" -m pip check 2>&1 || true)"
  if [[ "$check" != "$expected_check" ]]; then
    echo "$check" >&2
    fail "pip check in $venv reports unexpected problems (expected: '$expected_check')"
  fi
  echo "$stamp" >"$venv/.installed"
  flock -u "$lock_fd"
  link_venv "$venv" "$link"
  echo "lab setup: $name installed in $(since "$began")"
}

# link_venv VENV LINK: LINK (in .lab/) points at VENV; a venv an older setup built in .lab/ goes.
link_venv() {
  local venv="$1" link="$2"
  if [[ -d "$link" && ! -L "$link" ]]; then
    [[ -f "$link/pyvenv.cfg" ]] || fail "$link exists and is no virtualenv; move it away"
    rm -rf "$link"
  fi
  ln -sfn "$venv" "$link"
}

# watch_pip PID NAME LOG PACKAGES BEGAN: wait for the pip at PID, saying every PROGRESS_SECONDS how
# far it got from its log: packages fetched (one `Collecting` line each), then the install.
watch_pip() {
  local pid="$1" name="$2" log="$3" packages="$4" began="$5" next=$((SECONDS + PROGRESS_SECONDS))
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    ((SECONDS < next)) && continue
    next=$((SECONDS + PROGRESS_SECONDS))
    if grep -q '^Installing collected packages' "$log"; then
      echo "lab setup: $name: installing $packages packages ($(since "$began"))"
    else
      echo "lab setup: $name: fetched $(grep -c '^Collecting ' "$log") of $packages packages ($(since "$began"))"
    fi
  done
  wait "$pid"
}

build_model() {
  local model="$LAB_HOME/model" log="$LOG_DIR/model.log" stamp
  stamp="$(cat lab/tiny_model.py lab/standin.py lab/requirements-dynamo.lock | sha256sum | cut -d' ' -f1)"
  if [[ -f "$model/.built" && "$(cat "$model/.built")" == "$stamp" ]]; then
    echo "lab setup: tiny model is up to date"
    return
  fi
  local began=$SECONDS
  echo "lab setup: building the tiny model into $model"
  rm -rf "$model"
  # -I would drop the repository from sys.path; run from the root so `lab.standin` imports.
  HF_HUB_OFFLINE=1 "$LAB_HOME/dynamo-venv/bin/python" -m lab.tiny_model --out "$model" >"$log" 2>&1 \
    || fail_with_log "$log" "could not build the tiny model"
  echo "$stamp" >"$model/.built"
  echo "lab setup: tiny model built in $(since "$began")"
}

main() {
  local started=$SECONDS
  cd "$(dirname "$0")/.."
  mkdir -p "$LOG_DIR"
  "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
    || fail "$PYTHON is $("$PYTHON" --version 2>&1); the lab needs Python 3.10 or newer"

  # ai-dynamo 1.6.1 declares a dependency on aisimulate, a placeholder on PyPI that cannot install
  # here; the frontend and mock engine never import it, so it is the one known pip check finding.
  install_venv dynamo-venv lab/requirements-dynamo.lock \
    "ai-dynamo 1.6.1 requires aisimulate, which is not installed."
  install_venv aiperf-venv stages/requirements-aiperf.lock "No broken requirements found."
  build_model
  echo "lab setup: ready ($LAB_HOME) after $(since "$started")"
}

# Sourced (the tests call its functions), it defines them and runs nothing.
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  main
fi
