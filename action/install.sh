#!/usr/bin/env bash
# Installs Loopwright from this action's checkout (the repository root, one level above
# action/, holds pyproject.toml) into $RUNNER_TEMP/loopwright-venv, a virtualenv of its own:
# nothing lands in the interpreter or PATH the project under test uses.
set -euo pipefail

root="$(cd "$GITHUB_ACTION_PATH/.." && pwd)"
venv="${RUNNER_TEMP:?RUNNER_TEMP is not set; run this as a GitHub Actions step}/loopwright-venv"

if [ -x "$venv/bin/loopwright" ]; then
  echo "Loopwright is already installed in $venv"
  exit 0
fi

# Loopwright needs Python 3.11 or newer; the project's own setup-python may have put an older
# one first on PATH, so look at the runner's tool cache too.
python=""
candidates=(python3.13 python3.12 python3.11 python3)
for cached in "${RUNNER_TOOL_CACHE:-/opt/hostedtoolcache}"/Python/3.*/x64/bin/python3; do
  candidates+=("$cached")
done
for candidate in "${candidates[@]}"; do
  if command -v "$candidate" >/dev/null 2>&1 &&
    "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    python="$(command -v "$candidate")"
    break
  fi
done
if [ -z "$python" ]; then
  echo "::error::Loopwright needs Python 3.11 or newer on the runner; add actions/setup-python with python-version: '3.12' before it" >&2
  exit 2
fi

# Not in the workspace: `python -m` imports from the working directory first, and the
# workspace is the repository's checkout, whose `venv/`, `ensurepip/` or `pip/` directory
# must never run in place of the standard library's (venv starts ensurepip on its own).
cd "$RUNNER_TEMP"
"$python" -P -m venv "$venv"
"$venv/bin/python" -P -m pip install --quiet --disable-pip-version-check "$root"
echo "Installed Loopwright with $python into $venv"
