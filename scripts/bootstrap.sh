#!/usr/bin/env bash
# Installs everything Loopwright needs on a Debian machine and is safe to run again:
# Debian packages (git, python3-venv, docker.io, debootstrap, chromium), a running Docker
# engine, the project's virtualenv, and the sandbox image. Needs root (or sudo) for apt
# and dockerd.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\033[1m[bootstrap]\033[0m %s\n' "$*" >&2; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

need_pkgs=()
command -v git >/dev/null || need_pkgs+=(git)
command -v dockerd >/dev/null || need_pkgs+=(docker.io)
command -v debootstrap >/dev/null || need_pkgs+=(debootstrap)
[ -x /usr/bin/chromium ] || need_pkgs+=(chromium)
command -v node >/dev/null || need_pkgs+=(nodejs)
command -v npm >/dev/null || need_pkgs+=(npm)
python3 -c 'import ensurepip, venv' 2>/dev/null || need_pkgs+=(python3-venv)
command -v iptables >/dev/null || need_pkgs+=(iptables)
command -v shellcheck >/dev/null || need_pkgs+=(shellcheck)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  log "installing Debian packages: ${need_pkgs[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${need_pkgs[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  log "starting the Docker engine (dockerd)"
  as_root mkdir -p /var/log
  as_root sh -c 'nohup dockerd >/var/log/loopwright-dockerd.log 2>&1 &'
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { log "dockerd did not start; see /var/log/loopwright-dockerd.log"; exit 1; }
fi

stamp=.venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)
if [ ! -f "$stamp" ]; then
  log "creating the virtualenv .venv and installing Loopwright with its test tools"
  [ -x .venv/bin/python ] || python3 -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -e '.[test]'
  rm -f .venv/.installed-* && touch "$stamp"
fi

log "ensuring the sandbox image (built offline on first run; a few minutes)"
.venv/bin/loopwright sandbox build >/dev/null

if [ ! -f tests/fakes/npm/node_modules/.package-lock.json ] || [ tests/fakes/npm/package-lock.json -nt tests/fakes/npm/node_modules/.package-lock.json ]; then
  log "installing the test fixtures (GitHub's OpenAPI description, webhook examples) from npm"
  npm ci --prefix tests/fakes/npm --no-audit --no-fund --silent
fi
