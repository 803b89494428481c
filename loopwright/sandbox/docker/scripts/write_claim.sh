# shellcheck shell=bash
# Runs as root (uid 0, no capabilities), started with each pool container before anything
# else runs in it: $1 the claim directory. It makes the directory (root-owned, so the sandbox
# user can never write into it), says `ready`, then waits for the host to send the claim of
# the mission that takes the container (one line of JSON), writes it and says `claimed`.
# A directory that already exists was made by someone else: refused, nothing is said.
# The host's connection ending before a whole line (the process that started the container
# is gone) leaves `abandoned` in the directory instead: any reaper may then remove it.
set -e
umask 022
mkdir -m 0755 -- "$1"
printf ready
if ! IFS= read -r claim; then
  printf abandoned > "$1/abandoned"
  exit 0
fi
printf '%s\n' "$claim" > "$1/claim.json"
printf claimed
