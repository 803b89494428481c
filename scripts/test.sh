#!/usr/bin/env bash
# Runs the whole test suite: lint, format check, type check, then unit, integration and
# browser tests. Docker and Chromium tests run for real (bootstrap installs and starts
# them); with CI=true a missing engine fails the run instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh

export PATH="$PWD/.venv/bin:$PATH"
echo "== ruff"
ruff check loopwright tests benchmarks
ruff format --check loopwright tests benchmarks
echo "== mypy"
mypy
echo "== import-linter"
lint-imports
echo "== pytest"
# Most of the suite waits on containers and subprocesses rather than the CPU, so four
# workers help even on two cores. Tests that share one expensive session fixture carry the
# same xdist_group mark and run on one worker (--dist loadgroup).
pytest -q -p no:cacheprovider -n "${LOOPWRIGHT_TEST_WORKERS:-4}" --dist loadgroup "$@"
