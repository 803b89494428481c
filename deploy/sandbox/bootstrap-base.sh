#!/usr/bin/env bash
# Build the sandbox base image without any container registry: debootstrap a minimal Debian
# bookworm, preinstall the toolchain the Dockerfile lists, and `docker import` the tree.
#
# Usage (as root): deploy/sandbox/bootstrap-base.sh [IMAGE_TAG]
#        deploy/sandbox/bootstrap-base.sh --print-sources
#   IMAGE_TAG   defaults to loopwright-sandbox-base:bookworm
#   MIRROR      Debian mirror; by default the one this host's apt uses for bookworm
#   APT_DIR     where the apt configuration is read (default /etc/apt): sources.list and
#               sources.list.d/*.list (one-line) and sources.list.d/*.sources (deb822)
#   FORCE=1     rebuild even when IMAGE_TAG already exists
#   --print-sources  print the sources.list the image would get, and exit
#
# The mirrors are the operator's: the bookworm, bookworm-updates and bookworm-security
# sources configured for this host's apt, never a host name written here.
#
# Idempotent: exits 0 at once when IMAGE_TAG exists. The packages come from the
# SANDBOX_PACKAGES line of the Dockerfile beside this script, so the image built on this base
# needs no network at build time.
set -euo pipefail

SUITE=bookworm
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
APT_DIR="${APT_DIR:-/etc/apt}"

# "URI SUITE" for every enabled `deb` source of the host's apt configuration, in apt's order.
apt_sources() {
    local f
    shopt -s nullglob
    for f in "$APT_DIR/sources.list" "$APT_DIR"/sources.list.d/*.list; do
        [[ -f $f ]] || continue
        # deb [option=value ...] URI SUITE COMPONENT...
        awk '{ sub(/#.*/, "") }
             $1 == "deb" {
                 i = 2
                 if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
                 if (i + 1 <= NF) print $i, $(i + 1)
             }' "$f"
    done
    for f in "$APT_DIR"/sources.list.d/*.sources; do
        # deb822 stanzas: Types, URIs, Suites (each a list), Enabled; blank lines between.
        awk 'function flush(   n, m, a, b, u, s) {
                 if (types ~ /(^|[ \t])deb([ \t]|$)/ && enabled != "no") {
                     n = split(uris, u, /[ \t]+/); m = split(suites, s, /[ \t]+/)
                     for (a = 1; a <= n; a++) for (b = 1; b <= m; b++)
                         if (u[a] != "" && s[b] != "") print u[a], s[b]
                 }
                 types = uris = suites = enabled = ""
             }
             /^[ \t]*#/ { next }
             /^[ \t]*$/ { flush(); next }
             /^[ \t]/ { next }
             {
                 key = tolower($1); sub(/:.*/, "", key)
                 value = $0; sub(/^[^:]*:[ \t]*/, "", value); sub(/[ \t]+$/, "", value)
                 if (key == "types") types = value
                 else if (key == "uris") uris = value
                 else if (key == "suites") suites = value
                 else if (key == "enabled") enabled = tolower(value)
             }
             END { flush() }' "$f"
    done
    shopt -u nullglob
}

# The first configured URI for suite $1 (empty when none is).
apt_mirror() {
    apt_sources | awk -v suite="$1" '$2 == suite { print $1; exit }'
}

if [[ "${1:-}" != --print-sources ]]; then
    TAG="${1:-loopwright-sandbox-base:bookworm}"
    if [[ "${FORCE:-0}" != 1 ]] && docker image inspect "$TAG" >/dev/null 2>&1; then
        echo "base image $TAG already present"
        exit 0
    fi
fi

MIRROR="${MIRROR:-$(apt_mirror "$SUITE")}"
if [[ -z "$MIRROR" ]]; then
    echo "no Debian $SUITE source in $APT_DIR/sources.list or $APT_DIR/sources.list.d/;" \
        "set MIRROR to the Debian mirror to bootstrap from (e.g. MIRROR=http://HOST/debian)" >&2
    exit 1
fi
UPDATES="$(apt_mirror "$SUITE-updates")"
SECURITY="$(apt_mirror "$SUITE-security")"
SOURCES="deb $MIRROR $SUITE main"
if [[ -n "$UPDATES" ]]; then SOURCES+=$'\n'"deb $UPDATES $SUITE-updates main"; fi
if [[ -n "$SECURITY" ]]; then SOURCES+=$'\n'"deb $SECURITY $SUITE-security main"; fi
if [[ "${1:-}" == --print-sources ]]; then
    printf '%s\n' "$SOURCES"
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

printf '%s\n' "$SOURCES" >"$ROOT/etc/apt/sources.list"
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
