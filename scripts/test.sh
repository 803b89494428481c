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
echo "== pytest"
pytest -q -p no:cacheprovider "$@"
