# shellcheck shell=bash
# Resolves $1 inside the workspace: prints the workspace's real path, a newline, and the real
# path $1 names (components that do not exist are taken as written).
root=$(realpath -- /workspace) && p=$(realpath -m -- "/workspace/$1") || exit 4
printf "%s\n%s" "$root" "$p"
