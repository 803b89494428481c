# shellcheck shell=bash
# Runs as root (uid 0, no capabilities) when a mission claims a pool container: $1 the claim
# directory, $2 the claim (JSON). The directory must not exist yet: nothing has run in a pool
# container before its claim, so one that does was made by someone else and is refused.
set -e
umask 022
mkdir -m 0755 -- "$1"
printf '%s\n' "$2" > "$1/claim.json"
printf claimed
