#!/usr/bin/env bash
# Build the sandbox base image without any container registry: debootstrap a minimal Debian
# bookworm, preinstall the toolchain the Dockerfile lists, and `docker import` the tree.
#
# Usage (as root): deploy/sandbox/bootstrap-base.sh [IMAGE_TAG]
#   IMAGE_TAG   defaults to loopwright-sandbox-base:bookworm
#   MIRROR      Debian mirror (default http://deb.debian.org/debian)
#   FORCE=1     rebuild even when IMAGE_TAG already exists
#
# Idempotent: exits 0 at once when IMAGE_TAG exists. The packages come from the
# SANDBOX_PACKAGES line of the Dockerfile beside this script, so the image built on this base
# needs no network at build time.
set -euo pipefail

TAG="${1:-loopwright-sandbox-base:bookworm}"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"
SUITE=bookworm
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if [[ "${FORCE:-0}" != 1 ]] && docker image inspect "$TAG" >/dev/null 2>&1; then
    echo "base image $TAG already present"
    exit 0
fi
if [[ "$(id -u)" != 0 ]]; then
    echo "bootstrap-base.sh needs root (debootstrap and chroot); run it with sudo" >&2
    exit 1
fi
if ! command -v debootstrap >/dev/null; then
    echo "debootstrap is missing; install it with: apt-get install -y debootstrap" >&2
    exit 1
fi

# One package list for both paths (this base and FROM debian:bookworm-slim).
PACKAGES="$(sed -n 's/^ARG SANDBOX_PACKAGES="\(.*\)"$/\1/p' "$HERE/Dockerfile")"
if [[ -z "$PACKAGES" ]]; then
    echo "no ARG SANDBOX_PACKAGES=\"...\" line found in $HERE/Dockerfile" >&2
    exit 1
fi

ROOT="$(mktemp -d /var/tmp/loopwright-base.XXXXXX)"
cleanup() {
    # Unmount before deleting so rm can never descend into the host's /proc or /dev.
    for m in dev/pts dev proc sys; do
        if mountpoint -q "$ROOT/$m" 2>/dev/null; then umount -l "$ROOT/$m"; fi
    done
    rm -rf --one-file-system "$ROOT"
}
trap cleanup EXIT

echo "debootstrap $SUITE into $ROOT"
debootstrap --variant=minbase "$SUITE" "$ROOT" "$MIRROR"

cat >"$ROOT/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb http://security.debian.org/debian-security $SUITE-security main
EOF
# Keep package scripts from starting services inside the chroot.
printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d"
chmod 755 "$ROOT/usr/sbin/policy-rc.d"
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
mount -t proc proc "$ROOT/proc"
mount --bind /dev "$ROOT/dev"
mount --bind /dev/pts "$ROOT/dev/pts"

# npm cannot go in debootstrap's --include (its dependency set trips the resolver), so the
# whole toolchain is installed with apt inside the chroot.
# shellcheck disable=SC2086  # PACKAGES is a word list on purpose
chroot "$ROOT" env DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 \
    sh -c 'apt-get update && apt-get install -y --no-install-recommends "$@"' sh $PACKAGES
chroot "$ROOT" apt-get clean

for m in dev/pts dev proc; do umount -l "$ROOT/$m"; done
rm -f "$ROOT/usr/sbin/policy-rc.d"
rm -rf "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/cache/apt/*.bin "$ROOT"/tmp/* "$ROOT"/var/tmp/*
# The image gets Docker's own resolv.conf and hosts at run time.
: >"$ROOT/etc/resolv.conf"

echo "importing $ROOT as $TAG"
tar --numeric-owner -C "$ROOT" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' \
    - "$TAG"
echo "base image $TAG ready"
