#!/usr/bin/env bash
# Runs the whole test suite: lint, format check, type check, the import rules, then unit,
# integration and browser tests. Docker and Chromium tests run for real (bootstrap installs and starts
# them); with CI=true a missing engine fails the run instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
# The scale-out tests start their own Redis and PostgreSQL servers on loopback (see
# tests/services.py); only the binaries come from Debian. No service is left enabled.
# docker-compose (Debian's, 1.29) validates deploy/compose.yaml; it starts nothing.
need_pkgs=()
command -v redis-server >/dev/null || need_pkgs+=(redis-server)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need_pkgs+=(postgresql)
command -v docker-compose >/dev/null || need_pkgs+=(docker-compose)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "== installing ${need_pkgs[*]} for the scale-out and deployment tests"
  as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${need_pkgs[@]}" >/dev/null
fi

export PATH="$PWD/.venv/bin:$PATH"
echo "== ruff"
ruff check loopwright tests benchmarks
ruff format --check loopwright tests benchmarks
echo "== mypy"
mypy
echo "== import-linter"
lint-imports
echo "== shellcheck"
shellcheck loopwright/sandbox/docker/scripts/*.sh scripts/*.sh
echo "== pytest"
# Most of the suite waits on containers and subprocesses rather than the CPU, so four
# workers help even on two cores. Tests that share one expensive session fixture carry the
# same xdist_group mark and run on one worker (--dist loadgroup). The 25 slowest tests are
# listed at the end, so a test that grows slow is seen in every run.
pytest -q -p no:cacheprovider -n "${LOOPWRIGHT_TEST_WORKERS:-4}" --dist loadgroup --durations=25 "$@"
